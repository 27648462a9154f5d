"""simulate(): one iteration on a fleet = compute with stragglers + overlapped gradient exchange (§4.3).

Compute. Member m (k VMs of one type) has mean forward and backward times fw_m, bw_m at its per-device
batch. Each iteration every VM draws its compute time (see `srift.sim.compute`); the iteration's compute
ends when the slowest VM of the whole fleet is done, and C̄ is the mean over `straggler_iters` iterations.
C̄ is never below the slowest member's mean (fw + bw): with one VM the draws are noise, not waiting.

Exchange. Layer j's gradient can be reduced once *every* VM has produced it. Member m produces it at
ρ_m·(fw_m + ready_frac_j·bw_m), where ρ_m ≥ 1 is the mean ratio of the member's slowest VM to its mean, so
a_j = max over members. For one member this is Srift's ready_frac·t_bw measured from the start of backward
(ρ·t_fw later); for a mixed fleet the slowest member bounds it. The transfers then go through the stages
of `srift.sim.network` (intra-node, then network) with Srift eq. 2 sharing (`srift.sim.exchange`).

Loop overhead. A training loop also frees its gradients each iteration (and under DDP copies them into
buckets and back); the profile's measured `loop_overhead_s(distributed=…)` (the DDP value when the fleet
exchanges gradients) runs before forward, so it is counted in fw_m (and the breakdown's forward_s).

Iteration. t_iter = max(C̄, last transfer finished) + t_update — for one member exactly
t_fw + max(t_bw, t_pe) + t_update with stragglers folded into both; t_update is the slowest member's
optimizer step (the profile's `update_s`, 0 when not measured), which starts once every gradient is
reduced. Breakdown (Stash's terms): compute_s = slowest member's fw + bw, plus t_update;
straggler_wait_s = C̄ − compute_s; exposed communication = t_iter − C̄, of which exposed_network_s is the
time after C̄ during which the network stage was busy and exposed_intra_s the rest. communication_s is
the time during which any stage was busy; granularity = compute_s / communication_s (Erben et al.).

Locations. When members sit in two or more locations (regions, zones, clouds), the exchange crosses links
between them; `srift.sim.geo` builds those stages for the requested allreduce pattern (flat ring or
hierarchical), and the links come from the `geo` context's network facts (the shipped ones by default).

Data loading. With an input pipeline in the profiles, the slowest VM's loader time per iteration bounds the
iteration from below (`srift.sim.data`); the excess is the breakdown's data_stall_s.

"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from srift.domain import Breakdown, BusBandwidthModel, FleetMember, InstanceType, SpreadTerm
from srift.domain.profile import MAX_OVERLAP_SLOWDOWN
from srift.domain.simulation import SERVED, SimConfig
from srift.errors import InvalidInput, require_within
from srift.sim.band import Z90, band_for, communicates
from srift.sim.compute import member_keys, straggler_rows
from srift.sim.data import data_time_s, feed_rate, stall_warning
from srift.sim.exchange import ExchangeResult, Kernel, Stage, exchange
from srift.sim.geo import GeoContext, hierarchical_plans, ring_plans, spans_locations
from srift.sim.layers import LayerArrays, bucket_groups, bucketed, layer_arrays
from srift.sim.network import StagePlan, exchange_plans, intra_stage
from srift.sim.node_scaling import NodeEfficiency, shipped_node_efficiency
from srift.sim.overlap import CommWarp
from srift.sim.result import CommMode, IterationEstimate, granularity_of, with_band

MAX_STRAGGLER_ITERS = 100_000
MAX_MC_SAMPLES = 10_000
MIN_BANDWIDTH_FACTOR = 0.05


@functools.lru_cache(maxsize=1024)
def _matches_accelerator(instance: InstanceType, accelerator: str) -> bool:
    """`instance.matches_accelerator`, remembered: the optimizer asks about the same pairs again and again."""
    return instance.matches_accelerator(accelerator)


def validate_fleet(fleet: Sequence[FleetMember], *, field: str = "fleet") -> None:
    """Raise InvalidInput naming the member at fault (counts, batches, profiles that do not fit)."""
    if not fleet:
        raise InvalidInput(
            "the fleet is empty", hint="give at least one instance type with count ≥ 1", field=field
        )
    for i, m in enumerate(fleet):
        where = f"{field}[{i}]"
        if m.count < 1:
            raise InvalidInput(
                f"count {m.count} is below 1",
                hint="use a count ≥ 1 or leave the type out",
                field=f"{where}.count",
            )
        if m.batch < 1:
            raise InvalidInput(
                f"batch {m.batch} is below 1", hint="give each VM at least one sample", field=f"{where}.batch"
            )
        if not _matches_accelerator(m.instance, m.profile.accelerator):
            raise InvalidInput(
                f"the profile was made on {m.profile.accelerator!r}, not on {m.instance.name}'s "
                f"{m.instance.accelerator!r}",
                hint=f"profile the model on {m.instance.accelerator}, or pick a type with a matching profile",
                field=f"{where}.profile",
            )
        if m.per_device_batch > m.profile.max_batch:
            raise InvalidInput(
                f"batch {m.batch} on {m.instance.devices} device(s) is {m.per_device_batch:g} per device, "
                f"above the profile's max_batch {m.profile.max_batch}",
                hint=f"use a batch ≤ {m.profile.max_batch * m.instance.devices} per {m.instance.name}",
                field=f"{where}.batch",
            )


def quantiles(values: np.ndarray) -> tuple[float, float, float]:
    """p10, p50, p90 with linear interpolation (numpy's default method), without np.quantile's overhead."""
    ordered = np.sort(values).tolist()
    last = len(ordered) - 1
    out = []
    for p in (0.1, 0.5, 0.9):
        h = last * p
        lo = int(h)
        hi = min(lo + 1, last)
        out.append(ordered[lo] + (ordered[hi] - ordered[lo]) * (h - lo))
    return out[0], out[1], out[2]


def _exchange(
    arrivals: np.ndarray,
    canon: LayerArrays,
    stages: Sequence[Stage],
    *,
    presorted: bool = False,
    kernel: Kernel = "auto",
) -> ExchangeResult | None:
    if not stages or arrivals.size == 0:
        return None
    if not presorted and arrivals.size > 1 and bool(np.any(arrivals[1:] < arrivals[:-1])):
        order = np.argsort(arrivals, kind="stable")
        return exchange(
            arrivals[order].tolist(),
            canon.bits[order].tolist(),
            canon.klass[order].tolist(),
            stages,
            checked=False,
            kernel=kernel,
        )
    return exchange(
        arrivals.tolist(), canon.bits_list, canon.klass_list, stages, checked=False, kernel=kernel
    )


def default_geo() -> GeoContext:
    """The shipped network facts with a flat ring (what PyTorch DDP does)."""
    from srift.catalog.geo import shipped_geo

    return GeoContext(shipped_geo())


def stage_plans(
    fleet: Sequence[FleetMember],
    canon: LayerArrays,
    bandwidth: BusBandwidthModel,
    *,
    geo: GeoContext | None = None,
) -> tuple[list[StagePlan], list[float] | None]:
    """The exchange's stages for this fleet, and (flat ring across locations) each class's link share.

    Intra-node first; then the inter-node ring, or, across locations, the pattern's stages.
    """
    from srift.domain.geo import AllreducePattern

    if not spans_locations(fleet):
        return exchange_plans(fleet, canon.sizes, bandwidth), None
    plans = [p for p in (intra_stage(fleet, canon.sizes, bandwidth),) if p]
    context = geo or default_geo()
    if context.pattern is AllreducePattern.HIERARCHICAL:
        return plans + hierarchical_plans(fleet, canon, bandwidth, context.catalog), None
    ring, share = ring_plans(fleet, canon, bandwidth, context.catalog)
    return plans + ring, share


def _busy_until(result: ExchangeResult) -> Callable[[np.ndarray], np.ndarray]:
    """t ↦ seconds before t during which any stage of the exchange was busy (union over stages)."""
    spans = sorted(span for stage in result.busy for span in stage)
    merged: list[list[float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    starts = np.asarray([m[0] for m in merged])
    ends = np.asarray([m[1] for m in merged])

    def until(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        if not merged:
            return np.zeros_like(t)
        covered = np.minimum(ends[None, :], t.reshape(-1, 1)) - starts[None, :]
        return np.asarray(np.clip(covered, 0.0, None).sum(axis=1).reshape(t.shape))

    return until


@dataclass(frozen=True, slots=True)
class IterationInputs:
    """Everything `simulate` takes besides the fleet, in one value: the optimizer and the band simulate
    many fleets (or one fleet under a slower bandwidth model) with the same inputs. Fields as in
    `simulate`."""

    bandwidth: BusBandwidthModel
    seed: int = 0
    straggler_iters: int = 100
    mc_samples: int = 0
    comm: CommMode = CommMode.ALLREDUCE
    ps_servers: int = 1
    config: SimConfig = SERVED
    kernel: Kernel = "auto"
    geo: GeoContext | None = None
    read_gbps: float | None = None
    # The node efficiency η per GPU link class (`srift.sim.node_scaling`): the shipped table unless a caller
    # passes another (the fit of η simulates without it, a leave-one-GPU-out check with a refitted one).
    node_efficiency: NodeEfficiency = field(default_factory=shipped_node_efficiency)


def simulate(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int = 0,
    straggler_iters: int = 100,
    mc_samples: int = 0,
    comm: CommMode = CommMode.ALLREDUCE,
    ps_servers: int = 1,
    config: SimConfig = SERVED,
    kernel: Kernel = "auto",
    geo: GeoContext | None = None,
    read_gbps: float | None = None,
    node_efficiency: NodeEfficiency | None = None,
    iterations: int = 1,
    runs: int = 1,
    band: bool = True,
) -> IterationEstimate:
    """Predict one training iteration of `fleet`: mean seconds, p10/p50/p90, breakdown and sources.

    `seed` makes the answer reproducible; `comm` picks ring allreduce (Srift) or parameter servers (Li et al.,
    `ps_servers` servers, see `srift.sim.ps`). `config` says how gradients are exchanged: by default
    (`SERVED`) in PyTorch DDP's buckets (see `srift.sim.layers`), or layer by layer as the Srift paper models
    it (`PER_LAYER`); every product answer and `srift validate` use the same one. `kernel` picks the
    exchange's stage implementation (see `srift.sim.exchange`). `geo` gives the links between locations and
    the allreduce pattern for fleets that span several (default: the shipped facts, flat ring); `read_gbps`
    the read rate of each VM's input pipeline (default: its network); `node_efficiency` the η that divides
    the compute of nodes of several GPUs (`srift.sim.node_scaling`; default: the shipped table).

    p10/p50/p90 describe the mean iteration time of `iterations` iterations over `runs` runs taken at
    independent times (1: one job; a validation case averages its repeats): the band of
    `srift.sim.band`, built from every measured spread the prediction rests on (p50 is the prediction).
    `band=False` skips the band's extra simulations (p10 = p50 = p90 = the prediction, `band` None), for
    callers that need it only for some fleets (the optimizer). Raises InvalidInput for a fleet that cannot
    run. `simulate_with` takes the same inputs as one `IterationInputs`.
    """
    inputs = IterationInputs(
        bandwidth=bandwidth,
        seed=seed,
        straggler_iters=straggler_iters,
        mc_samples=mc_samples,
        comm=comm,
        ps_servers=ps_servers,
        config=config,
        kernel=kernel,
        geo=geo,
        read_gbps=read_gbps,
        node_efficiency=shipped_node_efficiency() if node_efficiency is None else node_efficiency,
    )
    return simulate_with(fleet, inputs, iterations=iterations, runs=runs, band=band)


def simulate_with(
    fleet: Sequence[FleetMember],
    inputs: IterationInputs,
    *,
    iterations: int = 1,
    runs: int = 1,
    band: bool = True,
) -> IterationEstimate:
    """`simulate(fleet, ...)` with its inputs given as one `IterationInputs`."""
    _require_iterations_and_runs(iterations=iterations, runs=runs)
    point = simulation_point(fleet, inputs)
    if not band:
        return unbanded(point)
    return band_point(point, fleet, inputs, iterations=iterations, runs=runs)


def _require_iterations_and_runs(*, iterations: int, runs: int) -> None:
    if iterations < 1:
        raise InvalidInput(
            f"{iterations} is below 1", hint="ask for at least one iteration", field="iterations"
        )
    if runs < 1:
        raise InvalidInput(f"{runs} is below 1", hint="ask for at least one run", field="runs")


def simulation_point(fleet: Sequence[FleetMember], inputs: IterationInputs) -> IterationEstimate:
    """The simulation of `fleet` before its band: mean iteration, breakdown, p10/p90 of one iteration and
    the note on estimated compute. `simulate_with` is `band_point` of it (or `unbanded(it)`); callers that
    need both a fleet's estimate and its band (the optimizer's evaluator) simulate the point once."""
    point = _point(fleet, inputs)
    note = estimate_note(fleet)
    return with_warnings(point, note) if note else point


def unbanded(point: IterationEstimate) -> IterationEstimate:
    """`point` as `simulate(..., band=False)` answers it: p10 = p50 = p90 = the prediction, no band."""
    t = point.iteration_s
    return replace(point, iteration_p10_s=t, iteration_p50_s=t, iteration_p90_s=t, band=None)


def band_point(
    point: IterationEstimate,
    fleet: Sequence[FleetMember],
    inputs: IterationInputs,
    *,
    iterations: int = 1,
    runs: int = 1,
) -> IterationEstimate:
    """`point` (`simulation_point(fleet, inputs)`) with its band over `iterations` iterations of `runs`
    runs: what `simulate_with(fleet, inputs, iterations=iterations, runs=runs)` answers."""
    _require_iterations_and_runs(iterations=iterations, runs=runs)

    def run(other: Sequence[FleetMember], model: BusBandwidthModel) -> float:
        # The band's reruns: the same inputs on another fleet or bandwidth model, without Monte Carlo.
        return _point(other, replace(inputs, bandwidth=model, mc_samples=0)).iteration_s

    return banded(
        point,
        fleet,
        bandwidth=inputs.bandwidth,
        iterations=iterations,
        runs=runs,
        run=run,
        extra_terms=overlap_terms(fleet, bandwidth=inputs.bandwidth, iteration_s=point.iteration_s, run=run),
    )


def banded(
    point: IterationEstimate,
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    iterations: int,
    runs: int,
    run: Callable[[Sequence[FleetMember], BusBandwidthModel], float],
    extra_terms: Sequence[SpreadTerm] = (),
) -> IterationEstimate:
    """`point` with the band of `srift.sim.band` over `iterations` iterations of `runs` runs, each source's
    term from `run` (the simulation again with that input one spread slower); the stragglers' term from
    the point's own p10–p90 of one iteration."""
    found = band_for(
        fleet,
        bandwidth=bandwidth,
        iteration_s=point.iteration_s,
        iteration_sd_s=max(0.0, point.iteration_p90_s - point.iteration_p10_s) / (2 * Z90),
        iterations=iterations,
        runs=runs,
        run=run,
        extra_terms=tuple(extra_terms),
    )
    return with_band(point, found)


