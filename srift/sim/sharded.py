"""One iteration of sharded data parallelism (ZeRO-1, ZeRO-2 / SHARD_GRAD_OP, FSDP full and hybrid sharding).

DDP is `srift.sim.simulate` (the served model) and stays so; this module adds the other strategies of
`srift.domain.sharding`.

ZeRO-1 (`ZeroRedundancyOptimizer` over DDP) is DDP's iteration with the optimizer step on 1/n of the
parameters, then the updated parameters all-gathered (each rank broadcasts its shard: PyTorch's
ZeroRedundancyOptimizer `_sync_params`), not overlapped with compute.

FSDP (`timeline`). Units are the model's repeated blocks plus the root (`srift.domain.sharding.fsdp_units`);
each stretch of forward and backward compute belongs to one unit. PyTorch issues every collective of a
process group on one NCCL stream, in the same program order on every rank, so a level's collectives run one
after another in issue order, each starting when the last rank has issued it and the previous one is done.
As FSDP2 schedules them (PyTorch FSDP2 design, pytorch/pytorch#114299; Zhao et al. 2023, §3.3–3.4):

- forward: the root is all-gathered first; when a unit's compute starts, the next unit's all-gather is
  issued (implicit prefetch: at most the current unit and the next are gathered), and a unit's compute
  starts once its own all-gather is done;
- backward, under full or hybrid sharding: blocks freed after forward are all-gathered again, the next
  one's issued when a unit's backward starts (backward prefetch); the root stays gathered. Under ZeRO-2
  (`reshard_after_forward=False`) nothing is gathered again;
- when a unit's backward is done its gradients are reduce-scattered (and, under hybrid sharding, the
  shard then allreduced across nodes on the replicate group's own stream);
- with activation checkpointing each block's forward runs again inside its backward (recomputation);
- the optimizer steps on the shard (the profile's update time × 1/shard ranks) once every gradient is
  reduced.

A collective of S bytes takes S·factor / busbw (nccl-tests' bus bandwidth, `Collective.bus_factor`); the
bus bandwidth is the model's for that collective at S rounded up to a power of two, for a mixed fleet the
slowest type's. Levels: with full sharding one ring over every rank (the model's answer for n ranks on N
nodes is already bounded by the slower of the node's links and the network); under hybrid sharding the
all-gathers and reduce-scatters run inside each node (n = its GPUs, one node) and the allreduce of the
shards across nodes (one rank per node: the g shards' allreduces share each node's NIC, which carries
what one allreduce of the whole unit would). Straggling is the served model's: each member's compute is
its mean stretched by the expected slowest-of-its-VMs factor (`srift.sim.compute`). Compute and
collectives slow each other as the served model has them do for DDP (`srift.sim.overlap`: the profiles'
measured `overlap_slowdown` and `comm_overlap_slowdown`), through a few passes of the timeline. A
strategy's own CPU work per iteration (FSDP2's hooks and copies), where measured (`OVERHEAD_KEY`), runs
within the units' compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from srift.bandwidth.collectives import collective_time_s
from srift.domain import Breakdown, BusBandwidthModel, FleetMember, InstanceType, ModelProfile
from srift.domain.bandwidth import BusbwQuery, Collective
from srift.domain.sharding import (
    REDUCE_BYTES,
    Segment,
    Setup,
    Strategy,
    Units,
    fsdp_units,
    is_mixed,
)
from srift.errors import InvalidInput
from srift.sim.exchange import covered_s
from srift.sim.iteration import (
    Members,
    banded,
    compute_phase,
    quantiles,
    require_straggler_iters,
    validate_fleet,
)
from srift.sim.network import pow2_ceil
from srift.sim.node_scaling import shipped_node_efficiency
from srift.sim.result import IterationEstimate, granularity_of

SHARD_LEVEL = "shard"
REPLICATE_LEVEL = "replicate"


# -- the timeline ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UnitComm:
    """Seconds of one unit's collectives: all-gather before forward and (when resharded) before backward,
    reduce-scatter after backward, and under hybrid sharding the allreduce across nodes after that."""

    all_gather_s: float
    reduce_scatter_s: float
    allreduce_s: float = 0.0


@dataclass(frozen=True, slots=True)
class MemberCompute:
    """One member's compute per iteration: forward, backward and recomputation (checkpointed blocks'
    forward again), and its optimizer step on the shard."""

    forward_s: float
    backward_s: float
    recompute_s: float = 0.0
    update_s: float = 0.0
    overhead_s: float = 0.0
    """The strategy's own CPU work per iteration (FSDP2's hooks, copy-in and copy-out), spread over the
    units' forward and backward stretches, half each."""

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s


