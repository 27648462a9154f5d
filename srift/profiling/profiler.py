"""The compute profiler of Srift §4.1: largest batch, forward/backward curves, gradient readiness, spread.

`profile_model` runs the user's model for real:

1. **Check** — build the model, run forward, loss and backward at batch 1 and 2; any failure is an
   InvalidInput naming the factory and the underlying exception.
2. **Largest batch and training memory** — double-then-bisect (`curves.largest_fitting`) up to the cap.
   On CUDA the largest batch is what the training memory model allows under the device's memory (or the
   budget) less its margin, confirmed by real steps beside a ballast of the optimizer's state; any
   allocation failure is out of memory (`srift.profiling.search`). The activation line (the step's peak
   growth less the gradients, `srift.profiling.peak`) is drawn through the allocator peaks of the two
   largest probes that ran on CUDA and, on CPU, through the live tensor storage of steps at ⅓ and ⅔ of
   the largest batch, checked at the largest: `extra["training_memory"]`, which plans read
   (`srift.domain.memory`). On CPU a batch fits if the peak resident-set growth of a forward+backward
   step (the larger of two, see srift.profiling.memory), plus the input batch, stays within the budget
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
   between tries and gaps, 0.63 … 0.65 by CPU time, docs/validation.md at 0856b84, cause 9), while its
   share of the backward's work does not. Without a quota the two agree; on CUDA the fractions come from
   CUDA events.
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
   `timing.loop_overhead`.
   Where the process runs under a CFS CPU quota (a container's CPU limit, a testbed host), its share of a
   core and its period are read from the cgroup into `extra["cpu_quota"]` (`srift.profiling.cpuquota`); the
   simulator takes a waiting rank's saving from them (`ModelProfile.fresh_quota_saving_s`).

Default loss: the sum, over every floating-point tensor in the model's output, of its mean.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from srift.domain.memory import DEFAULT_OPTIMIZER, Optimizer, parse_optimizer
from srift.domain.profile import PROFILE_SCHEMA_VERSION, LayerProfile, ModelProfile
from srift.domain.structure import ModelStructure, Precision, parse_precision
from srift.errors import InvalidInput
from srift.profiling.accelerator import MAX_NAME_CHARS, cpu_accelerator_name
from srift.profiling.bench import (
    Bench,
    Clock,
    Progress,
    ProgressFn,
    build_bench,
    call_model,
    checked_inputs,
    checked_step,
    clock_function,
    default_loss,
    no_gc,
    parse_device,
    precision_flags,
    torch_threads,
    trainable_bytes,
)
from srift.profiling.cpuquota import read_cpu_quota
from srift.profiling.curves import BendCheck, CurveSamples, breakpoints
from srift.profiling.defaults import (
    DEFAULT_ITERATIONS,
    DEFAULT_LAYERS_BATCH,
    DEFAULT_LAYERS_ITERATIONS,
    DEFAULT_REPEATS,
    DEFAULT_WARMUP,
)
from srift.profiling.peak import memory_document, step_peak
from srift.profiling.readiness import Readiness, measure_readiness, readiness_cpu_clock
from srift.profiling.search import MaxBatchSearch, search_max_batch
from srift.profiling.timing import (
    UPDATE_IN_LOOP,
    UPDATE_OPTIMIZER,
    Measured,
    loop_overhead,
    time_curve,
    time_points,
    update_time,
)

__all__ = [
    "Clock",
    "ProgressFn",
    "call_model",
    "default_loss",
    "parameters_without_grad",
    "profile_layers",
    "profile_model",
    "sample_curve_points",
]

DEFAULT_MAX_BATCH_CPU = 256
DEFAULT_MAX_BATCH_CUDA = 4096


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
    strict_fp32: bool = False,
    optimizer: Optimizer | str = DEFAULT_OPTIMIZER,
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
    products and convolutions for tf32; fp32 (and the float32 parts of fp16/bf16) train under PyTorch's
    default settings (IEEE matrix products, TF32 cuDNN) unless `strict_fp32` (see `precision_flags`). The
    model's structure (per-layer FLOPs, bytes and memory; `srift.profiling.structure`) is counted too, in
    the same precision. `optimizer` is the one the training memory model (`extra["training_memory"]`)
    assumes; on CUDA it decides the largest batch (see `srift.profiling.search`).
    """
    started = time.perf_counter()
    prec = parse_precision(precision)
    opt = parse_optimizer(optimizer)
    _check_positive(repeats=repeats, warmup=warmup + 1, iterations=iterations)
    _check_threads(threads)
    if memory_budget_bytes is not None and memory_budget_bytes < 1:
        raise InvalidInput("must be positive", hint="give the budget in bytes", field="memory_budget_bytes")
    _check_name(model_name, field="model_name", hint="give a short model name")
    _check_name(accelerator, field="accelerator", hint="give a short accelerator name")
    dev = parse_device(device)
    cap = _search_cap(max_batch, dev)
    report = Progress(progress)
    with torch_threads(threads) as used_threads, precision_flags(prec, dev, strict_fp32=strict_fp32) as math:
        now = clock_function(clock, device=dev, threads=used_threads)
        report("check", 0.0)
        bench = build_bench(model_factory, input_factory, loss_fn, dev, precision=prec)
        bench.now = now
        report("check", 1.0)
        search = search_max_batch(
            bench, cap=cap, budget_bytes=memory_budget_bytes, report=report, optimizer=opt
        )
        paper_points = breakpoints(search.max_batch)
        training, training_note = training_memory_or_note(bench, search, paper_points, optimizer=opt)
        with no_gc():
            timed = _time_training(
                bench,
                paper_points,
                refine=refine,
                repeats=repeats,
                warmup=warmup,
                iterations=iterations,
                report=report,
                device=dev,
                threads=used_threads,
            )
    forward, backward = timed.samples.curves()
    structure, structure_note = count_structure_or_note(model_factory, input_factory, loss_fn, prec)
    report("done", 1.0)
    extra = {
        "profiler": "srift.profiling",
        "clock": Clock(clock).value,
        **({"float32_math": math} if math else {}),
        **_bench_extra(bench),
        "max_batch_cap": cap,
        "max_batch_limited_by": "cap" if search.max_batch == cap else "memory",
        "memory": search.to_dict(),
        **({"training_memory": training} if training else {}),
        **({"training_memory_error": training_note} if training_note else {}),
        **timed.extra(paper_points, refine=refine, repeats=repeats, warmup=warmup, iterations=iterations),
        "update": UPDATE_IN_LOOP if bench.device.type == "cpu" else UPDATE_OPTIMIZER,
        **timed.overhead,
        "trainable_bytes": trainable_bytes(bench.model),
        "profile_s": round(time.perf_counter() - started, 3),
        **({"structure_error": structure_note} if structure_note else {}),
    }
    return ModelProfile(
        model=model_name.strip() if model_name else _default_model_name(model_factory, bench.model),
        accelerator=_accelerator_name(accelerator, dev, threads=used_threads),
        max_batch=search.max_batch,
        forward=forward,
        backward=backward,
        layers=timed.ready.layers,
        straggler_cv=timed.ready.straggler_cv,
        update_s=timed.update_s,
        precision=prec,
        structure=structure,
        schema_version=PROFILE_SCHEMA_VERSION,
        torch_version=str(torch.__version__),
        device=str(dev),
        threads=used_threads if dev.type == "cpu" or threads is not None else None,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        extra=extra,
    )


