"""Count what a model's repeated blocks save for backward and take as input, on fake tensors.

What activation checkpointing trades (`srift.domain.sharding.BlockFacts`): per sample, the bytes of the
tensors each block saves for its backward (parameters and their casts left out: they do not grow with the
batch) and the bytes of its input, the one tensor a checkpointed block keeps. The blocks are the elements
of the model's first nn.ModuleList (or nn.Sequential) whose children repeat a class, the FSDP units of
the blocks policy. Counted at two batches on fake tensors (nothing allocates), per sample = the difference,
with attention run as CUDA runs it (`srift.profiling.structure.CudaFusedAttention`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef

from srift.domain.sharding import BlockFacts
from srift.domain.structure import Precision
from srift.errors import InvalidInput

COUNT_BATCHES = (1, 2)


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The elements of the largest nn.ModuleList / nn.Sequential whose elements share one class."""
    best: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, nn.ModuleList | nn.Sequential):
            kids = list(module.children())
            if len(kids) >= 2 and len({type(k) for k in kids}) == 1 and len(kids) > len(best):
                best = kids
    return best


def _precision(precision: Precision) -> Any:
    if precision.autocast:
        dtype = torch.float16 if precision is Precision.FP16 else torch.bfloat16
        return torch.autocast("cpu", dtype=dtype)
    from contextlib import nullcontext

    return nullcontext()


def _count(
    model: nn.Module, inputs: Any, blocks: list[nn.Module], precision: Precision
) -> tuple[float, float]:
    """Bytes saved inside blocks and bytes of the blocks' inputs, for one forward pass."""
    params = {StorageWeakRef(p.untyped_storage()) for p in model.parameters()}  # type: ignore[no-untyped-call]
    inside: list[int] = []
    saved: dict[Any, int] = {}
    inputs_bytes = [0.0]

    def pre(_: nn.Module, args: tuple[Any, ...]) -> None:
        inside.append(1)
        if args and isinstance(args[0], torch.Tensor):
            inputs_bytes[0] += args[0].numel() * args[0].element_size()

    def post(*_: Any) -> None:
        inside.pop()

    def pack(t: torch.Tensor) -> torch.Tensor:
        if inside:
            ref = StorageWeakRef(t.untyped_storage())  # type: ignore[no-untyped-call]
            if ref not in params:
                saved[ref] = t.untyped_storage().nbytes()
        return t

    from srift.profiling.structure import CudaFusedAttention

    handles = [b.register_forward_pre_hook(pre) for b in blocks]
    handles += [b.register_forward_hook(post) for b in blocks]
    try:
        # attention as CUDA runs it, fused: no attention matrix or dropout mask saved (as the structure)
        with (
            CudaFusedAttention(),
            _precision(precision),
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        ):
            out = model(inputs)
            del out
    finally:
        for h in handles:
            h.remove()
    return float(sum(saved.values())), inputs_bytes[0]


def count_blocks(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    *,
    precision: Precision = Precision.FP32,
) -> BlockFacts:
    """Per-sample block facts of `model_factory()` on `input_factory(batch)` (module docstring)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        model = model_factory().train()
        blocks = repeated_blocks(model)
        if not blocks:
            raise InvalidInput(
                "the model has no repeated blocks (an nn.ModuleList of one class)",
                hint="checkpointing and FSDP units follow repeated blocks; plan without checkpointing",
                field="model_factory",
            )
        (b1, b2) = COUNT_BATCHES
        s1, i1 = _count(model, input_factory(b1), blocks, precision)
        s2, i2 = _count(model, input_factory(b2), blocks, precision)
    per_block = len(blocks)
    return BlockFacts(
        count=per_block,
        input_bytes_per_sample=max(0.0, (i2 - i1) / (b2 - b1)) / per_block,
        saved_bytes_per_sample=max(0.0, (s2 - s1) / (b2 - b1)) / per_block,
    )
