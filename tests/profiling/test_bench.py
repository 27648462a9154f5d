"""The profiler's bench: float32 arithmetic per precision through torch's own API, allocation failures
recognised wherever they are raised, and an fp16 update timed through a scaler that does not skip."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from srift.domain.structure import Precision
from srift.errors import InvalidInput
from srift.profiling import testmodels
from srift.profiling.bench import (
    DEFAULT_FLOAT32_MATH,
    Progress,
    build_bench,
    float32_math,
    is_out_of_memory,
    precision_flags,
    trainable_layers,
    uses_fp32_precision_api,
)
from srift.profiling.search import search_max_batch
from srift.profiling.timing import update_scaler, update_time

CUDA = torch.device("cuda", 0)


@pytest.mark.parametrize(
    ("precision", "strict", "expected"),
    [
        (Precision.FP32, False, ("ieee", "tf32")),
        (Precision.FP32, True, ("ieee", "ieee")),
        (Precision.TF32, False, ("tf32", "tf32")),
        (Precision.TF32, True, ("tf32", "tf32")),
        (Precision.BF16, False, ("ieee", "tf32")),
        (Precision.FP16, True, ("ieee", "ieee")),
    ],
)
def test_float32_math_is_pytorchs_default_unless_asked(
    precision: Precision, strict: bool, expected: tuple[str, str]
) -> None:
    assert float32_math(precision, strict_fp32=strict) == expected
    assert DEFAULT_FLOAT32_MATH == ("ieee", "tf32")


def test_the_installed_torch_is_set_through_fp32_precision_and_restored() -> None:
    """torch 2.13 has `fp32_precision` (the flags are process-wide, so no GPU is needed to set them); the
    legacy `allow_tf32` flags are never read, which would raise after the new API was used."""
    assert uses_fp32_precision_api()
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    before = (matmul.fp32_precision, conv.fp32_precision, torch.backends.cudnn.rnn.fp32_precision)
    with precision_flags(Precision.TF32, CUDA) as got:
        assert got == {"matmul": "tf32", "cudnn": "tf32", "api": "fp32_precision"}
        assert (matmul.fp32_precision, conv.fp32_precision) == ("tf32", "tf32")
    assert (matmul.fp32_precision, conv.fp32_precision, torch.backends.cudnn.rnn.fp32_precision) == before
    with precision_flags(Precision.FP32, CUDA, strict_fp32=True) as got:
        assert (matmul.fp32_precision, conv.fp32_precision) == ("ieee", "ieee")
    with precision_flags(Precision.FP32, CUDA):
        assert (matmul.fp32_precision, conv.fp32_precision) == ("ieee", "tf32")
    assert (matmul.fp32_precision, conv.fp32_precision, torch.backends.cudnn.rnn.fp32_precision) == before


def test_older_torch_is_set_through_the_legacy_flags() -> None:
    legacy: Any = SimpleNamespace(
        cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=True)), cudnn=SimpleNamespace(allow_tf32=False)
    )
    assert not uses_fp32_precision_api(legacy)
    with precision_flags(Precision.FP32, CUDA, backends=legacy) as got:
        assert got["api"] == "allow_tf32"
        assert (legacy.cuda.matmul.allow_tf32, legacy.cudnn.allow_tf32) == (False, True)
    assert (legacy.cuda.matmul.allow_tf32, legacy.cudnn.allow_tf32) == (True, False)


def test_nothing_is_set_on_a_cpu() -> None:
    with precision_flags(Precision.TF32, torch.device("cpu")) as got:
        assert got == {}


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("CUDA error: out of memory"),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
        RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
        RuntimeError("cuDNN Frontend error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 68719476736 bytes."),
        MemoryError(),
    ],
)
def test_every_allocation_failure_is_out_of_memory(exc: BaseException) -> None:
    assert is_out_of_memory(exc)


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)"),
        RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"),
        ValueError("out of memory"),
    ],
)
def test_other_failures_are_not(exc: BaseException) -> None:
    assert not is_out_of_memory(exc)


def test_an_allocation_failure_while_building_the_inputs_ends_the_search() -> None:
    """The input build is inside the probe's guard: a cuBLAS-style failure there means "does not fit"."""

    def inputs(batch: int) -> torch.Tensor:
        if batch > 5:
            raise RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
        return testmodels.sequential_input(batch)

    bench = build_bench(testmodels.sequential, inputs, None, torch.device("cpu"))
    search = search_max_batch(bench, cap=16, budget_bytes=1 << 40, report=Progress(None))
    assert search.max_batch == 5
    assert any(p.get("out_of_memory") for p in search.probes)


def test_the_fp16_update_is_timed_with_a_scaler_that_does_not_skip() -> None:
    bench = build_bench(
        testmodels.sequential,
        testmodels.sequential_input,
        None,
        torch.device("cpu"),
        precision=Precision.FP16,
    )
    scaler = update_scaler(bench)
    assert scaler is not None and scaler.get_scale() == 1.0
    assert update_time(bench, batch=2, repeats=3) > 0


def test_an_update_whose_gradients_are_never_finite_is_an_error() -> None:
    def infinite(output: Any) -> torch.Tensor:
        return output.float().sum() * float("inf")

    bench = build_bench(
        testmodels.sequential,
        testmodels.sequential_input,
        None,
        torch.device("cpu"),
        precision=Precision.FP16,
    )
    bench.loss_fn = infinite
    with pytest.raises(InvalidInput) as err:
        update_time(bench, batch=2, repeats=2)
    assert err.value.field == "precision"


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, 8, num_layers=2)
        self.head = nn.Linear(8, 3)


def test_a_module_with_more_than_two_parameters_is_one_layer_per_parameter() -> None:
    """As DDP buckets them: a two-layer GRU's four parameters per layer each a layer, a weight and its bias
    one layer."""
    layers = trainable_layers(_Recurrent())
    names = [x.name for x in layers]
    assert names == [
        *(f"rnn.{k}_l{i}" for i in (0, 1) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")),
        "head",
    ]
    assert [x.grad_bytes for x in layers[:4]] == [24 * 4 * 4, 24 * 8 * 4, 24 * 4, 24 * 4]
    assert layers[-1].grad_bytes == (8 * 3 + 3) * 4 and len(layers[-1].params) == 2