@dataclass(frozen=True, slots=True)
class _Timed:
    """What `profile_model` timed after the largest-batch search: the curve's points and samples, the
    midpoint checks, readiness and spread, and the training loop's overhead and optimizer step."""

    samples: CurveSamples
    checks: tuple[BendCheck, ...]
    ready: Readiness
    overhead: dict[str, Any]
    update_s: float

    def extra(
        self, paper_points: tuple[int, ...], *, refine: bool, repeats: int, warmup: int, iterations: int
    ) -> dict[str, Any]:
        """The profile's `extra` keys about the timing: raw samples, breakpoints, checks and readiness."""
        return {
            "measured": self.samples.to_dict(),
            "paper_breakpoints": list(paper_points),
            "bend_checks": [c.to_dict() for c in self.checks] if refine else None,
            "repeats": repeats,
            "warmup": warmup,
            "iterations": iterations,
            "iteration_batch": self.ready.batch,
            "readiness_clock": self.ready.clock,
            "iteration_mean_s": self.ready.mean_iteration_s,
        }


def _time_training(
    bench: Bench,
    paper_points: tuple[int, ...],
    *,
    refine: bool,
    repeats: int,
    warmup: int,
    iterations: int,
    report: Progress,
    device: torch.device,
    threads: int,
) -> _Timed:
    """Steps 3–5 of the module docstring: the curves, readiness and spread at the second breakpoint, and
    the loop's overhead and optimizer step there (under the CPU quota, when there is one)."""
    points, measured, checks = time_curve(
        bench, paper_points, refine=refine, repeats=repeats, warmup=warmup, report=report
    )
    quota = None if bench.cuda else read_cpu_quota()
    loop_batch = paper_points[1] if len(paper_points) > 1 else paper_points[0]
    ready = measure_readiness(
        bench,
        batch=loop_batch,
        iterations=iterations,
        report=report,
        cpu_clock=readiness_cpu_clock(device, threads=threads, quota=quota),
    )
    overhead = loop_overhead(bench, batch=loop_batch, repeats=repeats)
    if quota is not None:
        overhead["cpu_quota"] = quota.to_extra()
    in_loop = overhead.pop("update_s", None)
    if in_loop is None:
        in_loop = update_time(bench, batch=loop_batch, repeats=repeats)
    return _Timed(_samples(points, measured), checks, ready, overhead, float(in_loop))


