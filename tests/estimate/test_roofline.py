"""The roofline prices every layer at once exactly as the per-layer formula does, layer by layer."""

from __future__ import annotations

import pytest

from srift.catalog.accelerators import spec_named
from srift.domain.structure import PassWork, Precision
from srift.estimate.calibration import shipped_calibration
from srift.estimate.roofline import layer_seconds, roofline_times
from srift.refmodels.build import load_structure


@pytest.mark.parametrize(
    ("model", "precision", "gpu", "priced_as"),
    [
        ("resnet50", Precision.FP32, "T4", None),
        ("resnet50", Precision.FP16, "A100-SXM4-40GB", None),
        ("bert-base", Precision.FP32, "H100-SXM5-80GB", Precision.TF32),
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
    assert got.forward_s == max(forward, structure.forward.kernels * efficiency.kernel_s)
    assert got.backward_s == max(sum(backward), structure.backward.kernels * efficiency.kernel_s)
    # the same structure object again is priced from its cached columns, a copy of it afresh: both agree
    again = load_structure(model, precision)
    assert roofline_times(again, spec=spec, batch=batch, efficiency=efficiency, precision=priced_as) == got
