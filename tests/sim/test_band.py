"""Prediction bands: each measured spread's term on hand-computed timelines, and the band's arithmetic."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from srift.domain import Band, SpreadTerm
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.sim import simulate
from srift.sim.band import Z90

from .kit import P3_2XL, TableBandwidth, flat, member, profile


def _with_samples(prof: object, *, totals: list[float], batch: int = 64) -> object:
    """The profile with own samples (forward = backward = total / 2) at every breakpoint."""
    half = [t / 2 for t in totals]
    return replace(
        prof,  # type: ignore[type-var]
        extra={"measured": {"batches": [batch], "forward_s": [half], "backward_s": [half]}},
    )


def test_band_factor_and_probability_are_lognormal() -> None:
    band = Band.of(
        (SpreadTerm("a", 0.3, 0.06, "x"), SpreadTerm("b", 0.1, 0.08, "y"), SpreadTerm("c", 0, 0, "z"))
    )
    assert band.sigma == pytest.approx(0.1)
    assert [t.source for t in band.terms] == ["a", "b"]
    assert band.factor(0.9) == pytest.approx(math.exp(Z90 * 0.1))
    assert band.factor(0.5) == 1.0
    assert band.probability_within(math.exp(Z90 * 0.1)) == pytest.approx(0.9)
    assert band.probability_within(1.0) == pytest.approx(0.5)
    assert Band().factor(0.99) == 1.0
    assert (Band().probability_within(0.999), Band().probability_within(1.0)) == (0.0, 1.0)


def test_compute_spread_between_passes_else_between_samples_interpolated() -> None:
    prof = profile()
    # Own samples at batch 64: logs spread symmetrically ±0.1 around ln(0.3): MAD = 0.1 (n = 5).
    spread_samples = 1.4826 * 0.1 * math.sqrt(1 + 1 / 5)
    sampled = _with_samples(prof, totals=[0.3 * math.exp(d) for d in (-0.1, -0.1, 0.0, 0.1, 0.1)])
    assert sampled.compute_spread(64) == pytest.approx(spread_samples)  # type: ignore[attr-defined]
    # Three passes at batches 1 and 64: medians ±0.2 at 1, ±0.05 at 64 → interpolated at 32.5.
    passes = [
        {"batches": [1, 64], "compute_s": [0.1 * math.exp(a), 0.3 * math.exp(b)]}
        for a, b in ((-0.2, -0.05), (0.0, 0.0), (0.2, 0.05))
    ]
    pooled = replace(prof, extra={**sampled.extra, "measured_passes": passes})  # type: ignore[attr-defined]
    at_1, at_64 = (1.4826 * d * math.sqrt(1 + 1 / 3) for d in (0.2, 0.05))
    assert pooled.compute_spread(1) == pytest.approx(at_1)
    assert pooled.compute_spread(64) == pytest.approx(at_64)
    assert pooled.compute_spread(32.5) == pytest.approx((at_1 + at_64) / 2)
    assert pooled.compute_spread(200) == pytest.approx(at_64)
    # passes pooled by older code kept no samples: the robust spread of their means stands
    assert pooled.compute_spread(1, runs=2) == pytest.approx(at_1)
    declared = replace(prof, extra={"compute_spread": 0.07, "measured_passes": passes})
    assert declared.compute_spread(10) == 0.07
    assert prof.compute_spread(64) == 0.0


def _passes_with_samples(base_s: float) -> list[dict[str, object]]:
    """Three passes at batch 64, two steps each, logs ln(base) + (0, 0.2), (0.2, 0.4), (0.4, 0.6)."""
    out: list[dict[str, object]] = []
    for a in (0.0, 0.2, 0.4):
        steps = [base_s * math.exp(a), base_s * math.exp(a + 0.2)]
        out.append({"batches": [64], "compute_s": [sum(steps) / 2], "compute_samples_s": [steps]})
    return out


def test_compute_spread_is_the_drift_between_passes_net_of_their_sampling_noise() -> None:
    """By hand, on the logs: each pass's steps lie ±0.1 around its mean (0.1, 0.3, 0.5), so MSW = 6 × 0.01 / 3
    = 0.02; MSB = 2 × (0.04 + 0 + 0.04) / 2 = 0.08; n₀ = (6 − 12 / 6) / 2 = 2, so the drift's variance is
    (0.08 − 0.02) / 2 = 0.03. The passes' means (ln: a + ln((1 + e^0.2) / 2)) vary by 0.04 (sample
    variance), so the curve's own error is 0.04 / 3. One run: √(0.03 + 0.04/3); two runs' mean: √(0.015 +
    0.04/3). The robust spread of the three means alone would be 1.4826 × 0.2 × √(4/3) = 0.342."""
    prof = replace(profile(), extra={"measured_passes": _passes_with_samples(0.3)})
    assert prof.compute_spread(64) == pytest.approx(math.sqrt(0.03 + 0.04 / 3))
    assert prof.compute_spread(64, runs=2) == pytest.approx(math.sqrt(0.015 + 0.04 / 3))
    # passes whose means differ no more than their steps do: no drift, only the curve's own error
    noisy = [{"batches": [64], "compute_s": [0.3], "compute_samples_s": [[0.2, 0.4]]}] * 3
    assert replace(profile(), extra={"measured_passes": noisy}).compute_spread(64) == 0.0
    # a pass whose steps are unreadable or missing: the robust spread of the passes' means, as before
    means_only = 1.4826 * 0.2 * math.sqrt(1 + 1 / 3)
    for broken in ([["x", 0.3]], [[]], 0.3):
        passes = _passes_with_samples(0.3)
        passes[1] = {**passes[1], "compute_samples_s": broken}
        assert replace(profile(), extra={"measured_passes": passes}).compute_spread(64) == pytest.approx(
            means_only
        )


def test_one_vm_compute_term_shrinks_with_the_runs_a_measured_mean_averages() -> None:
    prof = replace(profile(), extra={"measured_passes": _passes_with_samples(0.3)})
    fleet = [member(P3_2XL, 1, 64, prof)]
    one = simulate(fleet, bandwidth=flat(10.0), config=PER_LAYER)  # type: ignore[arg-type]
    two = simulate(fleet, bandwidth=flat(10.0), runs=2, config=PER_LAYER)  # type: ignore[arg-type]
    assert one.band is not None and two.band is not None
    (a,) = one.band.terms
    (b,) = two.band.terms
    assert a.sigma == pytest.approx(math.sqrt(0.03 + 0.04 / 3))
    assert b.sigma == pytest.approx(math.sqrt(0.015 + 0.04 / 3))
    with pytest.raises(InvalidInput, match="runs"):
        simulate(fleet, bandwidth=flat(10.0), runs=0, config=PER_LAYER)  # type: ignore[arg-type]


def test_one_vm_compute_spread_is_the_whole_band() -> None:
    # One VM, fw 0.1 + bw 0.2 = 0.3 s, no exchange: one spread slower is 0.3·e^s, so the term is s itself.
    prof = _with_samples(profile(), totals=[0.3 * math.exp(d) for d in (-0.1, -0.1, 0.0, 0.1, 0.1)])
    s = prof.compute_spread(64)  # type: ignore[attr-defined]
    est = simulate([member(P3_2XL, 1, 64, prof)], bandwidth=flat(10.0), config=PER_LAYER)  # type: ignore[arg-type]
    assert est.band is not None and [t.source for t in est.band.terms] == ["compute"]
    assert est.band.sigma == pytest.approx(s)
    assert est.iteration_p50_s == pytest.approx(0.3)
    assert est.iteration_p90_s == pytest.approx(0.3 * math.exp(Z90 * s))
    assert est.iteration_p10_s == pytest.approx(0.3 * math.exp(-Z90 * s))


def test_network_spread_counts_only_where_the_link_is_the_bottleneck() -> None:
    # Two VMs, 1 GB at 8 Gbit/s: the exchange (1.0 s from 0.2) decides the iteration, 1.2 s. One error
    # spread r slower: 1.0·e^r s, so T' = 0.2 + e^r and the network term is ln((0.2 + e^r) / 1.2).
    r = 0.1
    est = simulate(
        [member(P3_2XL, 2, 64, profile())],
        bandwidth=TableBandwidth({1: 8.0}, residual_cv=r),
        config=PER_LAYER,
    )
    assert est.band is not None
    (net,) = [t for t in est.band.terms if t.source == "network"]
    assert net.spread == r
    assert net.sigma == pytest.approx(math.log((0.2 + math.exp(r)) / 1.2), rel=1e-9)
    # At 80 Gbit/s a layer ready at a quarter of backward (0.15 s) is reduced in 0.1 s, hidden by backward
    # (ends 0.3): one spread slower it still is (0.15 + 0.1·e^0.1 < 0.3), so the link's error adds nothing.
    early = profile(layers=((1_000_000_000, 0.25),))
    hidden = simulate(
        [member(P3_2XL, 2, 64, early)], bandwidth=TableBandwidth({1: 80.0}, residual_cv=r), config=PER_LAYER
    )
    assert hidden.band is not None
    assert all(t.source != "network" or t.sigma == 0 for t in hidden.band.terms)
    assert hidden.band.sigma == 0.0


def test_straggler_term_shrinks_with_the_iterations_a_run_averages() -> None:
    prof = profile(cv=0.1)
    one = simulate([member(P3_2XL, 1, 64, prof)], bandwidth=flat(10.0), iterations=1, config=PER_LAYER)
    many = simulate([member(P3_2XL, 1, 64, prof)], bandwidth=flat(10.0), iterations=100, config=PER_LAYER)
    assert one.band is not None and many.band is not None
    (a,) = one.band.terms
    (b,) = many.band.terms
    assert a.source == b.source == "stragglers"
    assert b.sigma == pytest.approx(a.sigma / 10)
    assert 0.05 < a.spread < 0.15


def test_without_band_the_quantiles_are_the_prediction() -> None:
    est = simulate(
        [member(P3_2XL, 2, 64, profile(cv=0.1))], bandwidth=flat(8.0), band=False, config=PER_LAYER
    )
    assert est.band is None
    assert est.iteration_p10_s == est.iteration_p50_s == est.iteration_p90_s == est.iteration_s
