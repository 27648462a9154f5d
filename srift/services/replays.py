"""A plan replayed through spot traces (`srift plan FILE --replay-traces PATH`, and a stored plan through the
imported trace set: GET /v1/plans/{id}/replay, which the dashboard's Plan page shows): its spot fleet's run
through every window of every applicable trace, under each deadline policy (srift.spot.policy), beside
what the plan itself predicted.

The plan document gives the run: the spot fleet (one spot type and location; its VM count is the fleet
size a trace must cover), its uninterrupted time and price, the on-demand fallback's time and price, the
time limit (else `NO_LIMIT_SLACK` × the fallback's time), the checkpoint interval and restart time. The
traces give the windows (start times every `DEFAULT_STRIDE_S` over each trace, srift.spot.replay). The
replay's own prediction comes from the model fitted to those same traces (in-sample: the benchmark,
benchmarks/spot_traces.py, is where the model is judged on traces it was not fitted to); for a plan
conditioned on a recent market (its request's `recent_market`), each window's from the traces before it.

A plan request's `recent_market` also goes through here (`nowcast_spot`, the plans service's spot model
phase): the plan's spot figures become the nowcast's prediction for a run starting at the log's `as_of`,
by the same path as the replay's nowcast (`replay_fleet`) and the benchmark's per-window prediction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from srift.domain.records import PlanRecord
from srift.domain.requests import RecentMarket
from srift.domain.states import ReplayStatus
from srift.errors import InvalidInput, NotFound
from srift.services.caching import RevisionCache
from srift.services.traces import stored_traces, traceset_path
from srift.settings import Settings
from srift.spot.model import SPLIT_BLOCK_S, Half, fit_model
from srift.spot.nowcast import choose_nowcast, look_back
from srift.spot.policy import DeadlinePolicy, ReplayOutcome, SpotJob, plan_programme
from srift.spot.replay import (
    DEFAULT_SAMPLES_PER_TRACE,
    DEFAULT_STRIDE_S,
    NO_LIMIT_SLACK,
    applicable,
    law_for,
    now_outcomes,
    pooled,
    replay,
)
from srift.spot.traces import SpotTrace, read_log_csv

DEFAULT_CHECKPOINT_S = 600.0
"""When the plan carries no spot outlook: srift.optimize.spot's default checkpoint interval."""
DEFAULT_RESTART_S = 150.0
"""When the plan carries no spot outlook: Srift §5.4's EC2 launch time."""
PLAN_PREDICTED = (
    "expected_cost_usd",
    "expected_time_s",
    "p_meets_time_limit",
    "time_p10_s",
    "time_p50_s",
    "time_p90_s",
    "cost_p90_usd",
    "uninterrupted_time_s",
    "uninterrupted_cost_usd",
)
"""The plan's own spot outlook (its `spot` section) a replay is shown beside."""


@dataclass(frozen=True, slots=True)
class NotReplayed:
    """Why a plan cannot be replayed through the traces given, and what would let it be."""

    status: ReplayStatus
    reason: str
    hint: str


@dataclass(frozen=True, slots=True)
class SpotFleet:
    """A plan's one spot fleet and where it runs, its run (SpotJob), and the traces that cover it."""

    instance_type: str
    nodes: int
    provider: str
    region: str
    job: SpotJob
    traces: tuple[SpotTrace, ...]


def _spot_choice(plan: Mapping[str, Any]) -> Mapping[str, Any] | NotReplayed:
    spot = [c for c in plan.get("choices", []) if c.get("market") == "spot"]
    if not spot:
        return NotReplayed(
            ReplayStatus.NO_SPOT,
            "the plan runs no spot VMs, so there is nothing to replay",
            "ask for market: spot (or any) in the request",
        )
    kinds = {(c["instance_type"], c.get("location")) for c in spot}
    if len(kinds) > 1:
        return NotReplayed(
            ReplayStatus.SEVERAL_FLEETS,
            f"the plan runs {len(kinds)} spot types or locations; a replay follows one spot fleet",
            "restrict the request's availability to one spot type to replay it",
        )
    chosen: Mapping[str, Any] = spot[0]
    return chosen


def plan_job(plan: Mapping[str, Any]) -> SpotJob:
    """The plan's run as a spot.policy.SpotJob: spot fleet, on-demand fallback, deadline, checkpoints."""
    job = _job(plan)
    if isinstance(job, NotReplayed):
        raise _refusal(job)
    return job