def estimate_note(fleet: Sequence[FleetMember]) -> str:
    """A warning naming the members whose compute is estimated (not measured on their GPU), or "".

    Their estimate's spread enters the band as the profile's compute spread (`ModelProfile.compute_spread`).
    """
    estimated = sorted(
        {
            f"{m.instance.name} ({m.profile.estimate.source} ±{100 * m.profile.estimate.spread:.0f} %)"
            for m in fleet
            if m.profile.estimate is not None
        }
    )
    if not estimated:
        return ""
    return (
        f"compute of {', '.join(estimated)} is estimated, not measured on that GPU: the band includes the "
        "estimate's error; profile the model there (`srift profile --device cuda`) for a measured answer"
    )


def overlap_terms(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    iteration_s: float,
    run: Callable[[Sequence[FleetMember], BusBandwidthModel], float],
) -> tuple[SpreadTerm, ...]:
    """The overlap slowdown's band term: the fleet simulated with every measured slowdown one spread
    larger (s·e^spread), as ln(T_slower / T); none when no member's profile carries a measured spread."""
    measured = [m.profile.overlap_slowdown() for m in fleet]
    if iteration_s <= 0 or not any(s > 1.0 and spread > 0 for s, spread in measured):
        return ()
    slower = [
        replace(
            m,
            profile=replace(
                m.profile,
                extra={
                    **m.profile.extra,
                    "overlap_slowdown": min(MAX_OVERLAP_SLOWDOWN, s * math.exp(spread)),
                },
            ),
        )
        if s > 1.0 and spread > 0
        else m
        for m, (s, spread) in zip(fleet, measured, strict=True)
    ]
    return (
        SpreadTerm(
            "overlap",
            max(spread for _, spread in measured),
            max(0.0, math.log(run(slower, bandwidth) / iteration_s)),
            "probes/overlap.py: backward timed alone and with a concurrent allreduce, spread over rounds",
        ),
    )


