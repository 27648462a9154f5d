"""The two-stage nowcast: the fitted law updated by a long look-back (the market's level), then a short."""

from __future__ import annotations

import numpy as np
import pytest

from srift.errors import InvalidInput
from srift.spot.model import Half, fit_model, split_blocks
from srift.spot.nowcast import (
    LONG_LOOKBACK_CANDIDATES_S,
    SHORT_LOOKBACK_CANDIDATES_S,
    Nowcast,
    _held_out,
    _held_out_error,
    choose_two_stage,
    look_back,
    nowcast_timelines,
    posterior_factors,
    recent_past,
)
from srift.spot.policy import DeadlinePolicy
from srift.spot.replay import now_outcomes, pooled
from tests.spot.test_model import trace
from tests.spot.test_nowcast import DAY, MOVING_POLICIES, TICK_S, job, moving_market_gaps, regimes


def two(short_h: float = 2.0, long_h: float = 24.0, a: float = 1.0, la: float = 1.0) -> Nowcast:
    return Nowcast(
        lookback_s=short_h * 3600.0,
        up_prior_runs=a,
        gap_prior_runs=a,
        long_lookback_s=long_h * 3600.0,
        long_up_prior_runs=la,
        long_gap_prior_runs=la,
    )


def test_the_long_look_back_ends_where_the_short_one_begins() -> None:
    #               0  1  2  3  4  5  6  7  8  9 10 11
    up = np.array([0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1], dtype=bool)
    nc = Nowcast(
        lookback_s=3 * 60.0,
        up_prior_runs=1.0,
        gap_prior_runs=1.0,
        long_lookback_s=8 * 60.0,
        long_up_prior_runs=1.0,
        long_gap_prior_runs=1.0,
    )
    short, long = look_back(up, np.array([12, 2]), nc, tick_s=60.0)
    assert long is not None
    # Start 12: short = ticks 9..11 (down 1, up 2), long = ticks 4..8 (up 3, down 2), no tick in both.
    assert short.up_s[0] == 120.0 and short.down_s[0] == 60.0
    assert long.up_s[0] == 180.0 and long.down_s[0] == 120.0
    assert long.up_ended[0] == 1 and long.down_ended[0] == 1  # the fall at 5 and the rise at 7
    # Start 2: the short look-back takes ticks 0..1; nothing is left for the long one.
    assert short.down_s[1] == 120.0 and long.up_s[1] == 0.0 and long.down_s[1] == 0.0 and not long.known[1]
    # A floor cuts both.
    _, long_f = look_back(up, np.array([12]), nc, tick_s=60.0, floor=np.array([7]))
    assert long_f is not None and long_f.up_s[0] + long_f.down_s[0] == 120.0  # ticks 7..8
    # One stage: no long look-back.
    one = Nowcast(lookback_s=180.0, up_prior_runs=1.0, gap_prior_runs=1.0)
    assert look_back(up, np.array([12]), one, tick_s=60.0)[1] is None


def test_the_short_stage_updates_the_long_stages_posterior() -> None:
    rng = np.random.default_rng(5)
    law = fit_model([trace(regimes(rng, days=8, bad_blocks=set()), gap_s=TICK_S)], half=Half.ALL).laws[0]
    up = np.array([True] * 30 + [False] * 6 + [True] * 4 + [False] * 8, dtype=bool)  # 48 ticks
    nc = two(short_h=1.0, long_h=4.0, a=2.0, la=3.0)  # 12 and 48 ticks of 300 s
    short, long = look_back(up, np.array([48]), nc, tick_s=TICK_S)
    assert long is not None
    fu, fg = posterior_factors(law, short, nc, long=long)
    # Long = ticks 0..35: 30 up, 6 down, one up run ended (at 30), no gap (the rise at 36 lies past it).
    # Short = ticks 36..47: 4 up, 8 down, one up run ended (at 40), no gap (the rise at 36 needs tick 35).
    u1 = (3.0 * law.up.mean_s + 30 * TICK_S) / (3.0 + 1)
    g1 = (3.0 * law.gap.mean_s + 6 * TICK_S) / (3.0 + 0)
    assert short.up_ended[0] == 1 and short.down_ended[0] == 0
    assert fu[0] * law.up.mean_s == pytest.approx((2.0 * u1 + 4 * TICK_S) / (2.0 + 1))
    assert fg[0] * law.gap.mean_s == pytest.approx((2.0 * g1 + 8 * TICK_S) / (2.0 + 0))
    # Without the long look-back the short stage's prior is the fitted law: the one-stage nowcast.
    one = Nowcast(lookback_s=3600.0, up_prior_runs=2.0, gap_prior_runs=2.0)
    assert posterior_factors(law, short, nc)[0][0] == pytest.approx(posterior_factors(law, short, one)[0][0])


