"""The compute profiler of Srift §4.1: largest batch, forward/backward curves, gradient readiness, spread.

`profile_model` runs the user's model for real:

1. **Check** — build the model, run forward, loss and backward at batch 1 and 2; any failure is an
   InvalidInput naming the factory and the underlying exception.
2. **Largest batch** — double-then-bisect (`curves.largest_fitting`) up to the cap. On CUDA a batch fits
   unless it raises out-of-memory (memory is freed and the search goes on) or, with a budget, its peak
   allocation exceeds it. On CPU a batch fits if the peak resident-set growth of a forward+backward step
   (the larger of two, see srift.profiling.memory), plus the input batch, stays within the budget
   (default: ¾ of the host's available memory or of the cgroup's headroom, whichever is smaller). A batch
   whose growth, extrapolated from the batches already measured, would pass 90 % of the free memory is not
   even tried, so the search does not invite the kernel's OOM killer.
3. **Curves** — forward (including the loss) and backward are timed separately at 1, ⅓, ⅔ and all of the
   largest batch, interleaved round-robin so slow spells hit every point alike, after warm-up; a point is
   the mean over repeats of forward and of backward (`curves.mean_point`: a run's mean iteration is what
   is predicted; CUDA timings are synchronised), and the 3-segment
   piecewise-linear curves pass through those points. The geometric midpoint of each segment is timed in
   the same rounds; a segment whose midpoint is more than 8 % off its chord is split there, and its halves
   are checked likewise (at most nine midpoints; `refine=False` keeps the paper's four points). See
   `curves.refine_breakpoints`.
4. **Readiness and spread** — at ⅓ of the largest batch, `iterations` fresh inputs are run with a
   post-accumulate-grad hook on every trainable parameter. A layer (a module owning parameters directly;
   shared parameters belong to the first owner; a module owning more than two is one layer per parameter,
   `module.param`, as DDP buckets them) is ready when its last parameter's gradient is; its
   `ready_frac` is the median over iterations of that instant as a fraction of the backward pass,
   `exec_prob` the share of iterations in which it received gradients, and `straggler_cv` is std/mean of
   the forward+backward time over those iterations. On CPU with one thread or under a CPU quota the
   fraction is read on the process's CPU clock (`extra["readiness_clock"]` = "cpu"): under a quota the wall
   clock stops whenever the period's quota is spent, so a layer's wall-clock fraction depends on where in
   its period the step began (vae's encoder head on a quarter-core host: 0.47 … 0.93 by the wall clock
   between tries and gaps, 0.63 … 0.65 by CPU time, docs/validation.md cause 9), while its share of the
   backward's work does not. Without a quota the two agree; on CUDA the fractions come from CUDA events.
5. **Loop overhead and update** — a training loop does more per iteration than forward and backward: its
   `zero_grad(set_to_none=True)` frees every gradient (a gradient above the allocator's mmap threshold
   goes back to the kernel, page by page), under DistributedDataParallel each gradient is copied into
   its bucket and back, and every iteration ends with the optimizer step. At the second breakpoint (⅓ of
   the largest batch, where a step is long enough for the loop's wall/CPU ratio to show a CPU quota's
   share), `repeats` rounds each run one step of the plain loop (plain SGD) and (on CPU, where no process
   group exists yet) one of the loop under DDP at world size 1 (gloo): `extra["loop_overhead_s"]` is the
   median zero_grad, `extra["ddp_overhead_s"]` that plus the median DDP loop step minus the median plain
   one (both ≥ 0), and on CPU `update_s` is the median optimizer step; on CPU all three are CPU seconds
   times the loop's wall/CPU ratio (its total wall over its total CPU seconds), so a CPU quota's
   throttling does not quantise them: a 3 ms step timed alone reads as 3 ms or as a whole throttled
   period. On CUDA `update_s` is the median synchronised time of a step timed on its own. See
   `_loop_overhead`. On CPU, in the same place, `extra["idle_compute"]` is a step (zero_grad, forward,
   backward) after idle gaps of 5, 10 and 30 ms over the step back to back (`_idle_compute`): a rank waiting
   for the exchange starts its next step with a fresh CPU quota (measured, kept as evidence; the simulator
   does not use it).
   Where the process runs under a CFS CPU quota (a container's CPU limit, a testbed host), its share of a
   core and its period are read from the cgroup into `extra["cpu_quota"]` (`srift.profiling.cpuquota`), with
   `burst_cpu_s`, the CPU seconds one thread runs unthrottled after an idle wait (measured where the quota
   binds one thread, `measure_burst_cpu_s`: five spins after four idle periods each); the simulator takes a
   waiting rank's saving from the share and the period (`ModelProfile.fresh_quota_saving_s`), and keeps
   the burst as evidence (docs/validation.md, round 12).

Default loss: the sum, over every floating-point tensor in the model's output, of its mean.
"""

from __future__ import annotations

import copy
import datetime as dt
import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import torch
from torch import nn

from srift.domain.profile import PROFILE_SCHEMA_VERSION, LayerGrad, LayerProfile, ModelProfile
from srift.domain.structure import ModelStructure, Precision, parse_precision
from srift.errors import EnvironmentProblem, Infeasible, InvalidInput
from srift.profiling import memory
from srift.profiling.accelerator import MAX_NAME_CHARS, cpu_accelerator_name
from srift.profiling.cpuquota import CpuQuota, measure_burst_cpu_s, read_cpu_quota
from srift.profiling.curves import (
    BendCheck,
    CurveSamples,
    PointTiming,
    breakpoints,
    coefficient_of_variation,
    largest_fitting,
    refine_breakpoints,
)
from srift.profiling.loading import describe