class Members(NamedTuple):
    """Each member's mean compute at its per-device batch (its profile's forward and backward, divided by
    the node efficiency η on nodes of several GPUs: `srift.sim.node_scaling`, the table the simulation's
    inputs carry), and what its straggler draws are keyed by."""

    # Forward, with the training loop's own overhead (it runs before forward).
    fw_s: list[float]
    bw_s: list[float]
    # fw_s + bw_s.
    means_s: list[float]
    cvs: list[float]
    counts: list[int]
    keys: list[int]
    # The member with the largest mean compute.
    slow: int

    @classmethod
    def of(cls, fleet: Sequence[FleetMember], *, distributed: bool, efficiency: NodeEfficiency) -> Members:
        # η: the node's DDP efficiency the simulation does not explain (`efficiency`, a table of
        # `srift.sim.node_scaling`); 1 on one-GPU, CPU and testbed nodes, whose compute stays the profile's.
        eta = [efficiency.of(m.instance) for m in fleet]
        fw = [
            _per_eta(m.profile.forward.time_s(m.per_device_batch), e)
            + m.profile.loop_overhead_s(distributed=distributed)
            for m, e in zip(fleet, eta, strict=True)
        ]
        bw = [
            _per_eta(m.profile.backward.time_s(m.per_device_batch), e)
            for m, e in zip(fleet, eta, strict=True)
        ]
        means = [f + b for f, b in zip(fw, bw, strict=True)]
        return cls(
            fw_s=fw,
            bw_s=bw,
            means_s=means,
            cvs=[m.profile.straggler_cv for m in fleet],
            counts=[m.count for m in fleet],
            keys=member_keys(fleet),
            slow=max(range(len(fleet)), key=means.__getitem__),
        )


