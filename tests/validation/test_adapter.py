"""The testbed adapter: fresh CPU quota and co-location turn profiles into what testbed hosts compute,
and the served simulator (unchanged) predicts from them; timelines by hand."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from srift.domain import ModelProfile
from srift.domain.profile_document import read_profile
from srift.errors import InvalidInput
from srift.sim import simulate
from srift.validation import adapter
from srift.validation.colocation import ColocationFactors
from tests.sim.kit import P3_2XL, flat, instance, member, profile

# fw 0.1, bw 0.2 at batch 64; two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s.
# Layer 1: 0.1 GB ready at a quarter of backward, layer 2: 0.25 GB at its end. Both are far above DDP's
# first bucket (1 MiB) and its 25 MiB cap, so the served buckets are these two layers.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def _quota(
    prof: ModelProfile, cores: float, period_s: float, threads: int | None = None, **more: float
) -> ModelProfile:
    return replace(prof, threads=threads, extra={"cpu_quota": {"cores": cores, "period_s": period_s, **more}})


def test_saving_by_hand() -> None:
    prof = _quota(profile(layers=LAYERS), 0.25, 0.1)
    assert adapter.cpu_share(prof) == (0.25, 0.1)
    # (1 − q) · min(idle, period, compute)
    assert adapter.fresh_quota_saving_s(prof, idle_s=0.25, compute_s=0.3) == pytest.approx(0.075, abs=1e-15)
    assert adapter.fresh_quota_saving_s(prof, idle_s=0.04, compute_s=0.3) == pytest.approx(0.03, abs=1e-15)
    assert adapter.fresh_quota_saving_s(prof, idle_s=0.25, compute_s=0.02) == pytest.approx(0.015, abs=1e-15)
    assert adapter.fresh_quota_saving_s(prof, idle_s=0.0, compute_s=0.3) == 0.0
    # two threads share the quarter core: each runs at an eighth
    two = _quota(profile(layers=LAYERS), 0.25, 0.1, threads=2)
    assert adapter.fresh_quota_saving_s(two, idle_s=1.0, compute_s=0.3) == pytest.approx(0.0875, abs=1e-15)
    # a core per thread or more: no quota binds
    for unbound in (_quota(profile(), 1.0, 0.1), _quota(profile(), 4.0, 0.1, threads=4), profile()):
        assert adapter.cpu_share(unbound) is None
        assert adapter.fresh_quota_saving_s(unbound, idle_s=1.0, compute_s=0.3) == 0.0


def test_the_served_simulator_ignores_a_quota() -> None:
    plain = simulate([member(P3_2XL, 2, 64, profile(layers=LAYERS))], bandwidth=flat(8.0))
    quota = simulate(
        [member(P3_2XL, 2, 64, _quota(profile(layers=LAYERS), 0.25, 0.1))],
        bandwidth=flat(8.0),
    )
    assert plain.iteration_s == quota.iteration_s == pytest.approx(0.55, abs=1e-9)


def test_two_members_that_wait_start_on_fresh_quota_by_hand() -> None:
    # Served, as profiled: layer 1 ready at 0.15, reduced [0.15, 0.25]; layer 2 ready at 0.3, reduced
    # [0.3, 0.55]; iteration 0.55. Each member computes 0.3 and waits 0.25 of it, so its step saves
    # (1 − 0.25) · min(0.25, 0.1, 0.3) = 0.075: compute 0.225 (fw 0.075, bw 0.15). The adapted profiles:
    # layer 1 ready at 0.1125, reduced [0.1125, 0.2125]; layer 2 ready at 0.225, reduced [0.225, 0.475].
    fleet = [member(P3_2XL, 2, 64, _quota(profile(layers=LAYERS), 0.25, 0.1))]
    inputs = adapter.testbed_fleet(fleet, bandwidth=flat(8.0), seed=0)
    assert inputs[0].profile.extra["compute_scale"] == pytest.approx(0.75, abs=1e-12)
    est = simulate(inputs, bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.475, abs=1e-9)
    assert est.breakdown.compute_s == pytest.approx(0.225, abs=1e-9)
    assert est.breakdown.forward_s == pytest.approx(0.075, abs=1e-9)


def test_one_vm_never_waits_so_its_profile_is_kept() -> None:
    fleet = [member(P3_2XL, 1, 64, _quota(profile(layers=LAYERS), 0.25, 0.1))]
    assert adapter.testbed_fleet(fleet, bandwidth=flat(8.0), seed=0) == fleet


def test_the_faster_member_waits_longer_but_the_slower_decides() -> None:
    # Member a computes 0.3, member b 0.15 (fw 0.05, bw 0.1); the exchange waits for a. a waits 0.25
    # (saves 0.075 as above), b waits 0.4 (saves 0.75 · 0.1 = 0.075 of its 0.15). a decides: 0.475.
    a = _quota(profile(layers=LAYERS), 0.25, 0.1)
    b = _quota(profile(layers=LAYERS, fw_s=0.05, bw_s=0.1), 0.25, 0.1)
    other = instance("p3.2xlarge-b", gpus=1, network_gbps=10.0)
    fleet = [member(P3_2XL, 1, 64, a), member(other, 1, 64, b)]
    est = simulate(adapter.testbed_fleet(fleet, bandwidth=flat(8.0), seed=0), bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.475, abs=1e-9)


def test_a_scaled_profile_stretches_forward_backward_and_loop_overhead() -> None:
    plain = replace(profile(layers=LAYERS), extra={"loop_overhead_s": 0.01, "ddp_overhead_s": 0.02})
    scaled = adapter.scaled_compute(plain, 1.5)
    assert scaled.compute_s(64) == pytest.approx(1.5 * plain.compute_s(64))
    assert scaled.compute_s(32) == pytest.approx(1.5 * plain.compute_s(32))
    assert scaled.loop_overhead_s(distributed=True) == pytest.approx(0.03)
    assert scaled.loop_overhead_s(distributed=False) == pytest.approx(0.015)
    assert scaled.extra["compute_scale"] == 1.5
    assert adapter.scaled_compute(scaled, 2.0).extra["compute_scale"] == 3.0
    assert scaled.layers == plain.layers


def test_colocation_slows_only_its_group_and_the_ring_waits_for_it() -> None:
    # One VM as profiled (backward ends at 0.30), one co-located ×1.5 (0.45): layer 2 is reduced once both
    # have it, over [0.45, 0.70]; the unscaled VM waits 0.15 s for its peer.
    plain = profile(layers=LAYERS)
    other = instance("p3.2xlarge-b", gpus=1, network_gbps=10.0)
    fleet = [member(P3_2XL, 1, 64, plain), member(other, 1, 64, plain)]
    factors = ColocationFactors(factors=(1.0, 1.5), ratios=((1.0,), (1.5,)), straggler_cv=(None, None))
    inputs = adapter.testbed_fleet(fleet, bandwidth=flat(8.0), seed=0, colocation=factors)
    est = simulate(inputs, bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.70, abs=1e-9)
    assert simulate(fleet, bandwidth=flat(8.0)).iteration_s == pytest.approx(0.55, abs=1e-9)


@pytest.mark.parametrize("factor", [0.0, -1.0, math.nan, math.inf])
def test_an_impossible_scale_is_refused(factor: float) -> None:
    with pytest.raises(InvalidInput) as err:
        adapter.scaled_compute(profile(layers=LAYERS), factor)
    assert err.value.field == "compute_scale"
    assert "To fix" in str(err.value)


@pytest.mark.parametrize(
    "bad",
    [
        {"cores": 0.0, "period_s": 0.01},
        {"cores": -1, "period_s": 0.01},
        {"cores": 0.25, "period_s": 2.0},
        {"cores": 0.25},
        {"cores": 0.25, "period_s": 0.01, "burst_s": 0.0},
        {"cores": True, "period_s": 0.01},
        {"cores": float("nan"), "period_s": 0.01},
        "0.25",
    ],
)
def test_a_malformed_quota_is_refused_with_its_field(bad: Any) -> None:
    doc = _quota(profile(), 0.25, 0.01).to_dict()
    assert adapter.cpu_share(read_profile(doc)) == (0.25, 0.01)
    doc["extra"]["cpu_quota"] = bad
    with pytest.raises(InvalidInput) as err:
        read_profile(doc)
    assert err.value.field == "extra.cpu_quota"
