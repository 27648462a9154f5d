"""The estimator: the shipped calibration is what the public table gives, estimates follow the specs, and a
measured profile always wins over an estimate."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from srift.catalog.accelerators import spec_named
from srift.domain import InstanceType, Interconnect
from srift.domain.structure import ZERO, ModelStructure, PassWork, Precision
from srift.estimate import public
from srift.estimate.calibration import shipped_calibration
from srift.estimate.estimator import complete_profiles, estimate_profile
from srift.estimate.roofline import structure_memory
from srift.refmodels.build import load_structure

structure_of = functools.lru_cache(maxsize=None)(load_structure)


def _instance(name: str, gpu_model: str, memory_gib: float) -> InstanceType:
    return InstanceType(
        provider="aws",
        name=name,
        gpu_model=gpu_model,
        gpu_count=1,
        gpu_memory_gib=memory_gib,
        vcpus=8,
        memory_gib=32.0,
        network_gbps=10.0,
        network_burst=True,
        interconnect=Interconnect.NONE,
        interconnect_gbps=0.0,
        efa=False,
    )


def test_the_shipped_calibration_is_what_the_public_table_fits() -> None:
    fitted = public.calibrate(structure_of)
    assert fitted.to_dict() == shipped_calibration().to_dict()


@pytest.mark.parametrize("precision", [Precision.FP32, Precision.FP16])
def test_a_faster_gpu_gets_shorter_times_and_more_memory_a_larger_batch(precision: Precision) -> None:
    structure = structure_of("resnet50", precision)
    t4 = estimate_profile(model="resnet50", structure=structure, spec=spec_named("T4"), precision=precision)
    a100_40 = estimate_profile(
        model="resnet50", structure=structure, spec=spec_named("A100-SXM4-40GB"), precision=precision
    )
    a100_80 = estimate_profile(
        model="resnet50", structure=structure, spec=spec_named("A100-SXM4-80GB"), precision=precision
    )
    assert t4.profile is not None and a100_40.profile is not None and a100_80.profile is not None
    b = 32
    t4_step = t4.profile.forward.time_s(b) + t4.profile.backward.time_s(b)
    a100_step = a100_40.profile.forward.time_s(b) + a100_40.profile.backward.time_s(b)
    assert a100_step < t4_step / 2
    assert t4.profile.max_batch < a100_40.profile.max_batch < a100_80.profile.max_batch
    memory = structure_memory(structure)
    usable = 0.9 * t4.profile.extra["memory_gib"] * 2**30
    assert memory.peak_bytes(t4.profile.max_batch) <= usable < memory.peak_bytes(t4.profile.max_batch + 1)
    assert t4.profile.source == "estimate:roofline"
    assert t4.profile.estimate is not None and t4.profile.estimate.spread > 0
    assert t4.profile.precision is precision


def test_a_model_that_does_not_fit_gets_no_estimate_and_says_why() -> None:
    structure = structure_of("gpt2-small", Precision.FP32)
    tiny = replace(spec_named("T4"), memory_gib=0.1)
    made = estimate_profile(model="gpt2-small", structure=structure, spec=tiny, memory_gib=0.1)
    assert made.profile is None
    assert "does not fit" in made.note


def test_a_measured_profile_wins_and_the_others_are_scaled_from_it() -> None:
    structure = structure_of("bert-base", Precision.FP16)
    base = estimate_profile(
        model="bert-base", structure=structure, spec=spec_named("A10G"), precision=Precision.FP16
    )
    assert base.profile is not None
    measured = replace(
        base.profile,
        accelerator="NVIDIA A10G",
        device="cuda",
        estimate=None,
        structure=structure,
        forward=replace(base.profile.forward, times_s=tuple(2 * t for t in base.profile.forward.times_s)),
    )
    instances = [_instance("g5.xlarge", "A10G", 22.35), _instance("p4d.24xlarge", "A100", 40.0)]
    completed, notes = complete_profiles([measured], instances, precision=Precision.FP16)
    assert completed[0] is measured
    assert [p.accelerator for p in completed[1:]] == ["A100-SXM4-40GB"]
    scaled = completed[1]
    assert scaled.estimate is not None and scaled.estimate.method == "scaled"
    assert scaled.estimate.based_on == "NVIDIA A10G"
    assert any("A100-SXM4-40GB" in n for n in notes)
    # Scaled from a measurement twice the roofline's forward time: the estimate's forward doubles too.
    plain = estimate_profile(
        model="bert-base", structure=structure, spec=spec_named("A100-SXM4-40GB"), precision=Precision.FP16
    )
    assert plain.profile is not None
    assert scaled.forward.time_s(8) > 1.5 * plain.profile.forward.time_s(8)


def test_repeated_runs_of_one_accelerator_are_matched_once_per_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan by model completes every stored run of the model, most of one accelerator: the estimates are
    those of one run, and each accelerator name is tried once per offered type, however many runs carry
    it."""
    structure = structure_of("bert-base", Precision.FP16)
    base = estimate_profile(
        model="bert-base", structure=structure, spec=spec_named("A10G"), precision=Precision.FP16
    )
    assert base.profile is not None
    measured = replace(
        base.profile, accelerator="NVIDIA A10G", device="cuda", estimate=None, structure=structure
    )
    runs = [replace(measured, straggler_cv=0.01 + k / 1000) for k in range(50)]
    instances = [
        _instance("g5.xlarge", "A10G", 22.35),
        _instance("p4d.24xlarge", "A100", 40.0),
        _instance("p4de.24xlarge", "A100", 80.0),
    ]
    tried: list[str] = []
    matches = InstanceType.matches_accelerator

    def counted(self: InstanceType, accelerator: str) -> bool:
        tried.append(accelerator)
        return matches(self, accelerator)

    monkeypatch.setattr(InstanceType, "matches_accelerator", counted)
    one, one_notes = complete_profiles(runs[:1], instances, precision=Precision.FP16)
    tried_with_one = list(tried)
    tried.clear()
    many, notes = complete_profiles(runs, instances, precision=Precision.FP16)
    assert many[:50] == runs and many[50:] == one[1:] and notes == one_notes
    assert [p.accelerator for p in one[1:]] == ["A100-SXM4-40GB", "A100-SXM4-80GB"]
    # g5: NVIDIA A10G; p4d: NVIDIA A10G; p4de: NVIDIA A10G, then the p4d's estimate (A100-SXM4-40GB)
    assert tried == tried_with_one and len(tried) == 4


