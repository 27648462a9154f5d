"""Replay a plan's run through every applicable trace window, and predict the same from the fitted model.

A trace applies to a plan's spot fleet of n VMs of a type in a region when it traced that type in a zone of
the region with at least n VMs. Its windows start every `stride_s` seconds (within the blocks of the half
asked for, srift.spot.model.split_blocks) and last as long as the deadline. The prediction runs the same
policy on timelines drawn from the fitted law of the same zone and period (`samples` per trace). Both are
pooled with equal weight per trace, so that a long trace does not outvote a short one: a plan's predicted
P(meets the deadline) and expected cost are then compared with the replayed share and mean cost over the
same traces.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from srift.spot.model import SPLIT_BLOCK_S, FleetLaw, Half, TraceModel, split_blocks
from srift.spot.nowcast import Nowcast, look_back, nowcast_timelines
from srift.spot.policy import DeadlinePolicy, Programme, ReplayOutcome, SpotJob, plan_programme, simulate
from srift.spot.traces import SpotTrace

DEFAULT_STRIDE_S = 1800.0
"""A window starts every 30 minutes of a trace (a choice: 96 start times a day)."""
DEFAULT_SAMPLES_PER_TRACE = 500
NO_LIMIT_SLACK = 2.0
"""A plan without a time limit is replayed against twice its on-demand time (a stated choice)."""
HISTOGRAM_BINS = 20
"""A distribution is shown in 20 equal bins (a choice: fine enough to see two modes, few enough to read)."""


def applicable(
    traces: Iterable[SpotTrace], *, provider: str, region: str, instance_type: str, nodes: int
) -> list[SpotTrace]:
    """The traces of the type in the region's zones that held or asked for at least `nodes` VMs."""
    return sorted(
        (
            t
            for t in traces
            if t.provider == provider
            and t.instance_type == instance_type
            and t.region == region
            and t.node_count >= nodes
        ),
        key=lambda t: t.name,
    )


def windows(
    trace: SpotTrace,
    *,
    nodes: int,
    ticks: int,
    half: Half,
    stride_s: float,
    block_s: float = SPLIT_BLOCK_S,
) -> np.ndarray:
    """Availability of a fleet of `nodes` VMs in every window (rows) of `ticks` ticks within `half`
    (blocks of `block_s`)."""
    stride = max(1, round(stride_s / trace.gap_s))
    rows = []
    for seg in split_blocks(trace, half, block_s=block_s):
        up = seg.counts >= nodes
        for start in range(0, up.size - ticks + 1, stride):
            rows.append(up[start : start + ticks])
    return np.array(rows, dtype=bool).reshape(len(rows), ticks)


def window_starts(
    trace: SpotTrace, *, ticks: int, half: Half, stride_s: float, block_s: float = SPLIT_BLOCK_S
) -> np.ndarray:
    """The tick (of the whole trace) each of `windows`' rows starts at, in the same order."""
    stride = max(1, round(stride_s / trace.gap_s))
    out = [
        seg.start + start
        for seg in split_blocks(trace, half, block_s=block_s)
        for start in range(0, seg.counts.size - ticks + 1, stride)
    ]
    return np.asarray(out, dtype=np.int64)


def law_for(model: TraceModel, trace: SpotTrace, nodes: int) -> FleetLaw | None:
    """The model's law for the trace's own period, else the zone's latest period (by name), else None."""
    law = model.law(
        provider=trace.provider,
        zone=trace.zone,
        instance_type=trace.instance_type,
        nodes=nodes,
        period=trace.name,
    )
    if law is not None:
        return law
    laws = model.zone_laws(
        provider=trace.provider, zone=trace.zone, instance_type=trace.instance_type, nodes=nodes
    )
    return laws[-1] if laws else None


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    return float(v[min(int(np.searchsorted(cum, q, side="left")), v.size - 1)])


