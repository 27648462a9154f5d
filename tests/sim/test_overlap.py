"""The overlap slowdown: backward slowed while the exchange is busy, on a hand-computed timeline."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from srift.domain import ModelProfile
from srift.errors import InvalidInput
from srift.sim import simulate

from .kit import P3_2XL, flat, member, profile

# fw 0.1, bw 0.2 (backward from 0.1 to 0.3); two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s.
# Layer 1: 0.1 GB ready at a quarter of backward (0.15), reduced over [0.15, 0.25].
# Layer 2: 0.25 GB ready at the end of backward (0.3), reduced over [0.3, 0.55]: iteration 0.55.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def _measured(slowdown: float, spread: float = 0.0) -> ModelProfile:
    return replace(
        profile(layers=LAYERS),
        extra={"overlap_slowdown": slowdown, "overlap_slowdown_spread": spread},
    )


def test_backward_slowed_while_the_exchange_is_busy_by_hand() -> None:
    plain = simulate([member(P3_2XL, 2, 64, profile(layers=LAYERS))], bandwidth=flat(8.0))
    assert plain.iteration_s == pytest.approx(0.55, abs=1e-9)
    # Slowdown 1.5: the exchange is busy 0.1 s of backward before layer 2 is ready ([0.15, 0.25]), so
    # backward ends 0.5·0.1 = 0.05 s later (0.35); layer 1 is ready before anything is busy (0.15, as
    # before); layer 2 is reduced over [0.35, 0.60].
    est = simulate([member(P3_2XL, 2, 64, _measured(1.5))], bandwidth=flat(8.0))
    b = est.breakdown
    assert est.iteration_s == pytest.approx(0.60, abs=1e-9)
    assert b.compute_s == pytest.approx(0.35, abs=1e-9)
    assert b.straggler_wait_s == pytest.approx(0.0, abs=1e-9)
    assert b.exposed_network_s == pytest.approx(0.25, abs=1e-9)
    assert b.compute_s + b.straggler_wait_s + b.exposed_network_s + b.exposed_intra_s == pytest.approx(
        est.iteration_s
    )


def test_one_vm_has_no_exchange_to_overlap() -> None:
    est = simulate([member(P3_2XL, 1, 64, _measured(1.5))], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.3, abs=1e-12)


def test_overlap_spread_is_a_band_term() -> None:
    # One spread σ larger slowdown 1.5·e^σ: T' = 0.55 + (1.5·e^σ − 1)·0.1 and the term is ln(T' / 0.60).
    sigma = 0.1
    est = simulate([member(P3_2XL, 2, 64, _measured(1.5, sigma))], bandwidth=flat(8.0))
    assert est.band is not None
    (term,) = [t for t in est.band.terms if t.source == "overlap"]
    assert term.spread == sigma
    assert term.sigma == pytest.approx(math.log((0.55 + (1.5 * math.exp(sigma) - 1) * 0.1) / 0.60))
    plain = simulate([member(P3_2XL, 2, 64, _measured(1.5))], bandwidth=flat(8.0))
    assert plain.band is not None and not [t for t in plain.band.terms if t.source == "overlap"]


@pytest.mark.parametrize(("key", "value"), [("overlap_slowdown", 0.8), ("overlap_slowdown_spread", -0.1)])
def test_a_profile_with_an_impossible_overlap_measurement_is_refused(key: str, value: float) -> None:
    doc = _measured(1.2, 0.05).to_dict()
    doc["extra"][key] = value
    with pytest.raises(InvalidInput) as err:
        ModelProfile.from_dict(doc)
    assert err.value.field == f"extra.{key}"
    assert ModelProfile.from_dict(_measured(1.2, 0.05).to_dict()).overlap_slowdown() == (1.2, 0.05)
