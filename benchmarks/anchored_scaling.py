"""Anchored scaling per layer against the whole-pass ratio, on public single-GPU rows (A/B, check only).

Issue #55 ("Right on real GPUs", "Anchored scaling") asks whether a profile measured on one GPU should be
carried to other GPUs per layer (Habitat's idea: Yu et al., "Habitat: A Runtime-Based Computational
Performance Predictor for Deep Neural Network Training", USENIX ATC 2021) rather than by one whole-model
factor. `srift.estimate.estimator.estimate_profile` (`estimate:scaled`) scales the anchor's measured
backward at each batch b by one ratio of whole-pass roofline times, R_B(b) / R_A(b) with
R_X(b) = max(Σ_layers gpu_X(layer, b), host floor on X at b). This script checks the per-layer alternative
without changing the product:

- **readiness groups**: the structure's layers in backward order, each trainable layer (gradient bytes
  > 0) closing a group with the parameter-free layers before it, the last group also taking those after
  the last trainable layer (as `estimator._readiness` accumulates them);
- **measured shares**: s_g = Δ of the anchor's `ready_frac` (CUDA events at its readiness batch b_r,
  `extra["iteration_batch"]`) in that order, the last group running to the end of the pass;
- **weights**: w_g = (s_g / a_g) · Σ a / Σ s, a_g the group's roofline GPU time on the anchor at b_r, so
  the weighted anchor GPU time at b_r equals the unweighted one;
- **per-layer backward**: measured_A(b') · R^w_B(b) / R^w_A(b') with R^w_X(b) = max(Σ_g w_g gpu_X(g, b),
  host floor on X at b) and b' = min(b, the anchor's largest batch), as the product takes b'. With every
  w_g = 1 it is the whole-pass ratio (checked below on every anchor, to 1e-12).

Forward and update are the product's in both arms (`estimate_profile` with the anchor, its largest batch
set to the row's batch so the row's batch is a breakpoint): only the backward differs. The script refuses
an anchor whose readiness was not timed with CUDA events, whose layer names are not the structure's
trainable layers, whose shares are not all > 0 in the structure's backward order, or whose roofline backward
at b_r is host-bound.

Anchors: the profiles Srift's profiler measured on an NVIDIA H200 (docs/images/gpu/h200-profile-*.json:
resnet50 tf32, bert-base tf32 and bf16, gpt2-small fp16). Rows: every single-GPU row of the public table
(srift/estimate/data/lambdal_throughput.csv, read through the measurement registry) and every row of timm's
RTX 3090 table (srift/estimate/data/timm_train_rtx3090.csv) whose model and precision group
(`srift.estimate.calibration.precision_group`: fp32/tf32, fp16/bf16) an anchor has; measured step =
per-GPU batch / samples per second; predicted step = forward + backward + update of the estimate at that
batch; error = predicted / measured − 1. The shipped calibration prices both arms (it was fitted on these
public rows, the same for both; nothing here is fitted). The public rows ran other code than the anchors
(NVIDIA DeepLearningExamples, apex for BERT fp16; the anchors are Srift's plain-PyTorch reference models),
so both arms carry that difference.

The product keeps the whole-pass ratio: per layer was worse on this check (docs/gpu.md, "Anchored scaling
per layer").

    python -m benchmarks.anchored_scaling             # table -> docs/BENCHMARKS.md
    python -m benchmarks.anchored_scaling --no-write  # print only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from benchmarks._report import write_section
from srift.catalog.accelerators import spec_for_accelerator
from srift.domain.accelerator import AcceleratorSpec
from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.domain.structure import ModelStructure, Precision
from srift.estimate import public, public_timm
from srift.estimate.calibration import Calibration, precision_group, shipped_calibration
from srift.estimate.estimator import READINESS_BATCH_FRACTION, estimate_profile, measured_strict_fp32
from srift.estimate.roofline import RooflineTimes, roofline_times

SECTION = "anchored scaling per layer (A/B, H200 anchors)"
ANCHORS = Path(__file__).resolve().parent.parent / "srift" / "refmodels" / "data" / "measured"
ANCHOR_FILES = ("resnet50-tf32", "bert-base-tf32", "bert-base-bf16", "gpt2-small-fp16")


@dataclass(frozen=True, eq=False)
class Groups:
    """A structure's readiness groups and their weights from an anchor (module docstring)."""

    order: npt.NDArray[np.intp]
    starts: npt.NDArray[np.intp]
    weights: npt.NDArray[np.float64]

    def group_s(self, times: RooflineTimes) -> npt.NDArray[np.float64]:
        """Unweighted roofline GPU seconds of each group's backward."""
        layers = np.asarray(times.backward_layers_s, dtype=np.float64)
        out: npt.NDArray[np.float64] = np.add.reduceat(layers[self.order], self.starts)
        return out

    def backward_s(self, times: RooflineTimes, *, unit: bool = False) -> float:
        """R^w: the weighted backward GPU time (all weights 1 with `unit`), never under the host floor."""
        groups = self.group_s(times)
        gpu = float(groups.sum()) if unit else float(np.dot(self.weights, groups))
        return max(gpu, times.backward_host_s)


