"""Deadline policies on availability timelines: hand-computed runs and the safety net's guarantee."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srift.spot.model import FleetLaw, Weibull
from srift.spot.policy import (
    TIE_PREFERENCE,
    DeadlinePolicy,
    Mode,
    SpotJob,
    _cheapest,
    _State,
    _tie_tolerance,
    _uniform_progress_want,
    _with_safety_net,
    plan_programme,
    plausible_laws,
    simulate,
)

TICK = 60.0


def job(
    *, work_s: float = 3600.0, slack: float = 1.5, checkpoint_s: float = 600.0, restart_s: float = 120.0
) -> SpotJob:
    return SpotJob(
        spot_work_s=work_s,
        spot_usd_per_s=0.001,
        od_work_s=work_s,
        od_usd_per_s=0.004,
        deadline_s=slack * (work_s + restart_s),
        checkpoint_s=checkpoint_s,
        restart_s=restart_s,
    )


def law(up_h: float = 2.0, gap_h: float = 1.0) -> FleetLaw:
    return FleetLaw(
        provider="aws",
        zone="us-east-1a",
        instance_type="p3.2xlarge",
        nodes=1,
        period="test",
        up=Weibull(0.7, up_h * 3600.0),
        gap=Weibull(0.8, gap_h * 3600.0),
        availability=0.6,
        up_runs=100,
        gap_runs=100,
        observed_s=30 * 86400.0,
        tick_s=TICK,
    )


def run(avail: list[bool] | np.ndarray, policy: DeadlinePolicy, j: SpotJob | None = None) -> dict[str, float]:
    j = j or job()
    o = simulate(j, np.asarray(avail, dtype=bool)[None, :], tick_s=TICK, policy=policy, law=law())
    return {
        "finish": float(o.finish_s[0]),
        "cost": float(o.cost_usd[0]),
        "met": bool(o.met[0]),
        "preemptions": int(o.preemptions[0]),
        "spot": float(o.spot_s[0]),
        "od": float(o.od_s[0]),
    }


def test_always_spot_costs_the_work_and_one_launch_on_spot() -> None:
    r = run([True] * 200, DeadlinePolicy.SPOT_ONLY)
    assert r["finish"] == pytest.approx(3600.0 + 120.0)
    assert r["cost"] == pytest.approx(3720.0 * 0.001)
    assert r["preemptions"] == 0
    srift = run([True] * 200, DeadlinePolicy.SRIFT)
    assert srift["cost"] == pytest.approx(r["cost"]) and srift["od"] == 0.0


def test_on_demand_only_costs_its_price_and_a_launch() -> None:
    r = run([False] * 200, DeadlinePolicy.ON_DEMAND)
    assert r["finish"] == pytest.approx(3720.0)
    assert r["cost"] == pytest.approx(3720.0 * 0.004)
    assert r["met"]


def test_a_preemption_loses_the_work_since_the_last_checkpoint() -> None:
    # Spot for 20 ticks (1200 s: 120 s launch, 1080 s work, a checkpoint at 600 s), then 5 ticks gone.
    avail = [True] * 20 + [False] * 5 + [True] * 200
    r = run(avail, DeadlinePolicy.SPOT_ONLY)
    # Lost 480 s of work; back at 1500 s, 120 s launch, then 3000 s of work left: done at 4620 s.
    assert r["preemptions"] == 1
    assert r["finish"] == pytest.approx(1500.0 + 120.0 + 3000.0)
    assert r["cost"] == pytest.approx((1200.0 + 3120.0) * 0.001)


def test_spot_then_on_demand_leaves_spot_at_its_first_interruption() -> None:
    avail = [True] * 20 + [False] * 5 + [True] * 200
    r = run(avail, DeadlinePolicy.SPOT_THEN_ON_DEMAND)
    # On-demand from 1200 s: a launch, then the 3000 s of work past the checkpoint.
    assert r["finish"] == pytest.approx(1200.0 + 120.0 + 3000.0)
    assert r["od"] == pytest.approx(3120.0)


def test_uniform_progress_waits_while_ahead_and_runs_on_demand_when_behind() -> None:
    # Never any spot: it waits while on the line t/D, runs on-demand when behind, waits again once ahead
    # by two restarts, and so on: the work and every relaunch billed on-demand, the deadline met.
    j = job()
    r = run([False] * 200, DeadlinePolicy.UNIFORM_PROGRESS, j)
    assert r["met"] and r["spot"] == 0.0
    launches = round((r["od"] - 3600.0) / 120.0)
    assert launches >= 2
    assert r["od"] == pytest.approx(3600.0 + launches * 120.0)
    assert r["finish"] > 3720.0


def test_the_dynamic_programme_waits_for_spot_when_slack_allows() -> None:
    # Two hours without capacity, then plenty, with a deadline of 2×: waiting beats paying on-demand.
    avail = [False] * 120 + [True] * 400
    j = job(slack=2.5)
    srift = run(avail, DeadlinePolicy.SRIFT, j)
    od = run(avail, DeadlinePolicy.ON_DEMAND, j)
    assert srift["met"] and srift["cost"] < od["cost"]
    programme = plan_programme(j, law(), tick_s=TICK)
    assert programme.expected_cost_usd < j.od_cost_usd


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=st.lists(st.booleans(), min_size=4, max_size=40),
    repeat=st.integers(1, 12),
    slack=st.floats(1.0, 2.5),
    checkpoint_s=st.sampled_from([60.0, 300.0, 600.0, 1800.0]),
    restart_s=st.sampled_from([0.0, 30.0, 150.0, 400.0]),
)
def test_the_safety_net_never_misses_a_deadline_on_demand_could_meet(
    pattern: list[bool], repeat: int, slack: float, checkpoint_s: float, restart_s: float
) -> None:
    j = job(work_s=1800.0, slack=slack, checkpoint_s=checkpoint_s, restart_s=restart_s)
    ticks = int(j.deadline_s // TICK) + 2
    avail = np.resize(np.repeat(np.array(pattern), repeat), ticks)
    # Every phase of the pattern as a window: many timelines at once.
    rows = np.array([np.roll(avail, k) for k in range(0, ticks, max(1, ticks // 16))])
    for policy in (DeadlinePolicy.UNIFORM_PROGRESS, DeadlinePolicy.SRIFT):
        o = simulate(j, rows, tick_s=TICK, policy=policy, law=law())
        assert o.met.all(), (policy, o.finish_s.max(), j.deadline_s)


def test_srift_runs_uniform_progress_where_its_programme_is_not_cheaper_on_the_laws_draws() -> None:
    # The shipped laws of us-east-2 p3.2xlarge (public traces' fit half), 12 h of work at 2× slack: on
    # some of them the coarse programme costs more than Uniform Progress on the law's own draws. Prices:
    # the shipped catalog's us-east-1 p3.2xlarge (on-demand 3.06, spot 0.5197 USD/h; the benchmark's).
    from srift.spot.shipped import shipped_model

    work = 12 * 3600.0
    j = SpotJob(
        spot_work_s=work,
        spot_usd_per_s=0.5197 / 3600.0,
        od_work_s=work,
        od_usd_per_s=3.06 / 3600.0,
        deadline_s=2.0 * (work + 150.0),
        checkpoint_s=600.0,
        restart_s=150.0,
    )
    laws = shipped_model().region_laws(
        provider="aws", region="us-east-2", instance_type="p3.2xlarge", nodes=1
    )
    assert laws
    kept = []
    for fleet in laws:
        programme = plan_programme(j, fleet, tick_s=fleet.tick_s)
        assert programme.drawn_cost_usd is not None
        mine, theirs = programme.drawn_cost_usd
        # Kept only where cheaper on the draws by more than their noise.
        assert not programme.uses_programme or mine < theirs
        kept.append(programme.uses_programme)
        # Fresh draws from the law (not the selection's): Srift costs at most what Uniform Progress does,
        # within the draws' noise, and misses nothing at 2× slack.
        ticks = int(np.ceil(j.deadline_s / fleet.tick_s)) + 1
        drawn = fleet.timeline(np.random.default_rng(99), runs=300, ticks=ticks, tick_s=fleet.tick_s)
        kw = {"tick_s": fleet.tick_s, "law": fleet}
        srift = simulate(j, drawn, policy=DeadlinePolicy.SRIFT, programme=programme, **kw)
        up = simulate(j, drawn, policy=DeadlinePolicy.UNIFORM_PROGRESS, **kw)
        assert srift.met.all()
        assert srift.cost_usd.mean() <= up.cost_usd.mean() * 1.02
        if not programme.uses_programme:
            assert np.array_equal(srift.cost_usd, up.cost_usd) and np.array_equal(srift.finish_s, up.finish_s)
        else:
            forced = replace(programme, uses_programme=False)
            again = simulate(j, drawn, policy=DeadlinePolicy.SRIFT, programme=forced, **kw)
            assert np.array_equal(again.cost_usd, up.cost_usd)
    assert not all(kept), "on these laws the programme is not always the cheaper rule"


def _states(j: SpotJob, rng: np.random.Generator, rows: int) -> _State:
    """Random states of a run: time, progress (a checkpoint behind it), capacity and its age, what ran."""
    now = float(rng.uniform(0.0, j.deadline_s * 0.9))
    progress = rng.uniform(0.0, 0.95, rows)
    avail = rng.random(rows) < 0.5
    return _State(
        now_s=now,
        avail=avail,
        age_s=rng.choice([0.0, 60.0, 600.0, 3600.0, 4 * 3600.0], rows),
        progress=progress,
        checkpointed=np.maximum(progress - rng.uniform(0.0, 0.1, rows), 0.0),
        mode=rng.choice([Mode.IDLE, Mode.SPOT, Mode.ON_DEMAND], rows).astype(np.int8),
        interrupted=np.zeros(rows, dtype=bool),
        od_locked=np.zeros(rows, dtype=bool),
    )


def test_srifts_programme_acts_within_uniform_progress_envelope() -> None:
    # Capacity whose hazard falls steeply with age (shape 0.3): the programme's own table leaves fresh
    # capacity idle and runs on-demand ahead of the line on some states. Srift's policy never does either
    # where Uniform Progress's rule would not: on-demand only where the rule (or the safety net) pays for
    # it, spot wherever the rule takes the capacity.
    steep = replace(law(), up=Weibull(0.3, 2.0 * 3600.0), gap=Weibull(0.5, 3600.0))
    j = job(slack=2.0)
    programme = plan_programme(j, steep, tick_s=TICK, selection_runs=0)
    rng = np.random.default_rng(5)
    own_outside = 0
    for _ in range(200):
        st = _states(j, rng, 64)
        up = _uniform_progress_want(j, st)
        own = programme.programme_want(st)
        own_outside += int(
            np.sum(
                ((own == Mode.ON_DEMAND) & (up != Mode.ON_DEMAND))
                | ((own == Mode.IDLE) & st.avail & (up == Mode.SPOT))
            )
        )
        out = programme.decide(j, st, TICK)
        net = _with_safety_net(j, st, TICK, up, lock=False)
        # On-demand only where the rule or the net would run it; no capacity left idle that the rule takes.
        assert np.all((out != Mode.ON_DEMAND) | (up == Mode.ON_DEMAND) | (net == Mode.ON_DEMAND))
        assert not np.any((out == Mode.IDLE) & st.avail & (up == Mode.SPOT))
    assert own_outside > 0, "the envelope must bind somewhere for this test to mean anything"


def test_plausible_laws_move_the_means_by_their_standard_errors_and_narrow_with_more_runs() -> None:
    fitted = law()
    point, optimistic, pessimistic = plausible_laws(fitted)
    assert point is fitted
    assert optimistic.up.mean_s > fitted.up.mean_s > pessimistic.up.mean_s
    assert optimistic.gap.mean_s < fitted.gap.mean_s < pessimistic.gap.mean_s
    assert optimistic.model_availability > fitted.model_availability > pessimistic.model_availability
    # log-symmetric: the corners' means multiply to the fitted mean squared
    assert optimistic.up.mean_s * pessimistic.up.mean_s == pytest.approx(fitted.up.mean_s**2)
    # Four times the runs halve the standard error, so the log-distance of the corners.
    many = replace(fitted, up_runs=4 * fitted.up_runs, gap_runs=4 * fitted.gap_runs)
    wide = math.log(optimistic.up.mean_s / fitted.up.mean_s)
    narrow = math.log(plausible_laws(many)[1].up.mean_s / fitted.up.mean_s)
    assert narrow == pytest.approx(wide / 2.0)


def test_the_programme_is_kept_only_where_it_wins_on_every_plausible_law() -> None:
    # A short job on a law fitted from few runs (wide corners) and from many (narrow ones): where the
    # programme is kept, it beats Uniform Progress on fresh draws from each corner as on the law's.
    j = job(work_s=2 * 3600.0, slack=2.0)
    kept = []
    for runs in (5, 500):
        fitted = replace(law(), up_runs=runs, gap_runs=runs)
        programme = plan_programme(j, fitted, tick_s=TICK, selection_runs=200)
        kept.append(programme.uses_programme)
        if not programme.uses_programme:
            continue
        ticks = int(np.ceil(j.deadline_s / TICK)) + 1
        for variant in plausible_laws(fitted):
            drawn = variant.timeline(np.random.default_rng(7), runs=200, ticks=ticks, tick_s=TICK)
            kw = {"tick_s": TICK, "law": fitted}
            mine = simulate(j, drawn, policy=DeadlinePolicy.SRIFT, programme=programme, **kw)
            theirs = simulate(j, drawn, policy=DeadlinePolicy.UNIFORM_PROGRESS, **kw)
            assert mine.met.all()
            assert mine.cost_usd.mean() <= theirs.cost_usd.mean() * 1.02
    assert any(kept), "the programme must be kept somewhere for this test to mean anything"


@pytest.mark.parametrize("slack", [1.1, 2.0])
def test_the_programme_is_the_same_when_its_inputs_move_by_rounding(slack: float) -> None:
    # Many of the programme's choices are ties (waiting a step then on-demand costs what on-demand now
    # does): a price or the law moved by a relative 1e-15, as another platform's rounding moves the values,
    # must leave every action where it was (before the tie tolerance, thousands of them moved).
    j, fitted = job(work_s=4 * 3600.0, slack=slack), law()
    base = plan_programme(j, fitted, tick_s=TICK, selection_runs=0)
    nudge = 1.0 + 1e-15
    for j2, law2 in (
        (replace(j, od_usd_per_s=j.od_usd_per_s * nudge), fitted),
        (replace(j, spot_usd_per_s=j.spot_usd_per_s * nudge), fitted),
        (j, replace(fitted, up=fitted.up.scaled(nudge))),
        (j, replace(fitted, gap=fitted.gap.scaled(nudge))),
    ):
        moved = plan_programme(j2, law2, tick_s=TICK, selection_runs=0)
        assert np.array_equal(moved.action, base.action)
        assert moved.expected_cost_usd == pytest.approx(base.expected_cost_usd, rel=1e-12)


def test_near_ties_go_to_the_preference_and_real_differences_to_the_cheaper() -> None:
    # One state per column; rows in TIE_PREFERENCE order (spot, idle, on-demand).
    assert TIE_PREFERENCE == (Mode.SPOT, Mode.IDLE, Mode.ON_DEMAND)
    rtol = _tie_tolerance(400, 20)
    ulps = 8 * np.finfo(np.float64).eps
    totals = np.array(
        [
            [10.0, 1.0, 10.0, 10.0 * (1 + 100 * rtol), 3.0],
            [10.0 * (1 + ulps), 10.0, 10.0 * (1 - ulps), 10.0, 3.0],
            [10.0 * (1 - ulps), 10.0 * (1 - ulps), 10.0, 10.0 * (1 - 100 * rtol), 2.0],
        ]
    )
    ok = np.array([[True, False, True, True, False], [True] * 5, [True] * 5])
    best, choice = _cheapest(totals, ok, rtol)
    # Rounding-level ties: the preferred action whichever side the rounding fell; an inadmissible action is
    # never taken; differences well beyond rounding (and spot inadmissible): the cheaper.
    assert choice.tolist() == [Mode.SPOT, Mode.IDLE, Mode.SPOT, Mode.ON_DEMAND, Mode.ON_DEMAND]
    assert best.tolist() == [10.0, 10.0, 10.0, 10.0 * (1 - 100 * rtol), 2.0]
    assert 1e-12 < rtol < 1e-10
