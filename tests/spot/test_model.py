"""The interruption model: Weibull and empirical laws, runs of a trace, the split, scaling and documents."""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pytest

from srift.errors import InvalidInput
from srift.spot.model import (
    Durations,
    Half,
    LawSource,
    TraceBlock,
    Weibull,
    fit_model,
    fit_weibull,
    model_from_document,
    residual_mean_s,
    runs_of,
    split_blocks,
)
from srift.spot.traces import SpotTrace, TraceKind, TraceMeta, TraceSource


def trace(
    counts: list[int] | np.ndarray, *, nodes: int = 1, gap_s: float = 60.0, zone: str = "us-east-1a"
) -> SpotTrace:
    meta = TraceMeta("aws", zone, "p3.2xlarge", TraceKind.AVAILABILITY, nodes, date(2024, 1, 1))
    source = TraceSource("test", f"{zone}-{nodes}.json", None, "0" * 64)
    return SpotTrace(meta=meta, gap_s=gap_s, counts=tuple(int(c) for c in counts), source=source)


def alternating(
    rng: np.random.Generator, *, up: Weibull, gap: Weibull, ticks: int, gap_s: float
) -> np.ndarray:
    out = np.zeros(ticks, dtype=np.int64)
    t, state = 0.0, True
    while t < ticks * gap_s:
        d = float((up if state else gap).sample(rng, 1)[0])
        a, b = int(t // gap_s), int((t + d) // gap_s)
        if state:
            out[a:b] = 1
        t += d
        state = not state
    return out


def test_maximum_likelihood_recovers_a_weibull_from_tick_quantised_runs() -> None:
    rng = np.random.default_rng(3)
    truth = Weibull(shape=0.6, scale_s=7200.0)
    x = truth.sample(rng, 4000)
    m = np.maximum(np.round(x / 300.0), 1.0)
    fitted = fit_weibull((m - 1) * 300.0, (m + 1) * 300.0)
    assert fitted.shape == pytest.approx(0.6, abs=0.04)
    assert fitted.scale_s == pytest.approx(7200.0, rel=0.08)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_clockwork_log_fits_a_steep_weibull_without_numeric_errors() -> None:
    """Runs that all last 20 ticks (a scheduled interruption, or a log written by a script): the likelihood
    prefers ever steeper laws, whose powers overflow; that overflow means S = 0 and is no error."""
    m = np.full(200, 20.0)
    fitted = fit_weibull((m - 1) * 60.0, (m + 1) * 60.0)
    assert math.isfinite(fitted.shape) and fitted.shape > 20
    assert fitted.scale_s == pytest.approx(20 * 60.0, rel=0.05)
    assert float(fitted.sf(1e9)) == 0.0 and float(fitted.sf(0.0)) == 1.0


def test_a_steep_weibull_answers_past_its_scale_without_overflow() -> None:
    """A clockwork log (every interruption 4 h after the last) fits a shape in the hundreds; a run seen at
    three times its scale put (a/λ)^k past the float range, and `srift plan --recent-log` died with an
    OverflowError there (residual_mean_s, and the conditional draws past the Kaplan-Meier body)."""
    law = Weibull(shape=400.0, scale_s=4 * 3600.0)
    for age in (1.01 * law.scale_s, 3 * law.scale_s, 1e9):
        rest = residual_mean_s(law, age)
        # Past the scale the law is all but over: what is left is a sliver of the age, a/(k·z) at most.
        assert math.isfinite(rest) and 0.0 <= rest < age / law.shape
        draws = law.sample_beyond(np.random.default_rng(0), age, 200)
        assert np.all(np.isfinite(draws)) and np.all(draws >= age) and np.all(draws < age * 1.01)
    # Where z stays in range the answers are the closed form's, as before.
    assert residual_mean_s(law, 0.0) == pytest.approx(law.mean_s)
    assert residual_mean_s(Weibull(2.0, 3600.0), 3600.0) == pytest.approx(
        3600.0 * math.sqrt(math.pi) * math.erfc(1.0) * math.exp(1.0) / 2.0, rel=1e-9
    )
    steady = Weibull(2.0, 3600.0).sample_beyond(np.random.default_rng(1), 1800.0, 5)
    again = 3600.0 * ((1800.0 / 3600.0) ** 2 + np.random.default_rng(1).exponential(1.0, 5)) ** 0.5
    assert steady.tolist() == again.tolist()


def test_a_weibull_of_shape_one_is_the_exponential() -> None:
    law = Weibull(1.0, 3600.0)
    assert law.mean_s == pytest.approx(3600.0)
    assert float(law.sf(3600.0)) == pytest.approx(math.exp(-1))
    assert residual_mean_s(law, 5000.0) == pytest.approx(3600.0, rel=1e-9)
    # Shape < 1: a run that has lasted is expected to last longer still.
    assert residual_mean_s(Weibull(0.5, 3600.0), 7200.0) > Weibull(0.5, 3600.0).mean_s


def test_runs_of_a_segment_drop_the_opening_run_and_censor_the_closing_one() -> None:
    t = trace([1, 1, 0, 0, 0, 1, 0, 1, 1], gap_s=60.0)
    r = runs_of([TraceBlock(t, 0, t.array())], 1)
    # Opening up run (2 ticks) dropped; down 3 ticks, up 1, down 1; closing up run (2 ticks) censored.
    assert r.up_lower_s.tolist() == [0.0, 60.0]
    assert r.up_upper_s.tolist() == [120.0, math.inf]
    assert r.down_lower_s.tolist() == [120.0, 0.0]
    assert r.down_upper_s.tolist() == [240.0, 120.0]
    assert r.availability == pytest.approx(5 / 9)
    # Every run, cut or not, is a place a window can start: (up, ticks, cut at the end, count).
    assert r.starts.tolist() == [[0, 1, 0, 1], [0, 3, 0, 1], [1, 1, 0, 1], [1, 2, 0, 1], [1, 2, 1, 1]]


def test_the_empirical_law_is_kaplan_meier_with_a_weibull_tail() -> None:
    # Runs of 1, 2, 2 and 4 ticks (60 s); the 4-tick one was cut (censored).
    lower = np.array([0.0, 60.0, 60.0, 180.0])
    upper = np.array([120.0, 180.0, 180.0, math.inf])
    law = Durations.from_runs(lower, upper, tick_s=60.0)
    assert law.times_s.tolist() == [60.0, 120.0, 240.0]
    # S(60) = 3/4, S(120) = 3/4 × (1 − 2/3) = 1/4; the censored run leaves 1/4 to the tail.
    assert float(law.sf(60.0)) == pytest.approx(0.75)
    assert float(law.sf(130.0)) == pytest.approx(0.25)
    assert law.tail_mass == pytest.approx(0.25)
    body = 60.0 * 1.0 + 60.0 * 0.75 + 120.0 * 0.25
    assert law.mean_s == pytest.approx(body + 0.25 * residual_mean_s(law.weibull, 240.0))
    draws = law.sample(np.random.default_rng(0), 20_000)
    assert np.mean(draws == 60.0) == pytest.approx(0.25, abs=0.01)
    assert np.all(law.sample_beyond(np.random.default_rng(1), 100.0, 500) >= 120.0)


def _heavy_tailed_law() -> Durations:
    """An empirical law like the shipped gaps: a body of tick-quantised runs, a fifth of the mass in a
    Weibull tail of shape 0.5 past the longest run."""
    lower = np.array([0.0, 60.0, 60.0, 180.0, 300.0, 300.0, 600.0, 1200.0, 2400.0, 3000.0])
    upper = np.array([120.0, 180.0, 180.0, 300.0, 420.0, 420.0, 720.0, 1320.0, math.inf, math.inf])
    body = Durations.from_runs(lower, upper, tick_s=60.0)
    return Durations(body.times_s, body.events, body.censored, Weibull(0.5, 3600.0))


def _integrals(law: Durations) -> tuple[float, float]:
    """∫ S and ∫ t·S over a fine grid: the mean and half the second moment, read off the survival."""
    t = np.linspace(0.0, 4e6, 2_000_001)
    s = law.sf(t)
    return float(np.trapezoid(s, t)), float(np.trapezoid(t * s, t))


def test_the_mean_within_a_horizon_integrates_the_survival() -> None:
    law = _heavy_tailed_law()
    assert 0.1 < law.tail_mass < 0.5  # the tail carries weight
    xs = np.array([0.0, 30.0, 60.0, 500.0, 2400.0, 3000.0, 10_000.0, 1e5, 4e6])
    exact = law.mean_within_s(xs)
    t = np.linspace(0.0, 4e6, 2_000_001)
    cumulative = np.concatenate(([0.0], np.cumsum((law.sf(t[1:]) + law.sf(t[:-1])) / 2 * np.diff(t))))
    assert exact == pytest.approx(np.interp(xs, t, cumulative), rel=2e-3, abs=1.0)
    assert float(law.mean_within_s(1e12)) == pytest.approx(law.mean_s, rel=1e-9)
    w = Weibull(0.6, 3600.0)
    draws = w.sample(np.random.default_rng(3), 200_000)
    assert float(w.mean_within_s(2000.0)) == pytest.approx(
        float(np.mean(np.minimum(draws, 2000.0))), rel=0.01
    )


def test_what_is_left_of_a_gap_seen_at_a_random_instant_has_the_renewal_mean() -> None:
    """E[X²] / (2 E[X]) exactly (no seeded draws), and draws one at a time with that mean: the old pool
    of 16 draws per sample put them well below it on a tail like this one."""
    law = _heavy_tailed_law()
    mean, half_second = _integrals(law)
    assert law.mean_s == pytest.approx(mean, rel=1e-3)
    assert law.second_moment_s2 / 2.0 == pytest.approx(half_second, rel=1e-3)
    rng = np.random.default_rng(11)
    one_at_a_time = np.array([float(law.sample_residual(rng, 1)[0]) for _ in range(6000)])
    expected = law.second_moment_s2 / (2.0 * law.mean_s)
    stderr = float(one_at_a_time.std(ddof=1)) / math.sqrt(one_at_a_time.size)
    assert abs(float(one_at_a_time.mean()) - expected) < 4.0 * stderr
    assert np.all(law.sample_residual(rng, 1000) >= 0.0)


def test_split_blocks_alternate_fit_and_check() -> None:
    t = trace(np.arange(10) % 2, gap_s=86_400.0 / 2)  # 2 ticks a day: 4 ticks per 2-day block
    fit = split_blocks(t, Half.FIT)
    check = split_blocks(t, Half.CHECK)
    assert [s.start for s in fit] == [0, 8]
    assert [s.start for s in check] == [4]
    assert sum(s.counts.size for s in fit + check) == 10
    assert split_blocks(t, Half.ALL)[0].counts.size == 10


def _fleet(rng: np.random.Generator, *, vms: int, together: bool, ticks: int) -> np.ndarray:
    up, gap = Weibull(1.0, 3 * 3600.0), Weibull(1.0, 3600.0)
    if together:
        return vms * alternating(rng, up=up, gap=gap, ticks=ticks, gap_s=300.0)
    return sum(alternating(rng, up=up, gap=gap, ticks=ticks, gap_s=300.0) for _ in range(vms))


def test_the_fleet_size_scaling_tells_independent_vms_from_ones_that_go_together() -> None:
    rng = np.random.default_rng(7)
    ticks = 40 * 288  # 40 days of 5-minute ticks
    alone = fit_model(
        [trace(_fleet(rng, vms=8, together=False, ticks=ticks), nodes=8, gap_s=300.0)], half=Half.ALL
    )
    together = fit_model(
        [trace(_fleet(rng, vms=8, together=True, ticks=ticks), nodes=8, gap_s=300.0)], half=Half.ALL
    )
    # Independent VMs: the fleet's capacity lasts about 1/n as long (β near 1); together: as long (β near 0).
    assert alone.scaling.beta > 0.6
    assert abs(together.scaling.beta) < 0.1
    assert set(together.scaling.drops) == {8}  # they go all at once
    assert max(alone.scaling.drops, key=alone.scaling.drops.__getitem__) == 1  # mostly one at a time


def test_a_fitted_model_round_trips_through_its_document_and_extrapolates_larger_fleets() -> None:
    rng = np.random.default_rng(11)
    counts = _fleet(rng, vms=4, together=False, ticks=20 * 288)
    model = fit_model([trace(counts, nodes=4, gap_s=300.0)], half=Half.FIT, provenance={"why": "test"})
    back = model_from_document(model.to_document(), origin="test")
    assert back.provenance == {"why": "test"}
    for a, b in zip(model.laws, back.laws, strict=True):
        assert (a.period, a.nodes, a.source) == (b.period, b.nodes, b.source)
        assert a.up.mean_s == pytest.approx(b.up.mean_s) and a.gap.mean_s == pytest.approx(b.gap.mean_s)
    period = model.laws[0].period
    four = model.law(provider="aws", zone="us-east-1a", instance_type="p3.2xlarge", nodes=4, period=period)
    eight = model.law(provider="aws", zone="us-east-1a", instance_type="p3.2xlarge", nodes=8, period=period)
    assert four is not None and eight is not None
    assert four.source is LawSource.FITTED and eight.source is LawSource.EXTRAPOLATED
    assert eight.up.mean_s == pytest.approx(four.up.mean_s * 2.0 ** (-model.scaling.beta), rel=1e-9)
    assert "scaled from 4" in eight.note
    assert model.zones(provider="aws", region="us-east-1", instance_type="p3.2xlarge") == ["us-east-1a"]
    assert model.region_laws(provider="aws", region="us-west-2", instance_type="p3.2xlarge", nodes=1) == []


def test_synthetic_timelines_show_the_fitted_availability() -> None:
    rng = np.random.default_rng(5)
    counts = alternating(
        rng, up=Weibull(0.7, 2 * 3600.0), gap=Weibull(0.8, 3600.0), ticks=30 * 288, gap_s=300.0
    )
    model = fit_model([trace(counts, gap_s=300.0)], half=Half.ALL)
    law = model.laws[0]
    drawn = law.timeline(np.random.default_rng(0), runs=400, ticks=288, tick_s=300.0)
    assert drawn.mean() == pytest.approx(law.availability, abs=0.04)
    assert law.model_availability == pytest.approx(law.availability, abs=0.05)


def test_a_damaged_model_document_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        model_from_document({"format": "nope"}, origin="x.json")
    assert caught.value.field == "format"
    rng = np.random.default_rng(2)
    doc = fit_model(
        [trace(_fleet(rng, vms=1, together=True, ticks=5 * 288), gap_s=300.0)], half=Half.ALL
    ).to_document()
    doc["laws"][0]["fleets"][0]["up"] = {"weibull": {"shape": -1, "scale_s": 5}, "runs": [[60, 1, 0]]}
    with pytest.raises(InvalidInput) as caught:
        model_from_document(doc, origin="x.json")
    assert caught.value.field is not None and "To fix:" in str(caught.value)


def test_a_block_long_outage_counts_in_the_gap_law() -> None:
    # 2-day blocks at 300 s ticks: fit blocks 0, 2 and 4 alternate capacity; fit block 2 has none at all
    # (one run whose start and end lie outside it, which the law's shape cannot use). The fitted laws must
    # still spend the data's share of time up: renewal–reward sets their means.
    per = 576
    rng = np.random.default_rng(11)
    busy = [
        alternating(rng, up=Weibull(0.7, 3 * 3600.0), gap=Weibull(0.8, 3600.0), ticks=per, gap_s=300.0)
        for _ in range(4)
    ]
    counts = np.concatenate([busy[0], busy[1], np.zeros(per, dtype=np.int64), busy[2], busy[3]])
    model = fit_model([trace(counts, gap_s=300.0)], half=Half.FIT)
    law = model.laws[0]
    assert law.source is LawSource.FITTED
    fit_up = np.concatenate([busy[0], np.zeros(per), busy[3]]).mean()
    assert law.availability == pytest.approx(fit_up)
    # Up and down runs that ended differ by at most one per block, so the two agree closely, not exactly.
    assert law.model_availability == pytest.approx(law.availability, abs=0.03)
    # Left to the runs the shape sees, the outage would vanish: availability well above the data's.
    r = runs_of(split_blocks(trace(counts, gap_s=300.0), Half.FIT), 1)
    shape_only = Durations.from_runs(r.up_lower_s, r.up_upper_s, tick_s=300.0).mean_s
    shape_gap = Durations.from_runs(r.down_lower_s, r.down_upper_s, tick_s=300.0).mean_s
    assert shape_only / (shape_only + shape_gap) > law.availability + 0.1