def readiness_batch(anchor: ModelProfile) -> int:
    """The batch the anchor's readiness was timed at: the profiler's `extra["iteration_batch"]`, else ⅓ of
    its largest batch (the profiler's pick)."""
    recorded = anchor.extra.get("iteration_batch")
    if isinstance(recorded, int) and 1 <= recorded <= anchor.max_batch:
        return recorded
    return max(1, round(anchor.max_batch * READINESS_BATCH_FRACTION))


def groups_of(structure: ModelStructure, anchor: ModelProfile, at_readiness: RooflineTimes) -> Groups:
    """The weights, or SystemExit naming the rule the anchor breaks (module docstring)."""
    if anchor.extra.get("readiness_clock") != "cuda":
        raise SystemExit(f"{anchor.model}: readiness not timed with CUDA events")
    order = sorted(range(len(structure.layers)), key=lambda i: structure.layers[i].backward_order)
    closing = [k for k, i in enumerate(order) if structure.layers[i].grad_bytes > 0]
    names = [structure.layers[order[k]].name for k in closing]
    ready = {layer.name: layer.ready_frac for layer in anchor.layers}
    if len(ready) != len(anchor.layers) or sorted(names) != sorted(ready):
        raise SystemExit(f"{anchor.model}: the profile's layers are not the structure's trainable layers")
    shares = np.diff([0.0, *(ready[n] for n in names[:-1]), 1.0])
    if not np.all(shares > 0):
        raise SystemExit(f"{anchor.model}: readiness does not rise strictly in backward order")
    starts = np.array([0, *(k + 1 for k in closing[:-1])], dtype=np.intp)
    unit = Groups(np.array(order, dtype=np.intp), starts, np.ones(len(names)))
    roofline = unit.group_s(at_readiness)
    if not np.all(roofline > 0) or roofline.sum() <= at_readiness.backward_host_s:
        raise SystemExit(f"{anchor.model}: a group without roofline time, or a host-bound readiness batch")
    weights = (shares / roofline) * (float(roofline.sum()) / float(shares.sum()))
    if not math.isclose(float(np.dot(weights, roofline)), float(roofline.sum()), rel_tol=1e-12):
        raise SystemExit(f"{anchor.model}: the weights are not normalised at the readiness batch")
    return Groups(unit.order, starts, weights)


@dataclass(frozen=True)
class Checked:
    """One row under one anchor: its measured step and both arms' predicted steps (seconds)."""

    anchor: str
    row: str
    gpu: str
    same_major: bool
    batch: int
    measured_s: float
    whole_s: float
    per_layer_s: float
    correlation: float
    """Time-weighted correlation of ln w_g with ln(gpu_target(g) / gpu_anchor(g)) at the readiness batch:
    > 0 when the groups the anchor ran slower than its roofline are those that grow most on the target."""

    @property
    def whole_error(self) -> float:
        return self.whole_s / self.measured_s - 1

    @property
    def per_layer_error(self) -> float:
        return self.per_layer_s / self.measured_s - 1