def _job(plan: Mapping[str, Any]) -> SpotJob | NotReplayed:
    fallback = plan.get("fallback")
    if not fallback:
        return NotReplayed(
            ReplayStatus.NO_FALLBACK,
            "the plan has no on-demand fallback to compare and fall back to",
            "set fallback: true in the request",
        )
    spot = plan.get("spot") or {}
    usd_per_s = sum(c["count"] * c["price_usd_per_hr"] for c in plan["choices"]) / 3600.0
    work_s = float(spot.get("uninterrupted_time_s") or plan["predicted"]["total_time_s"])
    od = fallback["predicted"]
    od_work_s = float(od["total_time_s"])
    restart_s = float(spot.get("restart_s", DEFAULT_RESTART_S))
    limit = (plan.get("limits") or {}).get("time_limit_s")
    deadline_s = float(limit) if limit else NO_LIMIT_SLACK * (od_work_s + restart_s)
    return SpotJob(
        spot_work_s=work_s,
        spot_usd_per_s=usd_per_s,
        od_work_s=od_work_s,
        od_usd_per_s=float(od["cost_usd"]) / od_work_s,
        deadline_s=deadline_s,
        checkpoint_s=float(spot.get("checkpoint_interval_s", DEFAULT_CHECKPOINT_S)),
        restart_s=restart_s,
    )


def _refusal(why: NotReplayed) -> InvalidInput:
    return InvalidInput(why.reason, hint=why.hint, field="--replay-traces")


def spot_fleet(
    plan: Mapping[str, Any], traces: Sequence[SpotTrace], *, provider: str, region: str
) -> SpotFleet | NotReplayed:
    """The plan's spot fleet (its choice's location, else `provider`/`region`), its run, and the traces
    of its type in its region that cover its VM count; or why there is none to replay."""
    choice = _spot_choice(plan)
    if isinstance(choice, NotReplayed):
        return choice
    where = choice.get("location")
    if where:
        provider, region = where.split("/")[:2]
    itype, nodes = str(choice["instance_type"]), int(choice["count"])
    job = _job(plan)
    if isinstance(job, NotReplayed):
        return job
    chosen = applicable(traces, provider=provider, region=region, instance_type=itype, nodes=nodes)
    if not chosen:
        have = sorted({f"{t.provider}/{t.region} {t.instance_type} ×{t.node_count}" for t in traces})
        return NotReplayed(
            ReplayStatus.NO_TRACE,
            f"no trace covers {nodes} × {itype} in {provider}/{region} (the traces cover "
            f"{', '.join(have) or 'nothing'})",
            "give traces of that type and region with at least that many VMs, or plan a covered type",
        )
    return SpotFleet(itype, nodes, provider, region, job, tuple(chosen))


def request_location(request: Mapping[str, Any], *, default_region: str) -> tuple[str, str]:
    """The provider and region a plan request names (its first of `regions` when it names several), where
    a replay looks for traces unless the plan's spot choice names its own location."""
    regions = request.get("regions") or []
    region = request.get("region") or (str(regions[0]).split("/")[-1] if regions else default_region)
    return str(request.get("provider") or "aws"), str(region)


def replay_plan(
    plan: Mapping[str, Any],
    traces: Sequence[SpotTrace],
    *,
    provider: str,
    region: str,
    seed: int = 0,
    nowcast: bool = False,
) -> dict[str, Any]:
    """Replay `plan`'s spot run through `traces` (those of its type in its region, covering its VM count);
    `nowcast`: predict each window from the traces before its start (replay_fleet)."""
    fleet = spot_fleet(plan, traces, provider=provider, region=region)
    if isinstance(fleet, NotReplayed):
        raise _refusal(fleet)
    out = replay_fleet(plan, fleet, seed=seed, nowcast=nowcast)
    if isinstance(out, NotReplayed):
        raise _refusal(out)
    return out


