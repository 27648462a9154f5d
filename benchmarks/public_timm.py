"""The compute estimator against timm's plain-PyTorch training throughput on one RTX 3090 (check only).

Every row of srift/estimate/data/timm_train_rtx3090.csv (timm's benchmark.py training step, native AMP,
NCHW and NHWC, PyTorch 1.10/1.11/1.12; its header and the registry set `timm-rtx3090-train` give the
source) is estimated the way Srift estimates a GPU nobody profiled (`srift.estimate.public_timm`): the
reference model's shipped fp16 structure priced on the RTX 3090's spec at the row's batch, times the model's
factor from the public table. Twice: with the shipped calibration (which fitted Lambda's RTX 3090 rows, but
never these) and with a calibration fitted the same way on the public table's single-GPU rows of every GPU
model except the RTX 3090 (`srift.estimate.public.fit`), so the GPU contributes nothing to its estimate.
Nothing is fitted to the timm rows.

Also reported: the step NHWC takes against NCHW per model and PyTorch version (the layout effect Srift's
structures do not model); Lambda's RTX 3090 ResNet-50 fp16 row (the tuned DeepLearningExamples code the
calibration fits) beside timm's plain-PyTorch rows; the estimate's largest batch against the batch timm ran;
the layout the Lambda table's ResNet-50 rows ran (cited from its launch scripts) and what a layout-aware
estimate would need.

    python -m benchmarks.public_timm        # table -> docs/BENCHMARKS.md
"""

from __future__ import annotations

import functools
import math
import os
import statistics
from collections import defaultdict
from dataclasses import dataclass

from benchmarks._report import write_section
from srift.domain.structure import Precision
from srift.estimate import public
from srift.estimate.calibration import Calibration, shipped_calibration
from srift.estimate.estimator import estimate_profile
from srift.estimate.public_timm import SOURCE, MemoryFormat, TimmRow, estimated_step_s, read_rows
from srift.estimate.roofline import layer_seconds, roofline_times
from srift.measurements import Use
from srift.refmodels.build import load_structure

SECTION = "public plain-PyTorch training (timm, RTX 3090)"
HELD_OUT_GPU = "RTX-3090"
"""The GPU of every timm row: the leave-one-GPU-out calibration is fitted without its table rows."""
structure_of = functools.lru_cache(maxsize=None)(load_structure)


@dataclass(frozen=True)
class Scored:
    """One timm row with Srift's two estimates of its step (seconds)."""

    row: TimmRow
    shipped_s: float
    held_out_s: float

    @property
    def shipped_ratio(self) -> float:
        return self.shipped_s / self.row.measured_step_s

    @property
    def held_out_ratio(self) -> float:
        return self.held_out_s / self.row.measured_step_s


def held_out_calibration() -> Calibration:
    """The public table's calibration fitted without any RTX 3090 row (the registry's fit rows, less the
    held-out GPU's), as `srift.estimate.public.calibrate` fits the shipped one."""
    rows = [r for r in public.registered_rows(Use.FIT) if r.gpu != HELD_OUT_GPU]
    fitted = public.fit(rows, structure_of, kernel_s=public.EAGER_KERNEL_S)
    shipped = shipped_calibration()
    return fitted.calibration(
        name=f"lambdal-without-{HELD_OUT_GPU}",
        spreads=shipped.spreads,
        fitted_on=f"{len(rows)} single-GPU rows of the public table without {HELD_OUT_GPU}",
        kernel_source=shipped.kernel_source,
    )


def score(rows: list[TimmRow], shipped: Calibration, held_out: Calibration) -> list[Scored]:
    """Both estimates of every row."""
    out = []
    for row in rows:
        structure = structure_of(row.model, row.precision)
        out.append(
            Scored(row, estimated_step_s(row, structure, shipped), estimated_step_s(row, structure, held_out))
        )
    return out


