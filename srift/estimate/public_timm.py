"""timm's plain-PyTorch training throughput on one RTX 3090, read as a check of the estimator (never a fit).

Data: `srift/estimate/data/timm_train_rtx3090.csv` (its header cites huggingface/pytorch-image-models, the
files, commits and what a row measures): samples/s of timm's `benchmark.py` training step for the timm
models that are Srift reference structures (resnet50 → `resnet50`, vit_base_patch16_224 → `vit-b16`), in
native AMP (fp16 autocast, float32 parameters: Srift's `Precision.FP16`), in NCHW and NHWC
(`channels_last`), under PyTorch 1.10, 1.11 and 1.12. The rows are eager PyTorch as users write it, not the
tuned code (NVIDIA DeepLearningExamples) behind the public table the estimator is calibrated on
(`srift.estimate.public`), so they say how far that calibration carries to plain PyTorch and how much the
memory layout alone moves a step.

The file is read through the measurement registry (set `timm-rtx3090-train`, use `check`): its hash must be
the registry's and its rows exactly the registry's, and `read_rows` refuses any row that a `fit` set would
list, so no fit can take them by accident. `estimated_step_s` is the estimate a user gets for the row: the
reference model's shipped structure priced on the GPU's spec at the row's batch (`roofline_times`: forward,
backward and update) times the model's factor from the public table (1 for models the table does not have,
as the estimator does). benchmarks/public_timm.py reports the ratios.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from srift.catalog.accelerators import spec_named
from srift.domain.accelerator import AcceleratorSpec
from srift.domain.structure import ModelStructure, Precision
from srift.estimate.calibration import Calibration
from srift.estimate.public import csv_rows
from srift.estimate.roofline import roofline_times
from srift.measurements import Registry, Use, shipped_registry

TABLE_COPY = "estimate/data/timm_train_rtx3090.csv"
"""The extracted rows as the measurement registry names them (relative to the srift package)."""
SET_ID = "timm-rtx3090-train"
"""The registry's set that lists every row of the copy (use: check)."""
SOURCE = (
    "huggingface/pytorch-image-models results/benchmark-train-amp-{nchw,nhwc}-pt{110,111,112}-cu113-"
    "rtx3090.csv @eac2df3d (pt110), @02b806e0 (pt111), @c865028c (pt112) "
    "(srift/estimate/data/timm_train_rtx3090.csv)"
)


class MemoryFormat(StrEnum):
    """The memory format timm ran the model and its input in (`--channels-last` gives NHWC)."""

    NCHW = "nchw"
    NHWC = "nhwc"


@dataclass(frozen=True, slots=True)
class TimmRow:
    """One model, layout and PyTorch version of timm's training benchmark on one GPU."""

    row: str
    model: str
    """Srift's reference model (`srift.refmodels`)."""
    timm_model: str
    gpu: str
    """Srift's accelerator spec name."""
    precision: Precision
    layout: MemoryFormat
    torch: str
    source_file: str
    commit: str
    samples_per_s: float
    step_ms: float
    """timm's mean of the per-step timings (zero_grad excluded), as published."""
    batch: int

    @property
    def measured_step_s(self) -> float:
        """One training step as the throughput implies it (batch / samples per second; the timed loop's wall
        time per step, zero_grad included)."""
        return self.batch / self.samples_per_s

    @property
    def spec(self) -> AcceleratorSpec:
        return spec_named(self.gpu)


def parse_rows(text: str) -> list[TimmRow]:
    """The rows of a copy in the shipped CSV format (comment lines start with '#')."""
    return csv_rows(
        TimmRow,
        text,
        precision=Precision,
        layout=MemoryFormat,
        samples_per_s=float,
        step_ms=float,
        batch=int,
    )


def read_rows(*, registry: Registry | None = None) -> list[TimmRow]:
    """The shipped rows, read through the measurement registry: ConfigurationError when the copy's hash or
    rows are not the registry's, or when a set other than a check set lists any of them."""
    reg = registry or shipped_registry()
    why = "timm's rows (they check the estimator) only check"
    return reg.read_rows(TABLE_COPY, parse_rows, use=Use.CHECK, set_id=SET_ID, why=why)


def estimated_step_s(row: TimmRow, structure: ModelStructure, calibration: Calibration) -> float:
    """Srift's estimate of `row`'s training step (module docstring): roofline forward + backward + update
    at the row's batch on its GPU, times the model's factor from the public table (1 without one)."""
    times = roofline_times(
        structure, spec=row.spec, batch=row.batch, efficiency=calibration.efficiency, precision=row.precision
    )
    factor = calibration.factor(row.model, row.precision) or 1.0
    return (times.forward_s + times.backward_s + times.update_s) * factor