@dataclass(slots=True)
class Timeline:
    """What `timeline` computed: the iteration's end, when compute ended, each level's busy spans, and
    (when asked) a log of (time, event, unit) entries."""

    iteration_s: float
    backward_end_s: float
    busy: dict[str, list[tuple[float, float]]]
    log: list[tuple[float, str, int]] = field(default_factory=list)


Spans = list[tuple[float, float]]


def merged(spans: Sequence[tuple[float, float]]) -> Spans:
    """The union of `spans` as sorted, disjoint spans."""
    out: Spans = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        elif end > start:
            out.append((start, end))
    return out


def stretched_end(start_s: float, work_s: float, slow: Sequence[tuple[float, float]], factor: float) -> float:
    """When `work_s` seconds of work started at `start_s` are done, running `factor` times slower inside
    the (merged) `slow` spans and at full speed outside them."""
    if factor <= 1.0 or work_s <= 0:
        return start_s + max(work_s, 0.0)
    t, left = start_s, work_s
    for a, b in slow:
        if b <= t:
            continue
        if a > t:
            if left <= a - t:
                return t + left
            left -= a - t
            t = a
        room = (b - t) / factor
        if left <= room:
            return t + left * factor
        left -= room
        t = b
    return t + left


class _Queue:
    """One level's NCCL stream: collectives in issue order, each after the previous one; a collective
    runs `slowdown` times slower while compute runs (`compute` spans, from the previous pass)."""

    def __init__(
        self,
        name: str,
        log: list[tuple[float, str, int]] | None,
        *,
        compute: Sequence[tuple[float, float]] = (),
        slowdown: float = 1.0,
    ) -> None:
        self.name = name
        self.free_s = 0.0
        self.busy: Spans = []
        self.log = log
        self.compute = compute
        self.slowdown = slowdown

    def run(self, what: str, unit: int, *, issued_s: float, seconds: float) -> float:
        if seconds <= 0:
            return issued_s
        start = max(issued_s, self.free_s)
        self.free_s = stretched_end(start, seconds, self.compute, self.slowdown)
        self.busy.append((start, self.free_s))
        if self.log is not None:
            self.log.append((start, f"{what}_start", unit))
            self.log.append((self.free_s, f"{what}_done", unit))
        return self.free_s


OVERLAP_PASSES = 4
"""Passes of the timeline when compute and collectives slow each other: each pass slows them inside the
other's spans of the pass before (a fixed point; with no slowdown one pass is exact)."""