class Clock(StrEnum):
    """What the profiler's timings measure.

    WALL: elapsed time (perf_counter; CUDA-synchronised) — what a training step costs on a machine of
    its own. THREAD: CPU time of the profiling thread (CPU device, one thread only) — excludes time the
    process waits for a core, so profiles and checks stay meaningful on a shared, loaded machine.
    """

    WALL = "wall"
    THREAD = "thread"


ProgressFn = Callable[[str, float], None]
"""Called with the stage ("check", "max batch", "timing", "readiness", "done") and the overall fraction."""

DEFAULT_MAX_BATCH_CPU = 256
DEFAULT_MAX_BATCH_CUDA = 4096
DEFAULT_REPEATS = 7
DEFAULT_WARMUP = 2
DEFAULT_ITERATIONS = 30
MEMORY_PROBE_STEPS = 2
"""Near the budget (first reading over half of it), CPU peak growth is the largest of this many steps:
RSS readings vary by a few MB with the allocator's state."""
PREDICTION_MARGIN = 1.1
"""A CPU batch is not tried when PREDICTION_MARGIN × its extrapolated growth exceeds the hard limit."""
DEFAULT_LOSS_NAME = "default: sum of the means of the output's floating-point tensors"

_STAGES = {"check": (0.0, 0.03), "max batch": (0.03, 0.25), "timing": (0.25, 0.75), "readiness": (0.75, 1.0)}


def default_loss(output: Any) -> torch.Tensor:
    """Sum of the means of every floating-point tensor in `output` (tensor, sequence or mapping)."""
    tensors = [t for t in _tensors(output) if t.is_floating_point() or t.is_complex()]
    if not tensors:
        raise TypeError(f"the model's output ({type(output).__name__}) holds no floating-point tensor")
    total = tensors[0].float().mean()
    for t in tensors[1:]:
        total = total + t.float().mean()
    return total.real if total.is_complex() else total


def parse_device(device: str) -> torch.device:
    """Accept "cpu", "cuda" or "cuda:N"; CUDA must be present here."""
    text = device.strip().lower()
    if text != "cpu" and text != "cuda" and not (text.startswith("cuda:") and text[5:].isdigit()):
        raise InvalidInput(
            f"device {device!r} is not cpu, cuda or cuda:N",
            hint="pass --device cpu or cuda:0",
            field="device",
        )
    if text == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            f"device {device!r} was asked for but this machine has no usable CUDA device",
            hint="profile on a GPU host (e.g. via a profile job) or pass --device cpu",
            field="device",
        )
    index = int(text[5:]) if ":" in text else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise InvalidInput(
            f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)",
            hint="pick an index below the device count",
            field="device",
        )
    return torch.device("cuda", index)


def clock_function(clock: Clock | str, *, device: torch.device, threads: int) -> Callable[[], float]:
    """The timer for `clock`; THREAD needs the CPU device and one intra-op thread."""
    try:
        chosen = Clock(clock)
    except ValueError:
        raise InvalidInput(f"unknown clock {clock!r}", hint="use wall or thread", field="clock") from None
    if chosen is Clock.WALL:
        return time.perf_counter
    if device.type != "cpu" or threads != 1:
        raise InvalidInput(
            f"the thread clock needs --device cpu and --threads 1 (got {device}, {threads} threads)",
            hint="add --threads 1, or use --clock wall",
            field="clock",
        )
    return time.thread_time


@dataclass(frozen=True, slots=True)
class _Layer:
    name: str
    params: tuple[int, ...]
    grad_bytes: int


SPLIT_ABOVE_PARAMS = 2
"""A module owning more trainable parameters than this (a multi-layer GRU or LSTM: four per layer; a user's
module of many `nn.Parameter`s) is one layer per parameter: its parameters get their gradients at
different times of backward and DDP buckets them one by one (docs/validation.md, cause 7). A weight and
its bias stay one layer."""


def trainable_layers(model: nn.Module) -> list[_Layer]:
    """Modules that own trainable parameters, each parameter (tied ones included) assigned once; a module
    with more than `SPLIT_ABOVE_PARAMS` of them is split into one layer per parameter (`module.param`).

    Parameter indices refer to `unique_trainable_parameters(model)`.
    """
    index = {id(p): i for i, p in enumerate(unique_trainable_parameters(model))}
    seen: set[int] = set()
    layers: list[_Layer] = []
    for name, module in model.named_modules():
        own: list[tuple[str, int, int]] = []
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            own.append((param_name, index[id(param)], param.numel() * param.element_size()))
        layer = name or "<root>"
        if len(own) > SPLIT_ABOVE_PARAMS:
            layers += [_Layer(name=f"{layer}.{p}", params=(i,), grad_bytes=b) for p, i, b in own]
        elif own:
            layers.append(
                _Layer(name=layer, params=tuple(i for _, i, _ in own), grad_bytes=sum(b for *_, b in own))
            )
    return layers


def unique_trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def trainable_bytes(model: nn.Module) -> int:
    """Bytes of the model's trainable parameters, shared parameters counted once."""
    return sum(p.numel() * p.element_size() for p in unique_trainable_parameters(model))


