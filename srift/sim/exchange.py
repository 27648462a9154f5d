"""Gradient exchange as a fair-share discrete-event simulation (Srift §4.3, eq. 2), one or two tandem stages.

Each layer's gradient is a transfer of `bits` payload bits that becomes ready at `ready_s`. It passes through
the stages in order (intra-node reduction, then the inter-node allreduce); a stage is one shared resource
with a rate per size class and a cap. Rates are *payload* rates (bits of gradient per second, i.e. bus
bandwidth × n / (2(n−1)) for a ring of n ranks), so a lone transfer takes bits / rate = 2s(n−1)/(n·busbw).

Sharing follows Srift eq. 2: with c transfers active in a stage and b_agg the sum of their own rates,
each runs at its own rate while b_agg < cap, otherwise at min(own rate, L), the level L sharing the cap
max-min fairly (`water_level`: Σ min(own, L) = cap). The paper writes cap / c for L, which leaves idle what
a transfer slower than cap / c cannot use; a shared link does not (TCP flows on one bottleneck converge to
max-min fair shares: a flow held below its share elsewhere leaves the rest to the others). With it idle, a
small layer overlapping a large one slowed it for nothing, so that delaying the small one (a slower added
VM) could end the exchange earlier. Whenever a stage's active set changes every active transfer's
rate and finish time is recomputed.

Three implementations give the same timeline. `exchange` runs each stage in C (`srift.sim._stage`, built at
install; it settles and re-rates every active transfer at each event, O(active) per event with no Python in
the loop) or, when that extension is missing or `kernel="python"`, in Python (`srift.sim.python_stage`:
transfers of one size class share a rate at every instant, so a class keeps one service clock and a heap of
finish marks, O(classes) per event). `exchange_reference` is literal: every transfer's finish event is
cancelled and rescheduled on the event engine at every change. Tests hold all three equal.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from srift.errors import EnvironmentProblem
from srift.sim.engine import Engine, Event
from srift.sim.python_stage import BULK_MIN, run_stage

INF = math.inf


@dataclass(frozen=True, slots=True)
class Stage:
    """One shared resource: payload rate (bits/s) per size class for a lone transfer, and the stage's cap."""

    name: str
    rates_bps: tuple[float, ...]
    cap_bps: float


@dataclass(frozen=True, slots=True)
class ExchangeResult:
    """Finish time of every transfer in every stage, and the intervals during which each stage was busy."""

    finish_s: tuple[tuple[float, ...], ...]
    busy: tuple[tuple[tuple[float, float], ...], ...]

    @property
    def end_s(self) -> float:
        """When the last transfer left the last stage (t_pe measured from the same origin as ready times)."""
        last = self.finish_s[-1]
        return max(last) if last else 0.0

    def busy_after(self, stage: int, t0: float) -> float:
        """Seconds after `t0` during which `stage` had at least one transfer active."""
        return sum(max(0.0, end - max(start, t0)) for start, end in self.busy[stage])

    def busy_total(self) -> float:
        """Seconds during which any stage was busy (the union of all stages' busy intervals)."""
        return covered_s(span for stage in self.busy for span in stage)


