"""Parameter-server mode: asynchronous data-parallel training against M servers (Li et al., Algorithm 3.1).

Model, following Li et al. (seed 004, §3.4 and §5) with HTTP/2 flow control off (whole operations, no
chunking):
- Layers are placed on servers greedily by bytes: each layer, in ready order, goes to the server holding
  the fewest bytes so far.
- Every server has a downlink (server → workers) and an uplink (workers → server). Each is shared by
  processor sharing among the workers using it: with `a` workers active each gets capacity / a (SHARE in
  Algorithm 3.1). A worker has at most one operation per link in flight; further operations queue (FIFO).
- A step (per worker): download every server's parameters; then compute, fw + bw drawn anew each step
  (steps resampled) from Normal(mean, straggler_cv·mean) clipped at 0; during backward layer j's gradient
  is ready at fw + ready_frac_j·bw and is uploaded to its server. Gradients queued behind a running upload
  to the same server leave together when it ends (the same bytes in the same order at the same shared
  rate, so step ends are unchanged). The step ends when compute and every upload are done; the next step
  starts at once (asynchronous training, as in Li et al.).
- Link capacity: the bandwidth model's bus bandwidth for a 2-node exchange of the largest buffer
  (for two ranks bus bandwidth equals point-to-point throughput), for the slowest member type. Servers are
  assumed to have that NIC; their cost is not counted. Server-side update time is not modelled, nor the
  intra-node reduction of multi-GPU workers.

Output. Each worker runs PS_STEPS steps; the first PS_WARMUP are discarded. Throughput is Σ batch_w /
mean step_w, and iteration_s is the time to process one global batch (Σ batch_w) at that throughput, so it
compares with allreduce iterations. Quantiles are those of the pooled step times, scaled to iteration_s.
Breakdown: compute_s is iteration_s × (mean compute / mean step), the rest is exposed network time (no
synchronous straggler wait in asynchronous training); communication_s is the mean time per step during
which a worker downloads or uploads, scaled likewise.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from itertools import count

import numpy as np

from srift.domain import Breakdown, BusBandwidthModel, FleetMember
from srift.errors import InvalidInput, require_within
from srift.sim.compute import max_of_normals, uniforms
from srift.sim.engine import Engine, Event
from srift.sim.layers import layer_arrays
from srift.sim.network import CAP_PROBE_BYTES, MIN_BUSBW_GBPS
from srift.sim.result import IterationEstimate, granularity_of

PS_STEPS = 12
PS_WARMUP = 2
MAX_SERVERS = 64
MAX_WORKERS = 512
MIN_BANDWIDTH_FACTOR = 0.05


class SharedLink:
    """A link shared equally by its active flows (processor sharing), driven by the event engine.

    All flows get capacity / n, so one virtual clock (bits served per flow) orders them; only the next
    finish is scheduled, and it is cancelled and rescheduled whenever the set of flows changes.
    """

    def __init__(self, engine: Engine, capacity_bps: float) -> None:
        self.engine = engine
        self.capacity_bps = capacity_bps
        self.virtual = 0.0
        self.last_t = engine.now
        self.flows: list[tuple[float, int, Callable[[], None]]] = []
        self.pending: Event | None = None
        self._seq = count()

    def _advance(self) -> None:
        now = self.engine.now
        if self.flows:
            self.virtual += (now - self.last_t) * self.capacity_bps / len(self.flows)
        self.last_t = now

    def _reschedule(self) -> None:
        if self.pending is not None:
            self.engine.cancel(self.pending)
            self.pending = None
        if self.flows:
            delay = (self.flows[0][0] - self.virtual) * len(self.flows) / self.capacity_bps
            self.pending = self.engine.schedule(max(0.0, delay), self._finish)

    def _finish(self) -> None:
        self._advance()
        _, _, on_done = heapq.heappop(self.flows)
        self.pending = None
        self._reschedule()
        on_done()

    def start(self, bits: float, on_done: Callable[[], None]) -> None:
        """Start a flow of `bits`; `on_done` runs when it has all been carried."""
        self._advance()
        heapq.heappush(self.flows, (self.virtual + bits, next(self._seq), on_done))
        self._reschedule()


def place_layers(bits: Sequence[float], servers: int) -> list[int]:
    """Server of each layer: greedily the one holding the fewest bytes so far (ties: lowest index)."""
    load = [(0.0, s) for s in range(servers)]
    placed = []
    for b in bits:
        held, s = heapq.heappop(load)
        placed.append(s)
        heapq.heappush(load, (held + b, s))
    return placed


class _Worker:
    """One VM's steps: downloads, compute, uploads queued per server."""

    def __init__(
        self,
        run: _Run,
        *,
        fw_s: float,
        bw_s: float,
        mean_s: float,
        compute_draws: np.ndarray,
        ready_frac: np.ndarray,
    ) -> None:
        self.run = run
        self.fw_s, self.bw_s, self.mean_s = fw_s, bw_s, mean_s
        self.draws = compute_draws
        self.ready_frac = ready_frac
        self.step = 0
        self.step_start = 0.0
        self.durations: list[float] = []
        self.compute: list[float] = []
        self.comm: list[float] = []
        self.downloads_left = 0
        self.download_end = 0.0
        self.first_upload = math.inf
        self.last_upload = 0.0
        self.open = 0

    def start_step(self) -> None:
        run = self.run
        self.step_start = run.engine.now
        self.first_upload, self.last_upload = math.inf, run.engine.now
        active = [s for s in range(run.servers) if run.server_bits[s] > 0]
        self.downloads_left = len(active)
        for s in active:
            run.down[s].start(run.server_bits[s], self._downloaded)
        if not active:
            self._compute()

    def _downloaded(self) -> None:
        self.downloads_left -= 1
        if self.downloads_left == 0:
            self._compute()

    def _compute(self) -> None:
        run = self.run
        now = run.engine.now
        self.download_end = now
        x = float(self.draws[self.step])
        scale = x / self.mean_s if self.mean_s > 0 else 0.0
        fw, bw = self.fw_s * scale, self.bw_s * scale
        self.compute.append(fw + bw)
        self.open = 1 + run.servers
        self.queues = [
            [now + fw + float(self.ready_frac[j]) * bw for j in run.by_server[s]] for s in range(run.servers)
        ]
        self.bits = [[run.bits[j] for j in run.by_server[s]] for s in range(run.servers)]
        self.next_layer = [0] * run.servers
        run.engine.schedule(fw + bw, self._close)
        for s in range(run.servers):
            self._pump(s)

    def _pump(self, s: int) -> None:
        """Start the next upload to server s: every gradient ready by now, or wait for the next one."""
        run = self.run
        now = run.engine.now
        times, bits = self.queues[s], self.bits[s]
        i = self.next_layer[s]
        if i >= len(times):
            self._close()
            return
        if times[i] > now:
            run.engine.schedule_at(times[i], lambda: self._pump(s))
            return
        total = 0.0
        while i < len(times) and times[i] <= now:
            total += bits[i]
            i += 1
        self.next_layer[s] = i
        self.first_upload = min(self.first_upload, now)
        run.up[s].start(total, lambda: self._uploaded(s))

    def _uploaded(self, s: int) -> None:
        self.last_upload = self.run.engine.now
        self._pump(s)

    def _close(self) -> None:
        self.open -= 1
        if self.open > 0:
            return
        run = self.run
        now = run.engine.now
        self.durations.append(now - self.step_start)
        uploads = max(0.0, self.last_upload - self.first_upload) if self.first_upload < math.inf else 0.0
        self.comm.append(self.download_end - self.step_start + uploads)
        self.step += 1
        if self.step < run.steps:
            self.start_step()


