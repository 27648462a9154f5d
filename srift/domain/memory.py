"""Training memory per GPU: parameters, gradients, optimizer state, DDP buckets, activations and a reserve.

A data-parallel rank holds, for the whole run, its parameters, their gradients (in the parameters' dtype),
the optimizer's state (`STATE_COPIES` per parameter), under low-precision weights an fp32 master copy, and
under DistributedDataParallel a flat bucket per gradient; the CUDA context and NCCL's buffers sit outside
PyTorch's allocator (`CUDA_CONTEXT_BYTES`, `NCCL_BUFFER_BYTES`). During forward and backward the
activations come on top (affine in the per-GPU batch: measured by `srift profile` from the allocator's peak
at two or more batches, or counted on fake tensors for a model's structure); during the optimizer step,
after the activations are freed, the update's temporaries do (`UPDATE_WORKSPACE_COPIES`). The step's peak
is the persistent parts plus the larger of the two.

The parts are kept apart (`TrainingMemory`) so that a sharding strategy (ZeRO, FSDP) can divide the ones it
shards. The largest batch is the largest whose peak fits the device's memory less `MARGIN_FRACTION`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from srift.domain.profile import ModelProfile
from srift.domain.structure import Affine
from srift.errors import InvalidInput, parse_choice

GIB = 2**30
MIB = 2**20


class Optimizer(StrEnum):
    """The optimizer a training run steps with; it decides the state kept per parameter."""

    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"
    ADAMW = "adamw"


DEFAULT_OPTIMIZER = Optimizer.ADAM
"""What plans assume when a profile does not say (the usual choice for transformers; SGD with momentum,
ResNet's, needs less)."""

STATE_COPIES = {Optimizer.SGD: 0, Optimizer.MOMENTUM: 1, Optimizer.ADAM: 2, Optimizer.ADAMW: 2}
"""State tensors per parameter, each of the parameter's shape and dtype: torch.optim.SGD keeps a
`momentum_buffer` only with momentum; Adam and AdamW keep `exp_avg` and `exp_avg_sq` (torch.optim docs)."""

UPDATE_WORKSPACE_COPIES = {Optimizer.SGD: 0, Optimizer.MOMENTUM: 0, Optimizer.ADAM: 1, Optimizer.ADAMW: 1}
"""Temporaries of the multi-tensor (foreach) update, the default on CUDA, in copies of the parameters: Adam's
and AdamW's `torch._foreach_sqrt(exp_avg_sqs)` (torch/optim/adam.py `_multi_tensor_adam`, torch 2.13);
SGD's updates are in place. On a CPU, where torch steps one parameter at a time, two copies of the largest
parameter (`CPU_WORKSPACE_LARGEST_COPIES`)."""

CPU_WORKSPACE_LARGEST_COPIES = 2
"""torch/optim/adam.py `_single_tensor_adam`: `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)`, two
temporaries of one parameter alive at once."""

MASTER_COPY_BYTES_PER_ELEMENT = 4
"""Low-precision weights (model.half() / bf16 parameters, as Megatron-LM or DeepSpeed train them) keep an
fp32 master copy for the update. Under torch.autocast, what `srift profile` runs, the parameters themselves
stay fp32 and there is no master copy (their low-precision casts live within the step's activations)."""

CUDA_CONTEXT_BYTES = 426 * MIB
"""The CUDA context with lazy module loading (PyTorch's default since 1.13): 426 MiB by nvidia-smi after
the first CUDA call, PyTorch 2.10 on an RTX 6000 Ada (unslothai/unsloth-zoo PR #1053, 2026); "around
400 MB" (pytorch/pytorch#109888, a PyTorch maintainer, CUDA ≥ 11.7). Cited, not measured here."""

NCCL_BUFFER_BYTES = 688 * MIB
"""NCCL's buffers for one process group of more than two ranks, all-reduce through PyTorch: 688 MB on a
4×A100 NVLink node (NVIDIA/nccl#964, 2023; NCCL's maintainer: memory grows with the channel count, ring
uses two connections at any scale, NVIDIA/nccl#864). Socket transport between nodes may need less; no
public figure for it was found, so this one stands for every transport."""

MARGIN_FRACTION = 0.1
"""Share of a device's memory the largest batch leaves unplanned: the caching allocator reserves more than
it hands out (block rounding and fragmentation). A stated policy, not a measurement;
benchmarks/gpu_check.py measures the reserved-over-allocated ratio on a real GPU to check it."""

DDP_BUCKET_SOURCE = (
    "DistributedDataParallel copies each gradient into a flat bucket of the same size unless "
    "gradient_as_bucket_view=True (PyTorch DDP docs: the saving equals the total gradients size)"
)


class Part(StrEnum):
    """The parts of a GPU's memory, in the order plans list them."""

    PARAMETERS = "parameters"
    GRADIENTS = "gradients"
    OPTIMIZER_STATE = "optimizer_state"
    MASTER_WEIGHTS = "master_weights"
    DDP_BUCKETS = "ddp_buckets"
    GATHERED_PARAMETERS = "gathered_parameters"
    """Sharded strategies: the unsharded parameters of the FSDP units alive at once."""
    COMM_BUFFERS = "comm_buffers"
    """Sharded strategies: all-gather and reduce-scatter buffers."""
    ACTIVATIONS = "activations"
    RESERVE = "reserve"


class Fits(Protocol):
    """A memory model whose step peak grows along an activation line (TrainingMemory, StrategyMemory)."""

    @property
    def persistent_bytes(self) -> int: ...

    @property
    def activation_bytes(self) -> Affine: ...

    def peak_bytes(self, batch: float) -> float: ...


def largest_fitting_batch(memory: Fits, usable_bytes: float, *, cap: int) -> int:
    """The largest per-GPU batch whose peak fits `usable_bytes` (0 when batch 1 does not; `cap` when every
    batch fits, the activations not growing with the batch)."""
    if memory.peak_bytes(1) > usable_bytes:
        return 0
    slope = memory.activation_bytes.per_sample
    if slope <= 0:
        return cap
    spare = usable_bytes - memory.persistent_bytes - memory.activation_bytes.fixed
    return int(min(cap, max(1, math.floor(spare / slope))))


@dataclass(frozen=True, slots=True)
class TrainingMemory:
    """Bytes one rank holds while training, part by part (see the module docstring).

    `activation_bytes` is the peak, beyond parameters and gradients, of a forward+backward step at a
    per-GPU batch b (activations saved for backward, their gradients, temporaries, the input batch);
    `update_workspace_bytes` the optimizer step's temporaries, alive when the activations are not. A
    measured line's fixed part may be negative (the step peaks before every gradient exists, so the
    activations there are less than the peak less all gradients); its value is never counted below 0.
    `reserve_bytes` sits outside PyTorch's allocator (`reserve_source` says what it is)."""

    parameter_bytes: int
    gradient_bytes: int
    optimizer_state_bytes: int
    master_weight_bytes: int
    bucket_bytes: int
    activation_bytes: Affine
    update_workspace_bytes: int
    reserve_bytes: int
    optimizer: Optimizer
    activation_source: str = ""
    reserve_source: str = ""

    @property
    def persistent_bytes(self) -> int:
        """What every step holds whatever the batch."""
        return (
            self.parameter_bytes
            + self.gradient_bytes
            + self.optimizer_state_bytes
            + self.master_weight_bytes
            + self.bucket_bytes
            + self.reserve_bytes
        )

    def transient_bytes(self, batch: float) -> float:
        """The larger of the step's activations at `batch` and the update's temporaries."""
        return max(self.activation_bytes.at(batch), float(self.update_workspace_bytes))

    def peak_bytes(self, batch: float) -> float:
        """The step's peak at per-GPU batch `batch`: the sum of `parts(batch)`."""
        return self.persistent_bytes + self.transient_bytes(batch)

    def parts(self, batch: float) -> dict[Part, float]:
        """Each part's bytes at `batch`; `activations` is the step's transient part (the activations, or the
        update's temporaries where those are larger)."""
        return {
            Part.PARAMETERS: float(self.parameter_bytes),
            Part.GRADIENTS: float(self.gradient_bytes),
            Part.OPTIMIZER_STATE: float(self.optimizer_state_bytes),
            Part.MASTER_WEIGHTS: float(self.master_weight_bytes),
            Part.DDP_BUCKETS: float(self.bucket_bytes),
            Part.ACTIVATIONS: self.transient_bytes(batch),
            Part.RESERVE: float(self.reserve_bytes),
        }

    def usable_bytes(self, capacity_bytes: float, *, margin_fraction: float = MARGIN_FRACTION) -> float:
        return capacity_bytes * (1.0 - margin_fraction)

    def largest_batch(
        self, capacity_bytes: float, *, margin_fraction: float = MARGIN_FRACTION, cap: int = 1 << 20
    ) -> int:
        """The largest per-GPU batch whose peak fits `capacity_bytes` less the margin (0 when batch 1 does
        not fit; `cap` when every batch fits, the activations not growing with the batch)."""
        return largest_fitting_batch(
            self, self.usable_bytes(capacity_bytes, margin_fraction=margin_fraction), cap=cap
        )

    def to_dict(self, batch: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "optimizer": self.optimizer.value,
            "parameter_bytes": self.parameter_bytes,
            "gradient_bytes": self.gradient_bytes,
            "optimizer_state_bytes": self.optimizer_state_bytes,
            "master_weight_bytes": self.master_weight_bytes,
            "bucket_bytes": self.bucket_bytes,
            "activation_bytes": self.activation_bytes.to_list(),
            "update_workspace_bytes": self.update_workspace_bytes,
            "reserve_bytes": self.reserve_bytes,
            "activation_source": self.activation_source,
            "reserve_source": self.reserve_source,
        }
        if batch is not None:
            out["batch"] = batch
            out["peak_bytes"] = int(self.peak_bytes(batch))
        return out


def training_memory(
    *,
    parameter_bytes: int,
    activation_bytes: Affine,
    optimizer: Optimizer = DEFAULT_OPTIMIZER,
    cuda: bool = True,
    distributed: bool = True,
    low_precision_weights: bool = False,
    parameter_elements: int | None = None,
    largest_parameter_bytes: int = 0,
    activation_source: str = "",
) -> TrainingMemory:
    """A rank's memory from the parameters' bytes and the measured or counted activations.

    `cuda` adds the CUDA context and takes the foreach update's temporaries; `distributed` (DDP, world
    size > 1) adds a bucket per gradient and NCCL's buffers (on CUDA). `low_precision_weights` (parameters
    held in fp16/bf16) adds an fp32 master copy, and the optimizer's state is kept in fp32 beside it;
    `parameter_elements` (needed then) counts the parameters. On a CPU the update's temporaries are two
    copies of `largest_parameter_bytes`."""
    if parameter_bytes < 0 or largest_parameter_bytes < 0:
        raise InvalidInput("must be ≥ 0", hint="give byte counts", field="parameter_bytes")
    copies = STATE_COPIES[optimizer]
    if low_precision_weights:
        if parameter_elements is None:
            raise InvalidInput(
                "low-precision weights need the parameter count",
                hint="give parameter_elements",
                field="parameter_elements",
            )
        master = MASTER_COPY_BYTES_PER_ELEMENT * parameter_elements
        state = copies * master
        update_unit = master
    else:
        master = 0
        state = copies * parameter_bytes
        update_unit = parameter_bytes
    if cuda:
        workspace = UPDATE_WORKSPACE_COPIES[optimizer] * update_unit
    else:
        workspace = CPU_WORKSPACE_LARGEST_COPIES * largest_parameter_bytes if copies == 2 else 0
    reserve = 0
    reserve_source = "none (a CPU has no device context)"
    if cuda:
        reserve = CUDA_CONTEXT_BYTES + (NCCL_BUFFER_BYTES if distributed else 0)
        reserve_source = "CUDA context 426 MiB (unsloth-zoo #1053, pytorch#109888)" + (
            " + NCCL buffers 688 MiB (NVIDIA/nccl#964)" if distributed else ""
        )
    return TrainingMemory(
        parameter_bytes=parameter_bytes,
        gradient_bytes=parameter_bytes,
        optimizer_state_bytes=state,
        master_weight_bytes=master,
        bucket_bytes=parameter_bytes if distributed else 0,
        activation_bytes=activation_bytes,
        update_workspace_bytes=workspace,
        reserve_bytes=reserve,
        optimizer=optimizer,
        activation_source=activation_source,
        reserve_source=reserve_source,
    )


def parse_optimizer(value: Any, *, field: str = "optimizer") -> Optimizer:
    """An Optimizer from its name (any case, spaces around ignored); InvalidInput listing the choices
    otherwise."""
    return parse_choice(Optimizer, str(value).strip().lower(), what="optimizer", field=field)


def profile_memory(
    profile: ModelProfile,
    *,
    optimizer: Optimizer | None = None,
    cuda: bool = True,
    distributed: bool = True,
) -> TrainingMemory | None:
    """A rank's memory for `profile`'s model: activations measured by `srift profile`
    (`extra["training_memory"]`), else counted for its structure; None when the profile has neither.

    The optimizer is `optimizer`, else the one the profile names, else `DEFAULT_OPTIMIZER`."""
    measured = (profile.extra or {}).get("training_memory")
    if measured is not None:
        doc = _measured(measured)
        return training_memory(
            parameter_bytes=doc["parameter_bytes"],
            activation_bytes=doc["activation_bytes"],
            optimizer=optimizer or doc["optimizer"] or DEFAULT_OPTIMIZER,
            cuda=cuda,
            distributed=distributed,
            largest_parameter_bytes=doc["largest_parameter_bytes"],
            activation_source=f"measured: {doc['method']} at batches {doc['batches']}",
        )
    if profile.structure is not None:
        use = profile.structure.memory
        return training_memory(
            parameter_bytes=use.parameter_bytes,
            activation_bytes=use.activation_bytes,
            optimizer=optimizer or DEFAULT_OPTIMIZER,
            cuda=cuda,
            distributed=distributed,
            activation_source=f"counted: {profile.structure.method}",
        )
    return None


def _measured(raw: Any) -> dict[str, Any]:
    """The fields of `extra["training_memory"]` the model reads; InvalidInput naming the one at fault."""
    where = "extra.training_memory"
    if not isinstance(raw, dict):
        raise InvalidInput("must be an object", hint="give the memory `srift profile` wrote", field=where)

    def count(key: str, default: int | None = None) -> int:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(
                f"{value!r} is not a byte count ≥ 0", hint="give an integer", field=f"{where}.{key}"
            )
        return value

    line = raw.get("activation_bytes")
    if (
        not isinstance(line, list)
        or len(line) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in line)
        or line[1] < 0
    ):
        raise InvalidInput(
            f"{line!r} is not [fixed, per_sample] bytes (per_sample ≥ 0)",
            hint="give the activation line `srift profile` fitted",
            field=f"{where}.activation_bytes",
        )
    name = raw.get("optimizer")
    return {
        "parameter_bytes": count("parameter_bytes"),
        "largest_parameter_bytes": count("largest_parameter_bytes", 0),
        "activation_bytes": Affine(float(line[0]), float(line[1])),
        "optimizer": parse_optimizer(name, field=f"{where}.optimizer") if name is not None else None,
        "method": str(raw.get("method", "measured"))[:200],
        "batches": [p.get("batch") for p in raw.get("points", []) if isinstance(p, dict)][:8],
    }


