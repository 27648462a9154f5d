"""The fit of η, the single-node DDP efficiency the simulator does not explain (`srift.sim.node_scaling`).

Every run of Lambda's raw logs (`srift.estimate.public_runs`, read through the measurement registry, set
`lambdal-raw-runs`, use fit) is predicted as the public-table benchmark predicts a row: the profile
estimated for the run's GPU, model and precision from a calibration (`srift.estimate.estimator`, the
reference model's shipped structure), the run's node (its GPU count and link) simulated with the α-β
bandwidth prior at the run's per-GPU batch, without η (`UNCORRECTED`: η is the residual of these
predictions). Each N-GPU series is paired with its 1-GPU run (`public_runs.series_cases`) and η per link
class is the median of published / predicted efficiency (`public_runs.link_efficiencies`).

It lives here, above the estimator and the simulator, because it needs both (neither may import the other).
The shipped η (`srift/data/node_efficiency.json`) is `fit_node_efficiency()` with the shipped calibration;
`python -m benchmarks.public_gpus --write-node-efficiency` writes it, and the benchmark refits it leaving
each GPU model out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import FleetMember, InstanceType, Interconnect
from srift.estimate import public_runs
from srift.estimate.calibration import Calibration, shipped_calibration
from srift.estimate.estimator import estimate_profile
from srift.estimate.public import Row
from srift.measurements import Registry
from srift.refmodels.build import load_structure
from srift.sim import IterationEstimate, simulate
from srift.sim.node_scaling import UNCORRECTED, NodeEfficiency

structure_of = functools.lru_cache(maxsize=None)(load_structure)
"""The reference models' shipped structures, loaded once per (model, precision)."""


def public_node(row: Row) -> InstanceType:
    """A public table's (or raw run's) machine as an instance type: its GPUs and their link (network
    irrelevant: one node)."""
    spec = row.spec
    return InstanceType(
        provider="lambdal",
        name=row.row,
        gpu_model=spec.name,
        gpu_count=row.gpus,
        gpu_memory_gib=spec.memory_gib,
        vcpus=8 * row.gpus,
        memory_gib=64.0 * row.gpus,
        network_gbps=100.0,
        network_burst=False,
        interconnect=Interconnect(row.interconnect),
        interconnect_gbps=row.interconnect_gbps,
        efa=False,
    )


def simulate_row(
    row: Row,
    calibration: Calibration,
    prior: AlphaBetaPrior,
    *,
    node_efficiency: NodeEfficiency,
    band: bool = True,
) -> tuple[int, IterationEstimate]:
    """The row's node simulated with the profile estimated from `calibration` and the η table
    `node_efficiency` (`srift.sim.node_scaling`): the estimate's largest per-GPU batch, and the simulation
    (at the row's batch, which it ran, even where the estimate's largest batch is smaller)."""
    estimated = estimate_profile(
        model=row.model,
        structure=structure_of(row.model, row.precision),
        spec=row.spec,
        precision=row.precision,
        calibration=calibration,
    )
    if estimated.profile is None:
        raise ValueError(f"{row.row}: no estimate ({estimated.note})")
    profile = estimated.profile
    wide = replace(profile, max_batch=max(profile.max_batch, row.per_gpu_batch))
    member = FleetMember(instance=public_node(row), count=1, batch=row.global_batch, profile=wide)
    return profile.max_batch, simulate(
        [member], bandwidth=prior, seed=0, node_efficiency=node_efficiency, band=band
    )


def uncorrected_samples_per_s(
    runs: Sequence[public_runs.LoggedRun], calibration_of: Callable[[str], Calibration]
) -> dict[str, float]:
    """Srift's node samples/s for each run without η (module docstring), its profile estimated from
    `calibration_of(the run's GPU model)`; one simulation per distinct configuration
    (`public_runs.config_key`)."""
    prior = AlphaBetaPrior()
    by_config: dict[tuple[str, int, str, str, int, str, float], float] = {}
    out = {}
    for run in runs:
        key = public_runs.config_key(run)
        if key not in by_config:
            row = run.as_row()
            calibration = calibration_of(run.gpu)
            _, result = simulate_row(row, calibration, prior, node_efficiency=UNCORRECTED, band=False)
            by_config[key] = row.global_batch / result.iteration_s
        out[run.row] = by_config[key]
    return out


def fit_node_efficiency(
    *,
    registry: Registry | None = None,
    calibration: Calibration | None = None,
    leave_out_gpu: str | None = None,
) -> NodeEfficiency:
    """η per link class from the registry's raw runs (module docstring), predicted with `calibration`
    (default: the shipped one); `leave_out_gpu` drops that GPU model's runs (a leave-one-GPU-out check)."""
    cal = calibration or shipped_calibration()
    runs = [r for r in public_runs.read_runs(registry=registry) if r.gpu != leave_out_gpu]
    cases = public_runs.series_cases(runs, uncorrected_samples_per_s(runs, lambda _: cal))
    eta = public_runs.link_efficiencies(cases)
    counts = ", ".join(f"{link} {sum(c.interconnect == link for c in cases)}" for link in sorted(eta))
    without = f", without {leave_out_gpu}" if leave_out_gpu else ""
    return NodeEfficiency(
        by_link={k: round(v, 4) for k, v in eta.items()},
        fitted_on=f"{public_runs.SET_ID}{without}: {len(cases)} N-GPU/1-GPU pairs ({counts}), "
        f"predicted with calibration {cal.name}",
    )