def replay_fleet(
    plan: Mapping[str, Any],
    fleet: SpotFleet,
    *,
    seed: int = 0,
    stride_s: float = DEFAULT_STRIDE_S,
    samples_per_trace: int = DEFAULT_SAMPLES_PER_TRACE,
    nowcast: bool = False,
) -> dict[str, Any] | NotReplayed:
    """Replay the plan's `fleet` through its traces under every policy: srift.spot.replay.Replay.to_dict,
    the fleet, the plan's own prediction and its gap to Srift's policy replayed, and the distribution of
    Srift's policy's replayed finish times and costs.

    `nowcast`: each window's prediction is conditioned on the trace before its start (srift.spot.nowcast,
    its constants chosen on the same traces for the run's deadline; `nowcast` in the answer says which);
    else every window gets its period's law's prediction."""
    itype, provider, region, job = fleet.instance_type, fleet.provider, fleet.region, fleet.job
    model = fit_model(fleet.traces, half=Half.ALL)
    conditioned = (
        choose_nowcast(model, fleet.traces, half=Half.ALL, block_s=SPLIT_BLOCK_S, horizon_s=job.deadline_s)
        if nowcast
        else None
    )
    result = replay(
        job,
        traces=fleet.traces,
        model=model,
        nodes=fleet.nodes,
        half=Half.ALL,
        stride_s=stride_s,
        samples_per_trace=samples_per_trace,
        seed=seed,
        nowcast=conditioned,
    )
    if not result.runs:
        return NotReplayed(
            ReplayStatus.TOO_SHORT,
            f"the traces of {itype} in {provider}/{region} are shorter than the run's deadline "
            f"({job.deadline_s:.0f} s) or too short to fit",
            "give longer traces",
        )
    out = result.to_dict()
    spot = plan.get("spot") or {}
    out["instance_type"], out["provider"], out["region"] = itype, provider, region
    out["trace_names"] = [r.trace.name for r in result.runs]
    limited = (plan.get("limits") or {}).get("time_limit_s")
    out["deadline_rule"] = (
        "the plan's time limit"
        if limited
        else f"no time limit: {NO_LIMIT_SLACK:g}× the on-demand fallback's time and one restart"
    )
    out["distribution"] = result.distribution(DeadlinePolicy.SRIFT)
    out["nowcast"] = conditioned.describe() if conditioned is not None else None
    out["plan_predicted"] = {key: spot.get(key) for key in PLAN_PREDICTED}
    srift = result.summary(DeadlinePolicy.SRIFT)["replayed"]
    if spot.get("expected_cost_usd"):
        out["plan_gap"] = {
            "expected_cost_pct": 100.0
            * (float(spot["expected_cost_usd"]) / float(srift["mean_cost_usd"]) - 1.0),
            "p_meets_time_limit_points": (
                100.0 * (float(spot["p_meets_time_limit"]) - float(srift["p_meets_deadline"]))
                if spot.get("p_meets_time_limit") is not None
                else None
            ),
        }
    return out


VIEW_MAX_WINDOWS = 20_000
"""A replay asked for over HTTP (GET /v1/plans/{id}/replay) starts at most about this many windows over all
its traces: beyond, the stride between starts grows from DEFAULT_STRIDE_S. The public traces stay under
it (10,208 windows for one p3.2xlarge in us-east-1), so the API answers what `--replay-traces` prints;
it bounds the rows of a user's months-long import."""
REPLAYS: RevisionCache[dict[str, Any]] = RevisionCache("plan replays", max_entries=64)
"""Replays of stored plans (which never change) keyed by plan, seed and the trace set's file stamp."""


def view_stride_s(traces: Sequence[SpotTrace]) -> float:
    """The stride between window starts that keeps a replay through `traces` under VIEW_MAX_WINDOWS."""
    span_s = sum(t.gap_s * len(t.counts) for t in traces)
    return max(DEFAULT_STRIDE_S, span_s / VIEW_MAX_WINDOWS)


def plan_replay(*, session: Session, settings: Settings, record: PlanRecord) -> dict[str, Any]:
    """GET /v1/plans/{id}/replay: the stored plan's spot run (`record`, which the caller may read: the plans
    service's get_plan_for) replayed through the imported trace set
    (`srift traces import`), beside what the plan predicted and what that prediction rests on; or, when it
    cannot be replayed (no spot fleet, several, no fallback, no covering trace, traces too short), the
    status and reason in plain words. Kept per plan and trace set (REPLAYS): a replay through many traces
    takes seconds (docs/spot.md), a second look at it none."""
    started = time.perf_counter()
    path = traceset_path(settings)
    stamp = None
    if path.exists():
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    out = REPLAYS.get_or_build(
        session=session,
        areas=(),
        key=(record.id, str(path), stamp),
        build=lambda: _replay_view(record, settings=settings),
    )
    return {**out, "replay_s": time.perf_counter() - started}