class _Run:
    """One parameter-server simulation: servers' links, workers, and the engine."""

    def __init__(self, *, servers: int, bits: Sequence[float], capacity_bps: float, steps: int) -> None:
        self.engine = Engine()
        self.servers = servers
        self.steps = steps
        self.bits = list(bits)
        placed = place_layers(self.bits, servers)
        self.by_server = [[j for j, s in enumerate(placed) if s == server] for server in range(servers)]
        self.server_bits = [sum(self.bits[j] for j in layers) for layers in self.by_server]
        self.down = [SharedLink(self.engine, capacity_bps) for _ in range(servers)]
        self.up = [SharedLink(self.engine, capacity_bps) for _ in range(servers)]


def _link_capacity(
    fleet: Sequence[FleetMember], model: BusBandwidthModel
) -> tuple[float, str, float, list[str]]:
    best = math.inf
    sources, residual, warnings = [], 0.0, []
    for instance in {(m.instance.provider, m.instance.name): m.instance for m in fleet}.values():
        est = model.predict(instance=instance, world_size=2, nodes=2, buffer_bytes=[CAP_PROBE_BYTES])
        value = est.busbw_gbps[0] if est.busbw_gbps else math.nan
        if not (math.isfinite(value) and value > 0):
            warnings.append(
                f"{est.source} predicted {value} Gbit/s for {instance.name}; used {MIN_BUSBW_GBPS}"
            )
            value = MIN_BUSBW_GBPS
        best = min(best, value)
        sources.append(est.source)
        residual = max(residual, est.residual_cv)
    return best * 1e9, ",".join(dict.fromkeys(sources)), residual, warnings