@dataclass(frozen=True, slots=True)
class BatchLimit:
    """The largest per-GPU batch of a profile on one GPU instance type, and why.

    `memory_batch` is what the memory model allows under `capacity_bytes` (the GPU's memory) less the
    margin; `profile_batch` the profile's own largest (measured, or the estimate's); `batch` the smaller."""

    instance_type: str
    capacity_bytes: int
    memory: TrainingMemory
    memory_batch: int
    profile_batch: int

    @property
    def batch(self) -> int:
        return min(self.memory_batch, self.profile_batch)

    @property
    def by_memory(self) -> bool:
        return self.memory_batch < self.profile_batch

    def reason(self) -> str:
        """One line: what caps the batch, with the memory per GPU at it."""
        at = max(self.batch, 1)
        use = self.memory.peak_bytes(at) / GIB
        cap = self.capacity_bytes / GIB
        how = f"{self.memory.optimizer.value}, " + ("DDP" if self.memory.bucket_bytes else "one rank")
        if self.by_memory:
            return (
                f"{self.instance_type}: batch {at} per GPU, capped by memory ({use:.1f} of {cap:.1f} GiB at "
                f"{at}, {how}, {MARGIN_FRACTION:.0%} margin; the profile allows {self.profile_batch})"
            )
        return f"{self.instance_type}: batch {at} per GPU, the profile's largest ({use:.1f} of {cap:.1f} GiB)"


