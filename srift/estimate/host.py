"""The host floor of an eager PyTorch training step on a GPU: what the CPU issues before the GPU can run it.

At small batches a PyTorch eager step is host-bound: the CPU issues every forward operator, every autograd
backward node and the optimizer's kernels one after another, and the GPU waits for each. The roofline
estimate (`srift.estimate.roofline`) takes a pass as never shorter than this floor:

    host_s(pass) = ops(pass) · (t_dispatch + t_launch)

- `ops(pass)`: the aten operators that do work in the pass, as `srift.profiling.structure` counts them
  (`PassWork.kernels`: views and allocations excluded; forward: matrix products, convolutions, bias adds,
  activations, residual adds, norms, dropout, autocast's casts and the loss; backward: what the autograd
  nodes dispatch, one or more operators per differentiable forward operator).
- `t_dispatch`: the host time of one eager operator through Python, the dispatcher and autograd, measured
  on a host (`Efficiency.kernel_s`, the registry's `eager-kernel-overhead` set: 7.21 µs on the development
  CPU with tensors too small for their arithmetic to count). That measurement ran CPU kernels, so it holds
  no CUDA launch.
- `t_launch`: the host side of one `cudaLaunchKernel`, `CUDA_LAUNCH_S`, a cited public figure (the registry's
  `cuda-launch-host-cost` set).

The optimizer update is priced as `torch.optim.AdamW` runs it on CUDA by default since PyTorch 2.0
(`foreach=True`, not fused, not capturable; `_multi_tensor_adam` in torch/optim/adam.py): per step one
`_foreach_add_` on the step counters (CPU tensors: dispatched, nothing launched) and eight `_foreach_*`
operators over every parameter tensor, each launching as many kernels as `multi_tensor_apply` needs to cover
the tensors' 65,536-element chunks (`multi_tensor_launches`). `zero_grad(set_to_none=True)` launches
nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

CUDA_LAUNCH_S = 2e-6
"""Host seconds of one cudaLaunchKernel call: the midpoint of the "~1–3 µs on CUDA 12+ drivers" a public
walkthrough of the PyTorch dispatch path gives for the driver's share of an eager operator (registry set
`cuda-launch-host-cost`, measured by its author, not by Srift); added to the measured dispatch time of each
operator, which ran CPU kernels."""

CHUNK_ELEMENTS = 65536
"""`kChunkSize` of aten/src/ATen/native/cuda/MultiTensorApply.cuh (pytorch/pytorch @008356ca): each CUDA
block of a multi-tensor kernel covers one chunk of this many elements of one tensor."""

MAX_TENSORS = {False: (110, 64, 48, 36, 30), True: (770, 448, 336, 252, 210)}
"""`DepthToMaxConfig<large_kernel_arg>::depth_to_max_tensors` of MultiTensorApply.cuh (same commit): the
tensors one launch takes, by list depth, with 4 KB kernel arguments (False) and with the 32 KB ones CUDA ≥
12.1, driver ≥ 530 and sm ≥ 70 allow (True)."""

MAX_TENSORS_SCALARLIST = {False: (96, 64, 48, 36, 30), True: (672, 448, 336, 252, 210)}
"""`depth_to_max_tensors_scalarlist` of the same file: the same for operators that take a list of scalars."""

MAX_BLOCKS = {False: 320, True: 2240}
"""`depth_to_max_blocks` of the same file (equal at every depth): chunks per launch."""


@dataclass(frozen=True, slots=True)
class ForeachOp:
    """One `torch._foreach_*` call of an optimizer step: its name, how many tensor lists its kernel reads
    and writes (multi_tensor_apply's depth), whether it takes a list of scalars, and whether it runs on the
    GPU (the step counters of a non-capturable Adam are CPU tensors: dispatched, nothing launched)."""

    name: str
    depth: int
    scalar_list: bool = False
    on_gpu: bool = True


ADAMW_FOREACH = (
    ForeachOp("_foreach_add_(state_steps, 1)", 1, on_gpu=False),
    ForeachOp("_foreach_mul_(params, 1 - lr * weight_decay)", 1),
    ForeachOp("_foreach_lerp_(exp_avgs, grads, 1 - beta1)", 2),
    ForeachOp("_foreach_mul_(exp_avg_sqs, beta2)", 1),
    ForeachOp("_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)", 3),
    ForeachOp("_foreach_sqrt(exp_avg_sqs)", 2),
    ForeachOp("_foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)", 1, scalar_list=True),
    ForeachOp("_foreach_add_(exp_avg_sq_sqrt, eps)", 1),
    ForeachOp("_foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size)", 3, scalar_list=True),
)
"""The `_foreach_*` calls of one `torch.optim.AdamW` step with its defaults on CUDA (`_multi_tensor_adam`,
weight decay 0.01 applied decoupled, amsgrad off, a float learning rate, not capturable), in order."""


def multi_tensor_launches(
    numels: Sequence[int], *, depth: int, scalar_list: bool = False, large_kernel_arg: bool = True
) -> int:
    """Kernels `multi_tensor_apply` launches for one foreach operator over tensors of `numels` elements.

    The loop of MultiTensorApply.cuh: tensors are taken in order, each cut into CHUNK_ELEMENTS chunks, one
    block per chunk; a launch goes out when the blocks reach MAX_BLOCKS or the tensors reach the depth's
    maximum (after a tensor's last chunk), and once more for what is left; empty tensors are skipped.
    """
    limits = MAX_TENSORS_SCALARLIST if scalar_list else MAX_TENSORS
    max_tensors = limits[large_kernel_arg][depth - 1]
    max_blocks = MAX_BLOCKS[large_kernel_arg]
    launches = blocks = tensors = 0
    for numel in numels:
        if numel <= 0:
            continue
        tensors += 1
        chunks = math.ceil(numel / CHUNK_ELEMENTS)
        done = 0
        while done < chunks:
            # Chunks of this tensor until the blocks fill (or the tensor ends).
            take = min(chunks - done, max_blocks - blocks)
            blocks += take
            done += take
            last = done == chunks
            if blocks == max_blocks or (last and tensors == max_tensors):
                launches += 1
                blocks = 0
                tensors = 0 if last else 1
    return launches + (1 if blocks else 0)


@dataclass(frozen=True, slots=True)
class HostCost:
    """Host seconds per dispatched operator and per CUDA kernel launch (module docstring)."""

    dispatch_s: float
    launch_s: float = CUDA_LAUNCH_S

    @property
    def op_s(self) -> float:
        """One eager operator that launches one kernel."""
        return self.dispatch_s + self.launch_s

    def pass_s(self, ops: int) -> float:
        """The host floor of a forward or backward pass of `ops` operators."""
        return ops * self.op_s

    def adamw_s(self, numels: Sequence[int], *, large_kernel_arg: bool = True) -> float:
        """The host floor of one AdamW step (foreach) over parameter tensors of `numels` elements."""
        return adamw_host_s(tuple(numels), self.dispatch_s, self.launch_s, large_kernel_arg)


def adamw_launches(numels: Sequence[int], *, large_kernel_arg: bool = True) -> int:
    """CUDA kernels one AdamW step (foreach) launches over parameter tensors of `numels` elements."""
    return sum(
        multi_tensor_launches(
            numels, depth=op.depth, scalar_list=op.scalar_list, large_kernel_arg=large_kernel_arg
        )
        for op in ADAMW_FOREACH
        if op.on_gpu
    )


@functools.lru_cache(maxsize=256)
def adamw_host_s(
    numels: tuple[int, ...], dispatch_s: float, launch_s: float, large_kernel_arg: bool
) -> float:
    """`HostCost.adamw_s`, cached: every foreach call dispatched once, every kernel launched."""
    if not any(n > 0 for n in numels):
        return 0.0
    launches = adamw_launches(numels, large_kernel_arg=large_kernel_arg)
    return len(ADAMW_FOREACH) * dispatch_s + launches * launch_s


class _PassTimes(Protocol):
    """What `factored_forward` and `factored_backward` read of `srift.estimate.roofline.RooflineTimes`."""

    @property
    def forward_gpu_s(self) -> float: ...
    @property
    def forward_host_s(self) -> float: ...
    @property
    def backward_layers_s(self) -> tuple[float, ...]: ...
    @property
    def backward_host_s(self) -> float: ...


def factored(gpu_s: float, host_s: float, factor: float) -> float:
    """A pass's GPU time times a model's factor, never under its host floor: the factor is the model's kernel
    efficiency measured at large batches on the public table, which says nothing of the host."""
    return max(gpu_s * factor, host_s)


def factored_forward(times: _PassTimes, factor: float) -> float:
    """`factored` for the forward pass of roofline times."""
    return factored(times.forward_gpu_s, times.forward_host_s, factor)


def factored_backward(times: _PassTimes, factor: float) -> float:
    """`factored` for the backward pass of roofline times."""
    return factored(sum(times.backward_layers_s), times.backward_host_s, factor)
