"""The nowcast: a fitted law conditioned on the market's recent past before a run starts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from srift.errors import InvalidInput
from srift.spot.model import Half, TraceModel, Weibull, fit_model, split_blocks
from srift.spot.nowcast import (
    LOOKBACK_CANDIDATES_S,
    Nowcast,
    choose_nowcast,
    nowcast_timelines,
    posterior_factors,
    prior_strengths,
    recent_past,
)
from srift.spot.policy import DeadlinePolicy, SpotJob
from srift.spot.replay import now_outcomes, pooled, predict, replay, window_starts, windows
from tests.spot.test_model import alternating, trace

TICK_S = 300.0
DAY = 288  # ticks of 300 s


def regimes(
    rng: np.random.Generator, *, days: int, bad_blocks: set[int], block_days: int = 2, shape: float = 0.8
) -> np.ndarray:
    """A fleet's availability that switches market every `block_days`: good (up ~6 h, gaps ~20 min) in
    most blocks, bad (up ~40 min, gaps ~3 h) in `bad_blocks` (Weibull laws of `shape`)."""
    good = alternating(
        rng, up=Weibull(shape, 6 * 3600.0), gap=Weibull(shape, 1200.0), ticks=days * DAY, gap_s=TICK_S
    )
    bad = alternating(
        rng, up=Weibull(shape, 2400.0), gap=Weibull(shape, 3 * 3600.0), ticks=days * DAY, gap_s=TICK_S
    )
    per = block_days * DAY
    out = good.copy()
    for b in bad_blocks:
        out[b * per : (b + 1) * per] = bad[b * per : (b + 1) * per]
    return out


def job(work_h: float = 4.0, slack: float = 1.3) -> SpotJob:
    return SpotJob(
        spot_work_s=work_h * 3600.0,
        spot_usd_per_s=0.3 / 3600,
        od_work_s=work_h * 3600.0,
        od_usd_per_s=1.0 / 3600,
        deadline_s=slack * (work_h * 3600.0 + 150.0),
        checkpoint_s=600.0,
        restart_s=150.0,
    )


def test_the_recent_past_counts_only_the_ticks_before_the_start() -> None:
    #          0  1  2  3  4  5  6  7  8  9
    up = np.array([1, 1, 0, 0, 0, 1, 1, 1, 0, 1], dtype=bool)
    r = recent_past(up, np.array([8, 0, 4]), lookback_s=6 * 60.0, tick_s=60.0)
    # Start 8: the look-back is ticks 2..7 (down 3, up 3); one down run ended (at 5), no up run did
    # (the fall at 2 needs tick 1, outside); the state before the start is up, for 3 ticks.
    assert r.up_s[0] == 180.0 and r.down_s[0] == 180.0
    assert r.up_ended[0] == 0 and r.down_ended[0] == 1
    assert r.state_up[0] and r.age_s[0] == 180.0 and r.known[0]
    # Start 0: nothing known.
    assert not r.known[1] and r.up_s[1] == 0 and r.down_s[1] == 0
    # Start 4: ticks 0..3, one up run ended (at 2), down for 2 ticks before the start.
    assert r.up_ended[2] == 1 and r.down_ended[2] == 0 and not r.state_up[2] and r.age_s[2] == 120.0
    # What happens from the start on is the outcome, never the past.
    changed = up.copy()
    changed[8:] = ~changed[8:]
    again = recent_past(changed, np.array([8]), lookback_s=6 * 60.0, tick_s=60.0)
    assert again.up_s[0] == r.up_s[0] and again.up_ended[0] == r.up_ended[0] and again.age_s[0] == r.age_s[0]


def test_the_look_back_never_reaches_below_its_floor() -> None:
    up = np.array([0, 0, 0, 1, 1, 1], dtype=bool)
    r = recent_past(up, np.array([6]), lookback_s=600.0, tick_s=60.0, floor=np.array([3]))
    assert r.up_s[0] == 180.0 and r.down_s[0] == 0.0 and r.down_ended[0] == 0 and r.age_s[0] == 180.0


def test_the_posterior_weighs_the_fitted_law_as_its_prior_runs() -> None:
    rng = np.random.default_rng(5)
    t = trace(regimes(rng, days=8, bad_blocks=set()), gap_s=TICK_S)
    law = fit_model([t], half=Half.ALL).laws[0]
    up = np.array([True] * 10 + [False] * 2 + [True] * 4 + [False] * 4)
    r = recent_past(up, np.array([20, 0]), lookback_s=20 * TICK_S, tick_s=TICK_S)
    nc = Nowcast(lookback_s=20 * TICK_S, up_prior_runs=2.0, gap_prior_runs=3.0)
    fu, fg = posterior_factors(law, r, nc)
    # 14 ticks up, two up runs ended (at ticks 10 and 16); 6 ticks down, one gap ended (at 12).
    assert fu[0] * law.up.mean_s == pytest.approx((2.0 * law.up.mean_s + 14 * TICK_S) / 4.0)
    assert fg[0] * law.gap.mean_s == pytest.approx((3.0 * law.gap.mean_s + 6 * TICK_S) / 4.0)
    assert fu[1] == 1.0 and fg[1] == 1.0  # nothing seen: the fitted law itself


def test_a_nowcast_needs_positive_constants() -> None:
    with pytest.raises(InvalidInput, match="To fix"):
        Nowcast(lookback_s=0.0, up_prior_runs=1.0, gap_prior_runs=1.0)


def test_timelines_start_in_the_state_seen_and_follow_the_recent_market() -> None:
    rng = np.random.default_rng(8)
    t = trace(regimes(rng, days=16, bad_blocks={1, 3, 5, 7}), gap_s=TICK_S)
    law = fit_model([t], half=Half.ALL).laws[0]
    nc = Nowcast(lookback_s=8 * 3600.0, up_prior_runs=1.0, gap_prior_runs=1.0)
    good = np.zeros(DAY, dtype=bool)
    good[:] = True
    good[100:104] = False  # up for hours, one short gap
    bad = np.zeros(DAY, dtype=bool)
    bad[50:58] = True
    bad[150:156] = True  # short up runs, long gaps, down at the start
    starts = np.full(400, DAY)
    after_good = nowcast_timelines(
        law,
        rng,
        recent_past(good, starts, lookback_s=nc.lookback_s, tick_s=TICK_S),
        nc,
        ticks=48,
        tick_s=TICK_S,
    )
    after_bad = nowcast_timelines(
        law,
        rng,
        recent_past(bad, starts, lookback_s=nc.lookback_s, tick_s=TICK_S),
        nc,
        ticks=48,
        tick_s=TICK_S,
    )
    assert after_good[:, 0].mean() > 0.9 and after_bad[:, 0].mean() < 0.1
    assert after_good.mean() > after_bad.mean() + 0.4


def test_window_starts_are_where_the_windows_begin() -> None:
    rng = np.random.default_rng(2)
    counts = regimes(rng, days=8, bad_blocks={1})
    t = trace(counts, gap_s=TICK_S)
    for half in (Half.FIT, Half.CHECK):
        w = windows(t, nodes=1, ticks=60, half=half, stride_s=1800.0)
        s = window_starts(t, ticks=60, half=half, stride_s=1800.0)
        assert w.shape[0] == s.size > 0
        for row, start in zip(w, s, strict=True):
            assert np.array_equal(row, counts[start : start + 60] >= 1)


def test_empirical_bayes_trusts_the_fitted_law_more_when_the_market_holds_still() -> None:
    # Exponential laws within a market: the counts then vary between pieces only as much as Poisson's do
    # where the market holds still, and more where it moves.
    rng = np.random.default_rng(11)
    still = trace(regimes(rng, days=40, bad_blocks=set(), shape=1.0), gap_s=TICK_S, zone="us-east-1a")
    moving = trace(
        regimes(rng, days=40, bad_blocks=set(range(1, 20, 2)), shape=1.0), gap_s=TICK_S, zone="us-east-1b"
    )
    strengths = {}
    for t in (still, moving):
        model = fit_model([t], half=Half.ALL)
        strengths[t.zone] = prior_strengths(model, split_blocks(t, Half.ALL), lookback_s=8 * 3600.0)
    assert strengths["us-east-1a"][0] > 3 * strengths["us-east-1b"][0]
    assert strengths["us-east-1a"][1] > 3 * strengths["us-east-1b"][1]


def test_the_nowcast_is_chosen_from_the_fit_half_alone() -> None:
    rng = np.random.default_rng(4)
    counts = regimes(rng, days=24, bad_blocks={1, 4, 7, 10})
    t = trace(counts, gap_s=TICK_S)
    model = fit_model([t], half=Half.FIT)
    chosen = choose_nowcast(model, [t], half=Half.FIT, block_s=2 * 86400.0, horizon_s=job().deadline_s)
    assert chosen.lookback_s in LOOKBACK_CANDIDATES_S and "fitted blocks" in chosen.note
    # The check half's outcomes play no part: scrambling them leaves the choice as it was.
    scrambled = counts.copy()
    per = 2 * DAY
    for b in range(1, 12, 2):
        scrambled[b * per : (b + 1) * per] = rng.integers(0, 2, per)
    t2 = trace(scrambled, gap_s=TICK_S)
    again = choose_nowcast(
        fit_model([t2], half=Half.FIT), [t2], half=Half.FIT, block_s=2 * 86400.0, horizon_s=job().deadline_s
    )
    assert again == chosen


MOVING_POLICIES = (DeadlinePolicy.SPOT_THEN_ON_DEMAND, DeadlinePolicy.UNIFORM_PROGRESS)


def moving_market_gaps(choose: Callable[..., Nowcast]) -> tuple[dict[str, float], TraceModel, Nowcast]:
    """On a market whose fit blocks (even) are mostly good and check blocks (odd) mostly bad: Uniform
    Progress's |expected − replayed mean cost| in % on the check half, predicted from the law fitted on the
    fit half alone ("law") and conditioned by the nowcast `choose` picks on the fit half ("conditioned");
    with the model and that nowcast."""
    rng = np.random.default_rng(6)
    t = trace(regimes(rng, days=32, bad_blocks={1, 3, 5, 7, 9, 11, 13, 4}), gap_s=TICK_S)
    model = fit_model([t], half=Half.FIT)
    j = job()
    nc = choose(model, [t], half=Half.FIT, block_s=2 * 86400.0, horizon_s=j.deadline_s)
    gaps = {}
    for name, how in (("law", None), ("conditioned", nc)):
        r = replay(
            j, traces=[t], model=model, nodes=1, half=Half.CHECK, policies=MOVING_POLICIES, nowcast=how
        )
        gaps[name] = abs(r.summary(DeadlinePolicy.UNIFORM_PROGRESS)["gap"]["mean_cost_pct"])
    return gaps, model, nc


def test_conditioning_on_the_recent_past_closes_the_gap_when_the_market_moves() -> None:
    # One stationary law fitted on the fit half mispredicts the check half's cost; the nowcast, which sees
    # each window's recent past, does not.
    gaps, _, _ = moving_market_gaps(choose_nowcast)
    assert gaps["law"] > 10.0
    assert gaps["conditioned"] < gaps["law"] / 2


def test_a_run_planned_now_costs_more_after_a_day_without_capacity_than_after_a_good_day() -> None:
    rng = np.random.default_rng(9)
    t = trace(regimes(rng, days=16, bad_blocks={1, 3, 5, 7}), gap_s=TICK_S)
    law = fit_model([t], half=Half.ALL).laws[0]
    nc = Nowcast(lookback_s=8 * 3600.0, up_prior_runs=1.0, gap_prior_runs=1.0)
    policies = (DeadlinePolicy.UNIFORM_PROGRESS,)
    kw = {"law": law, "tick_s": TICK_S, "nowcast": nc, "policies": policies, "samples": 300}
    uniform = DeadlinePolicy.UNIFORM_PROGRESS
    good = pooled([now_outcomes(job(), recent_up=np.ones(DAY, dtype=bool), **kw)[uniform]])
    bad = pooled([now_outcomes(job(), recent_up=np.zeros(DAY, dtype=bool), **kw)[uniform]])
    plain = predict(job(), laws=[law], policies=policies, samples_per_law=300)[
        DeadlinePolicy.UNIFORM_PROGRESS
    ]
    assert float(good["mean_cost_usd"]) < float(plain["mean_cost_usd"]) < float(bad["mean_cost_usd"])
    assert float(bad["mean_cost_usd"]) <= job().od_cost_usd * 1.05
