"""Data-loading stalls: a VM whose loader cores or reads cannot feed its GPUs (hand-computed cases)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from srift.domain import InputPipeline
from srift.domain.simulation import PER_LAYER
from srift.sim import simulate
from tests.sim.kit import P3_2XL, flat, member, profile

SMALL = replace(P3_2XL, name="small.2vcpu", vcpus=2)
PIPE = InputPipeline(samples_per_s_per_core=100.0, bytes_per_sample=1_000_000.0, source="test")
FED = replace(profile(fw_s=0.1, bw_s=0.2, layers=((1000, 0.5),)), input_pipeline=PIPE)


def test_a_vm_with_enough_cores_does_not_stall() -> None:
    # 8 vCPUs, one GPU: 7 loader cores × 100 = 700 samples/s, batch 32 → 0.046 s < 0.15 s of compute.
    est = simulate([member(P3_2XL, 1, 32, FED)], bandwidth=flat(10.0), config=PER_LAYER)
    assert est.breakdown.data_stall_s == 0.0
    assert est.iteration_s == pytest.approx(0.15)


def test_a_vm_with_one_loader_core_stalls_by_the_decode_shortfall() -> None:
    # 2 vCPUs, one GPU: 1 loader core → 100 samples/s; batch 32 → 0.32 s; compute 0.15 s → stall 0.17 s.
    est = simulate([member(SMALL, 1, 32, FED)], bandwidth=flat(10.0), config=PER_LAYER)
    assert est.iteration_s == pytest.approx(0.32)
    assert est.breakdown.data_stall_s == pytest.approx(0.17)
    assert est.iteration_p90_s >= 0.32
    b = est.breakdown
    total = b.compute_s + b.straggler_wait_s + b.exposed_intra_s + b.exposed_network_s + b.data_stall_s
    assert total == pytest.approx(est.iteration_s)
    assert any("data stall on small.2vcpu" in w and "decode 100 samples/s" in w for w in b.warnings)


def test_reads_bound_the_feed_when_storage_is_slow() -> None:
    # 0.1 Gbit/s of reads at 1 MB per sample → 12.5 samples/s; batch 32 → 2.56 s.
    est = simulate([member(P3_2XL, 1, 32, FED)], bandwidth=flat(10.0), read_gbps=0.1, config=PER_LAYER)
    assert est.iteration_s == pytest.approx(2.56)
    assert any("reads deliver 12 samples/s" in w for w in est.breakdown.warnings)


def test_the_slowest_feeder_sets_the_fleet_pace() -> None:
    fleet = [member(P3_2XL, 2, 32, FED), member(SMALL, 1, 32, FED)]
    est = simulate(fleet, bandwidth=flat(10.0), config=PER_LAYER)
    assert est.iteration_s >= 0.32