def _per_eta(time_s: float, eta: float) -> float:
    """`time_s` / `eta`, and `time_s` itself where η is 1 (no float operation on uncorrected nodes)."""
    return time_s if eta == 1.0 else time_s / eta


class ComputePhase(NamedTuple):
    """The compute phase over `straggler_iters` iterations of straggler draws."""

    # Each iteration's slowest VM of the whole fleet.
    per_iteration_s: np.ndarray
    # Each member's mean slowest-VM time over its mean compute (≥ 1): how much its stragglers stretch it.
    rho: list[float]
    # C̄: the mean of `per_iteration_s`, never below any member's stretched mean.
    end_s: float


def compute_phase(members: Members, *, seed: int, iters: int) -> ComputePhase:
    """Each member's straggler draws over `iters` iterations, the fleet's slowest VM per iteration, and the
    phase's end C̄ (module docstring); the sharded simulator's compute phase is this one too."""
    rows = straggler_rows(members.means_s, members.cvs, members.counts, members.keys, seed=seed, iters=iters)
    per_iteration = rows[0] if len(rows) == 1 else functools.reduce(np.maximum, rows)
    row_means = [float(row.sum()) / iters for row in rows]
    means = members.means_s
    rho = [max(1.0, row_means[i] / means[i]) if means[i] > 0 else 1.0 for i in range(len(means))]
    end_s = max(float(per_iteration.sum()) / iters, max(r * m for r, m in zip(rho, means, strict=True)))
    return ComputePhase(per_iteration, rho, end_s)


