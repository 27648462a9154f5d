"""A plan replayed through spot traces (srift.services.replays): the plan document's spot fleet and
on-demand fallback become the run, every applicable trace window is replayed under each deadline policy,
and a plan or a trace set that cannot be replayed is refused naming why."""

from __future__ import annotations

from datetime import date
from typing import Any

import numpy as np
import pytest

from srift.errors import InvalidInput
from srift.services.replays import plan_job, replay_plan
from srift.spot.model import Weibull
from srift.spot.traces import SpotTrace, TraceKind, TraceMeta, TraceSource


def _trace(seed: int, *, zone: str = "us-east-1a", nodes: int = 4) -> SpotTrace:
    """Six days of a preemption trace of `nodes` p3.2xlarge at 5-minute ticks: the whole fleet comes and
    goes with Weibull up times (mean ~5 h) and capacity gaps (mean ~1 h)."""
    rng = np.random.default_rng(seed)
    up, gap = Weibull(0.8, 4.4 * 3600.0), Weibull(1.0, 3600.0)
    ticks, tick_s = 6 * 288, 300.0
    counts = np.zeros(ticks, dtype=np.int64)
    t, on = 0.0, True
    while t < ticks * tick_s:
        d = float((up if on else gap).sample(rng, 1)[0])
        if on:
            counts[int(t // tick_s) : int((t + d) // tick_s)] = nodes
        t, on = t + d, not on
    meta = TraceMeta("aws", zone, "p3.2xlarge", TraceKind.PREEMPTION, nodes, date(2024, 1, 1))
    source = TraceSource("test", f"{zone}.json", None, "0" * 64)
    return SpotTrace(meta=meta, gap_s=tick_s, counts=tuple(int(c) for c in counts), source=source)


def _plan(*, market: str = "spot", limit_s: float | None = 4.0 * 3600.0) -> dict[str, Any]:
    """The fields of a plan document (srift.services.plans.plan_result) a replay reads: 4 spot p3.2xlarge
    for 3 h uninterrupted, an on-demand fallback of the same fleet."""
    choice = {"instance_type": "p3.2xlarge", "market": market, "count": 4, "price_usd_per_hr": 0.92}
    return {
        "choices": [choice],
        "predicted": {"total_time_s": 3.2 * 3600.0, "cost_usd": 12.0},
        "limits": {"time_limit_s": limit_s, "budget_usd": None},
        "spot": {
            "uninterrupted_time_s": 3.0 * 3600.0,
            "expected_cost_usd": 12.0,
            "expected_time_s": 3.2 * 3600.0,
            "p_meets_time_limit": 0.97,
            "checkpoint_interval_s": 600.0,
            "restart_s": 150.0,
        },
        "fallback": {"predicted": {"total_time_s": 3.0 * 3600.0, "cost_usd": 4 * 3.06 * 3.0}},
    }


def test_the_plan_becomes_a_run_with_its_fleet_fallback_deadline_and_checkpoints() -> None:
    job = plan_job(_plan())
    assert job.spot_work_s == 3.0 * 3600.0 and job.spot_usd_per_s == pytest.approx(4 * 0.92 / 3600.0)
    assert job.od_usd_per_s == pytest.approx(4 * 3.06 / 3600.0) and job.deadline_s == 4.0 * 3600.0
    assert (job.checkpoint_s, job.restart_s) == (600.0, 150.0)
    # No time limit: the deadline is NO_LIMIT_SLACK (2×) the fallback's time.
    assert plan_job(_plan(limit_s=None)).deadline_s == pytest.approx(2.0 * (3.0 * 3600.0 + 150.0))


def test_every_policy_is_replayed_through_every_window_of_the_covering_traces() -> None:
    traces = [_trace(1), _trace(2, zone="us-east-1b"), _trace(3, nodes=2), _trace(4, zone="us-west-2a")]
    rep = replay_plan(_plan(), traces, provider="aws", region="us-east-1")
    # Only the two 4-VM traces in us-east-1 cover 4 VMs there.
    assert rep["traces"] == 2 and rep["windows"] > 100
    by = {s["policy"]: s for s in rep["policies"]}
    assert set(by) == {"on_demand", "spot_only", "spot_then_on_demand", "uniform_progress", "srift"}
    od = by["on_demand"]["replayed"]
    assert od["deadline_misses"] == 0 and od["mean_cost_usd"] == pytest.approx(plan_job(_plan()).od_cost_usd)
    # 4 h against 3 h + 150 s on-demand is 1.3× slack: the deadline policies fall back in time.
    for name in ("uniform_progress", "srift"):
        assert by[name]["replayed"]["deadline_misses"] == 0
        assert by[name]["replayed"]["mean_cost_usd"] < od["mean_cost_usd"]
    assert rep["plan_predicted"]["p_meets_time_limit"] == 0.97 and "expected_cost_pct" in rep["plan_gap"]


def test_a_plan_without_spot_or_without_a_covering_trace_is_refused() -> None:
    with pytest.raises(InvalidInput, match="runs no spot VMs") as caught:
        replay_plan(_plan(market="on_demand"), [_trace(1)], provider="aws", region="us-east-1")
    assert "To fix:" in str(caught.value)
    with pytest.raises(InvalidInput, match=r"no trace covers 4 × p3.2xlarge in aws/us-east-1") as caught:
        replay_plan(_plan(), [_trace(3, nodes=2)], provider="aws", region="us-east-1")
    assert "aws/us-east-1 p3.2xlarge ×2" in str(caught.value)


def test_a_nowcast_replay_predicts_each_window_from_the_traces_before_it() -> None:
    traces = [_trace(1), _trace(2, zone="us-east-1b")]
    plain = replay_plan(_plan(), traces, provider="aws", region="us-east-1")
    rep = replay_plan(_plan(), traces, provider="aws", region="us-east-1", nowcast=True)
    assert plain["nowcast"] is None and "look-back" in rep["nowcast"]
    by = {s["policy"]: s for s in rep["policies"]}
    before = {s["policy"]: s for s in plain["policies"]}
    # The replay itself is the same; only the prediction beside it changes.
    for name in ("uniform_progress", "srift"):
        assert by[name]["replayed"] == before[name]["replayed"]
        assert by[name]["predicted"]["runs"] >= by[name]["replayed"]["runs"]
        assert by[name]["predicted"]["mean_cost_usd"] != before[name]["predicted"]["mean_cost_usd"]
