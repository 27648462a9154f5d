"""The host floor: AdamW's foreach calls as torch runs them, multi_tensor_apply's launches, the pass floor."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from srift.catalog.accelerators import spec_named
from srift.estimate.calibration import shipped_calibration
from srift.estimate.host import (
    ADAMW_FOREACH,
    CHUNK_ELEMENTS,
    CUDA_LAUNCH_S,
    MAX_BLOCKS,
    MAX_TENSORS,
    MAX_TENSORS_SCALARLIST,
    HostCost,
    adamw_launches,
    multi_tensor_launches,
)
from srift.estimate.roofline import roofline_times
from srift.measurements import shipped_registry
from srift.profiling.structure import count_structure


def _reference_launches(numels: list[int], *, depth: int, scalar_list: bool, large: bool) -> int:
    """MultiTensorApply.cuh's loop as written there: chunk by chunk."""
    max_tensors = (MAX_TENSORS_SCALARLIST if scalar_list else MAX_TENSORS)[large][depth - 1]
    max_blocks = MAX_BLOCKS[large]
    launches = loc_block = loc_tensor = 0
    for numel in numels:
        if numel == 0:
            continue
        loc_tensor += 1
        chunks = numel // CHUNK_ELEMENTS + (numel % CHUNK_ELEMENTS != 0)
        for chunk in range(chunks):
            loc_block += 1
            tensors_full = loc_tensor == max_tensors and chunk == chunks - 1
            if tensors_full or loc_block == max_blocks:
                launches += 1
                loc_block = 0
                loc_tensor = 0 if chunk == chunks - 1 else 1
    return launches + (1 if loc_block else 0)


@settings(max_examples=200, deadline=None)
@given(
    numels=st.lists(
        st.one_of(st.integers(0, 3 * CHUNK_ELEMENTS), st.integers(0, 400 * CHUNK_ELEMENTS)), max_size=900
    ),
    depth=st.integers(1, 5),
    scalar_list=st.booleans(),
    large=st.booleans(),
)
def test_launches_are_those_of_the_chunk_by_chunk_loop(
    numels: list[int], depth: int, scalar_list: bool, large: bool
) -> None:
    got = multi_tensor_launches(numels, depth=depth, scalar_list=scalar_list, large_kernel_arg=large)
    assert got == _reference_launches(numels, depth=depth, scalar_list=scalar_list, large=large)


def test_launches_by_hand() -> None:
    # ResNet-50's 161 parameter tensors (25.6 M elements, 390+ chunks) with 32 KB arguments: one launch
    # carries 770 tensors and 2,240 chunks, so one launch per operator at depth 1.
    assert multi_tensor_launches([160_000] * 161, depth=1) == 1
    # with 4 KB arguments, 110 tensors per launch: two
    assert multi_tensor_launches([1000] * 161, depth=1, large_kernel_arg=False) == 2
    # one tensor of just over 2,240 chunks: the blocks fill once, the rest goes in a second launch
    assert multi_tensor_launches([2240 * CHUNK_ELEMENTS + 1], depth=1) == 2
    assert multi_tensor_launches([0, 0], depth=2) == 0


class _Foreach(TorchDispatchMode):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func._overloadpacket.__name__
        if name.startswith("_foreach"):
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def test_adamw_dispatches_the_foreach_calls_listed() -> None:
    """torch.optim.AdamW with foreach (CUDA's default) dispatches exactly ADAMW_FOREACH, in order."""
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    for _ in range(2):  # the first step creates the state; the second is a steady one
        model.zero_grad(set_to_none=True)
        model(torch.randn(4, 8)).sum().backward()
        with _Foreach() as seen:
            optimizer.step()
    expected = [op.name.split("(")[0] for op in ADAMW_FOREACH]
    assert seen.calls == expected


def test_adamw_step_launches_per_operator_and_costs_its_dispatches() -> None:
    numels = [3 * CHUNK_ELEMENTS] * 10
    on_gpu = [op for op in ADAMW_FOREACH if op.on_gpu]
    assert adamw_launches(numels) == len(on_gpu)  # 30 chunks, 10 tensors: one launch each
    cost = HostCost(dispatch_s=1e-5, launch_s=1e-6)
    assert cost.adamw_s(numels) == pytest.approx(len(ADAMW_FOREACH) * 1e-5 + len(on_gpu) * 1e-6)
    assert cost.adamw_s([]) == 0.0


def test_the_launch_cost_is_the_registered_figure() -> None:
    registry = shipped_registry()
    assert registry.value("cuda-launch-host-cost", "srift.estimate.host.CUDA_LAUNCH_S") == CUDA_LAUNCH_S


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Dropout(0.1), nn.Linear(32, 4))


def _mlp_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 16)


def _autograd_nodes(loss: torch.Tensor) -> list[str]:
    """The nodes of loss's backward graph that do work (not AccumulateGrad, not a view's)."""
    seen: set[Any] = set()
    out: list[str] = []
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        name = type(node).__name__
        if name != "AccumulateGrad" and not name.startswith(("TBackward", "ViewBackward", "ExpandBackward")):
            out.append(name)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return out


def test_counted_passes_match_the_autograd_graph_and_price_the_floor() -> None:
    """A small model's counted operators against its real autograd graph on the CPU, and the pass floor
    they give on a GPU at batch 1 (where the host, not the GPU, is the bottleneck)."""
    structure = count_structure(_mlp, _mlp_input, fake=False)
    model = _mlp().train()
    nodes = _autograd_nodes(model(_mlp_input(2)).mean())
    # each working node dispatches one to three operators (a matrix product's backward: two products and
    # the bias's sum; layer norm's: one fused operator)
    assert len(nodes) <= structure.backward.kernels <= 3 * len(nodes)
    # forward: the two products, GELU, layer norm, dropout and the loss's mean at least
    assert structure.forward.kernels >= 6
    efficiency = shipped_calibration().efficiency
    times = roofline_times(structure, spec=spec_named("H200-SXM-141GB"), batch=1, efficiency=efficiency)
    op_s = efficiency.kernel_s + CUDA_LAUNCH_S
    assert times.forward_s == pytest.approx(structure.forward.kernels * op_s)
    assert times.backward_s == pytest.approx(structure.backward.kernels * op_s)
    assert math.isfinite(times.update_s)


def test_a_models_factor_scales_the_gpu_time_and_not_the_host_floor() -> None:
    """ResNet-50's public-table factor (≠ 1) multiplies its roofline GPU time; at batch 1 on an H200 the
    estimate is the host floor itself, at the largest batch the GPU time times the factor."""
    from srift.domain.structure import Precision
    from srift.estimate.estimator import estimate_profile
    from srift.refmodels.build import load_structure

    structure = load_structure("resnet50", Precision.FP32)
    spec = spec_named("H200-SXM-141GB")
    calibration = shipped_calibration()
    factor = calibration.factor("resnet50", Precision.FP32)
    assert factor is not None and factor != 1.0
    made = estimate_profile(model="resnet50", structure=structure, spec=spec)
    assert made.profile is not None
    efficiency = calibration.efficiency
    floor_s = HostCost(dispatch_s=efficiency.kernel_s).pass_s(structure.forward.kernels)
    assert made.profile.forward.time_s(1) == pytest.approx(floor_s, rel=1e-12)
    top = made.profile.max_batch
    times = roofline_times(structure, spec=spec, batch=top, efficiency=efficiency)
    assert times.forward_gpu_s * factor > times.forward_host_s
    assert made.profile.forward.time_s(top) == pytest.approx(times.forward_gpu_s * factor, rel=1e-12)