class _Layout(NamedTuple):
    """The exchange's layers (in the first member's order), stages, and each member's ready fractions."""

    canon: LayerArrays
    plans: list[StagePlan]
    # Flat ring across locations: the share of each class's network time spent on links between them.
    link_share: list[float] | None
    ready: list[np.ndarray]
    members: Members

    @property
    def stages(self) -> list[Stage]:
        return [p.stage for p in self.plans]

    @property
    def presorted(self) -> bool:
        """One member: arrivals follow the (sorted) ready fractions, so they are already in order."""
        return len(self.ready) == 1 and self.ready[0] is self.canon.ready_frac

    def arrivals(self, factors: Sequence[float]) -> np.ndarray:
        """When each layer is ready on every member: the latest over members of factor·(fw + ready·bw)."""
        fw, bw, ready = self.members.fw_s, self.members.bw_s, self.ready
        out = factors[0] * (fw[0] + ready[0] * bw[0])
        for i in range(1, len(ready)):
            out = np.maximum(out, factors[i] * (fw[i] + ready[i] * bw[i]))
        return np.asarray(out)


def _layout(fleet: Sequence[FleetMember], members: Members, inputs: IterationInputs) -> _Layout:
    canon = layer_arrays(fleet[0].profile)
    plans, link_share = stage_plans(fleet, canon, inputs.bandwidth, geo=inputs.geo)
    ready = [canon.aligned_ready_frac(layer_arrays(m.profile)) for m in fleet]
    return _Layout(canon, plans, link_share, ready, members)