@dataclass
class _Bench:
    """The model, its inputs and loss on one device, with one timed training step."""

    model: nn.Module
    make_input: Callable[[int], Any]
    loss_fn: Callable[[Any], torch.Tensor]
    device: torch.device
    model_desc: str
    input_desc: str
    loss_desc: str
    now: Callable[[], float] = time.perf_counter
    precision: Precision = Precision.FP32
    scaler: Any = None

    def __post_init__(self) -> None:
        if self.precision is Precision.FP16:
            self.scaler = torch.amp.GradScaler(self.device.type)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def inputs(self, batch: int) -> Any:
        return _to_device(self.make_input(batch), self.device)

    def autocast(self) -> AbstractContextManager[Any]:
        """`torch.autocast` in the profile's dtype for fp16/bf16; nothing otherwise."""
        if self.precision.autocast:
            dtype = torch.float16 if self.precision is Precision.FP16 else torch.bfloat16
            return torch.autocast(self.device.type, dtype=dtype)
        return nullcontext()

    def loss(self, inputs: Any) -> torch.Tensor:
        """Forward and loss, under autocast for fp16/bf16."""
        with self.autocast():
            return self.loss_fn(call_model(self.model, inputs))

    def backward(self, loss: torch.Tensor) -> None:
        """Backward; for fp16 through the gradient scaler, as mixed-precision training runs it."""
        _backward(self.scaler.scale(loss) if self.scaler is not None else loss)

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def step(self, inputs: Any) -> tuple[float, float]:
        """One forward (with loss) and backward; returns their seconds.

        On CUDA the two phases are timed with CUDA events recorded on the stream around them, read after
        a synchronisation; elsewhere with the bench's clock.
        """
        self.model.zero_grad(set_to_none=True)
        if self.cuda:
            start, mid, end = _cuda_event(), _cuda_event(), _cuda_event()
            self.sync()
            start.record()
            loss = self.loss(inputs)
            mid.record()
            self.backward(loss)
            end.record()
            end.synchronize()
            return start.elapsed_time(mid) / 1e3, mid.elapsed_time(end) / 1e3
        t0 = self.now()
        loss = self.loss(inputs)
        t1 = self.now()
        self.backward(loss)
        t2 = self.now()
        return t1 - t0, t2 - t1


class _Progress:
    def __init__(self, fn: ProgressFn | None, stages: dict[str, tuple[float, float]] | None = None) -> None:
        self.fn = fn
        self.stages = _STAGES if stages is None else stages

    def __call__(self, stage: str, fraction: float) -> None:
        if self.fn is None:
            return
        lo, hi = self.stages.get(stage, (1.0, 1.0))
        self.fn(stage, lo + (hi - lo) * min(max(fraction, 0.0), 1.0))