def _samples(points: tuple[int, ...], measured: Measured) -> CurveSamples:
    """Every forward and backward time taken at `points`, in the order the points were timed."""
    return CurveSamples(
        batches=points,
        forward_s=tuple(tuple(measured.forward_s[b]) for b in points),
        backward_s=tuple(tuple(measured.backward_s[b]) for b in points),
    )


def _bench_extra(bench: Bench) -> dict[str, Any]:
    """What the profile records of the model, input and loss it ran."""
    return {"model_factory": bench.model_desc, "input_factory": bench.input_desc, "loss": bench.loss_desc}


def _accelerator_name(accelerator: str | None, device: torch.device, *, threads: int) -> str:
    """The name the profile goes under: the one given, else the GPU's or the CPU's (with its threads)."""
    if accelerator:
        return accelerator.strip()
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)[:MAX_NAME_CHARS]
    return cpu_accelerator_name(threads)


def _search_cap(max_batch: int | None, device: torch.device) -> int:
    """The largest batch the search may try: `max_batch`, else the device's default."""
    cap = (
        max_batch
        if max_batch is not None
        else (DEFAULT_MAX_BATCH_CUDA if device.type == "cuda" else DEFAULT_MAX_BATCH_CPU)
    )
    if cap < 1:
        raise InvalidInput(f"{cap} is below 1", hint="pass --max-batch 1 or more", field="max_batch")
    return cap


def _check_threads(threads: int | None) -> None:
    if threads is not None and threads < 1:
        raise InvalidInput(f"{threads} is below 1", hint="pass --threads 1 or more", field="threads")


def _check_name(name: str | None, *, field: str, hint: str) -> None:
    """A name given must have 1 to MAX_NAME_CHARS characters besides surrounding blanks."""
    if name is not None and not (0 < len(name.strip()) <= MAX_NAME_CHARS):
        raise InvalidInput(f"must be 1–{MAX_NAME_CHARS} characters", hint=hint, field=field)


