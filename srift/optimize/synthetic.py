"""Synthetic compute profiles shaped like the Srift paper's models and GPUs, for benchmarks, tests and demos.

NOT measurements. Per-sample training times on a V100 are rounded public fp32 throughput figures (ResNet50
≈ 350 img/s, Inception v3 ≈ 250, VGG19 ≈ 180, ShuffleNet v2 ×2.0 ≈ 1500); other GPUs scale them by a relative
speed (rounded public fp32 training comparisons). Max batches per GPU follow Srift Table 4 (per-VM figures
divided by the VM's GPUs; Table 4 gives none for newer GPUs, which get 2–4× the V100's by memory). Gradient
sizes are the models' parameter counts × 4 bytes. Forward is a third of compute, backward two thirds, and
small batches carry a fixed per-iteration overhead, so curves are piecewise linear as in Srift §4.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from srift.domain import ComputeCurve, LayerGrad, ModelProfile


@dataclass(frozen=True, slots=True)
class SyntheticModel:
    """A paper model: V100 seconds per sample, fixed seconds per iteration, gradient bytes, and per-GPU max
    batches from Srift Table 4 (V100 = p3.8xlarge / 4, M60 = g3.8xlarge / 2, T4 = g4dn.8xlarge)."""

    name: str
    v100_s_per_sample: float
    fixed_s: float
    grad_bytes: int
    max_batch: dict[str, int]
    layers: int = 16


MODELS: dict[str, SyntheticModel] = {
    "resnet50": SyntheticModel("resnet50", 1 / 350, 0.02, 102_000_000, {"V100": 128, "M60": 32, "T4": 64}),
    "inception_v3": SyntheticModel(
        "inception_v3", 1 / 250, 0.03, 95_000_000, {"V100": 128, "M60": 64, "T4": 128}
    ),
    "vgg19": SyntheticModel("vgg19", 1 / 180, 0.02, 574_000_000, {"V100": 128, "M60": 32, "T4": 128}),
    "shufflenet_v2_x2_0": SyntheticModel(
        "shufflenet_v2_x2_0", 1 / 1500, 0.015, 29_600_000, {"V100": 256, "M60": 128, "T4": 256}
    ),
}

SPEED: dict[str, float] = {
    "V100": 1.0,
    "T4": 0.4,
    "M60": 0.25,
    "K80": 0.2,
    "A10G": 0.9,
    "L4": 0.8,
    "L40S": 1.9,
    "A100": 2.2,
    "H100": 3.8,
    "H200": 4.2,
}

MAX_BATCH_SCALE: dict[str, float] = {
    "K80": 0.5,
    "A10G": 1.5,
    "L4": 1.5,
    "L40S": 3.0,
    "A100": 2.5,
    "H100": 5.0,
    "H200": 8.0,
}
"""Per-GPU max batch relative to the V100's, for GPUs Table 4 does not cover (by memory: 12 GiB K80 halves,
24 GiB A10G/L4, 48 GiB L40S, 40–80 GiB A100, 80 GiB H100, 141 GiB H200)."""


def synthetic_profile(model: str, accelerator: str, *, straggler_cv: float = 0.036) -> ModelProfile:
    """A synthetic profile of a paper `model` on `accelerator` (a key of SPEED); see the module docstring."""
    m = MODELS[model]
    speed = SPEED[accelerator]
    max_batch = m.max_batch.get(accelerator) or max(
        4, int(m.max_batch["V100"] * MAX_BATCH_SCALE[accelerator])
    )
    per_sample = m.v100_s_per_sample / speed
    fixed = m.fixed_s / max(speed, 1.0) ** 0.5
    points = (1, max_batch // 3, 2 * max_batch // 3, max_batch)

    def total(b: int) -> float:
        return float(fixed + per_sample * b * (1.0 + 0.3 / b))

    fw = ComputeCurve(points, tuple(total(b) / 3 for b in points))
    bw = ComputeCurve(points, tuple(2 * total(b) / 3 for b in points))
    share = m.grad_bytes // m.layers
    layers = tuple(
        LayerGrad(name=f"layer{k}", grad_bytes=share, ready_frac=(k + 1) / m.layers) for k in range(m.layers)
    )
    return ModelProfile(
        model=m.name,
        accelerator=accelerator,
        max_batch=max_batch,
        forward=fw,
        backward=bw,
        layers=layers,
        straggler_cv=straggler_cv,
        device="synthetic",
        extra={"synthetic": True, "note": "synthetic profile (srift.optimize.synthetic), not a measurement"},
    )