def profile_model(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    *,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    device: str = "cpu",
    threads: int | None = None,
    max_batch: int | None = None,
    accelerator: str | None = None,
    memory_budget_bytes: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    iterations: int = DEFAULT_ITERATIONS,
    model_name: str | None = None,
    clock: Clock | str = Clock.WALL,
    refine: bool = True,
    progress: ProgressFn | None = None,
    precision: Precision | str = Precision.FP32,
) -> ModelProfile:
    """Profile a model on this machine (see the module docstring for the method) and return its ModelProfile.

    `model_factory()` returns the nn.Module; `input_factory(batch)` returns one input batch (a tensor, a
    tuple/list of positional tensors, or a dict of keyword tensors); `loss_fn(output)` returns the scalar to
    backpropagate (default: see `default_loss`). `max_batch` caps the search (default 256 on CPU, 4096 on
    CUDA). `threads` sets torch's intra-op threads for the run. `accelerator` overrides the recorded device
    name (e.g. a testbed or EC2 instance type). `repeats`/`warmup` are per curve point; `iterations` (≥ 30
    for the paper's spread measure) drive readiness, `exec_prob` and `straggler_cv`. `clock` picks wall
    time (default) or, on CPU with one thread, the thread's CPU time (see Clock). `refine=False` keeps the
    paper's four breakpoints even where the curve bends between them (see `curves.refine_breakpoints`).
    `precision` times under `torch.autocast` for fp16/bf16 (fp16 with a gradient scaler), with TF32 matrix
    products for tf32, strict float32 for fp32 (see `precision_flags`). The model's structure (per-layer
    FLOPs, bytes and memory; `srift.profiling.structure`) is counted too, in the same precision.
    """
    started = time.perf_counter()
    prec = parse_precision(precision)
    _check_positive(repeats=repeats, warmup=warmup + 1, iterations=iterations)
    if threads is not None and threads < 1:
        raise InvalidInput(f"{threads} is below 1", hint="pass --threads 1 or more", field="threads")
    if memory_budget_bytes is not None and memory_budget_bytes < 1:
        raise InvalidInput("must be positive", hint="give the budget in bytes", field="memory_budget_bytes")
    if model_name is not None and not (0 < len(model_name.strip()) <= MAX_NAME_CHARS):
        raise InvalidInput(
            f"must be 1–{MAX_NAME_CHARS} characters", hint="give a short model name", field="model_name"
        )
    if accelerator is not None and not (0 < len(accelerator.strip()) <= MAX_NAME_CHARS):
        raise InvalidInput(
            f"must be 1–{MAX_NAME_CHARS} characters",
            hint="give a short accelerator name",
            field="accelerator",
        )
    dev = parse_device(device)
    cap = (
        max_batch
        if max_batch is not None
        else (DEFAULT_MAX_BATCH_CUDA if dev.type == "cuda" else DEFAULT_MAX_BATCH_CPU)
    )
    if cap < 1:
        raise InvalidInput(f"{cap} is below 1", hint="pass --max-batch 1 or more", field="max_batch")
    report = _Progress(progress)
    with _threads(threads) as used_threads, precision_flags(prec, dev):
        now = clock_function(clock, device=dev, threads=used_threads)
        report("check", 0.0)
        bench = _build_bench(model_factory, input_factory, loss_fn, dev, precision=prec)
        bench.now = now
        report("check", 1.0)
        search = _search_max_batch(bench, cap=cap, budget_bytes=memory_budget_bytes, report=report)
        paper_points = breakpoints(search.max_batch)
        with _no_gc():
            points, measured, checks = _time_curve(
                bench, paper_points, refine=refine, repeats=repeats, warmup=warmup, report=report
            )
            quota = None if bench.cuda else read_cpu_quota()
            if quota is not None and quota.cores < 1.0:
                quota = quota.with_burst(measure_burst_cpu_s(quota))
            ready = _readiness(
                bench,
                batch=paper_points[1] if len(paper_points) > 1 else paper_points[0],
                iterations=iterations,
                report=report,
                cpu_clock=readiness_cpu_clock(dev, threads=used_threads, quota=quota),
            )
            loop_batch = paper_points[1] if len(paper_points) > 1 else paper_points[0]
            overhead = _loop_overhead(bench, batch=loop_batch, repeats=repeats)
            if not bench.cuda:
                overhead["idle_compute"] = _idle_compute(bench, batch=loop_batch, repeats=repeats)
                if quota is not None:
                    overhead["cpu_quota"] = quota.to_extra()
            in_loop = overhead.pop("update_s", None)
            if in_loop is None:
                in_loop = _update_time(bench, batch=loop_batch, repeats=repeats)
            update_s = float(in_loop)
    forward, backward = CurveSamples(
        batches=points,
        forward_s=tuple(tuple(measured.forward_s[b]) for b in points),
        backward_s=tuple(tuple(measured.backward_s[b]) for b in points),
    ).curves()
    name = model_name.strip() if model_name else _default_model_name(model_factory, bench.model)
    if accelerator:
        acc = accelerator.strip()
    elif dev.type == "cuda":
        acc = torch.cuda.get_device_name(dev)[:MAX_NAME_CHARS]
    else:
        acc = cpu_accelerator_name(used_threads)
    structure, structure_note = count_structure_or_note(model_factory, input_factory, loss_fn, prec)
    report("done", 1.0)
    return ModelProfile(
        model=name,
        accelerator=acc,
        max_batch=search.max_batch,
        forward=forward,
        backward=backward,
        layers=ready.layers,
        straggler_cv=ready.straggler_cv,
        update_s=update_s,
        precision=prec,
        structure=structure,
        schema_version=PROFILE_SCHEMA_VERSION,
        torch_version=str(torch.__version__),
        device=str(dev),
        threads=used_threads if dev.type == "cpu" or threads is not None else None,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        extra={
            "profiler": "srift.profiling",
            "clock": Clock(clock).value,
            "model_factory": bench.model_desc,
            "input_factory": bench.input_desc,
            "loss": bench.loss_desc,
            "max_batch_cap": cap,
            "max_batch_limited_by": "cap" if search.max_batch == cap else "memory",
            "memory": search.to_dict(),
            "measured": CurveSamples(
                batches=points,
                forward_s=tuple(tuple(measured.forward_s[b]) for b in points),
                backward_s=tuple(tuple(measured.backward_s[b]) for b in points),
            ).to_dict(),
            "paper_breakpoints": list(paper_points),
            "bend_checks": [c.to_dict() for c in checks] if refine else None,
            "repeats": repeats,
            "warmup": warmup,
            "iterations": iterations,
            "iteration_batch": ready.batch,
            "readiness_clock": ready.clock,
            "iteration_mean_s": ready.mean_iteration_s,
            "update": UPDATE_IN_LOOP if bench.device.type == "cpu" else UPDATE_OPTIMIZER,
            **overhead,
            "trainable_bytes": trainable_bytes(bench.model),
            "profile_s": round(time.perf_counter() - started, 3),
            **({"structure_error": structure_note} if structure_note else {}),
        },
    )


def count_structure_or_note(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    loss_fn: Callable[[Any], torch.Tensor] | None,
    precision: Precision,
) -> tuple[ModelStructure | None, str | None]:
    """The model's structure, or None and why not: a profile stays useful without it (no estimates for
    other accelerators), so a model the counter cannot run does not fail the profile."""
    from srift.profiling.structure import count_structure

    try:
        return count_structure(model_factory, input_factory, loss_fn=loss_fn, precision=precision), None
    except InvalidInput as exc:
        return None, exc.detail


@contextmanager
def precision_flags(precision: Precision, device: torch.device) -> Iterator[None]:
    """On CUDA, allow TF32 matrix products and convolutions for tf32 and forbid them otherwise (PyTorch's
    own default lets cuDNN use TF32 even in "fp32"); restored afterwards. Nothing to set on a CPU."""
    if device.type != "cuda":
        yield
        return
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    allow = precision is Precision.TF32
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


DEFAULT_LAYERS_BATCH = 2
DEFAULT_LAYERS_ITERATIONS = 5
_LAYER_STAGES = {"check": (0.0, 0.4), "readiness": (0.4, 1.0)}