def training_memory_or_note(
    bench: Bench, search: MaxBatchSearch, paper_points: tuple[int, ...], *, optimizer: Optimizer
) -> tuple[dict[str, Any] | None, str | None]:
    """`extra["training_memory"]`: the activation line through measured steps, and why not where it
    cannot be drawn. On CUDA the two largest of the search's probes that ran are the points; on a CPU one
    step at ⅓ and one at ⅔ of the largest batch (1 and 2 for small ones), checked at the largest."""
    if bench.cuda:
        # the two largest batches that ran: small batches peak elsewhere in the step (once every gradient
        # exists), so a line through them misses the activations of the batches that matter
        ran = {p.batch: p for p in search.step_peaks()}
        points = [ran[b] for b in sorted(ran)[-2:]]
        check = None
        extra = {"device": search.device.to_dict()} if search.device is not None else {}
    else:
        fit = sorted({b for b in paper_points[1:3]}) if len(paper_points) >= 3 else []
        if len(fit) < 2:
            fit = [b for b in (1, 2) if b <= search.max_batch]
        points = [step_peak(bench, bench.inputs(b), b) for b in fit]
        top = search.max_batch
        check = step_peak(bench, bench.inputs(top), top) if top not in fit else None
        extra = {}
    if len({p.batch for p in points}) < 2:
        return None, f"only {len(points)} batch(es) ran, two are needed for the activation line"
    return memory_document(bench, points, optimizer=optimizer.value, check=check, extra=extra), None


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
    _check_threads(threads)
    _check_name(model_name, field="model_name", hint="give a short model name")
    dev = parse_device(device)
    report = Progress(progress, _LAYER_STAGES)
    with torch_threads(threads) as used_threads, precision_flags(prec, dev):
        report("check", 0.0)
        bench = build_bench(model_factory, input_factory, loss_fn, dev, precision=prec)
        report("check", 1.0)
        with no_gc():
            quota = None if bench.cuda else read_cpu_quota()
            ready = measure_readiness(
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
            **_bench_extra(bench),
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
    bench = build_bench(model_factory, input_factory, loss_fn, torch.device("cpu"))
    checked_step(bench, checked_inputs(bench, 2))
    missing = [name for name, p in bench.model.named_parameters() if p.requires_grad and p.grad is None]
    bench.model.zero_grad(set_to_none=True)
    return missing


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
    few seconds of one profile. Also the direct measurement a profile's curve is checked against
    (`CurveSamples.median_times_s`); pass `lambda: model` to time a model already built.
    """
    _check_positive(repeats=repeats, warmup=warmup + 1)
    points = tuple(sorted(set(batches)))
    if not points or points[0] < 1:
        raise InvalidInput(f"{list(batches)} has no batch ≥ 1", hint="give batches ≥ 1", field="batches")
    dev = parse_device(device)
    measured = _time_points_on(
        lambda: build_bench(model_factory, input_factory, loss_fn, dev),
        points,
        device=dev,
        threads=threads,
        clock=clock,
        repeats=repeats,
        warmup=warmup,
    )
    return _samples(points, measured)


def _time_points_on(
    make_bench: Callable[[], Bench],
    points: tuple[int, ...],
    *,
    device: torch.device,
    threads: int | None,
    clock: Clock | str,
    repeats: int,
    warmup: int,
) -> Measured:
    """Time `points` as `profile_model` times its points (its clock, its threads, no garbage collection)
    on the bench `make_bench` returns, built under those threads."""
    with torch_threads(threads) as used_threads:
        bench = make_bench()
        bench.now = clock_function(clock, device=device, threads=used_threads)
        with no_gc():
            return time_points(bench, points, repeats=repeats, warmup=warmup, report=Progress(None))
