"""The profiler's timings: forward/backward at the curve's breakpoints, the update step, the loop overhead.

Breakpoints are timed round-robin after warm-up (`time_points`); `time_curve` adds the midpoints that show
where a curve bends. `loop_overhead` measures what a training loop spends beyond forward, backward and the
optimizer step (see `srift.profiling.profiler`, step 5).
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from srift.errors import InvalidInput
from srift.profiling.bench import (
    Bench,
    Progress,
    call_model,
    cuda_event,
    to_device,
    unique_trainable_parameters,
)
from srift.profiling.curves import BendCheck, PointTiming, refine_breakpoints


@dataclass
class Measured:
    forward_s: dict[int, list[float]]
    backward_s: dict[int, list[float]]


def time_points(
    bench: Bench,
    points: tuple[int, ...],
    *,
    repeats: int,
    warmup: int,
    report: Callable[[str, float], None],
) -> Measured:
    """Time forward and backward at each breakpoint, round-robin over the points, after `warmup` rounds.

    On CUDA the batches wait in host memory and only the one being timed is on the device: a device holds
    one breakpoint's inputs at a time, as a training run holds one batch (the copy is not timed)."""
    inputs = {b: bench.host_inputs(b) for b in points}
    measured = Measured({b: [] for b in points}, {b: [] for b in points})
    rounds = warmup + repeats
    for r in range(rounds):
        for b in points:
            on_device = to_device(inputs[b], bench.device) if bench.cuda else inputs[b]
            fw, bw = bench.step(on_device)
            del on_device
            if r >= warmup:
                measured.forward_s[b].append(fw)
                measured.backward_s[b].append(bw)
        report("timing", (r + 1) / rounds)
    bench.model.zero_grad(set_to_none=True)
    return measured


def time_curve(
    bench: Bench,
    paper_points: tuple[int, ...],
    *,
    refine: bool,
    repeats: int,
    warmup: int,
    report: Progress,
) -> tuple[tuple[int, ...], Measured, tuple[BendCheck, ...]]:
    """Time the paper's breakpoints and, with `refine`, the midpoints that show where the curve bends.

    Returns the curve's breakpoints, every sample taken (a batch timed in several rounds keeps all of
    them) and the midpoint checks.
    """
    measured = Measured({}, {})
    rounds_done = 0

    def measure(batches: tuple[int, ...]) -> dict[int, PointTiming]:
        nonlocal rounds_done
        # Progress: the first round (paper points and their midpoints) is most of the timing work; each
        # later round takes half of what is left, so the bar never runs backwards.
        lo, hi = (
            (0.0, 0.8)
            if rounds_done == 0
            else (1 - 0.2 * 0.5 ** (rounds_done - 1), 1 - 0.1 * 0.5 ** (rounds_done - 1))
        )
        got = time_points(
            bench,
            batches,
            repeats=repeats,
            warmup=warmup,
            report=lambda stage, f: report(stage, lo + (hi - lo) * f),
        )
        rounds_done += 1
        for b in batches:
            measured.forward_s.setdefault(b, []).extend(got.forward_s[b])
            measured.backward_s.setdefault(b, []).extend(got.backward_s[b])
        return {
            b: PointTiming.of([f + w for f, w in zip(got.forward_s[b], got.backward_s[b], strict=True)])
            for b in batches
        }

    points: tuple[int, ...] = paper_points
    checks: tuple[BendCheck, ...] = ()
    if refine:
        points, checks = refine_breakpoints(paper_points, measure)
    missing = tuple(b for b in points if b not in measured.forward_s)
    if missing:
        measure(missing)
    report("timing", 1.0)
    return points, measured, checks


UPDATE_OPTIMIZER = "torch.optim.SGD (no momentum), median of `repeats` steps"
UPDATE_IN_LOOP = (
    "torch.optim.SGD (no momentum) inside the training loop: median CPU seconds of the step times the loop's "
    "wall/CPU ratio"
)


def update_scaler(bench: Bench) -> Any:
    """For fp16, a gradient scaler whose steps are never skipped for a scale that overflows: scale 1 and no
    growth (a fresh default scaler starts at 2^16 and skips its first steps while it backs off, so a timed
    step would time no update). None for other precisions."""
    if bench.scaler is None:
        return None
    return torch.amp.GradScaler(bench.device.type, init_scale=1.0, growth_interval=2**31 - 1)


def update_time(bench: Bench, *, batch: int, repeats: int) -> float:
    """Median seconds of one optimizer step over the model's parameters: the update that follows the
    gradient exchange in every iteration (for large models on CPU it is a sizeable share of it).

    Under fp16 the step goes through a scaler that does not skip (`update_scaler`): a step that found
    non-finite gradients all the same (its scale dropped) is not counted; if every step was skipped the
    model's gradients are not finite and that is an error."""
    optimizer = torch.optim.SGD(unique_trainable_parameters(bench.model), lr=1e-12)
    scaler = update_scaler(bench)

    def step() -> None:
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()

    times: list[float] = []
    for r in range(repeats + 1):
        inputs = bench.inputs(batch)
        bench.model.zero_grad(set_to_none=True)
        loss = bench.loss(inputs)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        del loss, inputs
        before = scaler.get_scale() if scaler is not None else 1.0
        if bench.cuda:
            start, end = cuda_event(), cuda_event()
            bench.sync()
            start.record()
            step()
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1e3
        else:
            t0 = bench.now()
            step()
            elapsed = bench.now() - t0
        skipped = scaler is not None and scaler.get_scale() < before
        if skipped:
            scaler.update(1.0)
        if r and not skipped:
            times.append(elapsed)
    bench.model.zero_grad(set_to_none=True)
    if not times:
        raise InvalidInput(
            "every timed fp16 update found non-finite gradients at loss scale 1",
            hint="check the model in fp32 first, or profile it in bf16",
            field="precision",
        )
    return statistics.median(times)


