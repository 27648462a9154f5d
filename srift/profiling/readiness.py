"""Gradient readiness and spread: when each layer's gradient is ready in backward, and the step's spread.

See `srift.profiling.profiler`, step 4: post-accumulate-grad hooks on every trainable parameter, fractions
of the backward pass read on the CPU clock, the wall clock or CUDA events.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from srift.domain.profile import LayerGrad
from srift.profiling.bench import Bench, Progress, cuda_event, trainable_layers, unique_trainable_parameters
from srift.profiling.cpuquota import CpuQuota
from srift.profiling.curves import coefficient_of_variation


def _grad_ready_hook(param: torch.Tensor, hook: Callable[[torch.Tensor], None]) -> Any:
    return param.register_post_accumulate_grad_hook(hook)  # type: ignore[no-untyped-call]


@dataclass
class Readiness:
    layers: tuple[LayerGrad, ...]
    straggler_cv: float
    batch: int
    mean_iteration_s: float
    clock: str


def readiness_cpu_clock(
    device: torch.device, *, threads: int | None, quota: CpuQuota | None
) -> Callable[[], float] | None:
    """The clock readiness fractions are read on: the process's CPU clock on a CPU device with one thread
    or under a CPU quota (where the wall clock stops while the quota is spent); None (the bench's own
    clock, or CUDA events) otherwise. With several threads and no quota, CPU seconds pile up faster than
    wall seconds in the layers that parallelise well, so the wall clock is the truer share there."""
    if device.type != "cpu":
        return None
    return time.process_time if quota is not None or threads == 1 else None


def measure_readiness(
    bench: Bench,
    *,
    batch: int,
    iterations: int,
    report: Progress,
    cpu_clock: Callable[[], float] | None = None,
) -> Readiness:
    """Run `iterations` steps on fresh inputs with grad hooks; layer readiness, exec_prob and spread.

    Fractions are read on `cpu_clock` when given (see `readiness_cpu_clock`), the spread on the bench's
    clock."""
    params = unique_trainable_parameters(bench.model)
    layers = trainable_layers(bench.model)
    stamps: dict[int, Any] = {}
    cuda = bench.cuda
    now = bench.now
    frac_now = cpu_clock if cpu_clock is not None and not cuda else now

    def hook_for(i: int) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            if cuda:
                event = cuda_event()
                event.record()
                stamps[i] = event
            else:
                stamps[i] = frac_now()

        return hook

    handles = [_grad_ready_hook(p, hook_for(i)) for i, p in enumerate(params)]
    fractions: list[list[float]] = [[] for _ in layers]
    iteration_s: list[float] = []
    try:
        for it in range(iterations + 1):
            inputs = bench.inputs(batch)
            bench.model.zero_grad(set_to_none=True)
            stamps.clear()
            bench.sync()
            t0 = now()
            loss = bench.loss(inputs)
            bench.sync()
            f1 = frac_now()
            start_event = end_event = None
            if cuda:
                start_event = cuda_event()
                end_event = cuda_event()
                start_event.record()
            bench.backward(loss)
            if end_event is not None:
                end_event.record()
            bench.sync()
            t2 = now()
            f2 = frac_now()
            del loss, inputs
            if it == 0:
                continue
            iteration_s.append(t2 - t0)
            if start_event is not None and end_event is not None:
                total = max(start_event.elapsed_time(end_event), 1e-9)
                offsets = {i: start_event.elapsed_time(e) / total for i, e in stamps.items()}
            else:
                total = max(f2 - f1, 1e-12)
                offsets = {i: (s - f1) / total for i, s in stamps.items()}
            for k, layer in enumerate(layers):
                seen = [offsets[i] for i in layer.params if i in offsets]
                if seen:
                    fractions[k].append(min(max(max(seen), 0.0), 1.0))
            report("readiness", it / iterations)
    finally:
        for handle in handles:
            handle.remove()
        bench.model.zero_grad(set_to_none=True)
    grads = []
    for k, layer in enumerate(layers):
        runs = fractions[k]
        grads.append(
            LayerGrad(
                name=layer.name,
                grad_bytes=layer.grad_bytes,
                ready_frac=round(statistics.median(runs), 6) if runs else 1.0,
                exec_prob=round(len(runs) / iterations, 6),
            )
        )
    order = sorted(range(len(grads)), key=lambda k: (grads[k].ready_frac, -k))
    return Readiness(
        layers=tuple(grads[k] for k in order),
        straggler_cv=round(coefficient_of_variation(iteration_s), 6),
        batch=batch,
        mean_iteration_s=round(statistics.fmean(iteration_s), 9),
        clock="cuda" if cuda else ("cpu" if frac_now is cpu_clock else "wall"),
    )
