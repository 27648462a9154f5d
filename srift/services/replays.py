"""A plan replayed through spot traces (`srift plan FILE --replay-traces PATH`, and a stored plan through the
imported trace set: GET /v1/plans/{id}/replay, which the dashboard's Plan page shows): its spot fleet's run
through every window of every applicable trace, under each deadline policy (srift.spot.policy), beside
what the plan itself predicted.

The plan document gives the run: the spot fleet (one spot type and location; its VM count is the fleet
size a trace must cover), its uninterrupted time and price, the on-demand fallback's time and price, the
time limit (else `NO_LIMIT_SLACK` × the fallback's time), the checkpoint interval and restart time. The
traces give the windows (start times every `DEFAULT_STRIDE_S` over each trace, srift.spot.replay). The
replay's own prediction comes from the model fitted to those same traces (in-sample: the benchmark,
benchmarks/spot_traces.py, is where the model is judged on traces it was not fitted to).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from srift.domain.records import PlanRecord
from srift.errors import InvalidInput
from srift.services.caching import RevisionCache
from srift.services.plans import get_plan_for
from srift.services.traces import stored_traces, traceset_path
from srift.settings import Settings
from srift.spot.model import SPLIT_BLOCK_S, Half, fit_model
from srift.spot.nowcast import choose_nowcast
from srift.spot.policy import DeadlinePolicy, SpotJob
from srift.spot.replay import (
    DEFAULT_SAMPLES_PER_TRACE,
    DEFAULT_STRIDE_S,
    NO_LIMIT_SLACK,
    applicable,
    replay,
)
from srift.spot.traces import SpotTrace

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


class ReplayStatus(StrEnum):
    """Whether a plan could be replayed, and if not, why (GET /v1/plans/{id}/replay says which)."""

    REPLAYED = "replayed"
    NO_SPOT = "no_spot"
    SEVERAL_FLEETS = "several_fleets"
    NO_FALLBACK = "no_fallback"
    NO_TRACE = "no_trace"
    TOO_SHORT = "too_short"


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
    if conditioned is not None:
        out["nowcast"] = conditioned.describe()
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


def plan_replay(*, session: Session, settings: Settings, plan_id: int, viewer: str | None) -> dict[str, Any]:
    """GET /v1/plans/{id}/replay: the stored plan's spot run replayed through the imported trace set
    (`srift traces import`), beside what the plan predicted and what that prediction rests on; or, when it
    cannot be replayed (no spot fleet, several, no fallback, no covering trace, traces too short), the
    status and reason in plain words. Kept per plan and trace set (REPLAYS): a replay through many traces
    takes seconds (docs/spot.md), a second look at it none."""
    started = time.perf_counter()
    record = get_plan_for(session=session, plan_id=plan_id, viewer=viewer)
    path = traceset_path(settings)
    stamp = None
    if path.exists():
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    out = REPLAYS.get_or_build(
        session=session,
        areas=(),
        key=(plan_id, str(path), stamp),
        build=lambda: _replay_view(record, settings=settings),
    )
    return {**out, "replay_s": time.perf_counter() - started}


def _replay_view(record: PlanRecord, *, settings: Settings) -> dict[str, Any]:
    plan, request = record.document(), record.request
    spot = plan.get("spot") or {}
    traces = stored_traces(settings)
    provider, region = request_location(request, default_region=settings.default_region)
    out: dict[str, Any] = {
        "plan_id": record.id,
        "imported_traces": len(traces),
        "rates": spot.get("rates") or [],
        "plan_predicted": {key: spot.get(key) for key in PLAN_PREDICTED} if spot else None,
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
            plan, fleet, seed=int(request.get("seed") or 0), stride_s=view_stride_s(fleet.traces)
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