def profile_layers(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    *,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    device: str = "cpu",
    threads: int | None = None,
    batch: int = DEFAULT_LAYERS_BATCH,
    iterations: int = DEFAULT_LAYERS_ITERATIONS,
    model_name: str | None = None,
    progress: ProgressFn | None = None,
    precision: Precision | str = Precision.FP32,
) -> LayerProfile:
    """Gradient sizes and readiness order without the timing sweep (`srift profile --layers-only`).

    Builds the model, checks a step at batch 1 and 2 (as `profile_model`), then runs `iterations` steps at
    `batch` with the readiness hooks: each layer's gradient bytes, `ready_frac` (median over iterations) and
    `exec_prob`. No largest-batch search and no compute curves, so a BERT-base-sized model takes seconds on a
    CPU; the compute times come from elsewhere (`srift profile import`). The model's structure (per-layer
    FLOPs, bytes and memory in `precision`) is counted too: it is what estimates for other GPUs rest on.
    """
    started = time.perf_counter()
    prec = parse_precision(precision)
    _check_positive(batch=batch, iterations=iterations)
    if threads is not None and threads < 1:
        raise InvalidInput(f"{threads} is below 1", hint="pass --threads 1 or more", field="threads")
    if model_name is not None and not (0 < len(model_name.strip()) <= MAX_NAME_CHARS):
        raise InvalidInput(
            f"must be 1–{MAX_NAME_CHARS} characters", hint="give a short model name", field="model_name"
        )
    dev = parse_device(device)
    report = _Progress(progress, _LAYER_STAGES)
    with _threads(threads) as used_threads, precision_flags(prec, dev):
        report("check", 0.0)
        bench = _build_bench(model_factory, input_factory, loss_fn, dev, precision=prec)
        report("check", 1.0)
        with _no_gc():
            quota = None if bench.cuda else read_cpu_quota()
            ready = _readiness(
                bench,
                batch=batch,
                iterations=iterations,
                report=report,
                cpu_clock=readiness_cpu_clock(dev, threads=used_threads, quota=quota),
            )
    name = model_name.strip() if model_name else _default_model_name(model_factory, bench.model)
    structure, structure_note = count_structure_or_note(model_factory, input_factory, loss_fn, prec)
    report("done", 1.0)
    return LayerProfile(
        model=name,
        layers=ready.layers,
        precision=prec,
        structure=structure,
        trainable_bytes=trainable_bytes(bench.model),
        torch_version=str(torch.__version__),
        device=str(dev),
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        extra={
            "profiler": "srift.profiling (layers only)",
            "model_factory": bench.model_desc,
            "input_factory": bench.input_desc,
            "loss": bench.loss_desc,
            "threads": used_threads if dev.type == "cpu" or threads is not None else None,
            "iterations": iterations,
            "iteration_batch": ready.batch,
            "readiness_clock": ready.clock,
            "iteration_mean_s": ready.mean_iteration_s,
            "profile_s": round(time.perf_counter() - started, 3),
            **({"structure_error": structure_note} if structure_note else {}),
        },
    )


def _default_model_name(factory: Callable[[], nn.Module], model: nn.Module) -> str:
    name = getattr(factory, "__name__", None) or type(model).__name__
    return str(name)[:MAX_NAME_CHARS]


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if value < 1:
            raise InvalidInput(f"{value} is too small", hint=f"give a positive {key}", field=key)


@contextmanager
def _threads(threads: int | None) -> Iterator[int]:
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(old)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Keep Python's cyclic collector from pausing inside timed regions."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _tensors(v)


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_device(v, device) for v in value)
    return value


def parameters_without_grad(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
) -> list[str]:
    """Names of the trainable parameters that get no gradient in one training step at batch 2 on the CPU.

    DDP (as `srift validate` and the probes run it) refuses such a model on more than one host ("Expected
    to have finished reduction in the prior iteration"), and one process never notices. Raises what
    profiling would (InvalidInput naming `model_factory`, `input_factory` or `loss_fn`) for a model that
    cannot take a step at all."""
    bench = _build_bench(model_factory, input_factory, loss_fn, torch.device("cpu"))
    _checked_step(bench, _checked_inputs(bench, 2))
    missing = [name for name, p in bench.model.named_parameters() if p.requires_grad and p.grad is None]
    bench.model.zero_grad(set_to_none=True)
    return missing