def check_row(
    name: str,
    anchor: ModelProfile,
    anchor_spec: AcceleratorSpec,
    groups: Groups,
    cal: Calibration,
    *,
    row: str,
    spec: AcceleratorSpec,
    precision: Precision,
    batch: int,
    measured_s: float,
) -> Checked:
    """Both arms' step for one row (module docstring); the whole-pass arm is the product's estimate."""
    structure = anchor.structure
    assert structure is not None
    made = estimate_profile(
        model=anchor.model,
        structure=structure,
        spec=spec,
        precision=precision,
        anchor=anchor,
        anchor_spec=anchor_spec,
        calibration=cal,
        max_batch=batch,
    )
    assert made.profile is not None, made.note
    p = made.profile
    strict = measured_strict_fp32(anchor)
    at = min(batch, anchor.max_batch)
    on_a = roofline_times(
        structure, spec=anchor_spec, batch=at, efficiency=cal.efficiency, precision=anchor.precision,
        strict_fp32=strict,
    )  # fmt: skip
    on_b = roofline_times(
        structure, spec=spec, batch=batch, efficiency=cal.efficiency, precision=precision, strict_fp32=strict
    )
    measured_bw = anchor.backward.time_s(at)
    whole_bw = measured_bw * groups.backward_s(on_b, unit=True) / groups.backward_s(on_a, unit=True)
    product_bw = p.backward.time_s(batch)
    if not math.isclose(whole_bw, product_bw, rel_tol=1e-12):  # unit weights are the product's ratio
        raise SystemExit(f"{name} {row}: unit weights give {whole_bw!r}, the product {product_bw!r}")
    per_layer_bw = measured_bw * groups.backward_s(on_b) / groups.backward_s(on_a)
    whole = p.forward.time_s(batch) + product_bw + p.update_s
    a_cc, b_cc = anchor_spec.capability, spec.capability
    ready = readiness_batch(anchor)
    on_a_ready = roofline_times(
        structure, spec=anchor_spec, batch=ready, efficiency=cal.efficiency, precision=anchor.precision,
        strict_fp32=strict,
    )  # fmt: skip
    on_b_ready = roofline_times(
        structure, spec=spec, batch=ready, efficiency=cal.efficiency, precision=precision, strict_fp32=strict
    )
    return Checked(
        anchor=name,
        row=row,
        gpu=spec.name,
        same_major=a_cc is not None and b_cc is not None and a_cc[0] == b_cc[0],
        batch=batch,
        measured_s=measured_s,
        whole_s=whole,
        per_layer_s=whole - product_bw + per_layer_bw,
        correlation=weighted_correlation(
            np.log(groups.weights),
            np.log(groups.group_s(on_b_ready) / groups.group_s(on_a_ready)),
            groups.group_s(on_a_ready),
        ),
    )


def weighted_correlation(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]
) -> float:
    w = weights / weights.sum()
    dx, dy = x - float(np.dot(w, x)), y - float(np.dot(w, y))
    return float(np.dot(w, dx * dy) / math.sqrt(float(np.dot(w, dx * dx)) * float(np.dot(w, dy * dy))))


def check_all(cal: Calibration) -> tuple[list[Checked], list[str], dict[str, Groups]]:
    """Every row an anchor covers, both arms; notes on the rows no anchor covers; each anchor's groups."""
    public_rows = [r for r in public.read_table() if r.gpus == 1]
    timm_rows = public_timm.read_rows()
    out: list[Checked] = []
    notes: list[str] = []
    all_groups: dict[str, Groups] = {}
    covered_timm = 0
    for name in ANCHOR_FILES:
        anchor = read_profile(json.loads((ANCHORS / f"h200-profile-{name}.json").read_text()))
        anchor_spec = spec_for_accelerator(anchor.accelerator)
        assert anchor_spec is not None and anchor.structure is not None
        at_readiness = roofline_times(
            anchor.structure,
            spec=anchor_spec,
            batch=readiness_batch(anchor),
            efficiency=cal.efficiency,
            precision=anchor.precision,
            strict_fp32=measured_strict_fp32(anchor),
        )
        groups = groups_of(anchor.structure, anchor, at_readiness)
        all_groups[name] = groups
        group = precision_group(anchor.precision)
        for r in public_rows:
            if r.model == anchor.model and precision_group(r.precision) == group:
                out.append(
                    check_row(
                        name, anchor, anchor_spec, groups, cal, row=r.row, spec=r.spec,
                        precision=r.precision, batch=r.per_gpu_batch,
                        measured_s=r.per_gpu_batch / r.samples_per_s,
                    )
                )  # fmt: skip
        for t in timm_rows:
            if t.model == anchor.model and precision_group(t.precision) == group:
                covered_timm += 1
                out.append(
                    check_row(
                        name, anchor, anchor_spec, groups, cal, row=f"timm {t.row}", spec=t.spec,
                        precision=t.precision, batch=t.batch, measured_s=t.measured_step_s,
                    )
                )  # fmt: skip
    if covered_timm < len(timm_rows):
        kinds = sorted({f"{t.model} {t.precision.value}" for t in timm_rows})
        notes.append(
            f"timm's RTX 3090 rows ({', '.join(kinds)}; {len(timm_rows) - covered_timm} of {len(timm_rows)}) "
            "have no H200 anchor in their model and precision group (the H200 resnet50 profile is tf32, "
            "the fp32 group; there is no vit-b16 profile), so they are not checked"
        )
    anchored = {n for n in ANCHOR_FILES if any(c.anchor == n for c in out)}
    notes += [
        f"{n}: no public row of its model and precision group" for n in ANCHOR_FILES if n not in anchored
    ]
    return out, notes, all_groups