def report(scored: list[Scored], shipped: Calibration, held_out: Calibration) -> str:
    """The section's Markdown (module docstring)."""
    own = max(abs(s.row.step_ms / 1e3 / s.row.measured_step_s - 1) for s in scored)
    spec = scored[0].row.spec
    lines = [
        f"Srift's estimate of each timm training row ({SOURCE}) against timm's measured step. Measured "
        "step = batch / samples per second (the timed loop's wall time per step; timm's own per-step mean, "
        f"which leaves out zero_grad, is within {100 * own:.1f} % of it on every row). Estimate: "
        "`estimate:roofline` as a user gets it for an unprofiled GPU: the reference model's shipped fp16 "
        f"structure (autocast, float32 parameters) on the {spec.name} spec "
        f"({spec.peak_tflops[Precision.FP16]:g} TFLOPS fp16, {spec.memory_gbps:g} GB/s) at the row's batch, "
        "forward + backward + update, times the model's public-table factor (resnet50 has one; vit-b16 is "
        "pooled, factor 1). 'shipped': the shipped calibration, which fitted Lambda's RTX 3090 rows, never "
        f"these; 'held out': fitted on the table without the RTX 3090 ({held_out.fitted_on}). Each PyTorch "
        "version is a separate sample. Nothing is fitted to these rows.",
        "",
        "| timm model (Srift) | layout | torch | batch | measured step | samples/s | estimate, shipped | "
        "shipped / measured | estimate, held out | held out / measured |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scored:
        r = s.row
        lines.append(
            f"| {r.timm_model} ({r.model}) | {r.layout.value.upper()} | {r.torch} | {r.batch} | "
            f"{1e3 * r.measured_step_s:.1f} ms | {r.samples_per_s:.1f} | {1e3 * s.shipped_s:.1f} ms | "
            f"{s.shipped_ratio:.2f} | {1e3 * s.held_out_s:.1f} ms | {s.held_out_ratio:.2f} |"
        )
    groups: dict[tuple[str, MemoryFormat], list[Scored]] = defaultdict(list)
    for s in scored:
        groups[(s.row.model, s.row.layout)].append(s)
    lines += [
        "",
        "Estimate / measured step by model and layout (geometric mean over the three PyTorch versions; "
        "range in brackets):",
        "",
        "| model | layout | rows | shipped / measured | held out / measured |",
        "|---|---|---:|---:|---:|",
    ]
    for (model, layout), group in sorted(groups.items()):
        ship = [s.shipped_ratio for s in group]
        held = [s.held_out_ratio for s in group]
        lines.append(
            f"| {model} | {layout.value.upper()} | {len(group)} | {statistics.geometric_mean(ship):.2f} "
            f"({min(ship):.2f}–{max(ship):.2f}) | {statistics.geometric_mean(held):.2f} "
            f"({min(held):.2f}–{max(held):.2f}) |"
        )
    lines += [
        "",
        "The layout alone: NHWC (`--channels-last`: model and input in torch.channels_last) against NCHW, "
        "same model, PyTorch version and GPU (samples/s ratio; the batch may differ where one layout fit a "
        "larger retry step):",
        "",
        "| model | torch | NCHW samples/s (batch) | NHWC samples/s (batch) | NHWC / NCHW throughput |",
        "|---|---|---:|---:|---:|",
    ]
    pairs: dict[tuple[str, str], dict[MemoryFormat, TimmRow]] = defaultdict(dict)
    for s in scored:
        pairs[(s.row.model, s.row.torch)][s.row.layout] = s.row
    for (model, torch), by in sorted(pairs.items()):
        nchw, nhwc = by[MemoryFormat.NCHW], by[MemoryFormat.NHWC]
        lines.append(
            f"| {model} | {torch} | {nchw.samples_per_s:.1f} ({nchw.batch}) | {nhwc.samples_per_s:.1f} "
            f"({nhwc.batch}) | {nhwc.samples_per_s / nchw.samples_per_s:.2f} |"
        )
    lines += ["", *lambda_lines(scored, shipped), "", *batch_lines(scored, shipped), ""]
    lines += mapping_lines(scored, shipped, held_out)
    lines += ["", *layout_lines(scored, shipped)]
    return "\n".join(lines)


def lambda_lines(scored: list[Scored], shipped: Calibration) -> list[str]:
    """Lambda's single-GPU RTX 3090 ResNet-50 fp16 row (a fit row of the calibration) beside timm's."""
    lam = [
        r
        for r in public.registered_rows(Use.FIT)
        if r.gpu == HELD_OUT_GPU and r.gpus == 1 and r.model == "resnet50" and r.precision is Precision.FP16
    ]
    lines = [
        "The same GPU and model in the public table the calibration fits (Lambda, NVIDIA "
        "DeepLearningExamples ResNet-50 v1.5, 'fp16'; "
        + public.TABLE_SOURCE
        + ") against timm's plain-PyTorch AMP:",
        "",
        "| source | batch | samples/s | Lambda / this |",
        "|---|---:|---:|---:|",
    ]
    for row in lam:
        lines.append(f"| Lambda {row.row} (fit row) | {row.per_gpu_batch} | {row.samples_per_s:.0f} | 1.00 |")
        for layout in MemoryFormat:
            group = [s.row for s in scored if s.row.model == "resnet50" and s.row.layout is layout]
            thr = statistics.geometric_mean([r.samples_per_s for r in group])
            batches = "/".join(str(r.batch) for r in group)
            lines.append(
                f"| timm {layout.value.upper()} (geometric mean of torch 1.10–1.12) | {batches} | "
                f"{thr:.0f} | {row.samples_per_s / thr:.2f} |"
            )
        structure = structure_of(row.model, row.precision)
        estimate = row.per_gpu_batch / public.predict_single(
            row, structure, shipped.efficiency, shipped.factor(row.model, row.precision) or 1.0
        )
        lines += [
            "",
            f"Srift's shipped estimate for the Lambda row: {row.per_gpu_batch / estimate:.0f} samples/s "
            f"({1e3 * estimate:.1f} ms per step; estimate / measured step "
            f"{estimate / (row.per_gpu_batch / row.samples_per_s):.2f}).",
        ]
    return lines


def batch_lines(scored: list[Scored], shipped: Calibration) -> list[str]:
    """The estimate's largest batch (fp16, the RTX 3090's 24 GiB, Adam) against the batches timm ran."""
    lines = [
        "Largest batch: the estimate's (the training memory model for fp16 autocast with Adam, the "
        "estimator's default optimizer, on the spec's 24 GiB) against the batch timm ran (timm's SGD keeps "
        "one momentum buffer where Adam keeps two; a batch below 512 means the next retry step up failed):",
        "",
        "| model | estimate's largest batch | timm's batches (NCHW; NHWC) over torch 1.10 / 1.11 / 1.12 |",
        "|---|---:|---|",
    ]
    models = sorted({s.row.model for s in scored})
    for model in models:
        first = next(s.row for s in scored if s.row.model == model)
        made = estimate_profile(
            model=model,
            structure=structure_of(model, first.precision),
            spec=first.spec,
            precision=first.precision,
            calibration=shipped,
        )
        largest = str(made.profile.max_batch) if made.profile is not None else made.note
        timm = "; ".join(
            " / ".join(str(s.row.batch) for s in scored if s.row.model == model and s.row.layout is layout)
            for layout in MemoryFormat
        )
        lines.append(f"| {model} | {largest} | {timm} |")
    return lines


def mapping_lines(scored: list[Scored], shipped: Calibration, held_out: Calibration) -> list[str]:
    """What differs between timm's step and the one Srift's structure describes."""
    vit = structure_of("vit-b16", Precision.FP16)
    resnet = structure_of("resnet50", Precision.FP16)
    update_share = max(
        roofline_times(
            structure_of(s.row.model, s.row.precision),
            spec=s.row.spec,
            batch=s.row.batch,
            efficiency=shipped.efficiency,
            precision=s.row.precision,
        ).update_s
        * (shipped.factor(s.row.model, s.row.precision) or 1.0)
        / s.shipped_s
        for s in scored
    )
    return [
        "How the two steps map. Precision: timm's `--amp` is `torch.cuda.amp.autocast()` (fp16) around "
        "forward, loss and backward with float32 parameters and no gradient scaler; Srift's fp16 is "
        "autocast fp16 with float32 parameters and their gradients (`srift.domain.structure.Precision`, "
        "which assumes a scaler). Optimizer: timm's 'sgd' (Nesterov momentum, no weight decay) against the "
        f"update Srift prices from its structure ({resnet.update_bytes / 1e9:.2f} GB moved for resnet50, "
        f"{vit.update_bytes / 1e9:.2f} GB for vit-b16: at most {100 * update_share:.2f} % of an estimated "
        "step here). Attention: "
        "timm's vit_base_patch16_224 of 2022 computes q·kᵀ, softmax, dropout and ·v as separate kernels (it "
        "keeps the 197×197 attention matrix per head); Srift's vit-b16 structure is counted from "
        "`nn.MultiheadAttention(need_weights=False)` as PyTorch ran it when the shipped structure was "
        "counted. Layout: Srift's structures have none (NCHW is PyTorch's default and what a user gets "
        "without `channels_last`). Software: CUDA 11.3 and the cuDNN of PyTorch 1.10–1.12 (2021–2022).",
        "",
        f"Calibrations: shipped ({shipped.name}) compute {shipped.efficiency.compute:.3f}, matrix-operand "
        f"bandwidth {shipped.efficiency.matmul_memory:.3f}, other {shipped.efficiency.other_memory:.3f}, "
        f"resnet50/fp16 factor {shipped.factor('resnet50', Precision.FP16):.3f}; held out "
        f"({held_out.name}) compute {held_out.efficiency.compute:.3f}, matrix-operand bandwidth "
        f"{held_out.efficiency.matmul_memory:.3f}, other {held_out.efficiency.other_memory:.3f}, HBM factor "
        f"{held_out.efficiency.hbm_bandwidth:.3f}, resnet50/fp16 factor "
        f"{held_out.factor('resnet50', Precision.FP16):.3f}.",
    ]


def convolution_share(row: TimmRow, shipped: Calibration) -> float:
    """The share of the estimated forward + backward roofline seconds (before the kernel floor and the
    update) that falls in layers with convolution FLOPs, at the row's batch."""
    conv = total = 0.0
    for layer in structure_of(row.model, row.precision).layers:
        seconds = sum(
            layer_seconds(
                work, spec=row.spec, precision=row.precision, batch=row.batch, efficiency=shipped.efficiency
            )
            for work in (layer.forward, layer.backward)
        )
        total += seconds
        if layer.forward.conv_flops.at(row.batch) > 0 or layer.backward.conv_flops.at(row.batch) > 0:
            conv += seconds
    return conv / total


def layout_lines(scored: list[Scored], shipped: Calibration) -> list[str]:
    """What layout the public table's rows ran (cited), and what a layout-aware estimate would need (the
    layout ratios measured above; nothing is fitted)."""
    ratios: dict[str, list[float]] = defaultdict(list)
    pairs: dict[tuple[str, str], dict[MemoryFormat, TimmRow]] = defaultdict(dict)
    for s in scored:
        pairs[(s.row.model, s.row.torch)][s.row.layout] = s.row
    for (model, _), by in sorted(pairs.items()):
        ratios[model].append(by[MemoryFormat.NHWC].samples_per_s / by[MemoryFormat.NCHW].samples_per_s)
    resnet = ratios["resnet50"]
    vit = ratios["vit-b16"]
    nchw = [s.row for s in scored if s.row.model == "resnet50" and s.row.layout is MemoryFormat.NCHW]
    share = statistics.fmean(convolution_share(r, shipped) for r in nchw)
    speedup = statistics.geometric_mean(resnet)
    # If NHWC sped up only the layers with convolutions: 1 / speedup = (1 - share) + share / s.
    implied = share / (1 / speedup - (1 - share)) if 1 / speedup > 1 - share else math.inf
    return [
        "**Layout in the public table.** Lambda's ResNet-50 'fp16' rows ran NVIDIA "
        "DeepLearningExamples' ConvNets `main.py` from LambdaLabsML/DeepLearningExamples (branch "
        "`lambda/benchmark`, head c1781a370c8f775bb50bd742f5095e66902a0314, "
        "PyTorch/Classification/ConvNets/main.py) with the arguments of "
        "lambdal/deeplearning-benchmark@0551cb70 pytorch/scripts/config_v1/config_pytorch_24GB.sh "
        "(`--amp --static-loss-scale 256 --batch-size 448 --data-backend synthetic`, no "
        "`--memory-format`, whose default there is `nchw`) in NGC pytorch:22.10-py3 (the README's "
        "tested image); `--amp` is `torch.cuda.amp.autocast` with a `GradScaler` "
        "(image_classification/training.py). The ResNet-50 fp16 rows the calibration fits are therefore "
        "native AMP in NCHW, the same kind of step as timm's NCHW rows. Lambda's BERT-base fp16 rows are "
        "not plain PyTorch: run_squad.py (same branch) runs apex `amp.initialize(opt_level='O2')` (an "
        "fp16 model with float32 master weights) and apex `FusedAdam`.",
        "",
        "**What a layout-aware estimate would need** (not done; nothing here changes an estimate): (1) a "
        "memory-format field (nchw / nhwc) on the profile or request, which matters only for structures with "
        f"convolutions (vit-b16 NHWC / NCHW throughput {min(vit):.2f}–{max(vit):.2f} above); (2) a measured "
        "NHWC / NCHW factor as a registry fit set, per operator kind rather than per model. The timm rows "
        f"give the whole ResNet-50 step {min(resnet):.2f}–{max(resnet):.2f}× faster in NHWC (geometric mean "
        f"{speedup:.2f}, 3 pairs), but from one GPU (RTX 3090, cuDNN of 2022), one precision (fp16 autocast) "
        "and one model, so they cannot say how the factor carries to Hopper, bf16 or TF32. Srift's estimate "
        f"puts {100 * share:.0f} % of ResNet-50's forward + backward roofline seconds at these batches in "
        "layers with convolutions; were NHWC to speed up only those layers, they would run "
        f"{implied:.2f}× faster. (3) NCHW, what users get by default, is what the calibration's ResNet-50 "
        "rows ran, and the estimate / measured step above holds for it without a layout term; an NHWC "
        "user's ResNet-50 step is over-estimated by about the NHWC ratio.",
    ]


def main() -> None:
    rows = read_rows()
    shipped = shipped_calibration()
    held_out = held_out_calibration()
    scored = score(rows, shipped, held_out)
    text = report(scored, shipped, held_out)
    load = os.getloadavg()
    text += f"\n\nLoad average when it ran: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}."
    print(text)
    write_section(SECTION, text, command="python -m benchmarks.public_timm")


if __name__ == "__main__":
    main()