def _one_run(
    fleet: Sequence[FleetMember],
    *,
    fw_s: Sequence[float],
    bw_s: Sequence[float],
    keys: Sequence[int],
    seed: int,
    stream: int,
    servers: int,
    capacity_bps: float,
    steps: int,
) -> list[_Worker]:
    canon = layer_arrays(fleet[0].profile)
    run = _Run(servers=servers, bits=canon.bits.tolist(), capacity_bps=capacity_bps, steps=steps)
    workers = []
    for i, m in enumerate(fleet):
        mean = fw_s[i] + bw_s[i]
        ready = canon.aligned_ready_frac(layer_arrays(m.profile))
        u = uniforms(seed=seed, stream=stream, key=keys[i], iters=steps * m.count).reshape(m.count, steps)
        for vm in range(m.count):
            draws = max_of_normals(mean, m.profile.straggler_cv, 1, u[vm])
            workers.append(
                _Worker(run, fw_s=fw_s[i], bw_s=bw_s[i], mean_s=mean, compute_draws=draws, ready_frac=ready)
            )
    for w in workers:
        w.start_step()
    run.engine.run()
    return workers


def simulate_ps(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int,
    fw_s: Sequence[float],
    bw_s: Sequence[float],
    keys: Sequence[int],
    servers: int,
    mc_samples: int,
    profile_sources: tuple[str, ...],
    steps: int = PS_STEPS,
    warmup: int = PS_WARMUP,
) -> IterationEstimate:
    """The parameter-server estimate for `fleet` (called by `simulate` with comm=parameter_server)."""
    require_within(
        servers, 1, MAX_SERVERS, field="ps_servers", hint="use 1 to a few servers", what="parameter servers"
    )
    workers_n = sum(m.count for m in fleet)
    if workers_n > MAX_WORKERS:
        raise InvalidInput(
            f"{workers_n} workers is above the parameter-server limit {MAX_WORKERS}",
            hint="use comm=allreduce for large fleets",
            field="comm",
        )
    capacity, source, residual, warnings = _link_capacity(fleet, bandwidth)
    runs = [(0, 1.0)]
    if mc_samples > 0:
        rng = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, 5])
        runs += [
            (4 + s, max(MIN_BANDWIDTH_FACTOR, float(rng.normal(1.0, residual)))) for s in range(mc_samples)
        ]
    batches = [m.batch for m in fleet for _ in range(m.count)]
    base: list[_Worker] = []
    pooled: list[float] = []
    for stream, factor in runs:
        workers = _one_run(
            fleet,
            fw_s=fw_s,
            bw_s=bw_s,
            keys=keys,
            seed=seed,
            stream=3 + stream,
            servers=servers,
            capacity_bps=capacity * factor,
            steps=steps,
        )
        if stream == 0:
            base = workers
        pooled.extend(d for w in workers for d in w.durations[warmup:])
    step_means = [float(np.mean(w.durations[warmup:])) for w in base]
    throughput = sum(b / t for b, t in zip(batches, step_means, strict=True) if t > 0)
    mean_step = float(np.mean([d for w in base for d in w.durations[warmup:]]))
    iteration_s = sum(batches) / throughput if throughput > 0 else mean_step
    scale = iteration_s / mean_step if mean_step > 0 else 1.0
    mean_compute = float(np.mean([c for w in base for c in w.compute[warmup:]]))
    mean_comm = float(np.mean([c for w in base for c in w.comm[warmup:]]))
    compute_s = min(iteration_s, mean_compute * scale)
    communication_s = mean_comm * scale
    slow = max(range(len(fleet)), key=lambda i: fw_s[i] + bw_s[i])
    share_fw = fw_s[slow] / (fw_s[slow] + bw_s[slow]) if fw_s[slow] + bw_s[slow] > 0 else 0.5
    p10, p50, p90 = (float(q) * scale for q in np.quantile(pooled, [0.1, 0.5, 0.9]))
    granularity = granularity_of(compute_s=compute_s, communication_s=communication_s)
    if granularity < 1.0:
        warnings.append(
            f"granularity {granularity:.2f} < 1: parameter traffic outlasts compute; add servers "
            "(ps_servers) or use allreduce"
        )
    breakdown = Breakdown(
        forward_s=compute_s * share_fw,
        backward_s=compute_s * (1 - share_fw),
        compute_s=compute_s,
        straggler_wait_s=0.0,
        exposed_intra_s=0.0,
        exposed_network_s=iteration_s - compute_s,
        communication_s=communication_s,
        granularity=granularity,
        warnings=tuple(warnings),
    )
    sources = (*profile_sources, source, f"parameter_server:{servers}")
    return IterationEstimate(iteration_s, p10, p50, p90, breakdown, sources)