def covered_s(spans: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by the union of the (start, end) `spans`."""
    total = 0.0
    cur_start, cur_end = -INF, -INF
    for start, end in sorted(spans):
        if start > cur_end:
            total += max(0.0, cur_end - cur_start) if cur_end > -INF else 0.0
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end > -INF:
        total += cur_end - cur_start
    return total


def water_level(own_bps: Sequence[float], cap_bps: float) -> float:
    """The rate cap of eq. 2 with max-min fairness: INF while the own rates sum below the cap, else the
    level L with Σ min(own, L) = cap (a transfer slower than L keeps its own rate, the rest run at L)."""
    if sum(own_bps) < cap_bps:
        return INF
    left, m = cap_bps, len(own_bps)
    for own in sorted(own_bps):
        if own >= left / m:
            break
        left -= own
        m -= 1
    return left / m if m else max(own_bps)


def _check(
    ready_s: Sequence[float], bits: Sequence[float], klass: Sequence[int], stages: Sequence[Stage]
) -> None:
    if not (len(ready_s) == len(bits) == len(klass)):
        raise ValueError("ready_s, bits and klass must have one entry per transfer")
    if not stages:
        raise ValueError("at least one stage is needed")
    for stage in stages:
        if not (stage.cap_bps > 0 and stage.rates_bps and min(stage.rates_bps) > 0):
            raise ValueError(f"stage {stage.name}: rates and cap must be > 0")
    if not ready_s:
        return
    if not min(bits) > 0:
        raise ValueError("every transfer needs bits > 0 (drop empty gradients first)")
    if min(klass) < 0 or max(klass) >= min(len(s.rates_bps) for s in stages):
        raise ValueError("a class index is outside a stage's rate table")
    ready = np.asarray(ready_s, dtype=float)
    if ready.size > 1 and bool(np.any(ready[1:] < ready[:-1])):
        raise ValueError("ready_s must be sorted ascending")


Kernel = Literal["auto", "c", "python"]
StageRunner = Callable[
    [Sequence[float], Sequence[float], Sequence[int], Sequence[float], float],
    tuple[list[float], list[tuple[float, float]]],
]


@functools.cache
def c_stage() -> StageRunner | None:
    """The C stage kernel, or None when the extension was not built (no compiler at install time)."""
    try:  # by its full name: `from srift.sim import _stage` would import the package from inside it
        from srift.sim._stage import run_stage as compiled
    except ImportError:
        return None
    return compiled


def _runner(kernel: Kernel, bulk_min: int) -> StageRunner:
    if kernel != "python":
        fast = c_stage()
        if fast is not None:
            return fast
        if kernel == "c":
            raise EnvironmentProblem(
                "the C stage kernel srift.sim._stage is not built",
                hint="install a C compiler (e.g. apt-get install gcc) and reinstall Srift (make install), "
                "or use kernel='python'",
            )
    return functools.partial(run_stage, bulk_min=bulk_min)


def exchange(
    ready_s: Sequence[float],
    bits: Sequence[float],
    klass: Sequence[int],
    stages: Sequence[Stage],
    *,
    log: list[tuple[float, str, str, int]] | None = None,
    bulk_min: int = BULK_MIN,
    checked: bool = True,
    kernel: Kernel = "auto",
) -> ExchangeResult:
    """Simulate the transfers through the stages; `log` (if given) collects (time, stage, start|done, index).

    `ready_s` must be sorted ascending. Class `klass[j]` indexes every stage's `rates_bps`. Stages interact
    only through the hand-over (a transfer enters stage s+1 when it leaves stage s), so they are simulated
    one after another on the previous stage's finish times. `checked=False` skips validating the inputs
    (for callers that built them, like `simulate`). `kernel` picks the stage implementation: "auto" (C when
    built, else Python), "c" or "python"; `bulk_min` tunes the Python one.
    """
    if checked:
        _check(ready_s, bits, klass, stages)
    run_stage = _runner(kernel, bulk_min)
    n_jobs = len(ready_s)
    order: list[int] | None = None
    starts = ready_s
    finishes: list[tuple[float, ...]] = []
    busies: list[tuple[tuple[float, float], ...]] = []
    for index, stage in enumerate(stages):
        if order is None:
            done, busy = run_stage(starts, bits, klass, stage.rates_bps, stage.cap_bps)
            finish = done
        else:
            done, busy = run_stage(
                starts,
                [bits[j] for j in order],
                [klass[j] for j in order],
                stage.rates_bps,
                stage.cap_bps,
            )
            finish = [math.nan] * n_jobs
            for pos, j in enumerate(order):
                finish[j] = done[pos]
        if log is not None:
            for pos, j in enumerate(order or range(n_jobs)):
                log.append((starts[pos], stage.name, "start", j))
                log.append((done[pos], stage.name, "done", j))
        finishes.append(tuple(finish))
        busies.append(tuple(busy))
        if index + 1 < len(stages):
            order = sorted(range(n_jobs), key=finish.__getitem__)
            starts = [finish[j] for j in order]
    if log is not None:
        log.sort(key=lambda entry: entry[0])
    return ExchangeResult(finish_s=tuple(finishes), busy=tuple(busies))


def exchange_reference(
    ready_s: Sequence[float],
    bits: Sequence[float],
    klass: Sequence[int],
    stages: Sequence[Stage],
    *,
    log: list[tuple[float, str, str, int]] | None = None,
) -> ExchangeResult:
    """The same simulation, literally as Srift §4.3 describes it, on the event engine (slow; for checking)."""
    _check(ready_s, bits, klass, stages)
    engine = Engine()
    n_jobs, n_stages = len(ready_s), len(stages)
    remaining = [[0.0] * n_jobs for _ in range(n_stages)]
    rate = [[0.0] * n_jobs for _ in range(n_stages)]
    pending: list[dict[int, Event | None]] = [{} for _ in range(n_stages)]
    last_t = [0.0] * n_stages
    busy_start = [0.0] * n_stages
    busy: list[list[tuple[float, float]]] = [[] for _ in range(n_stages)]
    finish = [[math.nan] * n_jobs for _ in range(n_stages)]

    def settle(s: int) -> None:
        timespan = engine.now - last_t[s]
        for j in pending[s]:
            remaining[s][j] -= rate[s][j] * timespan
        last_t[s] = engine.now

    def reshare(s: int) -> None:
        stage, jobs = stages[s], pending[s]
        level = water_level([stage.rates_bps[klass[j]] for j in jobs], stage.cap_bps)
        for j, event in list(jobs.items()):
            rate[s][j] = min(stage.rates_bps[klass[j]], level)
            if event is not None:
                engine.cancel(event)
            delay = max(0.0, remaining[s][j] / rate[s][j])
            jobs[j] = engine.schedule(delay, _done(s, j), priority=0)

    def _done(s: int, j: int) -> Callable[[], None]:
        def callback() -> None:
            settle(s)
            del pending[s][j]
            finish[s][j] = engine.now
            if log is not None:
                log.append((engine.now, stages[s].name, "done", j))
            if not pending[s]:
                busy[s].append((busy_start[s], engine.now))
            reshare(s)
            if s + 1 < n_stages:
                _start(s + 1, j)()

        return callback

    def _start(s: int, j: int) -> Callable[[], None]:
        def callback() -> None:
            settle(s)
            if not pending[s]:
                busy_start[s] = engine.now
            remaining[s][j] = bits[j]
            pending[s][j] = None
            if log is not None:
                log.append((engine.now, stages[s].name, "start", j))
            reshare(s)

        return callback

    for j in range(n_jobs):
        engine.schedule_at(ready_s[j], _start(0, j), priority=1)
    engine.run()
    return ExchangeResult(finish_s=tuple(tuple(f) for f in finish), busy=tuple(tuple(b) for b in busy))