def _replay_view(record: PlanRecord, *, settings: Settings) -> dict[str, Any]:
    """The replay a stored plan gets: with the nowcast's prediction when the plan was conditioned on a
    recent market (its request's `recent_market`), else the period's law's, as its own figures were."""
    plan, request = record.document(), record.request
    spot = plan.get("spot") or {}
    traces = stored_traces(settings)
    provider, region = request_location(request, default_region=settings.default_region)
    out: dict[str, Any] = {
        "plan_id": record.id,
        "imported_traces": len(traces),
        "rates": spot.get("rates") or [],
        "plan_predicted": {key: spot.get(key) for key in PLAN_PREDICTED} if spot else None,
        "spot_model": spot.get("spot_model", FITTED_LAW) if spot else None,
        "fleet": None,
        "replay": None,
        "reason": None,
        "hint": None,
    }
    fleet = spot_fleet(plan, traces, provider=provider, region=region)
    if not isinstance(fleet, NotReplayed):
        out["fleet"] = {
            "instance_type": fleet.instance_type,
            "nodes": fleet.nodes,
            "provider": fleet.provider,
            "region": fleet.region,
        }
        fleet_replay = replay_fleet(
            plan,
            fleet,
            seed=int(request.get("seed") or 0),
            stride_s=view_stride_s(fleet.traces),
            nowcast=bool(request.get("recent_market")),
        )
        if isinstance(fleet_replay, NotReplayed):
            fleet = fleet_replay
        else:
            out["replay"] = fleet_replay
    if isinstance(fleet, NotReplayed):
        out.update(status=fleet.status, reason=fleet.reason, hint=fleet.hint)
    else:
        out["status"] = ReplayStatus.REPLAYED
    return out


FITTED_LAW = "fitted law"
"""`spot_model` of a plan whose spot figures come from the fitted law alone (no recent market given)."""
NOWCAST_REPLACES = (
    "expected_time_s",
    "expected_cost_usd",
    "time_p10_s",
    "time_p50_s",
    "time_p90_s",
    "cost_p90_usd",
    "p_meets_time_limit",
    "expected_interruptions",
    "samples",
    "method",
    "p_interrupted",
    "p_within_budget",
    "closed_form_time_s",
)
"""The spot section's figures a recent market replaces with the nowcast's (the fitted law's stay under
`nowcast.fitted_law`): every one the nowcast's timelines give, and closed_form_time_s, which they do not
(it becomes null: `NOWCAST_CLOSED_FORM`)."""
NOWCAST_CLOSED_FORM = (
    "closed_form_time_s is the fitted law's restart-in-place expectation, which the search compared fleets "
    "on; the nowcast has no closed form, so it is null here and kept under fitted_law"
)
"""What a nowcast plan's spot section says of its closed form (`nowcast.closed_form`)."""
BUDGET_TOLERANCE = 1e-12
"""A run's cost within `budget × (1 + this)` is within budget: srift.optimize.spot.monte_carlo's rounding
allowance, so that the two models count a run at exactly the budget alike."""
NOWCAST_METHOD = (
    "Srift's deadline policy on timelines of the fitted law conditioned on the recent market "
    "(srift.spot.replay.now_outcomes, as the benchmark's per-window prediction)"
)


@dataclass(frozen=True, slots=True)
class RecentLog:
    """The recent market's trace for the plan's spot fleet, cut at its `as_of` tick, and the field of the
    request it came from (for errors)."""

    trace: SpotTrace
    field: str


