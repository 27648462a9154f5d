"""A fleet member whose compute is scaled (the testbed's co-location factor), on a hand-computed timeline."""

from __future__ import annotations

import math

import pytest

from srift.errors import InvalidInput
from srift.sim import simulate

from .kit import P3_2XL, flat, member, profile

# fw 0.1, bw 0.2 at batch 64; two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s.
# Layer 1: 0.1 GB ready at a quarter of backward, layer 2: 0.25 GB at its end.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def test_a_scaled_profile_stretches_forward_and_backward_by_hand() -> None:
    plain = profile(layers=LAYERS)
    scaled = plain.scaled_compute(1.5)
    assert scaled.compute_s(64) == pytest.approx(1.5 * plain.compute_s(64))
    assert scaled.compute_s(32) == pytest.approx(1.5 * plain.compute_s(32))
    assert scaled.extra["compute_scale"] == 1.5
    assert scaled.layers == plain.layers
    # ×1.5: forward 0.15, backward over [0.15, 0.45]. Layer 1 ready at 0.15 + 0.25·0.3 = 0.225, reduced over
    # [0.225, 0.325]; layer 2 ready at 0.45, reduced over [0.45, 0.70].
    est = simulate([member(P3_2XL, 2, 64, scaled)], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.70, abs=1e-9)
    assert est.breakdown.compute_s == pytest.approx(0.45, abs=1e-9)
    assert est.breakdown.exposed_network_s == pytest.approx(0.25, abs=1e-9)


def test_only_the_scaled_group_is_slower_and_the_ring_waits_for_it() -> None:
    # One VM as profiled (backward ends at 0.30), one scaled ×1.5 (0.45): layer 2 is reduced once both have
    # it, over [0.45, 0.70]; the unscaled VM waits 0.15 s for its peer.
    plain = profile(layers=LAYERS)
    est = simulate(
        [member(P3_2XL, 1, 64, plain), member(P3_2XL, 1, 64, plain.scaled_compute(1.5))], bandwidth=flat(8.0)
    )
    assert est.iteration_s == pytest.approx(0.70, abs=1e-9)
    alone = simulate([member(P3_2XL, 2, 64, plain)], bandwidth=flat(8.0))
    assert alone.iteration_s == pytest.approx(0.55, abs=1e-9)


@pytest.mark.parametrize("factor", [0.0, -1.0, math.nan, math.inf])
def test_an_impossible_scale_is_refused(factor: float) -> None:
    with pytest.raises(InvalidInput) as err:
        profile(layers=LAYERS).scaled_compute(factor)
    assert err.value.field == "compute_scale"
    assert "To fix" in str(err.value)