def timeline(
    segments: Sequence[Segment],
    members: Sequence[MemberCompute],
    comm: Sequence[UnitComm],
    *,
    reshard_after_forward: bool,
    recompute_units: frozenset[int] = frozenset(),
    log: list[tuple[float, str, int]] | None = None,
    comm_slowdown: float = 1.0,
    compute_slowdowns: Sequence[float] = (),
) -> Timeline:
    """One FSDP iteration (module docstring). `segments` is the backward pass in order (shares of each
    member's backward; the forward runs them reversed, with the same shares of its forward); `comm[u]`
    unit u's collectives; unit 0 is the root, gathered once and kept. `recompute_units` are the
    checkpointed units, whose share of each member's forward (`recompute_s` over their shares) runs again
    at the start of their backward stretch. As the served simulator does for DDP (srift.sim.overlap), a
    collective runs `comm_slowdown` times slower while any member computes, and member m computes
    `compute_slowdowns[m]` times slower while a collective runs (both measured by probes/overlap.py; 1:
    not slowed)."""
    slowed = comm_slowdown > 1.0 or any(f > 1.0 for f in compute_slowdowns)
    compute: Spans = []
    busy: Spans = []
    found: Timeline | None = None
    for pass_no in range(OVERLAP_PASSES if slowed else 1):
        last = pass_no == (OVERLAP_PASSES if slowed else 1) - 1
        found, compute_spans = _pass(
            segments,
            members,
            comm,
            reshard_after_forward=reshard_after_forward,
            recompute_units=recompute_units,
            log=log if last else None,
            compute=compute,
            comm_busy=busy,
            comm_slowdown=comm_slowdown,
            compute_slowdowns=compute_slowdowns,
        )
        compute = merged(compute_spans)
        busy = merged([span for spans in found.busy.values() for span in spans])
    assert found is not None
    return found


def _pass(
    segments: Sequence[Segment],
    members: Sequence[MemberCompute],
    comm: Sequence[UnitComm],
    *,
    reshard_after_forward: bool,
    recompute_units: frozenset[int],
    log: list[tuple[float, str, int]] | None,
    compute: Sequence[tuple[float, float]],
    comm_busy: Sequence[tuple[float, float]],
    comm_slowdown: float,
    compute_slowdowns: Sequence[float],
) -> tuple[Timeline, Spans]:
    """One pass of `timeline`, with the other's spans of the pass before."""
    shard = _Queue(SHARD_LEVEL, log, compute=compute, slowdown=comm_slowdown)
    replicate = _Queue(REPLICATE_LEVEL, log, compute=compute, slowdown=comm_slowdown)
    m_count = len(members)
    factors = [compute_slowdowns[m] if m < len(compute_slowdowns) else 1.0 for m in range(m_count)]
    forward = list(reversed(segments))
    ckpt_share = sum(s.share for s in segments if s.unit in recompute_units)
    gathered: dict[int, float] = {}
    spans: Spans = []

    def work(m: int, start_s: float, seconds: float) -> float:
        end_s = stretched_end(start_s, seconds, comm_busy, factors[m])
        spans.append((start_s, end_s))
        return end_s

    def gather(into: dict[int, float], event: str, unit: int, issued_s: float) -> None:
        """All-gather `unit` (once per `into`: when its parameters are gathered)."""
        if unit not in into:
            into[unit] = shard.run(event, unit, issued_s=issued_s, seconds=comm[unit].all_gather_s)

    def prefetch(
        order: Sequence[Segment], k: int, into: dict[int, float], event: str, issued_s: float
    ) -> None:
        """All-gather the first unit after position `k` of `order` that `into` lacks (FSDP2's prefetch)."""
        ahead = _next_new(order, k, into)
        if ahead is not None:
            gather(into, event, ahead, issued_s)

    gather(gathered, "ag", 0, 0.0)
    end = [0.0] * m_count
    for k, seg in enumerate(forward):
        issued = max(end)
        gather(gathered, "ag", seg.unit, issued)
        start = [max(end[m], gathered[seg.unit]) for m in range(m_count)]
        prefetch(forward, k, gathered, "ag", max(start))
        if log is not None:
            log.append((max(start), "fw_start", seg.unit))
        end = [
            work(m, start[m], seg.share * (members[m].forward_s + members[m].overhead_s / 2))
            for m in range(m_count)
        ]
    forward_end = max(end)
    if log is not None:
        log.append((forward_end, "fw_done", -1))

    # Gathered again for backward (the root stays gathered from forward).
    regather: dict[int, float] = {0: gathered[0]} if reshard_after_forward else {}
    last_of = {seg.unit: k for k, seg in enumerate(segments)}
    reduced = [0.0]
    for k, seg in enumerate(segments):
        if reshard_after_forward:
            gather(regather, "ag_bw", seg.unit, max(end))
        ready = regather.get(seg.unit, 0.0)
        start = [max(end[m], ready) for m in range(m_count)]
        if reshard_after_forward:
            prefetch(segments, k, regather, "ag_bw", max(start))
        if log is not None:
            log.append((max(start), "bw_start", seg.unit))
        extra = [
            members[m].recompute_s * seg.share / ckpt_share
            if seg.unit in recompute_units and ckpt_share
            else 0.0
            for m in range(m_count)
        ]
        end = [
            work(m, start[m], extra[m] + seg.share * (members[m].backward_s + members[m].overhead_s / 2))
            for m in range(m_count)
        ]
        if last_of[seg.unit] == k:
            done = shard.run("rs", seg.unit, issued_s=max(end), seconds=comm[seg.unit].reduce_scatter_s)
            done = replicate.run("ar", seg.unit, issued_s=done, seconds=comm[seg.unit].allreduce_s)
            reduced.append(done)
    backward_end = max(end)
    step_start = max(backward_end, *reduced, shard.free_s, replicate.free_s)
    iteration = step_start + max((m.update_s for m in members), default=0.0)
    if log is not None:
        log.append((backward_end, "bw_done", -1))
        log.append((step_start, "step_start", -1))
        log.append((iteration, "step_done", -1))
        log.sort(key=lambda entry: entry[0])
    found = Timeline(
        iteration_s=iteration,
        backward_end_s=backward_end,
        busy={SHARD_LEVEL: shard.busy, REPLICATE_LEVEL: replicate.busy},
        log=log if log is not None else [],
    )
    return found, spans