def call_model(model: nn.Module, inputs: Any) -> Any:
    """The model on an input factory's value: a dict as keyword arguments, a tuple or list as positional
    ones, anything else as the one argument."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, list | tuple):
        return model(*inputs)
    return model(inputs)


def _nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(value))


def _numel(value: Any) -> int:
    return sum(t.numel() for t in _tensors(value))


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _build_bench(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    loss_fn: Callable[[Any], torch.Tensor] | None,
    device: torch.device,
    *,
    precision: Precision = Precision.FP32,
) -> _Bench:
    """Build the model and check one training step at batch 1 and 2, naming the culprit on failure."""
    model_desc, input_desc = describe(model_factory), describe(input_factory)
    loss_desc = describe(loss_fn) if loss_fn is not None else DEFAULT_LOSS_NAME
    try:
        model = model_factory()
    except Exception as exc:
        raise InvalidInput(
            f"model factory `{model_desc}` failed: {_failure(exc)}",
            hint="make the factory build the model without arguments",
            field="model_factory",
        ) from exc
    if not isinstance(model, nn.Module):
        raise InvalidInput(
            f"model factory `{model_desc}` returned {type(model).__name__}, not a torch.nn.Module",
            hint="return the nn.Module itself (not a class, tuple or state dict)",
            field="model_factory",
        )
    try:
        model = model.to(device).train()
    except Exception as exc:
        raise InvalidInput(
            f"model from `{model_desc}` could not move to {device}: {_failure(exc)}",
            hint="check the device",
            field="device",
        ) from exc
    bench = _Bench(
        model=model,
        make_input=input_factory,
        loss_fn=loss_fn or default_loss,
        device=device,
        model_desc=model_desc,
        input_desc=input_desc,
        loss_desc=loss_desc,
        precision=precision,
    )
    numel = {}
    for batch in (1, 2):
        inputs = _checked_inputs(bench, batch)
        numel[batch] = _numel(inputs)
        _checked_step(bench, inputs)
    if numel[2] <= numel[1]:
        raise InvalidInput(
            f"input factory `{input_desc}` returned {numel[2]} elements for batch 2, {numel[1]} for batch 1",
            hint="make the input factory's first argument the batch size and return that many samples",
            field="input_factory",
        )
    if not unique_trainable_parameters(model):
        raise InvalidInput(
            f"model from `{model_desc}` has no trainable parameters",
            hint="profile a model with parameters that require gradients",
            field="model_factory",
        )
    bench.model.zero_grad(set_to_none=True)
    return bench


def _checked_inputs(bench: _Bench, batch: int) -> Any:
    try:
        inputs = bench.make_input(batch)
    except Exception as exc:
        raise InvalidInput(
            f"input factory `{bench.input_desc}` failed for batch {batch}: {_failure(exc)}",
            hint="make the input factory take the batch size and return the input batch",
            field="input_factory",
        ) from exc
    if not any(True for _ in _tensors(inputs)):
        raise InvalidInput(
            f"input factory `{bench.input_desc}` returned {type(inputs).__name__}, not a tensor or tensors",
            hint="return a tensor, a tuple/list of tensors (positional inputs) or a dict (keyword inputs)",
            field="input_factory",
        )
    return _to_device(inputs, bench.device)


def _checked_step(bench: _Bench, inputs: Any) -> None:
    bench.model.zero_grad(set_to_none=True)
    try:
        with bench.autocast():
            output = call_model(bench.model, inputs)
    except Exception as exc:
        if _is_oom(exc):
            raise Infeasible(
                f"model from `{bench.model_desc}` ran out of memory on {bench.device} at batch 1 or 2: "
                f"{_failure(exc)}",
                hint="use a device with more memory or a smaller model",
                field="device",
            ) from exc
        raise InvalidInput(
            f"model from `{bench.model_desc}` failed on the batch from input factory `{bench.input_desc}`: "
            f"{_failure(exc)}",
            hint="make the input factory return a batch of the shape and type the model expects",
            field="input_factory",
        ) from exc
    try:
        with bench.autocast():
            loss = bench.loss_fn(output)
    except Exception as exc:
        raise InvalidInput(
            f"loss `{bench.loss_desc}` failed on the model's output: {_failure(exc)}",
            hint="pass --loss MODULE:FN taking the model's output and returning a scalar tensor",
            field="loss_fn",
        ) from exc
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
        raise InvalidInput(
            f"loss `{bench.loss_desc}` returned {_describe_value(loss)}, not a scalar tensor that needs grad",
            hint="return a one-element tensor computed from the model's output",
            field="loss_fn",
        )
    try:
        bench.backward(loss.reshape(()))
    except Exception as exc:
        raise InvalidInput(
            f"backward through the model from `{bench.model_desc}` failed: {_failure(exc)}",
            hint="make sure the model is differentiable (no in-place edits of saved tensors, no detach)",
            field="model_factory",
        ) from exc


def _backward(loss: torch.Tensor) -> None:
    loss.backward()  # type: ignore[no-untyped-call]


def _cuda_event() -> Any:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _grad_ready_hook(param: torch.Tensor, hook: Callable[[torch.Tensor], None]) -> Any:
    return param.register_post_accumulate_grad_hook(hook)  # type: ignore[no-untyped-call]


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} (requires_grad={value.requires_grad})"
    return f"a {type(value).__name__}"


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)
    )


@dataclass
class _Search:
    method: str
    budget_bytes: int | None
    fixed_bytes: int = 0
    hard_limit_bytes: int | None = None
    max_batch: int = 0
    probes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "budget_bytes": self.budget_bytes,
            "hard_limit_bytes": self.hard_limit_bytes,
            "probes": self.probes,
        }

    def predicted_bytes(self, batch: int) -> float | None:
        """Peak growth at `batch`: the largest measured batch's growth plus the steepest per-sample slope
        among the last three measured batches (the first slope runs from the gradients' size at batch 0)."""
        points = sorted((p["batch"], p["peak_bytes"]) for p in self.probes if p.get("peak_bytes") is not None)
        if not points:
            return None
        points = [(0, min(self.fixed_bytes, points[0][1])), *points][-4:]
        slope = max(max((g2 - g1) / (b2 - b1), 0.0) for (b1, g1), (b2, g2) in itertools.pairwise(points))
        b_last, g_last = points[-1]
        return float(g_last + slope * max(batch - b_last, 0))


def _search_max_batch(bench: _Bench, *, cap: int, budget_bytes: int | None, report: _Progress) -> _Search:
    if bench.cuda:
        search = _Search(method="cuda-peak-allocated", budget_bytes=budget_bytes)
    else:
        budget = budget_bytes if budget_bytes is not None else memory.default_budget_bytes()
        method = "rss-peak" if memory.peak_rss_supported() else "saved-tensors-estimate"
        free = memory.free_bytes()
        hard_limit = None if free is None else max(int(free * memory.HARD_LIMIT_FRACTION), budget or 0)
        search = _Search(
            method=method,
            budget_bytes=budget,
            fixed_bytes=trainable_bytes(bench.model),
            hard_limit_bytes=hard_limit,
        )
    expected_calls = 2 * max(math.log2(cap), 1.0) + 1

    def fits(batch: int) -> bool:
        report("max batch", len(search.probes) / expected_calls)
        probe = _probe(bench, search, batch)
        search.probes.append(probe)
        return bool(probe["fits"])

    search.max_batch = largest_fitting(fits, cap=cap)
    report("max batch", 1.0)
    if search.max_batch < 1:
        first = search.probes[0] if search.probes else {}
        raise Infeasible(
            f"the model does not fit at batch 1 on {bench.device} "
            f"(peak {first.get('peak_bytes')} bytes, budget {search.budget_bytes} bytes)",
            hint="raise --memory-budget or use a device with more memory",
            field="memory_budget_bytes",
        )
    return search


def _probe(bench: _Bench, search: _Search, batch: int) -> dict[str, Any]:
    """Try one training step at `batch` and report its peak memory growth and whether it fits the budget."""
    budget = search.budget_bytes
    if not bench.cuda and search.hard_limit_bytes is not None:
        predicted = search.predicted_bytes(batch)
        if predicted is not None and predicted * PREDICTION_MARGIN > search.hard_limit_bytes:
            return {"batch": batch, "peak_bytes": None, "predicted_bytes": int(predicted), "fits": False}
    inputs = bench.inputs(batch)
    input_bytes = _nbytes(inputs)
    bench.model.zero_grad(set_to_none=True)
    peak: int | None = None
    out_of_memory = False
    try:
        if bench.cuda:
            torch.cuda.reset_peak_memory_stats(bench.device)
            base = torch.cuda.memory_allocated(bench.device)
            bench.step(inputs)
            peak = torch.cuda.max_memory_allocated(bench.device) - base + input_bytes
        elif search.method == "rss-peak":
            peak = input_bytes + _rss_peak(bench, inputs, budget)
        else:
            peak = _saved_tensor_estimate(bench, inputs) + input_bytes
    except RuntimeError as exc:
        if not _is_oom(exc):
            raise
        out_of_memory = True
    inputs = None
    if out_of_memory:
        bench.model.zero_grad(set_to_none=True)
        gc.collect()
        if bench.cuda:
            torch.cuda.empty_cache()
        return {"batch": batch, "peak_bytes": None, "out_of_memory": True, "fits": False}
    bench.model.zero_grad(set_to_none=True)
    return {
        "batch": batch,
        "peak_bytes": peak,
        "fits": budget is None or (peak is not None and peak <= budget),
    }


def _rss_peak(bench: _Bench, inputs: Any, budget: int | None) -> int:
    readings = [memory.peak_rss_growth_bytes(lambda: _discard(bench.step(inputs)))]
    while budget is not None and readings[0] > budget / 2 and len(readings) < MEMORY_PROBE_STEPS:
        readings.append(memory.peak_rss_growth_bytes(lambda: _discard(bench.step(inputs))))
    return max(readings)


def _discard(_: object) -> None:
    return None


def _saved_tensor_estimate(bench: _Bench, inputs: Any) -> int:
    """Where peak RSS cannot be read: 1.5 × (tensors saved for backward + output) + gradients."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = bench.loss(inputs)
    bench.backward(loss)
    return int(1.5 * sum(storages.values())) + trainable_bytes(bench.model)


@dataclass
class _Measured:
    forward_s: dict[int, list[float]]
    backward_s: dict[int, list[float]]


def _time_points(
    bench: _Bench,
    points: tuple[int, ...],
    *,
    repeats: int,
    warmup: int,
    report: Callable[[str, float], None],
) -> _Measured:
    """Time forward and backward at each breakpoint, round-robin over the points, after `warmup` rounds."""
    inputs = {b: bench.inputs(b) for b in points}
    measured = _Measured({b: [] for b in points}, {b: [] for b in points})
    rounds = warmup + repeats
    for r in range(rounds):
        for b in points:
            fw, bw = bench.step(inputs[b])
            if r >= warmup:
                measured.forward_s[b].append(fw)
                measured.backward_s[b].append(bw)
        report("timing", (r + 1) / rounds)
    bench.model.zero_grad(set_to_none=True)
    return measured


def _time_curve(
    bench: _Bench,
    paper_points: tuple[int, ...],
    *,
    refine: bool,
    repeats: int,
    warmup: int,
    report: _Progress,
) -> tuple[tuple[int, ...], _Measured, tuple[BendCheck, ...]]:
    """Time the paper's breakpoints and, with `refine`, the midpoints that show where the curve bends.

    Returns the curve's breakpoints, every sample taken (a batch timed in several rounds keeps all of
    them) and the midpoint checks.
    """
    measured = _Measured({}, {})
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
        got = _time_points(
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


def sample_curve_points(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    batches: Sequence[int],
    *,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    device: str = "cpu",
    threads: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    clock: Clock | str = Clock.WALL,
) -> CurveSamples:
    """Every forward and backward time at `batches`, measured exactly as `profile_model` times its points.

    A further pass over a profile's breakpoints: on a machine whose speed drifts, passes spread over time
    and pooled with `pool_curve_samples` give a curve for the machine's typical speed rather than for the
    few seconds of one profile.
    """
    _check_positive(repeats=repeats, warmup=warmup + 1)
    points = tuple(sorted(set(batches)))
    if not points or points[0] < 1:
        raise InvalidInput(f"{list(batches)} has no batch ≥ 1", hint="give batches ≥ 1", field="batches")
    dev = parse_device(device)
    with _threads(threads) as used_threads:
        bench = _build_bench(model_factory, input_factory, loss_fn, dev)
        bench.now = clock_function(clock, device=dev, threads=used_threads)
        with _no_gc():
            measured = _time_points(bench, points, repeats=repeats, warmup=warmup, report=_Progress(None))
    return CurveSamples(
        batches=points,
        forward_s=tuple(tuple(measured.forward_s[b]) for b in points),
        backward_s=tuple(tuple(measured.backward_s[b]) for b in points),
    )


def measure_step_s(
    model: nn.Module,
    input_factory: Callable[[int], Any],
    batches: list[int],
    *,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    device: str = "cpu",
    threads: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    clock: Clock | str = Clock.WALL,
) -> dict[int, tuple[float, float]]:
    """Median (forward, backward) seconds at each batch, measured like the profile's points (for checks)."""
    dev = parse_device(device)
    bench = _Bench(
        model=model.to(dev).train(),
        make_input=input_factory,
        loss_fn=loss_fn or default_loss,
        device=dev,
        model_desc=type(model).__name__,
        input_desc=describe(input_factory),
        loss_desc=DEFAULT_LOSS_NAME if loss_fn is None else describe(loss_fn),
    )
    with _threads(threads) as used_threads, _no_gc():
        bench.now = clock_function(clock, device=dev, threads=used_threads)
        measured = _time_points(
            bench, tuple(sorted(set(batches))), repeats=repeats, warmup=warmup, report=_Progress(None)
        )
    return {
        b: (statistics.median(measured.forward_s[b]), statistics.median(measured.backward_s[b]))
        for b in measured.forward_s
    }


