"""The Pareto front of (total time, total cost) over every configuration the search evaluated."""

from __future__ import annotations

from collections.abc import Iterable

from srift.domain import ParetoPoint
from srift.optimize.evaluate import Evaluated
from srift.optimize.space import Groups, Problem


def front_flags(points: list[tuple[float, float]]) -> list[bool]:
    """True for points no other point dominates (≤ in both time and cost, < in one); ties both stay."""
    order = sorted(range(len(points)), key=lambda i: points[i])
    flags = [False] * len(points)
    best_before = float("inf")
    k = 0
    while k < len(order):
        t = points[order[k]][0]
        j = k
        while j < len(order) and points[order[j]][0] == t:
            j += 1
        group_min = points[order[k]][1]
        for idx in order[k:j]:
            c = points[idx][1]
            flags[idx] = c == group_min and c < best_before
        best_before = min(best_before, group_min)
        k = j
    return flags


def pareto_points(
    problem: Problem, records: Iterable[Evaluated], *, chosen: Groups | None, limit: int = 5000
) -> tuple[tuple[ParetoPoint, ...], int]:
    """Every evaluated point with its front flag, sorted by time; beyond `limit` points, the front, the chosen
    configuration and an even sample of the rest are kept. Returns the points and how many were evaluated."""
    items = list(records)
    flags = front_flags([(x.prediction.total_time_s, x.prediction.cost_usd) for x in items])
    order = sorted(
        range(len(items)), key=lambda i: (items[i].prediction.total_time_s, items[i].prediction.cost_usd)
    )
    keep = order
    if len(items) > limit:
        must = [i for i in order if flags[i] or items[i].groups == chosen]
        rest = [i for i in order if not (flags[i] or items[i].groups == chosen)]
        room = max(limit - len(must), 0)
        step = len(rest) / room if room else 0.0
        sample = {rest[int(k * step)] for k in range(room)} if room else set()
        chosen_set = set(must) | sample
        keep = [i for i in order if i in chosen_set]
    points = tuple(
        ParetoPoint(
            label=problem.config(items[i].groups).label(),
            total_time_s=items[i].prediction.total_time_s,
            cost_usd=items[i].prediction.cost_usd,
            feasible=items[i].feasible,
            on_front=flags[i],
            chosen=items[i].groups == chosen,
        )
        for i in keep
    )
    return points, len(items)