class _Timeline(NamedTuple):
    """The exchange as it ran after the compute phase's arrivals, with the overlap's slowdowns."""

    # None when there is nothing to exchange (no stage, or no layer).
    result: ExchangeResult | None
    # When each member's compute ends (its backward stretched while the exchange was busy).
    member_end_s: list[float]
    # How much later the slowest-ending member finishes its compute for that stretch.
    overlap_s: float


def _timeline(
    fleet: Sequence[FleetMember], layout: _Layout, phase: ComputePhase, kernel: Kernel
) -> _Timeline:
    """Run the exchange on the compute phase's arrivals. Where a member's backward runs slower while the
    exchange is busy (`overlap_slowdown`), the exchange is first run to find when it is busy, the arrivals
    stretched, and the exchange run again; where the exchange runs slower while members compute
    (`comm_overlap_slowdown`), that last run happens on the warped clock (srift.sim.overlap)."""
    fw, means, rho = layout.members.fw_s, layout.members.means_s, phase.rho
    member_end_s = [r * m for r, m in zip(rho, means, strict=True)]
    arrivals = layout.arrivals(rho)
    stages = layout.stages
    if not stages or arrivals.size == 0:
        return _Timeline(None, member_end_s, 0.0)
    slowdowns = [m.profile.overlap_slowdown()[0] for m in fleet]
    overlap_s = 0.0
    presorted = layout.presorted
    if max(slowdowns) > 1.0:
        first = _exchange(arrivals, layout.canon, stages, presorted=presorted, kernel=kernel)
        assert first is not None
        busy_until = _busy_until(first)
        starts = [r * f for r, f in zip(rho, fw, strict=True)]

        def stretched(i: int, t: np.ndarray) -> np.ndarray:
            """Member i's times t (from the iteration's start) with its backward slowed while busy: each
            second the exchange was busy between the member's backward start and t adds slowdown − 1."""
            return np.asarray(
                t + (slowdowns[i] - 1.0) * (busy_until(t) - busy_until(np.asarray([starts[i]]))[0])
            )

        # Each layer is ready when the last member has produced it on its stretched clock; each member's
        # compute ends later by its stretch, and overlap_s is the largest such delay.
        ready, bw = layout.ready, layout.members.bw_s
        arrivals = functools.reduce(
            np.maximum,
            [stretched(i, np.asarray(rho[i] * (fw[i] + ready[i] * bw[i]))) for i in range(len(fleet))],
        )
        member_end_s = [float(stretched(i, np.asarray([e]))[0]) for i, e in enumerate(member_end_s)]
        overlap_s = max(end - rho[i] * means[i] for i, end in enumerate(member_end_s))
        presorted = False
    warp = CommWarp.of(member_end_s, [m.profile.comm_overlap_slowdown() for m in fleet])
    if warp is None:
        result = _exchange(arrivals, layout.canon, stages, presorted=presorted, kernel=kernel)
    else:
        warped = _exchange(warp.to_work(arrivals), layout.canon, stages, kernel=kernel)
        assert warped is not None
        result = warp.result_to_wall(warped)
    return _Timeline(result, member_end_s, overlap_s)


def _exposed_split(
    result: ExchangeResult | None, layout: _Layout, *, exposed_s: float, compute_end_s: float
) -> tuple[float, float]:
    """(exposed_network_s, exposed_location_s): the parts of the `exposed_s` seconds after the compute
    phase (ending at `compute_end_s`) during which the network stage, and the links between locations,
    were busy. The location part is a part of the network part; the rest of `exposed_s` is intra-node."""
    if result is None:
        return 0.0, 0.0
    plans = layout.plans
    net_index = next((i for i, p in enumerate(plans) if p.stage.name == "network"), None)
    loc_index = next((i for i, p in enumerate(plans) if p.stage.name == "location"), None)
    exposed_network = exposed_location = 0.0
    if loc_index is not None:
        # A stage of its own between locations (hierarchical pattern) counts first...
        exposed_location = min(exposed_s, result.busy_after(loc_index, compute_end_s))
    if net_index is not None:
        # ...then the network stage, in what exposed time is left.
        exposed_network = min(exposed_s - exposed_location, result.busy_after(net_index, compute_end_s))
    if layout.link_share is not None and net_index is not None:
        # Flat ring across locations: the links between locations are inside the network stage. Their part
        # of its exposed time is the part of the stage's work spent on them: each layer's time alone in the
        # stage (bits / its class's rate), summed over layers whose class the link limits (share 1), over
        # the sum over all layers.
        canon = layout.canon
        own = canon.bits / np.asarray(plans[net_index].stage.rates_bps)[canon.klass]
        linked = float(np.sum(own * np.asarray(layout.link_share)[canon.klass]))
        total = float(np.sum(own))
        exposed_location = exposed_network * (linked / total if total > 0 else 0.0)
    else:
        # The location stage's exposed time is network time too.
        exposed_network += exposed_location
    return exposed_network, exposed_location