def loop_overhead(
    bench: Bench, *, batch: int, repeats: int, cpu_clock: Callable[[], float] = time.process_time
) -> dict[str, Any]:
    """Seconds per iteration a training loop spends beyond forward, backward and the optimizer step: plain
    (`loop_overhead_s`) and under DistributedDataParallel at world size 1 (`ddp_overhead_s`; CPU only, and
    only when this process has no process group of its own), and on CPU the optimizer step (`update_s`).
    All ≥ 0, measured in interleaved rounds (see the module docstring, step 5).

    On CPU the extra work is timed in process CPU seconds and turned into wall seconds at the loop's own
    wall/CPU ratio: a short phase timed by the wall clock under a CPU quota (a cloud vCPU share, a testbed
    host) reads as whole throttled periods or none, while inside a long training step it costs its CPU
    time over the share; the ratio is the plain loop's total wall over its total CPU seconds. On CUDA the
    wall clock (synchronised) is used as it is."""
    optimizer = torch.optim.SGD(unique_trainable_parameters(bench.model), lr=1e-12)
    inputs = bench.inputs(batch)
    ddp = _ddp_world_one(bench)
    ddp_optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-12) if ddp is not None else optimizer
    cpu = not bench.cuda
    plain_wall: list[float] = []
    plain_cost: list[float] = []
    plain_outside: list[float] = []
    plain_update: list[float] = []
    wrapped_cost: list[float] = []
    ddp_failed = False

    def loop_step(
        net: nn.Module, optimizer: torch.optim.Optimizer = optimizer
    ) -> tuple[float, float, float, float]:
        """One iteration as a training loop runs it: wall seconds, and (CPU seconds on CPU, else wall)
        of the whole step, of zero_grad and of the optimizer step."""
        bench.sync()
        t0, c0 = bench.now(), cpu_clock() if cpu else 0.0
        net.zero_grad(set_to_none=True)
        bench.sync()
        t1, c1 = bench.now(), cpu_clock() if cpu else 0.0
        with bench.autocast():
            loss = bench.loss_fn(call_model(net, inputs))
        bench.backward(loss)
        bench.sync()
        t2, c2 = bench.now(), cpu_clock() if cpu else 0.0
        bench.optimizer_step(optimizer)
        bench.sync()
        t3, c3 = bench.now(), cpu_clock() if cpu else 0.0
        if cpu:
            return t3 - t0, c3 - c0, c1 - c0, c3 - c2
        return t3 - t0, t3 - t0, t1 - t0, t3 - t2

    try:
        for r in range(repeats + 1):
            wall, cost, outside, stepped = loop_step(bench.model)
            if r:
                plain_wall.append(wall)
                plain_cost.append(cost)
                plain_outside.append(outside)
                plain_update.append(stepped)
            if ddp is not None and not ddp_failed:
                try:
                    _, cost, _, _ = loop_step(ddp, ddp_optimizer)
                except RuntimeError:  # DDP refuses the model (unused or reused parameters): plain only
                    ddp_failed = True
                    continue
                if r:
                    wrapped_cost.append(cost)
    finally:
        bench.model.zero_grad(set_to_none=True)
        if ddp is not None:
            import gc

            import torch.distributed as dist

            # The DDP module (its Reducer) goes before its process group: a Reducer freed later, by the
            # garbage collector, joins gloo's threads while they wait for the interpreter lock (a hang
            # seen in the test suite; pytorch/pytorch#154976).
            del ddp, ddp_optimizer
            gc.collect()
            dist.destroy_process_group()
    if ddp_failed:
        wrapped_cost.clear()
    cost_s = statistics.median(plain_cost)
    total_cpu_s = math.fsum(plain_cost)
    ratio = max(1.0, math.fsum(plain_wall) / total_cpu_s) if cpu and total_cpu_s > 0 else 1.0
    loop_s = max(0.0, statistics.median(plain_outside)) * ratio
    out: dict[str, Any] = {"loop_overhead_s": loop_s, "loop_overhead_batch": batch}
    if cpu:
        out["loop_wall_per_cpu"] = ratio
        out["update_s"] = max(0.0, statistics.median(plain_update)) * ratio
    if wrapped_cost:
        out["ddp_overhead_s"] = loop_s + max(0.0, statistics.median(wrapped_cost) - cost_s) * ratio
    return out


def _ddp_world_one(bench: Bench) -> nn.Module | None:
    """The bench's model under DistributedDataParallel in a one-rank gloo group of this process, or None
    where that cannot be done without touching the user's own distributed setup (CUDA, or a group exists)."""
    import torch.distributed as dist

    if bench.cuda or not dist.is_available() or dist.is_initialized():
        return None
    try:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # type: ignore[attr-defined]
    except (RuntimeError, ValueError):  # no usable network interface for gloo: measure the plain loop only
        return None
    # a copy: DDP's gradient hooks stay on the parameters it wraps, and must not touch the plain loop's
    return nn.parallel.DistributedDataParallel(copy.deepcopy(bench.model))
