"""The shrinkage estimate behind calibrated predictions: it starts at no correction, follows agreeing runs
at a pace set by their noise against the prior, separates compute from communication only when fleets
differ, and narrows bands only as far as the evidence allows."""

from __future__ import annotations

import math
import random

import pytest

from srift.domain.correction import (
    Correction,
    FleetCorrection,
    Observation,
    corrected,
    fit,
    for_fleet,
    network_key,
    summarize_steps,
)
from srift.domain.planning import Band, Breakdown, Prediction, SpreadTerm


def _obs(y: float, *, x: tuple[float, float] = (0.7, 0.3), v: float = 0.01, w: float = 1.0) -> Observation:
    return Observation(x[0], x[1], y, v, prior_sigma=0.2, weight=w)


def test_no_runs_no_correction() -> None:
    c = fit([], prior_sigma=0.2)
    assert c.mean == (0.0, 0.0) and c.runs == 0


def test_agreeing_runs_pull_the_fleets_total_toward_what_they_measured_and_each_run_helps() -> None:
    y = math.log(1.4)
    x = (0.7, 0.3)
    errors = []
    for n in range(0, 5):
        c = fit([_obs(y, x=x)] * n, prior_sigma=0.2)
        predicted = c.mean[0] * x[0] + c.mean[1] * x[1]
        errors.append(abs(y - predicted))
    assert errors == sorted(errors, reverse=True) and errors[0] == pytest.approx(y)
    # the runs say the band (0.2) was too confident: σ0² = (y² − v) / |x|²; along x that is y² − v, and a
    # run adds precision 1/v, so one run moves the prediction y·(y² − v)/y² of the way
    assert errors[1] == pytest.approx(y * 0.01 / y**2, rel=1e-6)
    assert errors[3] < errors[0] / 2


def test_a_band_that_holds_keeps_its_prior() -> None:
    small = fit([_obs(0.01, v=0.0001)], prior_sigma=0.2)
    assert small.prior_sigma == 0.2


def test_noisy_runs_move_it_less() -> None:
    quiet = fit([_obs(0.3, v=0.001)], prior_sigma=0.2)
    noisy = fit([_obs(0.3, v=0.1)], prior_sigma=0.2)
    assert abs(noisy.mean[0]) < abs(quiet.mean[0])


def test_fleets_of_different_mixes_separate_compute_from_communication() -> None:
    truth = (math.log(1.1), math.log(2.0))
    rng = random.Random(0)
    runs = []
    for x in [(0.9, 0.1), (0.3, 0.7), (0.6, 0.4)] * 8:
        y = truth[0] * x[0] + truth[1] * x[1] + rng.gauss(0, 0.01)
        runs.append(_obs(y, x=x, v=0.0001))
    c = fit(runs, prior_sigma=0.5)
    assert c.factors[0] == pytest.approx(1.1, rel=0.03)
    assert c.factors[1] == pytest.approx(2.0, rel=0.03)


def test_a_mixed_fleets_run_counts_for_each_type_by_its_share() -> None:
    full = fit([_obs(0.3, w=1.0)], prior_sigma=0.2)
    part = fit([_obs(0.3, w=0.25)], prior_sigma=0.2)
    assert 0 < part.mean[0] < full.mean[0]


def test_summarize_drops_warm_up_and_counts_drift() -> None:
    assert summarize_steps([0.1] * 5) is None
    steady = summarize_steps([1.0] + [0.5] * 40)
    assert steady is not None and steady.mean_s == pytest.approx(0.5) and steady.steps == 36
    drifting = summarize_steps([0.5 + 0.01 * k for k in range(40)])
    assert drifting is not None and drifting.log_variance > 1e-4


def _prediction(sigma: float) -> Prediction:
    bd = Breakdown(
        forward_s=0.2,
        backward_s=0.4,
        compute_s=0.6,
        straggler_wait_s=0.1,
        exposed_intra_s=0.0,
        exposed_network_s=0.3,
        communication_s=0.5,
        granularity=1.2,
    )
    band = Band(sigma, (SpreadTerm("network", sigma, sigma, "test"),))
    return Prediction(1.0, 0.9, 1.0, 1.1, 100.0, 10.0, bd, band=band)


