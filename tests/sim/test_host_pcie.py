"""Socket transport on PCIe GPUs: the intra-node and network stages become one serial stage."""

from __future__ import annotations

import dataclasses

import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import InstanceType, Interconnect
from srift.domain.network import NetworkSpec, Transport
from srift.domain.simulation import PER_LAYER
from srift.sim import simulate
from srift.sim.network import exchange_plans, intra_stage, network_stage

from .kit import member, profile

PCIE4 = InstanceType(
    provider="aws",
    name="g4dn.12xlarge",
    gpu_model="T4",
    gpu_count=4,
    gpu_memory_gib=16,
    vcpus=48,
    memory_gib=192,
    network_gbps=50,
    network_burst=False,
    interconnect=Interconnect.PCIE,
    interconnect_gbps=126,
    efa=True,
)
PROFILE = profile(accelerator="T4", fw_s=0.1, bw_s=0.2, layers=((50_000_000, 0.3), (100_000_000, 0.9)))


def test_tcp_on_pcie_adds_intra_and_network_times_efa_overlaps_them() -> None:
    fleet = [member(PCIE4, 2, 256, PROFILE)]
    sizes = [1 << 26, 1 << 27]
    tcp = AlphaBetaPrior()
    (serial,) = exchange_plans(fleet, sizes, tcp)
    intra, net = intra_stage(fleet, sizes, tcp), network_stage(fleet, sizes, tcp)
    assert intra is not None and net is not None and serial.stage.name == "network"
    for got, a, b in zip(serial.stage.rates_bps, intra.stage.rates_bps, net.stage.rates_bps, strict=True):
        assert 1 / got == pytest.approx(1 / a + 1 / b)
    efa = AlphaBetaPrior(network=NetworkSpec(transport=Transport.EFA))
    assert [p.stage.name for p in exchange_plans(fleet, sizes, efa)] == ["intra", "network"]
    one_node = [member(PCIE4, 1, 256, PROFILE)]
    assert [p.stage.name for p in exchange_plans(one_node, sizes, tcp)] == ["intra"]
    slower = simulate(fleet, bandwidth=tcp, config=PER_LAYER).iteration_s
    measured = AlphaBetaPrior(network=NetworkSpec(measured_gbps={"g4dn.12xlarge": 40.5}))
    assert [p.stage.name for p in exchange_plans(fleet, sizes, measured)] == ["intra", "network"]
    assert simulate(fleet, bandwidth=measured, config=PER_LAYER).iteration_s <= slower


def test_part_of_the_gpus_shrinks_the_intra_node_ring() -> None:
    two = dataclasses.replace(PCIE4, gpu_count=2)
    fleet = [member(two, 1, 128, PROFILE)]
    (plan,) = exchange_plans(fleet, [1 << 26], AlphaBetaPrior())
    four = exchange_plans([member(PCIE4, 1, 256, PROFILE)], [1 << 26], AlphaBetaPrior())[0]
    # a ring of 2 moves 2s·1/2 bytes per GPU, a ring of 4 moves 2s·3/4: the payload rate of 2 GPUs is higher
    assert plan.stage.rates_bps[0] > four.stage.rates_bps[0]