def recent_log(
    recent: RecentMarket, *, stored: Sequence[SpotTrace], fleet: tuple[str, str, str, int]
) -> RecentLog:
    """The request's recent market as one trace of the plan's spot `fleet` (provider, region, type, VMs),
    cut at `as_of_s`: the imported trace it names (`stored`: the trace set), or the inline log's trace of
    that fleet. A trace name the set does not hold is NotFound on `recent_market.trace` (404, like any
    stored data a valid request names), its hint listing the imported names; InvalidInput names
    `recent_market.<field>` and what would fix it for a log that does not cover the fleet and an as_of
    outside the log."""
    provider, region, itype, nodes = fleet
    if recent.trace is not None:
        where = "recent_market.trace"
        named = [t for t in stored if t.name == recent.trace]
        if not named:
            raise NotFound(
                f"no imported trace is named {recent.trace!r}",
                hint=f"name one of the imported traces ({_known_traces(stored)}) as `srift traces list` or "
                "GET /v1/traces shows it, or import yours with `srift traces import LOG.csv` first (or give "
                "the log inline as recent_market.log_csv)",
                field=where,
            )
        candidates = named
    else:
        where = "recent_market.log_csv"
        try:
            candidates = read_log_csv(
                (recent.log_csv or "").encode("utf-8"), path=where, provider=provider, tick_s=recent.tick_s
            )
        except InvalidInput as exc:
            inner = f"{where}.{exc.field}" if exc.field and exc.field != "tick_s" else "recent_market.tick_s"
            raise InvalidInput(exc.detail, hint=exc.hint, field=inner) from exc
    covering = applicable(candidates, provider=provider, region=region, instance_type=itype, nodes=nodes)
    if not covering:
        have = "; ".join(
            sorted(f"{t.provider}/{t.zone} {t.instance_type} ×{t.node_count}" for t in candidates)
        )
        raise InvalidInput(
            f"the recent market covers {have}, not the plan's spot fleet of {nodes} × {itype} in "
            f"{provider}/{region}",
            hint=f"give a log of {itype} in {provider}/{region} with at least {nodes} VMs, or restrict the "
            "request's availability to the log's type (a plan is conditioned on its own fleet's market)",
            field=where,
        )
    trace = covering[0]
    return RecentLog(_as_of(trace, recent.as_of_s), where)


def _known_traces(stored: Sequence[SpotTrace], *, shown: int = 5) -> str:
    """The imported traces' names for a hint: the first `shown` by name, and how many more."""
    names = sorted(t.name for t in stored)
    if not names:
        return "none is imported"
    more = f", and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _as_of(trace: SpotTrace, as_of_s: float | None) -> SpotTrace:
    """`trace` up to `as_of_s` seconds after its first tick (the ticks wholly before it; None: all)."""
    if as_of_s is None:
        return trace
    ticks = math.floor(as_of_s / trace.gap_s + 1e-9)
    if not 1 <= ticks <= trace.ticks:
        raise InvalidInput(
            f"as_of_s {as_of_s:g} s is outside the log ({trace.name}: {trace.ticks} ticks of "
            f"{trace.gap_s:g} s, {trace.duration_s:g} s)",
            hint=f"give {trace.gap_s:g} ≤ as_of_s ≤ {trace.duration_s:g} (seconds after the log's first "
            "tick), or leave it out for the log's end",
            field="recent_market.as_of_s",
        )
    prices = trace.prices_usd_per_hr[:ticks] if trace.prices_usd_per_hr is not None else None
    return replace(trace, counts=trace.counts[:ticks], prices_usd_per_hr=prices)


