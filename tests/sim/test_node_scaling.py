"""The node efficiency η: which nodes it applies to, and that the simulator divides their compute by it."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import pytest

from srift.domain import Interconnect
from srift.sim import IterationInputs, simulate
from srift.sim.node_scaling import FILE, UNCORRECTED, NodeEfficiency, shipped_node_efficiency

from .kit import P3_2XL, P3_8XL, TableBandwidth, instance, member, profile

TABLE = NodeEfficiency(by_link={"nvlink": 0.8, "pcie": 0.9}, fitted_on="a test table")


def test_eta_applies_to_nodes_of_several_known_gpus_with_a_fitted_link() -> None:
    assert TABLE.of(P3_8XL) == 0.8
    assert TABLE.of(replace(P3_8XL, interconnect=Interconnect.PCIE)) == 0.9
    # One GPU, a link without an η, an unknown GPU, a CPU or testbed type: the profile's compute.
    assert TABLE.of(P3_2XL) == 1.0
    assert TABLE.of(replace(P3_8XL, interconnect=Interconnect.NVSWITCH)) == 1.0
    assert TABLE.of(instance("x.4", gpus=4, gpu_model="NoSuchGPU")) == 1.0
    cpu = replace(instance("tb.small", gpus=1), gpu_model=None, gpu_count=0, interconnect=Interconnect.NONE)
    assert TABLE.of(cpu) == 1.0
    assert TABLE.of(replace(cpu, gpu_count=2)) == 1.0


def test_the_simulator_divides_a_nodes_compute_by_its_eta() -> None:
    model = TableBandwidth({1: 8.0}, {1: 1e6})
    prof = profile(fw_s=0.1, bw_s=0.2)
    plain = simulate([member(P3_8XL, 1, 256, prof)], bandwidth=model, node_efficiency=UNCORRECTED, band=False)
    single = simulate([member(P3_2XL, 1, 64, prof)], bandwidth=model, node_efficiency=UNCORRECTED, band=False)
    slowed = simulate([member(P3_8XL, 1, 256, prof)], bandwidth=model, node_efficiency=TABLE, band=False)
    single_again = simulate([member(P3_2XL, 1, 64, prof)], bandwidth=model, node_efficiency=TABLE, band=False)
    assert slowed.breakdown.forward_s == pytest.approx(plain.breakdown.forward_s / 0.8, rel=1e-12)
    assert slowed.breakdown.backward_s == pytest.approx(plain.breakdown.backward_s / 0.8, rel=1e-12)
    assert slowed.iteration_s > plain.iteration_s
    # A one-GPU node is exactly as before, bit for bit.
    assert single_again == single


def test_a_simulation_uses_the_shipped_table_unless_given_another() -> None:
    model = TableBandwidth({1: 8.0}, {1: 1e6})
    fleet = [member(P3_8XL, 1, 256, profile(fw_s=0.1, bw_s=0.2))]
    assert IterationInputs(bandwidth=model).node_efficiency == shipped_node_efficiency()
    default = simulate(fleet, bandwidth=model, band=False)
    assert default == simulate(fleet, bandwidth=model, node_efficiency=shipped_node_efficiency(), band=False)
    # Another table in one call leaves the next call's default alone.
    assert simulate(fleet, bandwidth=model, node_efficiency=TABLE, band=False) != default
    assert simulate(fleet, bandwidth=model, band=False) == default


def test_the_shipped_table_gives_every_gpu_link_an_eta_at_most_one() -> None:
    data = json.loads(resources.files("srift").joinpath(FILE).read_text())
    shipped = shipped_node_efficiency()
    assert shipped == NodeEfficiency.from_dict(data)
    assert set(shipped.by_link) == {"pcie", "nvlink", "nvswitch"}
    assert all(0.5 < v <= 1.0 for v in shipped.by_link.values())
    assert "lambdal-raw-runs" in shipped.fitted_on