def _convolutions_as_matrix_products(structure: ModelStructure) -> ModelStructure:
    """`structure` with no convolution FLOPs kept apart: every FLOP priced at the matrix-product peak."""

    def flat(work: PassWork) -> PassWork:
        return replace(work, conv_flops=ZERO)

    layers = tuple(replace(w, forward=flat(w.forward), backward=flat(w.backward)) for w in structure.layers)
    return replace(structure, layers=layers)


def test_a_strict_fp32_profile_scales_with_its_convolutions_in_ieee_float32() -> None:
    """A profile measured with `--strict-fp32` (cuDNN's TF32 off) is priced, and its estimates on other
    GPUs too, with float32 convolutions at the FP32 peak: exactly as if they were matrix products."""
    structure = structure_of("resnet50", Precision.FP32)
    # Labelled as a model without a public-table factor: a factor scales the GPU's time but not the host
    # floor (srift.estimate.host.factored), so only at factor 1 is a roofline profile scaled to another GPU
    # the same as that GPU's roofline at every batch, floored or not.
    model = "resnet50 (no factor)"
    flat = _convolutions_as_matrix_products(structure)
    h200 = estimate_profile(model=model, structure=flat, spec=spec_named("H200-SXM-141GB"))
    assert h200.profile is not None
    strict_math = {"matmul": "ieee", "cudnn": "ieee", "api": "fp32_precision"}
    measured = replace(
        h200.profile,
        accelerator="NVIDIA H200",
        device="cuda",
        estimate=None,
        structure=structure,
        extra={"float32_math": strict_math},
    )
    instances = [_instance("p4d.24xlarge", "A100", 40.0)]
    completed, _ = complete_profiles([measured], instances, precision=Precision.FP32)
    scaled = completed[1]
    assert scaled.estimate is not None and scaled.estimate.method == "scaled"
    expected = estimate_profile(model=model, structure=flat, spec=spec_named("A100-SXM4-40GB"))
    default = estimate_profile(model=model, structure=structure, spec=spec_named("A100-SXM4-40GB"))
    assert expected.profile is not None and default.profile is not None
    assert scaled.forward.batches == expected.profile.forward.batches
    assert scaled.forward.times_s == pytest.approx(expected.profile.forward.times_s, rel=1e-9)
    assert scaled.backward.times_s == pytest.approx(expected.profile.backward.times_s, rel=1e-9)
    assert scaled.update_s == pytest.approx(expected.profile.update_s, rel=1e-9)
    assert scaled.extra["float32_math"]["cudnn"] == "ieee"
    # IEEE float32 convolutions on an A100 take several times their TF32 time.
    assert scaled.compute_s(64) > 2 * default.profile.compute_s(64)
    # Without the record (PyTorch's defaults) the TF32-convolution roofline's times scale to its estimate.
    on_h200 = estimate_profile(model=model, structure=structure, spec=spec_named("H200-SXM-141GB"))
    assert on_h200.profile is not None
    default_measured = replace(
        measured, extra={}, forward=on_h200.profile.forward, backward=on_h200.profile.backward
    )
    completed, _ = complete_profiles([default_measured], instances, precision=Precision.FP32)
    assert completed[1].forward.times_s == pytest.approx(default.profile.forward.times_s, rel=1e-9)
    assert "float32_math" not in completed[1].extra


@pytest.mark.parametrize(("model", "low", "high"), [("gpt2-small", 0.2, 0.35), ("resnet50", 0.0, 0.0)])
def test_a_half_precision_estimate_records_its_unaligned_share(model: str, low: float, high: float) -> None:
    """The share of the step in fp16/bf16 products off cuBLAS's 16-byte alignment, at the estimate's largest
    batch (GPT-2's 50,257-wide head; ResNet-50 has none), is in the estimate; float32 has no such rule."""
    spec = spec_named("H100-SXM5-80GB")
    bf16 = structure_of(model, Precision.BF16)
    made = estimate_profile(model=model, structure=bf16, spec=spec, precision=Precision.BF16)
    assert made.profile is not None
    share = made.profile.extra["unaligned_share"]
    assert share == round(bf16.unaligned_share(made.profile.max_batch), 6)
    assert low <= share <= high
    fp32 = estimate_profile(model=model, structure=structure_of(model, Precision.FP32), spec=spec)
    assert fp32.profile is not None and "unaligned_share" not in fp32.profile.extra
