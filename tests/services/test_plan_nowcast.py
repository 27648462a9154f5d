"""A plan's spot figures conditioned on a recent market (srift.services.replays.nowcast_spot): the recent
log is found and cut at as_of, the figures are the nowcast's prediction for a run starting then (Srift's
deadline policy, srift.spot.replay.now_outcomes) and say so, P(within budget) and P(interrupted) among them
(shares of the same timelines), the fitted law's stay beside them; a plan without an on-demand fallback
keeps the fitted law's figures and says why."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from srift.domain.requests import RecentMarket
from srift.errors import InvalidInput, NotFound
from srift.services.replays import NOWCAST_REPLACES, nowcast_spot, plan_job, recent_log
from srift.spot.model import SPLIT_BLOCK_S, Half, fit_model
from srift.spot.nowcast import choose_nowcast
from srift.spot.policy import DeadlinePolicy
from srift.spot.replay import law_for, now_outcomes, pooled
from srift.spot.traces import SpotTrace
from tests.services.test_replays import _plan, _trace

TAIL = 12 * 24
"""The last day of 5-minute ticks, which the tests rewrite (at least the nowcast's look-back here)."""


def _with_tail(trace: SpotTrace, tail: list[int]) -> SpotTrace:
    return replace(trace, counts=trace.counts[: len(trace.counts) - len(tail)] + tuple(tail))


def _conditioned(
    trace: SpotTrace, others: list[SpotTrace], *, plan: dict[str, Any] | None = None, **recent: float
) -> dict[str, Any]:
    """`plan` (default `_plan()`)'s spot section conditioned on `trace` as its recent market, among
    `others` imported: 200 timelines, seed 0."""
    out = nowcast_spot(
        _plan() if plan is None else plan,
        RecentMarket(trace=trace.name, **recent),
        stored=[trace, *others],
        provider="aws",
        region="us-east-1",
        seed=0,
        samples=200,
    )
    assert out is not None
    return out


def test_a_stormy_recent_past_makes_the_run_dearer_and_later_than_a_calm_one() -> None:
    base, other = _trace(1), _trace(2, zone="us-east-1b")
    stormy = _with_tail(base, [4 if i % 12 < 3 else 0 for i in range(TAIL)])
    calm = _with_tail(base, [4] * TAIL)
    got = {name: _conditioned(t, [other]) for name, t in (("stormy", stormy), ("calm", calm))}
    for spot in got.values():
        assert str(spot["spot_model"]).startswith("nowcast(look-back ")
        seen = spot["nowcast"]
        assert isinstance(seen, dict)
        assert seen["fitted_law"] == {key: _plan()["spot"].get(key) for key in NOWCAST_REPLACES}
        assert seen["traces"] == [base.name, other.name] and seen["as_of_s"] == base.duration_s
    s, c = got["stormy"], got["calm"]
    assert s["expected_cost_usd"] > c["expected_cost_usd"]
    assert s["expected_time_s"] > c["expected_time_s"]
    assert s["p_meets_time_limit"] <= c["p_meets_time_limit"]


def test_the_budget_and_interruption_chances_are_shares_of_the_nowcasts_own_timelines() -> None:
    stormy = _with_tail(_trace(1), [4 if i % 12 < 3 else 0 for i in range(TAIL)])
    other = _trace(2, zone="us-east-1b")
    # The nowcast's timelines for this plan, drawn here as the plans service draws them (the same law,
    # constants, look-back, samples and seed), and Srift's policy's run on each.
    plan = _plan()
    job = plan_job(plan)
    model = fit_model([stormy, other], half=Half.ALL)
    nowcast = choose_nowcast(
        model, [stormy, other], half=Half.ALL, block_s=SPLIT_BLOCK_S, horizon_s=job.deadline_s
    )
    law = law_for(model, stormy, 4)
    assert law is not None
    kw = {"law": law, "recent_up": stormy.up(4), "tick_s": stormy.gap_s, "nowcast": nowcast}
    runs = now_outcomes(job, policies=(DeadlinePolicy.SRIFT,), samples=200, seed=0, **kw)
    runs_cost, runs_preempted = runs[DeadlinePolicy.SRIFT].cost_usd, runs[DeadlinePolicy.SRIFT].preemptions
    summary = {p: pooled([o]) for p, o in runs.items()}
    # A budget at one run's cost (the median run's): that run, and every cheaper one, is within it.
    budget = float(np.sort(runs_cost)[runs_cost.size // 2])
    fitted = {"p_interrupted": 0.61, "p_within_budget": 0.42, "closed_form_time_s": 11_000.0}
    plan = {**plan, "limits": {**plan["limits"], "budget_usd": budget}, "spot": {**plan["spot"], **fitted}}
    out = _conditioned(stormy, [other], plan=plan)
    assert out["expected_cost_usd"] == summary[DeadlinePolicy.SRIFT]["mean_cost_usd"]
    assert out["p_within_budget"] == sum(float(c) <= budget for c in runs_cost) / runs_cost.size
    assert 0.5 <= out["p_within_budget"] < 1.0
    assert out["p_interrupted"] == sum(int(n) > 0 for n in runs_preempted) / runs_preempted.size
    assert out["p_interrupted"] > 0.0
    # The fitted law's figures are kept, and its closed form is not shown beside the nowcast's figures.
    assert {key: out["nowcast"]["fitted_law"][key] for key in fitted} == fitted
    assert out["closed_form_time_s"] is None and "closed form" in out["nowcast"]["closed_form"]
    alone = out["nowcast"]["without_recent"]
    assert alone["p_within_budget"] is not None and alone["p_interrupted"] is not None
    # Without a budget there is no chance of meeting one.
    unlimited = _conditioned(stormy, [other])
    assert unlimited["p_within_budget"] is None
    assert unlimited["p_interrupted"] == out["p_interrupted"]


def test_as_of_cuts_the_log_and_what_follows_it_changes_nothing() -> None:
    base = _trace(1)
    half = base.duration_s / 2
    early = _conditioned(base, [], as_of_s=half)
    # The same log with its second half rewritten: what follows as_of is never seen.
    rewritten = _with_tail(base, [0] * (base.ticks // 2))
    assert _conditioned(rewritten, [], as_of_s=half) == early
    assert early["nowcast"]["as_of_s"] == half


def test_a_plan_without_an_on_demand_fallback_keeps_the_fitted_law_and_says_why() -> None:
    plan = {**_plan(), "fallback": None}
    out = nowcast_spot(
        plan,
        RecentMarket(trace=_trace(1).name),
        stored=[_trace(1)],
        provider="aws",
        region="us-east-1",
        seed=0,
        samples=50,
    )
    assert out is not None and "nowcast" not in out
    assert out["spot_model"].startswith("fitted law (the plan has no on-demand fallback")
    assert {key: value for key, value in out.items() if key != "spot_model"} == plan["spot"]
    # A plan without spot VMs has nothing to condition.
    on_demand = nowcast_spot(
        _plan(market="on_demand"),
        RecentMarket(trace=_trace(1).name),
        stored=[_trace(1)],
        provider="aws",
        region="us-east-1",
        seed=0,
        samples=50,
    )
    assert on_demand is None


def test_the_recent_log_must_exist_cover_the_fleet_and_hold_as_of() -> None:
    fleet = ("aws", "us-east-1", "p3.2xlarge", 4)
    trace = _trace(1)
    with pytest.raises(NotFound, match="no imported trace is named 'nope'") as missing:
        recent_log(RecentMarket(trace="nope"), stored=[trace], fleet=fleet)
    assert missing.value.field == "recent_market.trace" and "srift traces list" in str(missing.value)
    assert trace.name in missing.value.hint
    for bad in (("aws", "us-west-2", "p3.2xlarge", 4), ("aws", "us-east-1", "p3.2xlarge", 8)):
        with pytest.raises(InvalidInput, match="not the plan's spot fleet") as caught:
            recent_log(RecentMarket(trace=trace.name), stored=[trace], fleet=bad)
        assert caught.value.field == "recent_market.trace" and "To fix:" in str(caught.value)
    for as_of in (1.0, trace.duration_s + trace.gap_s):
        with pytest.raises(InvalidInput, match="outside the log") as caught:
            recent_log(RecentMarket(trace=trace.name, as_of_s=as_of), stored=[trace], fleet=fleet)
        assert caught.value.field == "recent_market.as_of_s"
    cut = recent_log(RecentMarket(trace=trace.name, as_of_s=3600.0), stored=[trace], fleet=fleet)
    assert cut.trace.counts == trace.counts[:12] and cut.field == "recent_market.trace"
    with pytest.raises(InvalidInput, match=r"rows\[1\]\.count") as caught:
        recent_log(
            RecentMarket(
                log_csv="time,zone,instance_type,event,count\n2024-01-01T00:00Z,us-east-1a,p3.2xlarge,launched,4\n2024-01-01T01:00Z,us-east-1a,p3.2xlarge,interrupted,x\n"
            ),
            stored=[],
            fleet=fleet,
        )
    assert caught.value.field == "recent_market.log_csv.rows[1].count"
