"""The memory a training step needs, as the allocator sees it, and the activation line through two batches.

A step (zero_grad, forward with loss, backward) at batch b raises the memory in use by its peak growth:
the gradients (in the parameters' dtype) plus everything else alive at that instant — activations saved for
backward, their gradients, temporaries — on top of the input batch. On CUDA the growth is the caching
allocator's (`torch.cuda.max_memory_allocated` over what was allocated before the step); on a CPU, which
keeps no such statistics, it is the peak of live tensor storage during the step, tracked operator by
operator (a `TorchDispatchMode` holding weak references to every storage an operator creates): the bytes
the CPU allocator hands out to tensors, without its own slack. Activations are the growth less the
gradients, a line through the batches measured (`fit_activations`); `srift.domain.memory` adds the parts
that do not depend on the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from srift.domain.structure import Affine
from srift.profiling.bench import Bench, nbytes_of, tensors_in, unique_trainable_parameters

CUDA_METHOD = "cuda-allocator-peak"
CPU_METHOD = "cpu-live-storage"


@dataclass(frozen=True, slots=True)
class StepPeak:
    """One measured step: its batch, peak growth over the memory in use before it (input batch included)
    and, on CUDA, the allocator's peak reserved bytes (allocated plus its cached slack)."""

    batch: int
    peak_bytes: int
    reserved_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batch": self.batch, "step_peak_bytes": self.peak_bytes}
        if self.reserved_bytes is not None:
            out["reserved_bytes"] = self.reserved_bytes
        return out


class LiveStorage(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The peak total of storages created while it is active and still alive (freed ones are noticed at
    the next operator). An operator whose result aliases an argument (a view, an in-place or out= op)
    creates no storage."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.live: dict[Any, int] = {}
        self.total = 0
        self.peak = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if any(r.alias_info is not None for r in func._schema.returns):
            return out
        for ref in [r for r in self.live if r.expired()]:
            self.total -= self.live.pop(ref)
        for t in tensors_in(out):
            ref = StorageWeakRef(t.untyped_storage())  # type: ignore[no-untyped-call]
            if ref not in self.live:
                size = int(t.untyped_storage().nbytes())
                self.live[ref] = size
                self.total += size
        self.peak = max(self.peak, self.total)
        return out


def step_peak(bench: Bench, inputs: Any, batch: int) -> StepPeak:
    """Run one step at `batch` on `inputs` and return its peak growth (see the module docstring)."""
    input_bytes = nbytes_of(inputs)
    bench.model.zero_grad(set_to_none=True)
    if bench.cuda:
        bench.sync()
        torch.cuda.reset_peak_memory_stats(bench.device)
        base = torch.cuda.memory_allocated(bench.device)
        base_reserved = torch.cuda.memory_reserved(bench.device)
        bench.step(inputs)
        peak = torch.cuda.max_memory_allocated(bench.device) - base
        reserved = torch.cuda.max_memory_reserved(bench.device) - base_reserved
        bench.model.zero_grad(set_to_none=True)
        return StepPeak(batch, int(peak + input_bytes), int(reserved + input_bytes))
    with LiveStorage() as live:
        bench.step(inputs)
    bench.model.zero_grad(set_to_none=True)
    return StepPeak(batch, int(live.peak + input_bytes))


def gradient_bytes(bench: Bench) -> int:
    """Bytes of the gradients of the model's trainable parameters (each in its parameter's dtype)."""
    return sum(p.numel() * p.element_size() for p in unique_trainable_parameters(bench.model))


def fit_activations(points: Sequence[StepPeak], *, gradient_bytes: int) -> Affine:
    """The least-squares line of (peak growth − gradients) over the points' batches; needs two distinct
    batches. The slope is clipped at 0; the fixed part may be negative: where activations are large the
    step peaks before backward has made every gradient (a transformer's peak at batch 8 holds half of
    them), and the line through large batches says so (`TrainingMemory` never counts activations below 0)."""
    xs = [float(p.batch) for p in points]
    ys = [float(p.peak_bytes - gradient_bytes) for p in points]
    if len(set(xs)) < 2:
        raise ValueError("the activation line needs two distinct batches")
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    slope = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / math.fsum(
        (x - mx) ** 2 for x in xs
    )
    slope = max(slope, 0.0)
    return Affine(my - slope * mx, slope)


def memory_document(
    bench: Bench,
    points: Sequence[StepPeak],
    *,
    optimizer: str,
    check: StepPeak | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`extra["training_memory"]` of a profile: the parameters, the activation line through `points`, and
    with `check` the measured and predicted peak growth at a batch outside the fit."""
    params = unique_trainable_parameters(bench.model)
    grads = gradient_bytes(bench)
    line = fit_activations(points, gradient_bytes=grads)
    doc: dict[str, Any] = {
        "method": CUDA_METHOD if bench.cuda else CPU_METHOD,
        "parameter_bytes": grads,
        "parameter_elements": sum(p.numel() for p in params),
        "largest_parameter_bytes": max((p.numel() * p.element_size() for p in params), default=0),
        "activation_bytes": [round(line.fixed, 3), round(line.per_sample, 3)],
        "optimizer": optimizer,
        "points": [p.to_dict() for p in points],
    }
    if check is not None:
        predicted = grads + line.at(check.batch)
        doc["check"] = {
            "batch": check.batch,
            "measured_bytes": check.peak_bytes,
            "predicted_bytes": round(predicted),
            "error": round(predicted / check.peak_bytes - 1.0, 6) if check.peak_bytes else None,
        }
    return {**doc, **(extra or {})}