def pooled(outcomes: Sequence[ReplayOutcome]) -> dict[str, float | int]:
    """The summary of several traces' outcomes, each trace weighing the same (ReplayOutcome.summary's
    fields)."""
    kept = [o for o in outcomes if o.runs]
    if not kept:
        return {"runs": 0}
    weights = np.concatenate([np.full(o.runs, 1.0 / o.runs) for o in kept])
    weights /= weights.sum()

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(o, name) for o in kept])

    finish, cost, met = cat("finish_s"), cat("cost_usd"), cat("met")
    spot, od = cat("spot_s"), cat("od_s")
    return {
        "runs": int(finish.size),
        "traces": len(kept),
        # A weighted share of booleans; its float sum may land a rounding step above 1 (1.0000000000000004).
        "p_meets_deadline": min(1.0, float(np.sum(weights * met))),
        "deadline_misses": int((~met).sum()),
        "mean_cost_usd": float(np.sum(weights * cost)),
        "cost_p10_usd": _weighted_quantile(cost, weights, 0.1),
        "cost_p50_usd": _weighted_quantile(cost, weights, 0.5),
        "cost_p90_usd": _weighted_quantile(cost, weights, 0.9),
        "mean_finish_s": float(np.sum(weights * finish)),
        "finish_p10_s": _weighted_quantile(finish, weights, 0.1),
        "finish_p50_s": _weighted_quantile(finish, weights, 0.5),
        "finish_p90_s": _weighted_quantile(finish, weights, 0.9),
        "mean_preemptions": float(np.sum(weights * cat("preemptions"))),
        "mean_spot_share": float(np.sum(weights * spot / np.maximum(spot + od, 1e-9))),
        "past_window": int(cat("past_window").sum()),
    }


def histogram(outcomes: Sequence[ReplayOutcome], name: str, *, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
    """The distribution of one outcome (`finish_s` or `cost_usd`) over several traces' runs, each trace
    weighing the same as in `pooled`: `bins` equal bins between the smallest and largest value, their
    `edges` (bins + 1) and `shares` (summing to 1), and the `counts` of runs in each."""
    kept = [o for o in outcomes if o.runs]
    if not kept:
        return {"edges": [], "shares": [], "counts": []}
    values = np.concatenate([getattr(o, name) for o in kept])
    weights = np.concatenate([np.full(o.runs, 1.0 / o.runs) for o in kept])
    shares, edges = np.histogram(values, bins=bins, weights=weights / weights.sum())
    counts, _ = np.histogram(values, bins=edges)
    return {
        "edges": [float(e) for e in edges],
        "shares": [float(s) for s in shares],
        "counts": [int(c) for c in counts],
    }


@dataclass(frozen=True)
class TraceRun:
    """One trace's windows under every policy, and the prediction for them from its period's law."""

    trace: SpotTrace
    law: FleetLaw
    windows: int
    replayed: dict[DeadlinePolicy, ReplayOutcome] = field(repr=False)
    predicted: dict[DeadlinePolicy, ReplayOutcome] = field(repr=False)
    programme: Programme | None = field(default=None, repr=False)
    """Srift's policy for this trace's law (None when `srift` was not replayed)."""


@dataclass(frozen=True)
class Replay:
    """A plan's run through every applicable trace window, beside the model's prediction for it."""

    job: SpotJob
    nodes: int
    half: Half
    runs: list[TraceRun]
    policies: tuple[DeadlinePolicy, ...]

    def summary(self, policy: DeadlinePolicy) -> dict[str, Any]:
        """Predicted and replayed figures for one policy, their gaps, and the per-trace breakdown."""
        rep = pooled([r.replayed[policy] for r in self.runs])
        pred = pooled([r.predicted[policy] for r in self.runs])
        out: dict[str, Any] = {"policy": policy.value, "replayed": rep, "predicted": pred}
        if rep.get("runs") and pred.get("runs"):
            out["gap"] = {
                "p_meets_deadline_points": 100.0
                * (float(pred["p_meets_deadline"]) - float(rep["p_meets_deadline"])),
                "mean_cost_pct": 100.0 * (float(pred["mean_cost_usd"]) / float(rep["mean_cost_usd"]) - 1.0),
                "mean_finish_pct": 100.0 * (float(pred["mean_finish_s"]) / float(rep["mean_finish_s"]) - 1.0),
            }
        out["traces"] = [
            {
                "trace": r.trace.name,
                "zone": r.trace.zone,
                "windows": r.windows,
                "law": r.law.source.value,
                "replayed_p_meets_deadline": float(r.replayed[policy].met.mean()),
                "replayed_mean_cost_usd": float(r.replayed[policy].cost_usd.mean()),
                "predicted_p_meets_deadline": float(r.predicted[policy].met.mean()),
                "predicted_mean_cost_usd": float(r.predicted[policy].cost_usd.mean()),
            }
            for r in self.runs
        ]
        return out

    def distribution(self, policy: DeadlinePolicy) -> dict[str, dict[str, Any]]:
        """One policy's replayed finish times and costs as histograms (`histogram`), trace-weighted."""
        outcomes = [r.replayed[policy] for r in self.runs]
        return {"finish_s": histogram(outcomes, "finish_s"), "cost_usd": histogram(outcomes, "cost_usd")}

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "half": self.half.value,
            "deadline_s": self.job.deadline_s,
            "slack": self.job.slack,
            "on_demand_cost_usd": self.job.od_cost_usd,
            "windows": sum(r.windows for r in self.runs),
            "traces": len(self.runs),
            "policies": [self.summary(p) for p in self.policies],
        }