UPDATE_OPTIMIZER = "torch.optim.SGD (no momentum), median of `repeats` steps"
UPDATE_IN_LOOP = (
    "torch.optim.SGD (no momentum) inside the training loop: median CPU seconds of the step times the loop's "
    "wall/CPU ratio"
)


def _update_time(bench: _Bench, *, batch: int, repeats: int) -> float:
    """Median seconds of one optimizer step over the model's parameters: the update that follows the
    gradient exchange in every iteration (for large models on CPU it is a sizeable share of it)."""
    optimizer = torch.optim.SGD(unique_trainable_parameters(bench.model), lr=1e-12)
    times: list[float] = []
    for r in range(repeats + 1):
        bench.step(bench.inputs(batch))
        if bench.cuda:
            start, end = _cuda_event(), _cuda_event()
            bench.sync()
            start.record()
            bench.optimizer_step(optimizer)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1e3
        else:
            t0 = bench.now()
            bench.optimizer_step(optimizer)
            elapsed = bench.now() - t0
        if r:
            times.append(elapsed)
    bench.model.zero_grad(set_to_none=True)
    return statistics.median(times)


def _loop_overhead(
    bench: _Bench, *, batch: int, repeats: int, cpu_clock: Callable[[], float] = time.process_time
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
            import torch.distributed as dist

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


IDLE_GAPS_S = (0.005, 0.01, 0.03)
"""Idle gaps before a timed step (`_idle_compute`): under a CPU quota of period P and share q a step needs
an idle gap of (1 − q)·P to start with a fresh quota (7.5 ms for a quarter core over 10 ms)."""


def _idle_compute(
    bench: _Bench,
    *,
    batch: int,
    repeats: int,
    gaps_s: tuple[float, ...] = IDLE_GAPS_S,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """A step (zero_grad, forward, backward) after each idle gap of `gaps_s` over the same step back to back
    (right after another), medians of `repeats` interleaved rounds: `{"gaps_s", "ratio", "batch"}`.

    In data-parallel training each rank waits, idle, for the exchange (and for slower ranks) before its
    next step; under a CPU quota that step starts with a fresh quota and ends sooner than the profile's
    back-to-back steps (docs/validation.md, cause 7). Without a quota the ratios are 1 up to noise."""
    inputs = bench.inputs(batch)

    def step() -> float:
        bench.sync()
        t0 = bench.now()
        bench.model.zero_grad(set_to_none=True)
        bench.backward(bench.loss(inputs))
        bench.sync()
        return bench.now() - t0

    back: list[float] = []
    after: list[list[float]] = [[] for _ in gaps_s]
    try:
        step()
        for _ in range(max(1, repeats)):
            back.append(step())
            for k, gap in enumerate(gaps_s):
                sleep(gap)
                after[k].append(step())
    finally:
        bench.model.zero_grad(set_to_none=True)
    base = statistics.median(back)
    ratios = [min(2.0, max(0.05, statistics.median(a) / base)) if base > 0 else 1.0 for a in after]
    return {"gaps_s": list(gaps_s), "ratio": [round(r, 6) for r in ratios], "batch": batch}


def _ddp_world_one(bench: _Bench) -> nn.Module | None:
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


@dataclass
class _Readiness:
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


def _readiness(
    bench: _Bench,
    *,
    batch: int,
    iterations: int,
    report: _Progress,
    cpu_clock: Callable[[], float] | None = None,
) -> _Readiness:
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
                event = _cuda_event()
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
                start_event = _cuda_event()
                end_event = _cuda_event()
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
    return _Readiness(
        layers=tuple(grads[k] for k in order),
        straggler_cv=round(coefficient_of_variation(iteration_s), 6),
        batch=batch,
        mean_iteration_s=round(statistics.fmean(iteration_s), 9),
        clock="cuda" if cuda else ("cpu" if frac_now is cpu_clock else "wall"),
    )
