"""Diminishing returns: is there a much cheaper or smaller fleet that is nearly as fast as a min_time plan?

A min_time plan spends whatever the budget allows to finish sooner; past a point each extra dollar or GPU
buys little. After the search, this phase looks for the cheapest fleet that takes at most TIME_SLACK longer
than the plan (a min_cost search with that deadline, within the plan's own limits and caps, plus every
fleet already evaluated). When it costs at least COST_SAVING less, or uses at most GPU_SHARE of the plan's
GPUs, the plan carries a note: the seconds the plan saves per extra dollar and per extra GPU.

The thresholds are product choices (what is worth telling a user), not measurements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace

from srift.domain import Constraints, DiminishingReturns, Objective
from srift.optimize.evaluate import Evaluated, Evaluations
from srift.optimize.search import Incumbent
from srift.optimize.space import Problem

TIME_SLACK = 0.10
"""An alternative may take up to 10 % longer than the plan."""
COST_SAVING = 0.25
"""Worth a note when it costs at least 25 % less ..."""
GPU_SHARE = 0.5
"""... or uses at most half the plan's GPUs."""

Search = Callable[[Constraints, Incumbent], Incumbent]


def diminishing_returns(
    problem: Problem, evals: Evaluations, best: Evaluated, *, search: Search
) -> DiminishingReturns | None:
    """The note for `best` (a min_time plan), or None when no cheaper or smaller fleet is nearly as fast.

    `search(constraints, incumbent)` runs the optimizer's search under other constraints (here: min_cost
    within the plan's time plus TIME_SLACK) and returns its incumbent."""
    c = problem.constraints
    if c.objective is not Objective.MIN_TIME:
        return None
    plan = best.prediction
    deadline = plan.total_time_s * (1 + TIME_SLACK)
    if c.time_limit_s is not None:
        deadline = min(deadline, c.time_limit_s)
    near = replace(c, objective=Objective.MIN_COST, time_limit_s=deadline)
    plan_gpus = problem.gpus(best.groups)
    worth = _worth_a_note(evals.records.values(), evals, plan=best, deadline_s=deadline)
    incumbent = Incumbent(Objective.MIN_COST)
    for item in _near(worth, evals, near):
        incumbent.offer(item)
    found = search(near, incumbent)
    options = [
        x for x in (found.best, _fewest_gpus(evals, near, worth)) if x is not None and x.groups != best.groups
    ]
    for alt in options:
        p = alt.prediction
        gpus = problem.gpus(alt.groups)
        cheaper = p.cost_usd <= plan.cost_usd * (1 - COST_SAVING)
        smaller = gpus <= plan_gpus * GPU_SHARE
        if not (cheaper or smaller):
            continue
        saved = p.total_time_s - plan.total_time_s
        extra_usd = plan.cost_usd - p.cost_usd
        extra_gpus = plan_gpus - gpus
        return DiminishingReturns(
            alternative=problem.config(alt.groups),
            total_time_s=p.total_time_s,
            cost_usd=p.cost_usd,
            gpus=gpus,
            plan_gpus=plan_gpus,
            seconds_saved=saved,
            extra_usd=extra_usd,
            extra_gpus=extra_gpus,
            seconds_per_usd=saved / extra_usd if extra_usd > 0 else None,
            seconds_per_gpu=saved / extra_gpus if extra_gpus > 0 else None,
        )
    return None


def _near(records: Iterable[Evaluated], evals: Evaluations, near: Constraints) -> list[Evaluated]:
    return [evals.evaluate(x.groups, constraints=near) for x in list(records)]


def _worth_a_note(
    records: Iterable[Evaluated], evals: Evaluations, *, plan: Evaluated, deadline_s: float
) -> list[Evaluated]:
    """The fleets evaluated that could make the note: at most the deadline at the median (a quantile above
    it is no shorter) and at least COST_SAVING cheaper or at most GPU_SHARE of the plan's GPUs. Only these
    are judged again at the request's confidence (which may simulate their bands)."""
    p = plan.prediction
    gpus = evals.problem.gpus(plan.groups)
    return [
        x
        for x in list(records)
        if x.prediction.total_time_s <= deadline_s
        and (
            x.prediction.cost_usd <= p.cost_usd * (1 - COST_SAVING)
            or evals.problem.gpus(x.groups) <= gpus * GPU_SHARE
        )
    ]


def _fewest_gpus(evals: Evaluations, near: Constraints, records: Iterable[Evaluated]) -> Evaluated | None:
    """Of `records`, the one with the fewest GPUs (then cheapest) that meets `near`."""
    ok = [x for x in _near(records, evals, near) if x.feasible]
    if not ok:
        return None
    return min(ok, key=lambda x: (evals.problem.gpus(x.groups), x.prediction.cost_usd))


def words(note: DiminishingReturns) -> str:
    """The note as a plan warning."""
    pct = 100 * note.seconds_saved / note.total_time_s if note.total_time_s > 0 else math.nan
    plan_usd = note.cost_usd + note.extra_usd
    text = (
        f"diminishing returns: {note.alternative.label()} takes only {_duration(note.seconds_saved)} "
        f"({pct:.1f} %) longer for ${note.cost_usd:.2f} instead of ${plan_usd:.2f}"
    )
    if note.gpus != note.plan_gpus:
        text += f" on {note.gpus} GPUs instead of {note.plan_gpus}"
    bought = []
    if note.seconds_per_usd is not None:
        bought.append(f"{note.seconds_per_usd:.3g} s per extra dollar")
    if note.seconds_per_gpu is not None:
        bought.append(f"{note.seconds_per_gpu:.3g} s per extra GPU")
    if bought:
        text += f": the plan saves {' and '.join(bought)}"
    return text


def _duration(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 120 else f"{seconds / 60:.3g} min"