def replay(
    job: SpotJob,
    *,
    traces: Sequence[SpotTrace],
    model: TraceModel,
    nodes: int,
    half: Half = Half.ALL,
    policies: Sequence[DeadlinePolicy] = tuple(DeadlinePolicy),
    stride_s: float = DEFAULT_STRIDE_S,
    samples_per_trace: int = DEFAULT_SAMPLES_PER_TRACE,
    seed: int = 0,
    block_s: float = SPLIT_BLOCK_S,
    nowcast: Nowcast | None = None,
) -> Replay:
    """Replay `job` through the windows of `traces` (already the applicable ones) and predict it per trace
    (`half` of blocks of `block_s`: the one the model was not fitted on, for an honest check).

    With `nowcast`, each window is predicted from the law conditioned on the trace before the window's start
    (srift.spot.nowcast: what a user knows when the run starts), at least `samples_per_trace` timelines
    per trace spread evenly over its windows; the prediction is the mean over the windows. Without, every
    window gets the same prediction from the period's law."""
    runs: list[TraceRun] = []
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0x7EAC])
    for trace in traces:
        law = law_for(model, trace, nodes)
        if law is None:
            continue
        ticks = math.ceil(job.deadline_s / trace.gap_s) + 1
        win = windows(trace, nodes=nodes, ticks=ticks, half=half, stride_s=stride_s, block_s=block_s)
        if win.shape[0] == 0:
            continue
        if nowcast is None:
            synthetic = law.timeline(rng, runs=samples_per_trace, ticks=ticks, tick_s=trace.gap_s)
        else:
            synthetic = predicted_timelines(
                trace,
                law,
                nowcast,
                rng,
                ticks=ticks,
                half=half,
                stride_s=stride_s,
                block_s=block_s,
                per_window=max(1, math.ceil(samples_per_trace / win.shape[0])),
            )
        programme: Programme | None = None
        if DeadlinePolicy.SRIFT in policies:
            programme = plan_programme(job, law, tick_s=trace.gap_s)
        replayed, predicted = {}, {}
        for policy in policies:
            kw: dict[str, Any] = {"tick_s": trace.gap_s, "policy": policy, "law": law, "programme": programme}
            replayed[policy] = simulate(job, win, **kw)
            predicted[policy] = simulate(job, synthetic, **kw)
        runs.append(
            TraceRun(
                trace=trace,
                law=law,
                windows=int(win.shape[0]),
                replayed=replayed,
                predicted=predicted,
                programme=programme,
            )
        )
    return Replay(job=job, nodes=nodes, half=half, runs=runs, policies=tuple(policies))