def gpu_batch_limit(
    profile: ModelProfile,
    *,
    instance_type: str,
    gpu_memory_gib: float,
    optimizer: Optimizer | None = None,
    distributed: bool = True,
) -> BatchLimit | None:
    """The batch limit of `profile` on a GPU with `gpu_memory_gib`; None without a memory model or a GPU."""
    if gpu_memory_gib <= 0:
        return None
    memory = profile_memory(profile, optimizer=optimizer, cuda=True, distributed=distributed)
    if memory is None:
        return None
    capacity = int(gpu_memory_gib * GIB)
    return BatchLimit(
        instance_type=instance_type,
        capacity_bytes=capacity,
        memory=memory,
        memory_batch=memory.largest_batch(capacity),
        profile_batch=profile.max_batch,
    )


BATCH_LIMIT_FACT = "batch_limit"
"""`extra["batch_limit"]` of a profile whose largest batch a plan lowered to what the GPU's memory holds."""


def memory_per_gpu(
    profile: ModelProfile, *, gpu_memory_gib: float, per_gpu_batch: float, distributed: bool
) -> dict[str, Any]:
    """What a plan's choice shows of memory: the peak bytes per GPU at its batch, the GPU's bytes, and why
    its batch is capped (empty for a CPU type; `memory_per_gpu_bytes` None without a memory model)."""
    if gpu_memory_gib <= 0:
        return {}
    memory = profile_memory(profile, cuda=True, distributed=distributed)
    return {
        "memory_per_gpu_bytes": int(memory.peak_bytes(per_gpu_batch)) if memory is not None else None,
        "gpu_memory_bytes": int(gpu_memory_gib * GIB),
        "batch_limit": (profile.extra or {}).get(BATCH_LIMIT_FACT),
    }


__all__ = [
    "CUDA_CONTEXT_BYTES",
    "DEFAULT_OPTIMIZER",
    "MARGIN_FRACTION",
    "NCCL_BUFFER_BYTES",
    "STATE_COPIES",
    "UPDATE_WORKSPACE_COPIES",
    "BatchLimit",
    "Fits",
    "Optimizer",
    "Part",
    "TrainingMemory",
    "gpu_batch_limit",
    "largest_fitting_batch",
    "memory_per_gpu",
    "parse_optimizer",
    "profile_memory",
    "training_memory",
]
