"""The profiler's largest-batch search: double-then-bisect over training steps that fit the memory budget.

On CUDA the largest batch is the one the training memory model (`srift.domain.memory`) allows under the
device's memory less the margin, and the search confirms it on the device: every probe runs a real step
beside a ballast the size of the optimizer's state and update temporaries (`DeviceBudget`), and fits when
it raised no allocation failure and the memory it needed — allocated before the step, the step's peak
growth, and what the CUDA context holds outside the allocator, measured here — stays within the usable
memory. On CPU the peak resident-set growth of a step plus the input batch must stay within the budget (see
`srift.profiling.memory`), and a batch whose extrapolated growth would pass the hard limit is not tried.
Whatever the device, every allocation failure counts as out of memory and the device holds one probe's
inputs at a time.
"""

from __future__ import annotations

import gc
import itertools
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from srift.domain.memory import DEFAULT_OPTIMIZER, MARGIN_FRACTION, Optimizer, training_memory
from srift.domain.structure import Affine
from srift.errors import Infeasible
from srift.profiling import memory
from srift.profiling.bench import (
    Bench,
    Progress,
    is_out_of_memory,
    nbytes_of,
    trainable_bytes,
    unique_trainable_parameters,
)
from srift.profiling.curves import largest_fitting
from srift.profiling.peak import StepPeak, step_peak

MEMORY_PROBE_STEPS = 2
"""Near the budget (first reading over half of it), CPU peak growth is the largest of this many steps:
RSS readings vary by a few MB with the allocator's state."""
PREDICTION_MARGIN = 1.1
"""A CPU batch is not tried when PREDICTION_MARGIN × its extrapolated growth exceeds the hard limit."""


@dataclass(frozen=True, slots=True)
class DeviceBudget:
    """What a CUDA probe must fit: `usable_bytes` of the device (its memory, or the budget, less the
    margin), with `ballast_bytes` allocated beside the step (the optimizer's state and update temporaries,
    `srift.domain.memory`) and `context_bytes` held outside PyTorch's allocator (the CUDA context, measured
    as total − free − reserved before the search)."""

    capacity_bytes: int
    usable_bytes: int
    ballast_bytes: int
    context_bytes: int
    optimizer: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "margin_fraction": MARGIN_FRACTION}


def device_budget(bench: Bench, *, budget_bytes: int | None, optimizer: Optimizer) -> DeviceBudget:
    """The CUDA device's budget for training `bench`'s model with `optimizer` on one rank."""
    free, total = torch.cuda.mem_get_info(bench.device)
    context = max(total - free - torch.cuda.memory_reserved(bench.device), 0)
    capacity = budget_bytes if budget_bytes is not None else total
    params = unique_trainable_parameters(bench.model)
    model = training_memory(
        parameter_bytes=trainable_bytes(bench.model),
        activation_bytes=Affine(0.0, 0.0),
        optimizer=optimizer,
        cuda=True,
        distributed=False,
        largest_parameter_bytes=max((p.numel() * p.element_size() for p in params), default=0),
    )
    return DeviceBudget(
        capacity_bytes=int(capacity),
        usable_bytes=int(capacity * (1.0 - MARGIN_FRACTION)),
        ballast_bytes=model.optimizer_state_bytes + model.update_workspace_bytes,
        context_bytes=int(context),
        optimizer=optimizer.value,
    )


@dataclass
class MaxBatchSearch:
    method: str
    budget_bytes: int | None
    fixed_bytes: int = 0
    hard_limit_bytes: int | None = None
    max_batch: int = 0
    probes: list[dict[str, Any]] = field(default_factory=list)
    device: DeviceBudget | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "budget_bytes": self.budget_bytes,
            "hard_limit_bytes": self.hard_limit_bytes,
            "probes": self.probes,
            **({"device": self.device.to_dict()} if self.device is not None else {}),
        }

    def step_peaks(self) -> list[StepPeak]:
        """The CUDA probes that ran, as measured steps (for the activation line)."""
        return [
            StepPeak(p["batch"], p["peak_bytes"], p.get("reserved_bytes"))
            for p in self.probes
            if p.get("peak_bytes") is not None and "reserved_bytes" in p
        ]

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