def predicted_timelines(
    trace: SpotTrace,
    law: FleetLaw,
    nowcast: Nowcast,
    rng: np.random.Generator,
    *,
    ticks: int,
    half: Half,
    stride_s: float,
    block_s: float = SPLIT_BLOCK_S,
    per_window: int = 1,
) -> np.ndarray:
    """`per_window` timelines for each of `windows`' rows (in order), each drawn from `law` conditioned on the
    trace's look-back before that window's start (srift.spot.nowcast.nowcast_timelines)."""
    starts = window_starts(trace, ticks=ticks, half=half, stride_s=stride_s, block_s=block_s)
    up = trace.array() >= law.nodes
    recent, long = look_back(up, starts, nowcast, tick_s=trace.gap_s)
    return nowcast_timelines(
        law,
        rng,
        recent.repeat(per_window),
        nowcast,
        ticks=ticks,
        tick_s=trace.gap_s,
        long=None if long is None else long.repeat(per_window),
    )


def predict(
    job: SpotJob,
    *,
    laws: Sequence[FleetLaw],
    policies: Sequence[DeadlinePolicy] = tuple(DeadlinePolicy),
    samples_per_law: int = DEFAULT_SAMPLES_PER_TRACE,
    seed: int = 0,
) -> dict[DeadlinePolicy, dict[str, float | int]]:
    """Each policy's pooled prediction over `laws` (a region's zones and periods, weighed alike)."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0x9E0D])
    per: dict[DeadlinePolicy, list[ReplayOutcome]] = {p: [] for p in policies}
    for law in laws:
        tick = law.tick_s
        ticks = math.ceil(job.deadline_s / tick) + 1
        synthetic = law.timeline(rng, runs=samples_per_law, ticks=ticks, tick_s=tick)
        programme = plan_programme(job, law, tick_s=tick) if DeadlinePolicy.SRIFT in policies else None
        for policy in policies:
            per[policy].append(
                simulate(job, synthetic, tick_s=tick, policy=policy, law=law, programme=programme)
            )
    return {p: pooled(v) for p, v in per.items()}


def now_outcomes(
    job: SpotJob,
    *,
    law: FleetLaw,
    recent_up: np.ndarray,
    tick_s: float,
    nowcast: Nowcast,
    policies: Sequence[DeadlinePolicy] = tuple(DeadlinePolicy),
    samples: int = DEFAULT_SAMPLES_PER_TRACE,
    seed: int = 0,
    programme: Programme | None = None,
) -> dict[DeadlinePolicy, ReplayOutcome]:
    """Each policy's outcomes for a run starting now, on the `samples` timelines drawn from `law` conditioned
    on the market's recent past (the same timelines, in order, for every policy): `recent_up`, the fleet's
    availability (bool per tick of `tick_s`, oldest first) up to now, e.g. a user's own launch and
    interruption log (`srift traces import`). What the benchmark's per-window prediction does for one window
    (srift.spot.nowcast); the policy itself is planned on `law` alone: `programme`, when the caller has it
    already (plan_programme(job, law, tick_s=tick_s), the same for every recent past), else planned here.
    `pooled([outcome])` summarises one policy's runs; the runs themselves give the figures a summary does
    not keep (the share of runs within a budget, or interrupted at least once)."""
    up = np.asarray(recent_up, dtype=bool)
    recent, long = look_back(up, np.array([up.size]), nowcast, tick_s=tick_s)
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0x40C5])
    ticks = math.ceil(job.deadline_s / tick_s) + 1
    drawn = nowcast_timelines(
        law,
        rng,
        recent.repeat(samples),
        nowcast,
        ticks=ticks,
        tick_s=tick_s,
        long=None if long is None else long.repeat(samples),
    )
    if programme is None and DeadlinePolicy.SRIFT in policies:
        programme = plan_programme(job, law, tick_s=tick_s)
    return {p: simulate(job, drawn, tick_s=tick_s, policy=p, law=law, programme=programme) for p in policies}
