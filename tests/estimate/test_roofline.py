"""The roofline prices every layer at once exactly as the per-layer formula does, layer by layer."""

from __future__ import annotations

import functools

import pytest

from srift.catalog.accelerators import spec_named
from srift.domain.structure import ZERO, Affine, PassWork, Precision
from srift.estimate.calibration import shipped_calibration
from srift.estimate.host import CUDA_LAUNCH_S
from srift.estimate.roofline import Efficiency, layer_seconds, roofline_times
from srift.refmodels.build import load_structure


@pytest.mark.parametrize(
    ("model", "precision", "gpu", "priced_as"),
    [
        ("resnet50", Precision.FP32, "T4", None),
        ("resnet50", Precision.FP16, "A100-SXM4-40GB", None),
        ("bert-base", Precision.FP32, "H100-SXM5-80GB", Precision.TF32),
        ("resnet50", Precision.FP32, "H200-SXM-141GB", None),
        ("gpt2-small", Precision.BF16, "H200-SXM-141GB", None),
    ],
)
@pytest.mark.parametrize("batch", [1, 7, 256])
def test_every_layer_is_priced_bit_for_bit_as_layer_seconds(
    model: str, precision: Precision, gpu: str, priced_as: Precision | None, batch: int
) -> None:
    structure = load_structure(model, precision)
    spec = spec_named(gpu)
    efficiency = shipped_calibration().efficiency
    prec = priced_as or structure.precision
    got = roofline_times(structure, spec=spec, batch=batch, efficiency=efficiency, precision=priced_as)

    def one(work: PassWork) -> float:
        return layer_seconds(work, spec=spec, precision=prec, batch=batch, efficiency=efficiency)

    backward = [one(layer.backward) for layer in structure.layers]
    assert got.backward_layers_s == tuple(backward)
    forward = sum(one(layer.forward) for layer in structure.layers)
    op_s = efficiency.kernel_s + CUDA_LAUNCH_S  # the host floor of one operator (srift.estimate.host)
    assert got.forward_s == max(forward, structure.forward.kernels * op_s)
    assert got.backward_s == max(sum(backward), structure.backward.kernels * op_s)
    # the same structure object again is priced from its cached columns, a copy of it afresh: both agree
    again = load_structure(model, precision)
    assert roofline_times(again, spec=spec, batch=batch, efficiency=efficiency, precision=priced_as) == got


def test_float32_convolutions_are_priced_in_tf32_and_matrix_products_in_ieee_float32() -> None:
    """PyTorch's defaults: cuDNN convolutions may use TF32 (`torch.backends.cudnn.allow_tf32` True), float32
    matrix products may not (`torch.backends.cuda.matmul.allow_tf32` False)."""
    spec = spec_named("H200-SXM-141GB")
    full = Efficiency(compute=1.0, matmul_memory=1.0, other_memory=1.0, kernel_s=0.0)
    work = PassWork(
        matmul_flops=Affine(0.0, 3e12),
        matmul_bytes=ZERO,
        other_bytes=ZERO,
        kernels=1,
        conv_flops=Affine(0.0, 2e12),
    )

    def seconds(precision: Precision) -> float:
        return layer_seconds(work, spec=spec, precision=precision, batch=1, efficiency=full)

    fp32, tf32 = spec.peak_flops(Precision.FP32), spec.peak_flops(Precision.TF32)
    assert seconds(Precision.FP32) == pytest.approx(1e12 / fp32 + 2e12 / tf32, rel=1e-12)
    assert seconds(Precision.TF32) == pytest.approx(3e12 / tf32, rel=1e-12)
    bf16 = spec.peak_flops(Precision.BF16)
    assert seconds(Precision.BF16) == pytest.approx(3e12 / bf16, rel=1e-12)
    # cuDNN's TF32 disabled (`--strict-fp32`): float32 convolutions in IEEE float32, the others unchanged
    strict = functools.partial(layer_seconds, work, spec=spec, batch=1, efficiency=full, strict_fp32=True)
    assert strict(precision=Precision.FP32) == pytest.approx(3e12 / fp32, rel=1e-12)
    assert strict(precision=Precision.TF32) == seconds(Precision.TF32)
    assert strict(precision=Precision.BF16) == seconds(Precision.BF16)