def search_max_batch(
    bench: Bench,
    *,
    cap: int,
    budget_bytes: int | None,
    report: Progress,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
) -> MaxBatchSearch:
    if bench.cuda:
        search = MaxBatchSearch(
            method="cuda-memory-model",
            budget_bytes=budget_bytes,
            device=device_budget(bench, budget_bytes=budget_bytes, optimizer=optimizer),
        )
    else:
        budget = budget_bytes if budget_bytes is not None else memory.default_budget_bytes()
        method = "rss-peak" if memory.peak_rss_supported() else "saved-tensors-estimate"
        free = memory.free_bytes()
        hard_limit = None if free is None else max(int(free * memory.HARD_LIMIT_FRACTION), budget or 0)
        search = MaxBatchSearch(
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
        if search.device is not None:
            dev = search.device
            needed = first.get("needed_bytes")
            raise Infeasible(
                f"training at batch 1 with {dev.optimizer} does not fit {bench.device}: "
                + (f"{needed / 2**30:.2f} GiB needed" if needed else "out of memory")
                + f", {dev.usable_bytes / 2**30:.2f} GiB usable ({dev.ballast_bytes / 2**30:.2f} GiB of "
                "optimizer state and update temporaries)",
                hint="use a GPU with more memory, --optimizer sgd, or shard the model (not profiled here)",
                field="device",
            )
        raise Infeasible(
            f"the model does not fit at batch 1 on {bench.device} "
            f"(peak {first.get('peak_bytes')} bytes, budget {search.budget_bytes} bytes)",
            hint="raise --memory-budget or use a device with more memory",
            field="memory_budget_bytes",
        )
    return search


def _probe(bench: Bench, search: MaxBatchSearch, batch: int) -> dict[str, Any]:
    """Try one training step at `batch` and report its peak memory growth and whether it fits the budget."""
    budget = search.budget_bytes
    if not bench.cuda and search.hard_limit_bytes is not None:
        predicted = search.predicted_bytes(batch)
        if predicted is not None and predicted * PREDICTION_MARGIN > search.hard_limit_bytes:
            return {"batch": batch, "peak_bytes": None, "predicted_bytes": int(predicted), "fits": False}
    bench.model.zero_grad(set_to_none=True)
    peak: int | None = None
    needed: int | None = None
    reserved: int | None = None
    out_of_memory = False
    inputs: Any = None
    ballast: Any = None
    try:
        if search.device is not None:
            ballast = torch.empty(search.device.ballast_bytes, dtype=torch.uint8, device=bench.device)
            inputs = bench.inputs(batch)
            measured = step_peak(bench, inputs, batch)
            peak, reserved = measured.peak_bytes, measured.reserved_bytes
            before = torch.cuda.memory_allocated(bench.device) - nbytes_of(inputs)
            needed = before + peak + search.device.context_bytes
        else:
            inputs = bench.inputs(batch)
            input_bytes = nbytes_of(inputs)
            if search.method == "rss-peak":
                peak = input_bytes + _rss_peak(bench, inputs, budget)
            else:
                peak = _saved_tensor_estimate(bench, inputs) + input_bytes
    except Exception as exc:  # every allocation failure, wherever it is raised, is out of memory
        if not is_out_of_memory(exc):
            raise
        out_of_memory = True
    del inputs, ballast
    if out_of_memory:
        bench.model.zero_grad(set_to_none=True)
        gc.collect()
        if bench.cuda:
            torch.cuda.empty_cache()
        return {"batch": batch, "peak_bytes": None, "out_of_memory": True, "fits": False}
    bench.model.zero_grad(set_to_none=True)
    if search.device is not None and needed is not None:
        return {
            "batch": batch,
            "peak_bytes": peak,
            "reserved_bytes": reserved,
            "needed_bytes": needed,
            "fits": needed <= search.device.usable_bytes,
        }
    return {
        "batch": batch,
        "peak_bytes": peak,
        "fits": budget is None or (peak is not None and peak <= budget),
    }


def _rss_peak(bench: Bench, inputs: Any, budget: int | None) -> int:
    readings = [memory.peak_rss_growth_bytes(lambda: _discard(bench.step(inputs)))]
    while budget is not None and readings[0] > budget / 2 and len(readings) < MEMORY_PROBE_STEPS:
        readings.append(memory.peak_rss_growth_bytes(lambda: _discard(bench.step(inputs))))
    return max(readings)


def _discard(_: object) -> None:
    return None


def _saved_tensor_estimate(bench: Bench, inputs: Any) -> int:
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