def test_a_two_stage_nowcast_needs_a_long_look_back_longer_than_the_short_one() -> None:
    with pytest.raises(InvalidInput, match="To fix"):
        two(short_h=8.0, long_h=8.0)
    with pytest.raises(InvalidInput, match="To fix"):
        two(la=0.0)
    assert two().two_stage and "long look-back 24 h" in two().describe()
    assert not Nowcast(3600.0, 1.0, 1.0).two_stage


def test_leaving_a_block_out_gives_its_prior_the_other_blocks_market() -> None:
    # One bad block among good ones: the law fitted on all of them has seen the bad block; the prior the
    # chooser gives that block is the good blocks' law (the longest up runs and the shortest gaps of the four
    # priors, gaps far shorter than the law's); a good block's prior has the bad block among its others
    # (gaps longer than the law's).
    rng = np.random.default_rng(3)
    t = trace(regimes(rng, days=16, bad_blocks={2}), gap_s=TICK_S)
    model = fit_model([t], half=Half.FIT)
    held = _held_out(model, split_blocks(t, Half.FIT, block_s=2 * 86400.0))
    [(_, weight, segs)] = held
    assert weight == 1.0 and len(segs) == 4
    bad = segs[1]  # block 2 is the second fit (even) block
    assert bad.up_factor > 1.3 and bad.gap_factor < 0.5
    for good in (segs[0], segs[2], segs[3]):
        assert good.gap_factor > 1.0 and good.up_factor < bad.up_factor


def test_the_two_stage_nowcast_is_chosen_from_the_fit_half_alone() -> None:
    rng = np.random.default_rng(4)
    counts = regimes(rng, days=24, bad_blocks={1, 4, 7, 10})
    t = trace(counts, gap_s=TICK_S)
    horizon = job().deadline_s
    chosen = choose_two_stage(
        fit_model([t], half=Half.FIT), [t], half=Half.FIT, block_s=2 * 86400.0, horizon_s=horizon
    )
    assert chosen.two_stage and "fitted blocks" in chosen.note
    assert chosen.long_lookback_s in LONG_LOOKBACK_CANDIDATES_S
    assert chosen.lookback_s in SHORT_LOOKBACK_CANDIDATES_S
    scrambled = counts.copy()
    per = 2 * DAY
    for b in range(1, 12, 2):
        scrambled[b * per : (b + 1) * per] = rng.integers(0, 2, per)
    t2 = trace(scrambled, gap_s=TICK_S)
    again = choose_two_stage(
        fit_model([t2], half=Half.FIT), [t2], half=Half.FIT, block_s=2 * 86400.0, horizon_s=horizon
    )
    assert again == chosen


def test_the_long_look_back_nowcasts_a_market_that_moves_over_days_better_than_the_law() -> None:
    # Markets that last 4 days: from within a block the long look-back has seen its level, the held-out law
    # has not. Cross-validated on the fit half (each block with the law of the others), the chosen
    # nowcast's error is well below the held-out law's alone (look-backs that see nothing).
    rng = np.random.default_rng(12)
    t = trace(regimes(rng, days=48, bad_blocks={1, 4, 5}, block_days=4), gap_s=TICK_S)
    model = fit_model([t], half=Half.FIT)
    horizon = 12 * 3600.0
    chosen = choose_two_stage(model, [t], half=Half.FIT, block_s=4 * 86400.0, horizon_s=horizon)
    held = _held_out(model, split_blocks(t, Half.FIT, block_s=4 * 86400.0))
    blind = Nowcast(
        lookback_s=TICK_S,
        up_prior_runs=1e4,
        gap_prior_runs=1e4,
        long_lookback_s=2 * TICK_S,
        long_up_prior_runs=1e4,
        long_gap_prior_runs=1e4,
    )
    assert _held_out_error(held, chosen, horizon_s=horizon) < 0.5 * _held_out_error(
        held, blind, horizon_s=horizon
    )