def nowcast_spot(
    plan: Mapping[str, Any],
    recent: RecentMarket,
    *,
    stored: Sequence[SpotTrace],
    provider: str,
    region: str,
    seed: int,
    samples: int,
) -> dict[str, Any] | None:
    """The plan's spot section with its figures from the nowcast (the fitted law conditioned on the recent
    market), or None when the plan runs no spot VMs. The same path as the replay's nowcast (replay_fleet):
    the law fitted to the traces of the fleet's type in its region that cover it (the trace set's, with the
    recent log cut at as_of in place of its whole), the nowcast's constants chosen on them for the run's
    deadline (srift.spot.nowcast.choose_nowcast), and the prediction for a run starting at as_of from its
    look-back (srift.spot.replay.now_outcomes), under Srift's deadline policy: every figure its timelines
    give (NOWCAST_REPLACES; P(within budget) and P(interrupted) are the shares of those timelines), the
    fitted law's kept under `nowcast.fitted_law`. Without an on-demand fallback to plan that policy with,
    the fitted law's figures stay and `spot_model` says why."""
    spot = plan.get("spot")
    choice = _spot_choice(plan)
    if not spot or isinstance(choice, NotReplayed):
        return None
    where = choice.get("location")
    if where:
        provider, region = where.split("/")[:2]
    itype, nodes = str(choice["instance_type"]), int(choice["count"])
    log = recent_log(recent, stored=stored, fleet=(provider, region, itype, nodes))
    job = _job(plan)
    if isinstance(job, NotReplayed):
        return {**spot, "spot_model": f"{FITTED_LAW} ({job.reason}: the nowcast's policy needs it)"}
    others = applicable(
        [t for t in stored if t.name != log.trace.name],
        provider=provider,
        region=region,
        instance_type=itype,
        nodes=nodes,
    )
    traces = [log.trace, *others]
    model = fit_model(traces, half=Half.ALL)
    nowcast = choose_nowcast(model, traces, half=Half.ALL, block_s=SPLIT_BLOCK_S, horizon_s=job.deadline_s)
    law = law_for(model, log.trace, nodes)
    assert law is not None  # the model was fitted on the log itself
    up = log.trace.up(nodes)
    tick = log.trace.gap_s
    # The policy is planned on the law alone: one programme for the prediction with the look-back and without.
    programme = plan_programme(job, law, tick_s=tick)

    def predicted(recent_up: np.ndarray) -> ReplayOutcome:
        return now_outcomes(
            job,
            law=law,
            recent_up=recent_up,
            tick_s=tick,
            nowcast=nowcast,
            policies=(DeadlinePolicy.SRIFT,),
            samples=samples,
            seed=seed,
            programme=programme,
        )[DeadlinePolicy.SRIFT]

    now, alone = predicted(up), predicted(up[:0])
    seen, _ = look_back(up, np.array([up.size]), nowcast, tick_s=tick)
    limits = plan.get("limits") or {}
    limited = bool(limits.get("time_limit_s"))
    budget = limits.get("budget_usd")
    ended = int(seen.up_ended[0] + seen.down_ended[0])
    return {
        **spot,
        **_figures(now, limited=limited, budget_usd=budget),
        "closed_form_time_s": None,
        "method": NOWCAST_METHOD,
        "spot_model": f"nowcast(look-back {nowcast.lookback_s / 3600:g} h, {ended} ended runs)",
        "nowcast": {
            "trace": log.trace.name,
            "source": log.field,
            "as_of_s": log.trace.duration_s,
            "lookback_s": nowcast.lookback_s,
            "up_s": float(seen.up_s[0]),
            "down_s": float(seen.down_s[0]),
            "interruptions": int(seen.up_ended[0]),
            "capacity_returns": int(seen.down_ended[0]),
            "up_at_start": bool(seen.state_up[0]),
            "constants": nowcast.describe(),
            "law": law.source.value,
            "traces": [t.name for t in traces],
            "spot_share": float(pooled([now])["mean_spot_share"]),
            "without_recent": _figures(alone, limited=limited, budget_usd=budget),
            "fitted_law": {key: spot.get(key) for key in NOWCAST_REPLACES},
            "closed_form": NOWCAST_CLOSED_FORM,
        },
    }


def _figures(outcome: ReplayOutcome, *, limited: bool, budget_usd: float | None) -> dict[str, Any]:
    """Srift's policy's runs on the nowcast's timelines (srift.spot.replay.now_outcomes) as the spot
    section's figures: their summary (srift.spot.replay.pooled), the share of runs that cost at most
    `budget_usd` (None without one) and the share interrupted at least once."""
    summary = pooled([outcome])
    within = outcome.cost_usd <= budget_usd * (1 + BUDGET_TOLERANCE) if budget_usd is not None else None
    return {
        "expected_time_s": float(summary["mean_finish_s"]),
        "expected_cost_usd": float(summary["mean_cost_usd"]),
        "time_p10_s": float(summary["finish_p10_s"]),
        "time_p50_s": float(summary["finish_p50_s"]),
        "time_p90_s": float(summary["finish_p90_s"]),
        "cost_p90_usd": float(summary["cost_p90_usd"]),
        "p_meets_time_limit": float(summary["p_meets_deadline"]) if limited else None,
        "expected_interruptions": float(summary["mean_preemptions"]),
        "samples": int(summary["runs"]),
        "p_interrupted": float(np.mean(outcome.preemptions >= 1)),
        "p_within_budget": float(np.mean(within)) if within is not None else None,
    }