def _mape(errors: list[float]) -> float:
    return 100 * statistics.fmean(abs(e) for e in errors)


def _median(errors: list[float]) -> float:
    return 100 * statistics.median(abs(e) for e in errors)


def _log_sigma(errors: list[float]) -> float:
    return statistics.pstdev([math.log1p(e) for e in errors])


def summary_line(label: str, rows: list[Checked]) -> str:
    whole = [c.whole_error for c in rows]
    layer = [c.per_layer_error for c in rows]
    wins = sum(abs(c.per_layer_error) < abs(c.whole_error) for c in rows)
    losses = sum(abs(c.per_layer_error) > abs(c.whole_error) for c in rows)
    return (
        f"| {label} | {len(rows)} | {_mape(whole):.1f} % | {_mape(layer):.1f} % | {_median(whole):.1f} % | "
        f"{_median(layer):.1f} % | {_log_sigma(whole):.3f} | {_log_sigma(layer):.3f} | {losses} | {wins} |"
    )


def report(checked: list[Checked], notes: list[str], groups: dict[str, Groups]) -> str:
    lines = [
        "Each H200 profile measured by Srift's profiler as the anchor of every public row of its model and "
        "precision group, estimated twice: the backward scaled by the whole-pass roofline ratio (what "
        "`estimate:scaled` does) and per layer (readiness groups weighted by the anchor's measured shares; "
        "benchmarks/anchored_scaling.py's docstring). Forward and update are the same in both. Error = "
        "predicted / measured step − 1. The public rows ran other code than the anchors (NVIDIA "
        "DeepLearningExamples, apex for BERT fp16; the anchors are Srift's plain-PyTorch reference models), "
        "so both arms carry that difference; nothing is fitted. log σ: the standard deviation of "
        "ln(predicted / measured) over the rows, which leaves out an offset common to the rows (how well the "
        "step is carried from GPU to GPU). The split by the target's compute capability was added after "
        "the first run, to describe where the arms differ; it chose nothing.",
        "",
        "| anchor | rows | MAPE whole-pass | MAPE per-layer | median abs whole-pass | median abs per-layer | "
        "log σ whole-pass | log σ per-layer | whole-pass closer | per-layer closer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    anchors = list(dict.fromkeys(c.anchor for c in checked))
    for name in anchors:
        lines.append(summary_line(name, [c for c in checked if c.anchor == name]))
    lines.append(summary_line("all", checked))
    lines.append(
        summary_line(
            "targets of the anchor's major compute capability (Hopper)", [c for c in checked if c.same_major]
        )
    )
    lines.append(summary_line("other targets", [c for c in checked if not c.same_major]))
    lines += [
        "",
        "Weights w_g by anchor (readiness groups; min / median / max): "
        + "; ".join(
            f"{n} {len(g.weights)} groups, {g.weights.min():.2f} / {float(np.median(g.weights)):.2f} / "
            f"{g.weights.max():.2f}"
            for n, g in groups.items()
        )
        + ".",
        "",
        "Per row: the error of each arm, and the correlation (weighted by the anchor's roofline time of each "
        "group, at its readiness batch) of ln w_g with ln(gpu_target(g) / gpu_anchor(g)): above 0 the "
        "groups the H200 ran slower than its roofline are those that grow most on the target, and per layer "
        "predicts a longer backward than the whole-pass ratio.",
        "",
        "| anchor | row | GPU | batch | measured step | whole-pass | per-layer | correlation |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for c in checked:
        lines.append(
            f"| {c.anchor} | {c.row} | {c.gpu} | {c.batch} | {1e3 * c.measured_s:.1f} ms | "
            f"{100 * c.whole_error:+.1f} % | {100 * c.per_layer_error:+.1f} % | {c.correlation:+.2f} |"
        )
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--no-write", action="store_true", help="print the section, leave BENCHMARKS.md alone"
    )
    args = parser.parse_args()
    checked, notes, groups = check_all(shipped_calibration())
    text = report(checked, notes, groups)
    load = os.getloadavg()
    text += f"\n\nLoad average when it ran: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}."
    print(text)
    if not args.no_write:
        write_section(SECTION, text, command="python -m benchmarks.anchored_scaling")


if __name__ == "__main__":
    main()