def _monte_carlo(layout: _Layout, inputs: IterationInputs, *, update_s: float) -> tuple[float, float, float]:
    """p10/p50/p90 of one iteration over `mc_samples` draws, each with its own stragglers and each stage's
    rates scaled by a draw of its residual spread (the exchange run per draw, without the overlap)."""
    members, plans, samples_n, seed = layout.members, layout.plans, inputs.mc_samples, inputs.seed
    means = members.means_s
    rows = straggler_rows(
        means, members.cvs, members.counts, members.keys, seed=seed, iters=samples_n, stream=1
    )
    factors = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, 2]).normal(
        1.0, 1.0, size=(samples_n, len(plans))
    )
    samples = np.empty(samples_n)
    for s in range(samples_n):
        scale = [
            max(MIN_BANDWIDTH_FACTOR, 1.0 + (f - 1.0) * p.residual_cv)
            for f, p in zip(factors[s], plans, strict=True)
        ]
        scaled = [
            Stage(st.name, tuple(r * k for r in st.rates_bps), st.cap_bps * k)
            for st, k in zip(layout.stages, scale, strict=True)
        ]
        # This draw's slowest VM of each member over the member's mean: its arrivals' stretch.
        iteration_rho = [float(rows[i][s]) / means[i] if means[i] > 0 else 1.0 for i in range(len(means))]
        sample = _exchange(
            layout.arrivals(iteration_rho),
            layout.canon,
            scaled,
            presorted=layout.presorted,
            kernel=inputs.kernel,
        )
        # The draw's iteration: its slowest VM or its exchange, whichever ends later, then the update.
        slowest = max(float(row[s]) for row in rows)
        samples[s] = max(slowest, sample.end_s if sample is not None else 0.0) + update_s
    return quantiles(samples)


def require_straggler_iters(straggler_iters: int) -> None:
    """InvalidInput unless 1 ≤ `straggler_iters` ≤ MAX_STRAGGLER_ITERS (each simulator averages over them)."""
    require_within(
        straggler_iters,
        1,
        MAX_STRAGGLER_ITERS,
        field="straggler_iters",
        hint="100 is plenty",
        what="straggler_iters",
    )


def _checked(fleet: Sequence[FleetMember], inputs: IterationInputs) -> Sequence[FleetMember]:
    """The fleet, validated, its layers in DDP's buckets where the configuration uses them."""
    validate_fleet(fleet)
    cap_bytes = inputs.config.bucket_cap_bytes
    if cap_bytes is not None and CommMode(inputs.comm) is CommMode.ALLREDUCE:
        fleet = with_buckets(fleet, cap_bytes=cap_bytes)
    require_straggler_iters(inputs.straggler_iters)
    require_within(
        inputs.mc_samples,
        0,
        MAX_MC_SAMPLES,
        field="mc_samples",
        hint="use 0 (no Monte Carlo) or a few hundred",
        what="mc_samples",
    )
    return fleet


def _profile_sources(fleet: Sequence[FleetMember]) -> tuple[str, ...]:
    return tuple(
        dict.fromkeys(
            f"profile:{m.profile.model}@{m.profile.accelerator}"
            + (f" ({m.profile.estimate.source})" if m.profile.estimate is not None else "")
            for m in fleet
        )
    )


def _parameter_server(
    fleet: Sequence[FleetMember], inputs: IterationInputs, members: Members, profile_sources: tuple[str, ...]
) -> IterationEstimate:
    from srift.sim.ps import simulate_ps

    if spans_locations(fleet):
        raise InvalidInput(
            "parameter-server mode does not model fleets across locations",
            hint="use allreduce for fleets that span regions or clouds",
            field="comm",
        )
    return simulate_ps(
        fleet,
        bandwidth=inputs.bandwidth,
        seed=inputs.seed,
        fw_s=members.fw_s,
        bw_s=members.bw_s,
        keys=members.keys,
        servers=inputs.ps_servers,
        mc_samples=inputs.mc_samples,
        profile_sources=profile_sources,
    )


