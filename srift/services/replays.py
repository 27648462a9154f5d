"""A plan replayed through spot traces (`srift plan FILE --replay-traces PATH`): its spot fleet's run
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

from collections.abc import Mapping, Sequence
from typing import Any

from srift.errors import InvalidInput
from srift.spot.model import Half, fit_model
from srift.spot.policy import DeadlinePolicy, SpotJob
from srift.spot.replay import NO_LIMIT_SLACK, applicable, replay
from srift.spot.traces import SpotTrace

DEFAULT_CHECKPOINT_S = 600.0
"""When the plan carries no spot outlook: srift.optimize.spot's default checkpoint interval."""
DEFAULT_RESTART_S = 150.0
"""When the plan carries no spot outlook: Srift §5.4's EC2 launch time."""


def _spot_choice(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    spot = [c for c in plan.get("choices", []) if c.get("market") == "spot"]
    if not spot:
        raise InvalidInput(
            "the plan runs no spot VMs, so there is nothing to replay",
            hint="ask for market: spot (or any) in the request",
            field="--replay-traces",
        )
    kinds = {(c["instance_type"], c.get("location")) for c in spot}
    if len(kinds) > 1:
        raise InvalidInput(
            f"the plan runs {len(kinds)} spot types or locations; a replay follows one spot fleet",
            hint="restrict the request's availability to one spot type to replay it",
            field="--replay-traces",
        )
    chosen: Mapping[str, Any] = spot[0]
    return chosen


def plan_job(plan: Mapping[str, Any]) -> SpotJob:
    """The plan's run as a spot.policy.SpotJob: spot fleet, on-demand fallback, deadline, checkpoints."""
    fallback = plan.get("fallback")
    if not fallback:
        raise InvalidInput(
            "the plan has no on-demand fallback to compare and fall back to",
            hint="set fallback: true in the request",
            field="--replay-traces",
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


def replay_plan(
    plan: Mapping[str, Any],
    traces: Sequence[SpotTrace],
    *,
    provider: str,
    region: str,
    seed: int = 0,
) -> dict[str, Any]:
    """Replay `plan`'s spot run through `traces` (those of its type in its region, covering its VM count)."""
    choice = _spot_choice(plan)
    where = choice.get("location")
    if where:
        provider, region = where.split("/")[:2]
    itype, nodes = str(choice["instance_type"]), int(choice["count"])
    job = plan_job(plan)
    chosen = applicable(traces, provider=provider, region=region, instance_type=itype, nodes=nodes)
    if not chosen:
        have = sorted({f"{t.provider}/{t.region} {t.instance_type} ×{t.node_count}" for t in traces})
        raise InvalidInput(
            f"no trace covers {nodes} × {itype} in {provider}/{region} (the traces cover "
            f"{', '.join(have) or 'nothing'})",
            hint="give traces of that type and region with at least that many VMs, or plan a covered type",
            field="--replay-traces",
        )
    model = fit_model(chosen, half=Half.ALL)
    result = replay(job, traces=chosen, model=model, nodes=nodes, half=Half.ALL, seed=seed)
    if not result.runs:
        raise InvalidInput(
            f"the traces of {itype} in {provider}/{region} are shorter than the run's deadline "
            f"({job.deadline_s:.0f} s) or too short to fit",
            hint="give longer traces",
            field="--replay-traces",
        )
    out = result.to_dict()
    spot = plan.get("spot") or {}
    out["instance_type"], out["provider"], out["region"] = itype, provider, region
    out["plan_predicted"] = {
        "expected_cost_usd": spot.get("expected_cost_usd"),
        "expected_time_s": spot.get("expected_time_s"),
        "p_meets_time_limit": spot.get("p_meets_time_limit"),
    }
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