def test_a_correction_scales_the_terms_and_the_totals() -> None:
    fleet = FleetCorrection((math.log(2.0), math.log(0.5)), 0.05, 3, "calibrated on 3 runs")
    p = corrected(_prediction(0.2), fleet)
    assert p.breakdown.compute_s == pytest.approx(1.2) and p.breakdown.exposed_network_s == pytest.approx(
        0.15
    )
    assert p.iteration_s == pytest.approx(0.7 * 2.0 + 0.3 * 0.5)
    assert p.total_time_s == pytest.approx(100 * p.iteration_s)
    assert p.band is not None and p.band.sigma == pytest.approx(0.05)
    assert any("calibrated on 3 runs" in s for s in p.sources)


def test_the_band_follows_the_runs_and_an_uncorrected_type_keeps_the_fleets_band() -> None:
    wide = corrected(_prediction(0.1), FleetCorrection((0.1, 0.1), 0.5, 1, "x"))
    assert wide.band is not None and wide.band.sigma == pytest.approx(0.5)
    learned = fit([_obs(0.2)] * 3, prior_sigma=0.2)
    fleet = for_fleet({"a": learned}, {"a": 0.5, "b": 0.5}, x=(0.7, 0.3), runs=3)
    assert fleet is not None and fleet.sigma is None
    alone = for_fleet({"a": learned}, {"a": 1.0}, x=(0.7, 0.3), runs=3)
    assert alone is not None and alone.sigma is not None and alone.sigma < 0.2
    assert for_fleet({"a": Correction()}, {"a": 1.0}, x=(1.0, 0.0), runs=0) is None


def test_network_keys_name_the_setting() -> None:
    key = network_key(
        transport="tcp", library="nccl", placement_group=False, flows_per_peer=None, ena_visible=None
    )
    assert key == "tcp/nccl/no-pg/flows-auto/ena-unknown"


def test_one_run_recentres_the_band_without_narrowing_it() -> None:
    """One run measures its own mean well (v small) but says nothing of how far the next run lands."""
    one = fit([Observation(0.7, 0.3, -0.06, 0.0002, prior_sigma=0.1)])
    fleet = for_fleet({"a": one}, {"a": 1.0}, x=(0.7, 0.3), runs=1)
    assert fleet is not None and fleet.sigma is not None and fleet.sigma >= 0.1


def test_agreeing_runs_narrow_the_band_and_scattered_runs_widen_it() -> None:
    def sigma(ys: list[float]) -> float:
        c = fit([Observation(0.7, 0.3, y, 0.0002, prior_sigma=0.1) for y in ys])
        fleet = for_fleet({"a": c}, {"a": 1.0}, x=(0.7, 0.3), runs=len(ys))
        assert fleet is not None and fleet.sigma is not None
        return fleet.sigma

    agreeing = [sigma([-0.08 + 0.002 * (k % 2) for k in range(n)]) for n in (1, 2, 4, 8)]
    assert agreeing == sorted(agreeing, reverse=True) and agreeing[-1] < 0.06
    assert sigma([-0.3, 0.1, -0.25, 0.15]) > 0.1


@pytest.mark.parametrize("runs", [1, 2, 3])
def test_the_calibrated_band_covers_the_next_run_as_often_as_it_says(runs: int) -> None:
    """Runs of one fleet: a bias the uncalibrated band (σ 0.1) allows for, run-to-run scatter τ 0.06 and
    each run's own noise 1.5 %: the p10–p90 band after `runs` runs holds the next run about 80 % of the
    time (with the run's noise as the run-to-run term, it held 25 % after one run)."""
    rng = random.Random(runs)
    x, z, held, sims = (0.7, 0.3), 1.2815515655446004, 0, 1000
    for _ in range(sims):
        bias = rng.gauss(0.0, 0.08)
        c = fit(
            [Observation(*x, bias + rng.gauss(0.0, 0.06), 0.015**2, prior_sigma=0.1) for _ in range(runs)]
        )
        fleet = for_fleet({"a": c}, {"a": 1.0}, x=x, runs=runs)
        assert fleet is not None and fleet.sigma is not None
        centre = c.mean[0] * x[0] + c.mean[1] * x[1]
        held += abs(bias + rng.gauss(0.0, 0.06) - centre) <= z * fleet.sigma
    assert 0.75 <= held / sims <= 0.95