def _next_new(order: Sequence[Segment], k: int, done: dict[int, float]) -> int | None:
    """The first unit after position `k` of `order` not in `done`: the one to prefetch."""
    for seg in order[k + 1 :]:
        if seg.unit not in done:
            return seg.unit
    return None


# -- the fleet's collectives --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ring:
    """A level's ranks, nodes and instance types, and the bus bandwidth model's answers on it."""

    ranks: int
    nodes: int
    types: tuple[InstanceType, ...]

    def times_s(
        self,
        bandwidth: BusBandwidthModel,
        collective: Collective,
        buffers: Sequence[float],
        *,
        message_div: int = 1,
    ) -> tuple[list[float], tuple[str, ...]]:
        """Seconds of `collective` on each buffer (bytes), at the slowest type's bus bandwidth for the
        buffer (divided by `message_div`, the message each rank group sends) rounded up to a power of two."""
        if self.ranks < 2 or not buffers:
            return [0.0] * len(buffers), ()
        sizes = [pow2_ceil(max(1, int(b // message_div))) for b in buffers]
        distinct = sorted(set(sizes))
        slowest: dict[int, float] = {}
        sources: list[str] = []
        for instance in self.types:
            est = BusbwQuery(instance, self.ranks, self.nodes, tuple(distinct)).ask_collective(
                bandwidth, collective
            )
            sources.append(est.source)
            for size, value in zip(distinct, est.busbw_gbps, strict=True):
                good = value if math.isfinite(value) and value > 0 else 1e-6
                slowest[size] = min(slowest.get(size, math.inf), good)
        ask = getattr(bandwidth, "mixed_ring_factors", None)
        if len(self.types) >= 2 and self.nodes >= 2 and callable(ask):
            # What a ring of these types measured against its slowest type alone (allreduce probes,
            # srift.bandwidth.mixed): the same links carry the other collectives.
            factors = ask(instances=self.types, nodes=self.nodes, buffer_bytes=distinct)
            if factors is not None and len(factors) == len(distinct):
                slowest = {size: slowest[size] * float(f) for size, f in zip(distinct, factors, strict=True)}
                sources.append(f"mixed-ring:{'+'.join(sorted(t.name for t in self.types))}")
        out = [
            collective_time_s(
                collective=collective, buffer_bytes=b, world_size=self.ranks, busbw_gbps=slowest[s]
            )
            for b, s in zip(buffers, sizes, strict=True)
        ]
        return out, tuple(dict.fromkeys(sources))


def _types(fleet: Sequence[FleetMember]) -> tuple[InstanceType, ...]:
    return tuple({(m.instance.provider, m.instance.name): m.instance for m in fleet}.values())


def unit_comm(
    fleet: Sequence[FleetMember], units: Units, setup: Setup, *, bandwidth: BusBandwidthModel
) -> tuple[list[UnitComm], tuple[str, ...]]:
    """Each unit's collective times on this fleet, and the bandwidth answers they rest on."""
    mixed = is_mixed(fleet[0].profile)
    working = (2 if mixed else 4) / 4
    nodes = sum(m.count for m in fleet)
    ranks = sum(m.count * m.instance.devices for m in fleet)
    types = _types(fleet)
    gathered = [working * b for b in units.parameter_bytes]
    reduced = [REDUCE_BYTES / 4 * b for b in units.parameter_bytes]
    if setup.strategy is Strategy.HYBRID:
        per_node = {m.instance.devices for m in fleet}
        if len(per_node) != 1:
            raise InvalidInput(
                "hybrid sharding needs the same number of GPUs on every VM (one shard group per node)",
                hint="use full_shard for fleets of types with different GPU counts",
                field="strategy",
            )
        g = per_node.pop()
        shard = Ring(g, 1, types)
        replicate = Ring(nodes, nodes, types)
    else:
        g = 1
        shard = Ring(ranks, nodes, types)
        replicate = Ring(1, 1, types)
    ag, s1 = shard.times_s(bandwidth, Collective.ALL_GATHER, gathered)
    rs, s2 = shard.times_s(bandwidth, Collective.REDUCE_SCATTER, reduced)
    ar, s3 = replicate.times_s(bandwidth, Collective.ALLREDUCE, reduced, message_div=g)
    comm = [UnitComm(a, r, x) for a, r, x in zip(ag, rs, ar, strict=True)]
    return comm, tuple(dict.fromkeys((*s1, *s2, *s3)))


# -- the iteration -------------------------------------------------------------------------------------


OVERHEAD_KEY = "sharded_overhead_s"
"""`extra["sharded_overhead_s"]` of a profile: {strategy: seconds per iteration} the strategy's own CPU
work adds on that instance type (one rank under it against the plain model, at the profile's batch),
measured by `srift validate` for its sharded cases; `srift profile` does not measure it, so plans take 0
(on a GPU the host runs it ahead of the device)."""


def strategy_overhead_s(profile: ModelProfile, strategy: Strategy) -> float:
    """The measured per-iteration CPU overhead of `strategy` in `profile` (0 when not measured)."""
    found = (profile.extra or {}).get(OVERHEAD_KEY)
    value = found.get(strategy.value) if isinstance(found, dict) else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else 0.0


def shard_ranks(fleet: Sequence[FleetMember], strategy: Strategy) -> int:
    """Ranks one shard is spread over: every rank, or under hybrid sharding a node's GPUs."""
    if strategy is Strategy.HYBRID:
        return max(1, min(m.instance.devices for m in fleet))
    if strategy is Strategy.DDP:
        return 1
    return sum(m.count * m.instance.devices for m in fleet)


def simulate_sharded(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    setup: Setup,
    seed: int = 0,
    straggler_iters: int = 100,
    iterations: int = 1,
    runs: int = 1,
    band: bool = True,
    log: list[tuple[float, str, int]] | None = None,
) -> IterationEstimate:
    """Predict one iteration of `fleet` trained under `setup` (not DDP: that is `srift.sim.simulate`).
    `band` as in `simulate`; `log` collects the FSDP timeline's events."""
    if setup.strategy is Strategy.DDP:
        raise InvalidInput("DDP is the served simulator's", hint="call srift.sim.simulate", field="strategy")
    require_straggler_iters(straggler_iters)
    point = _point(
        fleet, bandwidth=bandwidth, setup=setup, seed=seed, straggler_iters=straggler_iters, log=log
    )
    if not band:
        return point

    def run(other: Sequence[FleetMember], model: BusBandwidthModel) -> float:
        return _point(
            other, bandwidth=model, setup=setup, seed=seed, straggler_iters=straggler_iters
        ).iteration_s

    return banded(point, fleet, bandwidth=bandwidth, iterations=iterations, runs=runs, run=run)


def _point(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    setup: Setup,
    seed: int,
    straggler_iters: int,
    log: list[tuple[float, str, int]] | None = None,
) -> IterationEstimate:
    validate_fleet(fleet)
    if setup.strategy is Strategy.ZERO1:
        return _zero1(fleet, bandwidth=bandwidth, setup=setup, seed=seed, straggler_iters=straggler_iters)
    ranks = sum(m.count * m.instance.devices for m in fleet)
    distributed = ranks > 1
    units = fsdp_units(fleet[0].profile)
    # The served η (`srift.sim.node_scaling`): only DDP simulations are refitted or checked without it.
    computes = Members.of(fleet, distributed=distributed, efficiency=shipped_node_efficiency())
    fw, bw, means = computes.fw_s, computes.bw_s, computes.means_s
    # The served model's compute phase: no rank is done before the mean of each iteration's slowest draw
    # (`phase.end_s`); the sharded timeline never ends before it.
    phase = compute_phase(computes, seed=seed, iters=straggler_iters)
    rho = phase.rho
    blocks = frozenset(range(1, len(units.names))) if setup.checkpointing else frozenset()
    block_share = sum(s.share for s in units.segments if s.unit in blocks)
    members = _member_computes(fleet, setup, fw_s=fw, bw_s=bw, rho=rho, block_share=block_share)
    comm, comm_sources = unit_comm(fleet, units, setup, bandwidth=bandwidth)
    found = timeline(
        units.segments,
        members,
        comm,
        reshard_after_forward=setup.strategy.reshards_after_forward,
        recompute_units=blocks,
        log=log,
        comm_slowdown=max(m.profile.comm_overlap_slowdown() for m in fleet),
        compute_slowdowns=[m.profile.overlap_slowdown()[0] for m in fleet],
    )
    slow = max(range(len(fleet)), key=lambda i: fw[i] + bw[i] + fw[i] * block_share)
    update_s = max(m.update_s for m in members)
    compute_s = fw[slow] + bw[slow] + fw[slow] * block_share + members[slow].overhead_s
    straggle = max(
        0.0,
        max(m.total_s + m.overhead_s for m in members) - compute_s,
        phase.end_s - means[slow] - members[slow].overhead_s,
    )
    iteration = max(found.iteration_s, compute_s + straggle + update_s)
    exposed = max(0.0, iteration - compute_s - straggle - update_s)
    exposed_network = _exposed_network_s(found, fleet, setup, exposed_s=exposed)
    communication = covered_s(span for spans in found.busy.values() for span in spans)
    scale = compute_s / means[slow] if means[slow] > 0 else 1.0
    p10, p50, p90 = (q * scale + exposed + update_s for q in quantiles(phase.per_iteration_s))
    granularity = granularity_of(compute_s=compute_s, communication_s=communication)
    warnings = []
    if granularity < 1.0:
        warnings.append(
            f"granularity {granularity:.2f} < 1: {setup.label()}'s collectives ({communication:.3g} s) "
            f"outlast compute ({compute_s:.3g} s); a larger batch per GPU or better-connected VMs "
            "would use it better"
        )
    breakdown = Breakdown(
        forward_s=fw[slow],
        backward_s=bw[slow] + fw[slow] * block_share,
        compute_s=compute_s + update_s,
        straggler_wait_s=straggle,
        exposed_intra_s=exposed - exposed_network,
        exposed_network_s=exposed_network,
        communication_s=communication,
        granularity=granularity,
        warnings=tuple(warnings),
        update_s=update_s,
    )
    sources = (
        *dict.fromkeys(f"profile:{m.profile.model}@{m.profile.accelerator}" for m in fleet),
        *comm_sources,
        f"strategy:{setup.label()} ({len(units.names) - 1} block units + root, FSDP2 prefetch)",
    )
    return IterationEstimate(iteration, p10, p50, p90, breakdown, tuple(sources))


def _member_computes(
    fleet: Sequence[FleetMember],
    setup: Setup,
    *,
    fw_s: Sequence[float],
    bw_s: Sequence[float],
    rho: Sequence[float],
    block_share: float,
) -> list[MemberCompute]:
    """Each member's compute stretched by its stragglers (`rho`), checkpointed blocks' forward again
    (`block_share` of forward), and its step on the shard."""
    n_shard = shard_ranks(fleet, setup.strategy)
    return [
        MemberCompute(
            forward_s=rho[i] * fw_s[i],
            backward_s=rho[i] * bw_s[i],
            recompute_s=rho[i] * fw_s[i] * block_share,
            update_s=m.profile.update_s / n_shard,
            overhead_s=strategy_overhead_s(m.profile, setup.strategy),
        )
        for i, m in enumerate(fleet)
    ]


def _exposed_network_s(
    found: Timeline, fleet: Sequence[FleetMember], setup: Setup, *, exposed_s: float
) -> float:
    """The part of the exposed `exposed_s` that is network time. Hybrid sharding: in proportion to the
    seconds each level was busy (the replicate level's allreduces cross the network, the shard level's
    collectives stay in a node). Otherwise every collective is one ring over all ranks: network time
    when the fleet has two or more nodes."""
    if setup.strategy is Strategy.HYBRID:
        network_busy = sum(e - s for s, e in found.busy[REPLICATE_LEVEL])
        shard_busy = sum(e - s for s, e in found.busy[SHARD_LEVEL])
        total = network_busy + shard_busy
        return exposed_s * (network_busy / total) if total > 0 else 0.0
    return exposed_s if sum(m.count for m in fleet) >= 2 else 0.0


def _zero1(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    setup: Setup,
    seed: int,
    straggler_iters: int,
) -> IterationEstimate:
    """DDP's iteration (the served model), the step on 1/n, then the parameters all-gathered."""
    from srift.sim.iteration import simulate

    ddp = simulate(fleet, bandwidth=bandwidth, seed=seed, straggler_iters=straggler_iters, band=False)
    ranks = sum(m.count * m.instance.devices for m in fleet)
    nodes = sum(m.count for m in fleet)
    parameter_bytes = sum(layer.grad_bytes for layer in fleet[0].profile.layers)
    ring = Ring(ranks, nodes, _types(fleet))
    (gather_s,), sources = ring.times_s(bandwidth, Collective.ALL_GATHER, [float(parameter_bytes)])
    update = ddp.breakdown.update_s
    shard_update = update / max(1, ranks)
    delta = shard_update - update + gather_s
    b = ddp.breakdown
    network = gather_s if nodes >= 2 else 0.0
    breakdown = replace(
        b,
        compute_s=b.compute_s - update + shard_update,
        update_s=shard_update,
        exposed_network_s=b.exposed_network_s + network,
        exposed_intra_s=b.exposed_intra_s + gather_s - network,
        communication_s=b.communication_s + gather_s,
    )
    return IterationEstimate(
        ddp.iteration_s + delta,
        ddp.iteration_p10_s + delta,
        ddp.iteration_p50_s + delta,
        ddp.iteration_p90_s + delta,
        breakdown,
        (*ddp.sources, *sources, f"strategy:{setup.label()} (ZeroRedundancyOptimizer)"),
    )


__all__ = [
    "MemberCompute",
    "Timeline",
    "UnitComm",
    "shard_ranks",
    "simulate_sharded",
    "timeline",
    "unit_comm",
]
