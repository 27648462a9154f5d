"""The fit of η from the registry's raw runs, and the shipped table it wrote."""

from __future__ import annotations

import json
from importlib import resources

from srift.estimate import public_runs
from srift.sim.node_scaling import FILE, shipped_node_efficiency
from srift.validation.node_efficiency import fit_node_efficiency


def test_the_shipped_eta_is_what_the_fit_gives_from_the_registry() -> None:
    """srift/data/node_efficiency.json = `python -m benchmarks.public_gpus --write-node-efficiency`."""
    shipped = json.loads(resources.files("srift").joinpath(FILE).read_text())
    assert fit_node_efficiency().to_dict() == shipped
    assert shipped_node_efficiency().by_link == shipped["by_link"]


def test_leaving_a_gpu_out_drops_its_runs_from_the_fit() -> None:
    """Without the V100 runs (the only NVLink pairs), NVLink takes the median over every pair."""
    runs = public_runs.read_runs()
    assert any(r.gpu == "V100-SXM2-16GB" and r.interconnect == "nvlink" and r.gpus > 1 for r in runs)
    every = fit_node_efficiency()
    without = fit_node_efficiency(leave_out_gpu="V100-SXM2-16GB")
    assert "without V100-SXM2-16GB" in without.fitted_on and "nvlink 0" in without.fitted_on
    assert without.by_link["nvlink"] != every.by_link["nvlink"]
    assert without.by_link["nvswitch"] == every.by_link["nvswitch"]
