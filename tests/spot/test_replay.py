"""Replays through trace windows beside predictions from the fitted model."""

from __future__ import annotations

import numpy as np
import pytest

from srift.spot.model import Half, Weibull, fit_model
from srift.spot.policy import DeadlinePolicy, ReplayOutcome, SpotJob
from srift.spot.replay import applicable, histogram, pooled, predict, replay, windows
from tests.spot.test_model import alternating, trace


def outcome(costs: list[float], met: list[bool]) -> ReplayOutcome:
    n = len(costs)
    return ReplayOutcome(
        finish_s=np.full(n, 100.0),
        cost_usd=np.array(costs),
        met=np.array(met),
        spot_s=np.zeros(n),
        od_s=np.full(n, 100.0),
        preemptions=np.zeros(n, dtype=np.int64),
        past_window=np.zeros(n, dtype=bool),
    )


def test_each_trace_weighs_the_same_however_many_windows_it_has() -> None:
    s = pooled([outcome([10.0], [True]), outcome([2.0, 2.0, 2.0], [False, False, True])])
    assert s["mean_cost_usd"] == pytest.approx((10.0 + 2.0) / 2)
    assert s["p_meets_deadline"] == pytest.approx((1.0 + 1 / 3) / 2)
    assert s["runs"] == 4 and s["deadline_misses"] == 2


def test_a_fleet_that_always_met_its_deadline_has_a_share_of_exactly_one() -> None:
    # Found 2026-12-07: the per-trace weights 1, 1/3, 1/3, 1/3, 1/3, 1/3, 1/3 (normalised) sum in floating
    # point to 1.0000000000000002, and a plan showed P(meets the time limit) above 1.
    runs = [outcome([1.0] * n, [True] * n) for n in (1, 3, 3)]
    assert pooled(runs)["p_meets_deadline"] == 1.0


def test_a_histogram_weighs_each_trace_the_same_as_its_quantiles_do() -> None:
    one, three = outcome([10.0], [True]), outcome([2.0, 2.0, 4.0], [False, False, True])
    h = histogram([one, three, outcome([], [])], "cost_usd", bins=4)
    assert h["edges"] == [2.0, 4.0, 6.0, 8.0, 10.0] and h["counts"] == [2, 1, 0, 1]
    # The lone $10 run is half the weight; the other trace's three runs share the other half.
    assert h["shares"] == pytest.approx([1 / 3, 1 / 6, 0.0, 1 / 2])
    assert histogram([], "cost_usd") == {"edges": [], "shares": [], "counts": []}


def test_windows_start_every_stride_inside_the_half_asked_for() -> None:
    t = trace(np.ones(2 * 576, dtype=int), gap_s=300.0)  # 4 days: one fit block, one check block
    w = windows(t, nodes=1, ticks=48, half=Half.CHECK, stride_s=1800.0)
    assert w.shape == ((576 - 48) // 6 + 1, 48) and w.all()
    assert not windows(t, nodes=2, ticks=48, half=Half.FIT, stride_s=1800.0).any()  # 1 VM, never 2
    assert windows(t, nodes=1, ticks=600, half=Half.FIT, stride_s=1800.0).shape == (0, 600)


def test_only_traces_of_the_type_region_and_enough_vms_apply() -> None:
    a = trace([1, 1], nodes=4, zone="us-east-1a")
    b = trace([1, 1], nodes=1, zone="us-east-1b")
    c = trace([1, 1], nodes=16, zone="us-west-2a")
    got = applicable([a, b, c], provider="aws", region="us-east-1", instance_type="p3.2xlarge", nodes=2)
    assert got == [a]


def test_on_a_trace_drawn_from_one_law_the_prediction_meets_the_replay() -> None:
    rng = np.random.default_rng(21)
    counts = alternating(
        rng, up=Weibull(0.7, 3 * 3600.0), gap=Weibull(0.8, 3600.0), ticks=60 * 288, gap_s=300.0
    )
    t = trace(counts, gap_s=300.0)
    model = fit_model([t], half=Half.FIT)
    job = SpotJob(
        spot_work_s=4 * 3600.0,
        spot_usd_per_s=0.3 / 3600,
        od_work_s=4 * 3600.0,
        od_usd_per_s=1.0 / 3600,
        deadline_s=1.3 * (4 * 3600.0 + 150.0),
        checkpoint_s=600.0,
        restart_s=150.0,
    )
    policies = (DeadlinePolicy.SPOT_ONLY, DeadlinePolicy.UNIFORM_PROGRESS, DeadlinePolicy.SRIFT)
    r = replay(
        job, traces=[t], model=model, nodes=1, half=Half.CHECK, policies=policies, samples_per_trace=400
    )
    assert r.runs and r.runs[0].windows > 400
    for policy in policies:
        s = r.summary(policy)
        assert abs(s["gap"]["mean_cost_pct"]) < 10.0, s["gap"]
        assert abs(s["gap"]["p_meets_deadline_points"]) < 10.0, s["gap"]
    assert r.summary(DeadlinePolicy.SRIFT)["replayed"]["deadline_misses"] == 0
    again = predict(job, laws=model.laws, policies=policies, samples_per_law=400)
    assert again[DeadlinePolicy.SRIFT]["p_meets_deadline"] == pytest.approx(1.0)


def test_longer_blocks_give_each_half_whole_blocks_of_that_length() -> None:
    # 8 days at 300 s: with 4-day blocks the check half is days 4-8 (up), the fit half days 0-4 (down).
    per = 4 * 288
    t = trace(np.concatenate([np.zeros(per, dtype=int), np.ones(per, dtype=int)]), gap_s=300.0)
    four = 4 * 86400.0
    w = windows(t, nodes=1, ticks=288, half=Half.CHECK, stride_s=1800.0, block_s=four)
    assert w.shape == ((per - 288) // 6 + 1, 288) and w.all()
    assert not windows(t, nodes=1, ticks=288, half=Half.FIT, stride_s=1800.0, block_s=four).any()
    # With the default 2-day blocks both halves hold one down and one up block.
    assert windows(t, nodes=1, ticks=288, half=Half.CHECK, stride_s=1800.0).any()
    fit = fit_model([t], half=Half.FIT, block_s=four).laws[0]
    check = fit_model([t], half=Half.CHECK, block_s=four).laws[0]
    assert fit.availability == 0.0 and check.availability == 1.0
