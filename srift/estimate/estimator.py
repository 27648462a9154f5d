"""Estimated compute profiles for accelerators nobody profiled on.

`estimate_profile` builds a full ModelProfile (forward/backward curves, largest batch, gradient readiness,
update time, straggler spread) for one accelerator spec from a model's structure (per-layer FLOPs, bytes,
memory; `srift.profiling.structure`), in one of two ways:

- **scaled** (`estimate:scaled`): from a profile *measured* on another accelerator with a known spec. At
  each batch the measured forward (backward) time is multiplied by the ratio of the two accelerators'
  roofline times (`srift.estimate.roofline`); gradient readiness and the straggler spread are the measured
  ones. Batches above the measured profile's largest use its ratio there.
- **roofline** (`estimate:roofline`): from the structure alone, with the calibration's efficiencies and,
  for models the public table has (ResNet-50, BERT-base), that model's time factor.

The largest batch is the one whose training step fits the accelerator's memory less the margin, by the
training memory model of one CUDA rank (`srift.domain.memory`: parameters, gradients, Adam's state and
temporaries, the CUDA context and the structure's activations), as `srift profile` finds it on a GPU.
Curves have breakpoints at 1, 2, 4, … and the largest batch.
A profile measured with `srift profile --strict-fp32` (`extra.float32_math.cudnn` "ieee": cuDNN's TF32
disabled, as users who set `torch.backends.cudnn.allow_tf32 = False` train) is priced with float32
convolutions in IEEE float32, and so are the estimates scaled from it, which record that in their own
`extra.float32_math`.
Every estimate carries `estimate` (method, source accelerator, calibration) and a `spread`, the relative
1-σ error of that method measured leaving one accelerator out (`srift.estimate.calibration`).
`complete_profiles` adds estimates for the instance types a request's measured profiles do not cover.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from srift.catalog.accelerators import spec_for_accelerator, spec_for_instance
from srift.domain.accelerator import AcceleratorSpec
from srift.domain.catalog import InstanceType
from srift.domain.memory import DEFAULT_OPTIMIZER
from srift.domain.profile import (
    PROFILE_SCHEMA_VERSION,
    ComputeCurve,
    EstimateInfo,
    LayerGrad,
    ModelProfile,
)
from srift.domain.profile_document import MIN_PASS_S
from srift.domain.structure import ModelStructure, Precision
from srift.estimate.calibration import Calibration, precision_group, shipped_calibration
from srift.estimate.host import factored_backward, factored_forward
from srift.estimate.roofline import RooflineTimes, fitting_batch, roofline_times, structure_memory

MAX_ESTIMATED_BATCH = 1 << 16
"""Largest per-GPU batch an estimate offers (the optimizer's search space grows with it)."""

READINESS_BATCH_FRACTION = 1 / 3
"""Gradient readiness is computed at ⅓ of the largest batch, where the profiler measures it."""


@dataclass(frozen=True, slots=True)
class Estimated:
    """An estimate, or why there is none (`profile` None and `note` says)."""

    profile: ModelProfile | None
    note: str


def _no_work(model: str, label: str) -> str:
    """Why a structure that counts (almost) no work in a pass gives no estimate: a pass shorter than
    MIN_PASS_S is no time at all, and arithmetic on it overflows (issue 48)."""
    return (
        f"{model}'s structure counts too little work for a pass on {label} (under {MIN_PASS_S:g} s: no "
        "kernels, FLOPs or bytes), so other GPUs are not estimated from it"
    )


def curve_batches(max_batch: int) -> tuple[int, ...]:
    """1, 2, 4, … below `max_batch`, then `max_batch`."""
    out = []
    b = 1
    while b < max_batch:
        out.append(b)
        b *= 2
    out.append(max_batch)
    return tuple(out)


def _readiness(structure: ModelStructure, times: RooflineTimes) -> tuple[LayerGrad, ...]:
    """Trainable layers with the share of the backward pass done when their last backward work ends."""
    order = sorted(range(len(structure.layers)), key=lambda i: structure.layers[i].backward_order)
    total = sum(times.backward_layers_s) or 1.0
    done = 0.0
    ready: list[LayerGrad] = []
    for i in order:
        done += times.backward_layers_s[i]
        layer = structure.layers[i]
        if layer.grad_bytes > 0:
            ready.append(
                LayerGrad(
                    name=layer.name, grad_bytes=layer.grad_bytes, ready_frac=round(min(done / total, 1.0), 6)
                )
            )
    return tuple(ready)


def _straggler_cv(accelerator: str) -> float:
    from srift.profiling.imports import straggler_cv_for

    return straggler_cv_for(accelerator)[0]


STRICT_FLOAT32_MATH = {"matmul": "ieee", "cudnn": "ieee"}
"""What an estimate for strict-fp32 training records in `extra.float32_math` (the profiler's keys)."""


def measured_strict_fp32(profile: ModelProfile) -> bool:
    """Whether `profile` was timed with cuDNN's TF32 disabled (`srift profile --strict-fp32`), as its
    `extra.float32_math` records; profiles without the record ran under PyTorch's defaults."""
    math_used = profile.extra.get("float32_math")
    return isinstance(math_used, dict) and math_used.get("cudnn") == "ieee"


def estimate_profile(
    *,
    model: str,
    structure: ModelStructure,
    spec: AcceleratorSpec,
    accelerator: str | None = None,
    precision: Precision | None = None,
    memory_gib: float | None = None,
    anchor: ModelProfile | None = None,
    anchor_spec: AcceleratorSpec | None = None,
    calibration: Calibration | None = None,
    max_batch: int | None = None,
    strict_fp32: bool | None = None,
) -> Estimated:
    """An estimated profile of `model` on `spec` (see the module docstring).

    `precision` (default: the structure's) must be in the structure's group (fp32 structures serve fp32
    and tf32). `accelerator` labels the profile (default: the spec's name); `memory_gib` overrides the
    spec's memory (EC2 reports a little less than the datasheet). With `anchor` (a measured profile in the
    same precision group) and its `anchor_spec` the estimate is scaled from it. `max_batch`, when given,
    replaces the one-rank memory model's largest batch (sharded data parallelism holds less per GPU; the
    plan checks each strategy's memory, `srift.domain.sharding`). `strict_fp32` prices float32
    convolutions in IEEE float32 (`roofline.convolution_precision`); None follows the anchor's record
    (`measured_strict_fp32`), PyTorch's defaults without an anchor. The anchor is always priced as it
    was measured.
    """
    cal = calibration or shipped_calibration()
    prec = precision or structure.precision
    anchor_strict = anchor is not None and measured_strict_fp32(anchor)
    strict = anchor_strict if strict_fp32 is None else strict_fp32
    eff = cal.efficiency
    memory = (memory_gib if memory_gib and memory_gib > 0 else spec.memory_gib) * 2**30
    limited_by = "memory"
    if max_batch is None:
        max_batch = min(fitting_batch(structure, memory_bytes=memory), MAX_ESTIMATED_BATCH)
    else:
        max_batch = min(max_batch, MAX_ESTIMATED_BATCH)
        limited_by = "activations (sharded data parallelism)"
    label = accelerator or spec.name
    if max_batch < 1:
        need = structure_memory(structure).peak_bytes(1) / 2**30
        return Estimated(None, f"{model} does not fit on {label} (needs {need:.1f} GiB at batch 1)")
    batches = curve_batches(max_batch)
    rf = [
        roofline_times(structure, spec=spec, batch=b, efficiency=eff, precision=prec, strict_fp32=strict)
        for b in batches
    ]
    readiness_batch = max(1, round(max_batch * READINESS_BATCH_FRACTION))
    ready_times = roofline_times(
        structure, spec=spec, batch=readiness_batch, efficiency=eff, precision=prec, strict_fp32=strict
    )
    if anchor is not None and anchor_spec is not None:
        # The anchor priced as it was measured (its GPU, precision and float32 math), at any batch.
        on_anchor = functools.partial(
            roofline_times,
            structure,
            spec=anchor_spec,
            efficiency=eff,
            precision=anchor.precision,
            strict_fp32=anchor_strict,
        )
        factors_fw, factors_bw = [], []
        for b in batches:
            at = min(b, anchor.max_batch)
            ra = on_anchor(batch=at)
            if min(ra.forward_s, ra.backward_s) < MIN_PASS_S:
                return Estimated(None, _no_work(model, anchor_spec.name))
            factors_fw.append(anchor.forward.time_s(at) / ra.forward_s)
            factors_bw.append(anchor.backward.time_s(at) / ra.backward_s)
        anchor_update = on_anchor(batch=1).update_s
        update_factor = anchor.update_s / anchor_update if anchor.update_s > 0 else factors_bw[-1]
        layers = anchor.layers
        cv = anchor.straggler_cv
        info = EstimateInfo(
            method="scaled", spread=cal.spreads["scaled"], calibration=cal.name, based_on=anchor.accelerator
        )
        how = f"scaled from the profile measured on {anchor.accelerator} ({anchor_spec.name})"
    else:
        factor = cal.factor(model, prec)
        factors_fw = factors_bw = [factor or 1.0] * len(batches)
        update_factor = factor or 1.0
        layers = _readiness(structure, ready_times)
        cv = _straggler_cv(label)
        info = EstimateInfo(
            method="roofline",
            spread=cal.spreads["model" if factor is not None else "pooled"],
            calibration=cal.name,
        )
        how = (
            f"roofline with {model}'s factor {factor:g} from the public table"
            if factor is not None
            else "roofline, pooled calibration (the model is not in the public table)"
        )
    if strict and prec is Precision.FP32:
        how += ", float32 convolutions in IEEE float32 (strict fp32)"
    if not layers:
        return Estimated(None, f"{model} has no trainable layers to estimate")
    if anchor is not None and anchor_spec is not None:
        forward = ComputeCurve(batches, tuple(r.forward_s * f for r, f in zip(rf, factors_fw, strict=True)))
        backward = ComputeCurve(batches, tuple(r.backward_s * f for r, f in zip(rf, factors_bw, strict=True)))
    else:  # the model's factor scales the GPU's time, not the host floor (srift.estimate.host.factored)
        forward = ComputeCurve(
            batches, tuple(factored_forward(r, f) for r, f in zip(rf, factors_fw, strict=True))
        )
        backward = ComputeCurve(
            batches, tuple(factored_backward(r, f) for r, f in zip(rf, factors_bw, strict=True))
        )
    if not all(math.isfinite(t) and t >= MIN_PASS_S for t in (*forward.times_s, *backward.times_s)):
        return Estimated(None, _no_work(model, label))
    profile = ModelProfile(
        model=model,
        accelerator=label,
        max_batch=max_batch,
        forward=forward,
        backward=backward,
        layers=layers,
        straggler_cv=cv,
        update_s=rf[0].update_s * update_factor,
        schema_version=PROFILE_SCHEMA_VERSION,
        device="estimate",
        precision=prec,
        estimate=info,
        extra={
            "estimated": how,
            **({"float32_math": dict(STRICT_FLOAT32_MATH)} if strict else {}),
            "accelerator_spec": spec.name,
            "spec_source": spec.source_text,
            "memory_gib": round(memory / 2**30, 3),
            "max_batch_limited_by": limited_by if max_batch < MAX_ESTIMATED_BATCH else "cap",
            "structure": structure.method,
            **_unaligned(structure, prec, max_batch),
            "training_memory": {
                "method": "structure count (fake tensors)",
                "parameter_bytes": structure.memory.parameter_bytes,
                "activation_bytes": structure.memory.activation_bytes.to_list(),
                "optimizer": DEFAULT_OPTIMIZER.value,
            },
        },
    )
    return Estimated(profile, how)


def _unaligned(structure: ModelStructure, precision: Precision, batch: int) -> dict[str, float]:
    """`unaligned_share`: the share of the step's FLOP-counted work at `batch` in half-precision matrix
    products off cuBLAS's 16-byte alignment (`ModelStructure.unaligned_share`), which a roofline estimate
    prices like aligned ones and a scaled one at its anchor's cost for them (docs/gpu.md, "Unaligned
    half-precision products"); only under autocast, where the structure counts them."""
    if not precision.autocast:
        return {}
    return {"unaligned_share": round(structure.unaligned_share(batch), 6)}


def _same_group(a: Precision, b: Precision) -> bool:
    return precision_group(a) == precision_group(b)


def complete_profiles(
    profiles: Sequence[ModelProfile],
    instances: Sequence[InstanceType],
    *,
    precision: Precision,
    calibration: Calibration | None = None,
) -> tuple[list[ModelProfile], list[str]]:
    """`profiles` plus estimates for the GPU instance types none of them covers; notes on what was done.

    Measured and stored profiles come first, so a type any of them matches keeps it (a measured profile
    always wins). An estimate is scaled from the first measured profile with a structure whose accelerator
    has a known spec, else roofline from any profile's structure (in `precision`'s group). Estimates are
    strict fp32 when the anchor was measured so, or without an anchor when any of the profiles in the
    group was (`measured_strict_fp32`). Types whose model does not fit, CPU types and GPUs without a spec
    get no estimate.
    """
    out = list(profiles)
    notes: list[str] = []
    structure = next(
        (
            p.structure
            for p in profiles
            if p.structure is not None and _same_group(p.structure.precision, precision)
        ),
        None,
    )
    if structure is None or not profiles:
        return out, notes
    anchor = next(
        (
            p
            for p in profiles
            if not p.is_estimate
            and _same_group(p.precision, precision)
            and spec_for_accelerator(p.accelerator) is not None
        ),
        None,
    )
    anchor_spec = spec_for_accelerator(anchor.accelerator) if anchor is not None else None
    strict = (
        measured_strict_fp32(anchor)
        if anchor is not None
        else any(measured_strict_fp32(p) for p in profiles if _same_group(p.precision, precision))
    )
    done: set[str] = set()
    covered = list(dict.fromkeys(p.accelerator for p in out))  # each name once: profiles repeat names
    for instance in instances:
        if any(instance.matches_accelerator(name) for name in covered):
            continue
        spec = spec_for_instance(instance)
        if spec is None or spec.name in done:
            continue
        done.add(spec.name)
        made = estimate_profile(
            model=profiles[0].model,
            structure=structure,
            spec=spec,
            precision=precision,
            memory_gib=instance.gpu_memory_gib or None,
            anchor=anchor,
            anchor_spec=anchor_spec,
            calibration=calibration,
            strict_fp32=strict,
        )
        if made.profile is None:
            notes.append(made.note)
            continue
        out.append(made.profile)
        if made.profile.accelerator not in covered:
            covered.append(made.profile.accelerator)
        notes.append(
            f"{spec.name}: estimated ({made.note}, ±{100 * made.profile.estimate.spread:.0f} %)"
            if made.profile.estimate is not None
            else made.note
        )
    return out, notes


def spread_of(profiles: Sequence[ModelProfile]) -> float:
    """The largest estimate spread among `profiles` (0 when all are measured)."""
    return max((p.estimate.spread for p in profiles if p.estimate is not None), default=0.0)


def log_normal_quantile(spread: float, z: float) -> float:
    """exp(z·σ): the factor of a multiplicative error with log-σ `spread` at standard-normal `z`."""
    return math.exp(z * spread)