def _point(fleet: Sequence[FleetMember], inputs: IterationInputs) -> IterationEstimate:
    """The simulation itself: mean iteration, breakdown, and p10/p90 of *one* iteration (straggler draws,
    with `mc_samples` the exchange per draw), which `simulate` turns into the band's stragglers term."""
    fleet = _checked(fleet, inputs)
    distributed = communicates(fleet)
    members = Members.of(fleet, distributed=distributed, efficiency=inputs.node_efficiency)
    profile_sources = _profile_sources(fleet)
    if CommMode(inputs.comm) is CommMode.PARAMETER_SERVER:
        return _parameter_server(fleet, inputs, members, profile_sources)
    phase = compute_phase(members, seed=inputs.seed, iters=inputs.straggler_iters)
    layout = _layout(fleet, members, inputs)
    timeline = _timeline(fleet, layout, phase, inputs.kernel)
    result = timeline.result
    compute_end = phase.end_s + timeline.overlap_s
    # Exposed communication: how long the exchange runs on after the compute phase.
    exposed = max(compute_end, result.end_s if result is not None else 0.0) - compute_end
    update_s = max(m.profile.update_s for m in fleet)
    iteration_s = compute_end + exposed + update_s
    exposed_network, exposed_location = _exposed_split(
        result, layout, exposed_s=exposed, compute_end_s=compute_end
    )
    if inputs.mc_samples > 0 and layout.stages:
        p10, p50, p90 = _monte_carlo(layout, inputs, update_s=update_s)
    else:
        p10, p50, p90 = (q + exposed + update_s for q in quantiles(phase.per_iteration_s))
    data_s, slow_feeder = data_time_s(fleet, read_gbps=inputs.read_gbps)
    data_stall = max(0.0, data_s - iteration_s)
    if data_stall > 0:
        p10, p50, p90 = (max(q, data_s) for q in (p10, p50, p90))
        iteration_s = data_s
    compute_s = members.means_s[members.slow]
    communication_s = result.busy_total() if result is not None else 0.0
    granularity = granularity_of(compute_s=compute_s, communication_s=communication_s)
    warnings = [w for p in layout.plans for w in p.warnings]
    if data_stall > 0 and slow_feeder is not None:
        rate = feed_rate(fleet[slow_feeder], read_gbps=inputs.read_gbps)
        assert rate is not None
        warnings.append(stall_warning(fleet[slow_feeder], rate, iteration_s=iteration_s - data_stall))
    if granularity < 1.0:
        warnings.append(
            f"granularity {granularity:.2f} < 1: gradient exchange ({communication_s:.3g} s) outlasts "
            f"compute ({compute_s:.3g} s); the fleet is communication-bound: fewer or better-connected VMs, "
            "or a larger batch per VM, would use it better"
        )
    breakdown = Breakdown(
        forward_s=members.fw_s[members.slow],
        backward_s=members.bw_s[members.slow],
        compute_s=compute_s + timeline.overlap_s + update_s,
        straggler_wait_s=compute_end - compute_s - timeline.overlap_s,
        exposed_intra_s=exposed - exposed_network,
        exposed_network_s=exposed_network,
        communication_s=communication_s,
        granularity=granularity,
        warnings=tuple(warnings),
        update_s=update_s,
        data_stall_s=data_stall,
        exposed_location_s=exposed_location,
    )
    sources = profile_sources + tuple(dict.fromkeys(s for p in layout.plans for s in p.sources))
    if distributed:
        sources = (*sources, inputs.config.label())
    return IterationEstimate(iteration_s, p10, p50, p90, breakdown, sources)


def with_buckets(fleet: Sequence[FleetMember], *, cap_bytes: int) -> list[FleetMember]:
    """The fleet with every member's layers merged into DDP buckets (grouped as the first member's)."""
    groups = bucket_groups(fleet[0].profile, cap_bytes=cap_bytes)
    return [replace(m, profile=bucketed(m.profile, groups)) for m in fleet]


def with_warnings(estimate: IterationEstimate, *extra: str) -> IterationEstimate:
    """The same estimate with more warnings in its breakdown."""
    return replace(
        estimate, breakdown=replace(estimate.breakdown, warnings=(*estimate.breakdown.warnings, *extra))
    )


__all__ = [
    "IterationInputs",
    "StagePlan",
    "band_point",
    "simulate",
    "simulate_with",
    "simulation_point",
    "unbanded",
    "validate_fleet",
    "with_band",
    "with_buckets",
    "with_warnings",
]
