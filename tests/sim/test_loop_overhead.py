"""The training loop's per-iteration overhead (freeing gradients; DDP's bucket copies), by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from srift.domain import ModelProfile
from srift.domain.profile_document import read_profile
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.sim import simulate

from .kit import P3_2XL, flat, member, profile

# fw 0.1, bw 0.2; two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s (as in test_overlap).
# Layer 1: 0.1 GB ready at a quarter of backward, layer 2: 0.25 GB at its end.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def _with(**extra: float) -> ModelProfile:
    return replace(profile(layers=LAYERS), extra=extra)


def test_one_vm_adds_the_plain_loop_overhead_by_hand() -> None:
    # One VM exchanges nothing: 0.02 (zero_grad) + 0.1 + 0.2 = 0.32; the DDP value is not used.
    est = simulate(
        [member(P3_2XL, 1, 64, _with(loop_overhead_s=0.02, ddp_overhead_s=0.05))],
        bandwidth=flat(8.0),
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(0.32, abs=1e-12)
    assert est.breakdown.forward_s == pytest.approx(0.12, abs=1e-12)


def test_a_fleet_that_exchanges_adds_the_ddp_overhead_before_its_buckets_by_hand() -> None:
    # Without overhead: layer 1 ready at 0.15, reduced [0.15, 0.25]; layer 2 ready at 0.3, reduced
    # [0.3, 0.55]. With 0.05 s of DDP overhead before forward, every arrival moves 0.05 s later:
    # layer 2 is reduced over [0.35, 0.60].
    est = simulate(
        [member(P3_2XL, 2, 64, _with(loop_overhead_s=0.02, ddp_overhead_s=0.05))],
        bandwidth=flat(8.0),
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(0.60, abs=1e-9)
    # Only the plain value measured: it stands for the DDP one too.
    plain = simulate(
        [member(P3_2XL, 2, 64, _with(loop_overhead_s=0.02))], bandwidth=flat(8.0), config=PER_LAYER
    )
    assert plain.iteration_s == pytest.approx(0.57, abs=1e-9)


def test_unmeasured_overhead_changes_nothing() -> None:
    est = simulate([member(P3_2XL, 1, 64, profile(layers=LAYERS))], bandwidth=flat(8.0), config=PER_LAYER)
    assert est.iteration_s == pytest.approx(0.3, abs=1e-12)


@pytest.mark.parametrize("key", ["loop_overhead_s", "ddp_overhead_s"])
def test_a_negative_overhead_is_refused_with_its_field(key: str) -> None:
    doc = _with(loop_overhead_s=0.01).to_dict()
    doc["extra"][key] = -0.01
    with pytest.raises(InvalidInput) as err:
        read_profile(doc)
    assert err.value.field == f"extra.{key}"
    assert read_profile(_with(loop_overhead_s=0.01).to_dict()).loop_overhead_s(distributed=True) == 0.01