def test_two_stage_timelines_follow_the_markets_level_even_when_the_last_hours_say_little() -> None:
    # The same last two hours (up throughout) after a bad day or after a good day: the long look-back
    # tells them apart.
    rng = np.random.default_rng(8)
    law = fit_model(
        [trace(regimes(rng, days=16, bad_blocks={1, 3, 5, 7}), gap_s=TICK_S)], half=Half.ALL
    ).laws[0]
    nc = two(short_h=2.0, long_h=26.0)
    bad = np.zeros(26 * 12, dtype=bool)
    bad[::40] = True
    bad[-24:] = True
    good = np.ones(26 * 12, dtype=bool)
    good[100:103] = False
    starts = np.full(400, bad.size)
    drawn = {}
    for name, up in (("bad", bad), ("good", good)):
        short, long = look_back(up, starts, nc, tick_s=TICK_S)
        assert np.array_equal(
            short.up_s, recent_past(up, starts, lookback_s=nc.lookback_s, tick_s=TICK_S).up_s
        )
        drawn[name] = nowcast_timelines(law, rng, short, nc, ticks=96, tick_s=TICK_S, long=long)
    assert drawn["good"].mean() > drawn["bad"].mean() + 0.2


def test_replay_and_now_outcomes_take_a_two_stage_nowcast() -> None:
    gaps, model, nc = moving_market_gaps(choose_two_stage)
    assert gaps["law"] > 10.0 and gaps["conditioned"] < gaps["law"] / 2
    j, policies = job(), MOVING_POLICIES
    law = model.laws[0]
    kw = {"law": law, "tick_s": TICK_S, "nowcast": nc, "policies": policies[1:], "samples": 300}
    uniform = DeadlinePolicy.UNIFORM_PROGRESS
    good = pooled([now_outcomes(j, recent_up=np.ones(4 * DAY, dtype=bool), **kw)[uniform]])
    bad = pooled([now_outcomes(j, recent_up=np.zeros(4 * DAY, dtype=bool), **kw)[uniform]])
    assert float(good["mean_cost_usd"]) < float(bad["mean_cost_usd"])


def test_drawn_rates_spread_the_timelines_as_wide_as_the_posterior_and_no_wider() -> None:
    # Few runs seen and a weak prior: the rates are uncertain, so timelines drawn with their own rates differ
    # between them more than timelines that share the posterior mean rate; with a prior worth 10^4 runs the
    # posterior is sharp and drawing changes nothing but noise.
    rng = np.random.default_rng(14)
    law = fit_model([trace(regimes(rng, days=16, bad_blocks={1, 3}), gap_s=TICK_S)], half=Half.ALL).laws[0]
    up = np.ones(2 * 12, dtype=bool)
    up[5:8] = False
    starts = np.full(2000, up.size)
    spread = {}
    for a in (0.5, 1e4):
        for draw in (False, True):
            nc = Nowcast(lookback_s=2 * 3600.0, up_prior_runs=a, gap_prior_runs=a, draw_rates=draw)
            short, _ = look_back(up, starts, nc, tick_s=TICK_S)
            lines = nowcast_timelines(law, rng, short, nc, ticks=144, tick_s=TICK_S)
            spread[(a, draw)] = (float(lines.mean(axis=1).std()), float(lines.mean()))
    assert spread[(0.5, True)][0] > 1.2 * spread[(0.5, False)][0]
    assert spread[(1e4, True)][0] == pytest.approx(spread[(1e4, False)][0], rel=0.1)
    assert spread[(1e4, True)][1] == pytest.approx(spread[(1e4, False)][1], abs=0.02)
    assert "drawn from their posterior" in Nowcast(3600.0, 1.0, 1.0, draw_rates=True).describe()
