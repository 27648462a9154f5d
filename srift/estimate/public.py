"""The public GPU throughput table, the estimator's calibration on it, and leave-one-accelerator-out checks.

Data: `srift/estimate/data/lambdal_throughput.csv` (its header cites the source, commits and every
assumption): samples/s of ResNet-50 and BERT-base training on 1–8 GPUs of 12 GPU models, fp32 (TF32 on
Ampere and later) and fp16 (autocast), with the batch each was measured at. It is read through the
measurement registry (`srift.measurements`): the file's hash must be the registry's, every row must be
listed there, and `calibrate` fits exactly the rows its `fit` sets list (the single-GPU rows, set
`lambdal-single-gpu`), with the host time of one kernel its `eager-kernel-overhead` set gives.

Calibration (`fit`): on single-GPU rows only, least squares on log throughput, predicted as batch /
((forward + backward + update roofline seconds) × factor): three efficiencies and the HBM bandwidth factor
shared by every model and GPU, and one time factor per (model, precision group) whose logarithms average to
zero within a group (so the efficiencies carry the pooled level that models outside the table get). Rows
that repeat a GPU model (several vendors' H100 systems) are averaged first, so no GPU weighs more than
another.

Checks (`leave_one_accelerator_out`): for each GPU model, fit on every other GPU's rows and predict its
rows three ways: `model` (the model's factor from the other GPUs), `pooled` (factor 1: a model the table
does not have), `scaled` (each other GPU's measurement of the same model and precision, scaled by the two
GPUs' roofline times: a user's profile from one accelerator).

Bands (`nested_spreads`, `within_band`, `band_coverage`): whether held-out measurements lie inside the
p10–p90 band (`srift.domain.Band`) of their estimate, with each GPU model's σ from the other GPU models'
leave-one-out residuals only (benchmarks/public_gpus.py reports the coverage, issue #55).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np
from scipy.optimize import least_squares  # type: ignore[import-untyped]

from srift.catalog.accelerators import spec_named
from srift.domain import Band, SpreadTerm
from srift.domain.accelerator import AcceleratorSpec
from srift.domain.structure import ModelStructure, Precision
from srift.errors import ConfigurationError
from srift.estimate.calibration import GROUPS, Calibration, precision_group
from srift.estimate.roofline import Efficiency
from srift.measurements import Registry, Use, shipped_registry

TABLE = "data/lambdal_throughput.csv"
TABLE_COPY = "estimate/" + TABLE
"""The table as the measurement registry names it (relative to the srift package)."""
KERNEL_SET = "eager-kernel-overhead"
"""The registry's set that gives the host time of one eager kernel (EAGER_KERNEL_S)."""
TABLE_SOURCE = (
    "lambdal/deeplearning-benchmark pytorch-train-throughput-{fp32,fp16}.csv @0551cb70 and "
    "pytorch-train-bs-{fp32,fp16}.csv @08d77c41 (srift/estimate/data/lambdal_throughput.csv)"
)
EAGER_KERNEL_S = 7.21e-6
"""The host time of one eager kernel: the floor of an estimated pass (kernels × it); the registry's
`eager-kernel-overhead` set holds the measurement (a test checks the two agree)."""
EAGER_KERNEL_SOURCE = (
    "benchmarks/eager_overhead.py, 2026-11-23 20:30 UTC on the development host (AMD EPYC, one thread, "
    "PyTorch 2.13 eager): median 7.21 µs of host time per kernel (docs/BENCHMARKS.md, 'eager kernel "
    "overhead'); a GPU host adds the CUDA launch, so it is a lower bound"
)

PRECISION_OF_LABEL = {"fp32": Precision.TF32, "fp16": Precision.FP16}
"""The table's fp32 rows ran with TF32 tensor cores on Ampere and later (see the CSV header); GPUs without
TF32 run tf32 at their fp32 rate, so TF32 prices every fp32 row right."""
LABEL_OF_PRECISION = {v: k for k, v in PRECISION_OF_LABEL.items()}


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement of the public table (throughput of the whole node)."""

    row: str
    gpu: str
    gpus: int
    model: str
    precision: Precision
    samples_per_s: float
    global_batch: int
    batch_from: str
    interconnect: str
    interconnect_gbps: float

    @property
    def id(self) -> str:
        """The row's name in the measurement registry: system, model and the table's precision label."""
        return f"{self.row}/{self.model}/{LABEL_OF_PRECISION[self.precision]}"

    @property
    def per_gpu_batch(self) -> int:
        return self.global_batch // self.gpus

    @property
    def spec(self) -> AcceleratorSpec:
        return spec_named(self.gpu)


class EfficiencyGap:
    """What a public scaling case compares: the published and the predicted efficiency thr_N / (N · thr_1)
    of N GPUs against one, and their gap. A base of the cases' frozen dataclasses (public_quality's table
    rows, public_runs' raw-log series), which declare the two fields; it adds no slot of its own."""

    __slots__ = ()
    published_efficiency: float
    predicted_efficiency: float

    @property
    def difference_points(self) -> float:
        """Predicted − published efficiency in percentage points."""
        return 100 * (self.predicted_efficiency - self.published_efficiency)


def csv_records(text: str) -> csv.DictReader[str]:
    """The records of a shipped table's CSV text: its header and rows, without the comment lines (starting
    with '#') that cite its source."""
    return csv.DictReader(line for line in io.StringIO(text) if not line.startswith("#"))


T = TypeVar("T")


def csv_rows(cls: type[T], text: str, **read: Callable[[str], Any]) -> list[T]:
    """One `cls` (a dataclass) per record of a shipped table's CSV text (`csv_records`): each field from the
    column of its name, as text unless `read` names the function that reads that column."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    if unknown := set(read) - set(names):
        raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    return [cls(**{n: read.get(n, str)(r[n]) for n in names}) for r in csv_records(text)]


LAMBDA_COLUMNS: dict[str, Callable[[str], Any]] = {
    "gpus": int,
    "precision": PRECISION_OF_LABEL.__getitem__,
    "interconnect_gbps": float,
}
"""How `csv_rows` reads the columns other than text that Lambda's summary table and its raw-log extract
(`srift.estimate.public_runs`) share."""


def read_table(text: str | None = None, *, registry: Registry | None = None) -> list[Row]:
    """The shipped table's rows, read through the measurement registry (its hash checked), or those of
    `text` in the same CSV format."""
    if text is None:
        text = (registry or shipped_registry()).read(TABLE_COPY)
    return csv_rows(Row, text, **LAMBDA_COLUMNS, samples_per_s=float, global_batch=int)


def registered_rows(use: Use, *, registry: Registry | None = None) -> list[Row]:
    """The shipped table's rows that the registry's sets of `use` list (Use.FIT: what `calibrate` fits;
    Use.CHECK: what only checks it). ConfigurationError when the file's hash is not the registry's, or its
    rows are not exactly those the registry lists."""
    reg = registry or shipped_registry()
    rows = read_table(registry=reg)
    wanted = reg.rows(TABLE_COPY, use, (r.id for r in rows))
    return [r for r in rows if r.id in wanted]


StructureOf = Callable[[str, Precision], ModelStructure]


class _Work:
    """One single-GPU observation as arrays, so a roofline time costs a few numpy operations."""

    def __init__(self, row: Row, structure: ModelStructure) -> None:
        b = row.per_gpu_batch
        layers = [(x.forward, x.backward) for x in structure.layers]
        passes = [p for pair in layers for p in pair]
        self.flops = np.array([p.product_flops.at(b) for p in passes])
        self.conv_flops = np.array([p.conv_flops.at(b) for p in passes])
        self.matmul_bytes = np.array([p.matmul_bytes.at(b) for p in passes])
        self.other_bytes = float(sum(p.other_bytes.at(b) for p in passes))
        self.update_bytes = float(structure.update_bytes)
        self.kernels_fw = structure.forward.kernels
        self.kernels_bw = structure.backward.kernels
        self.batch = b
        self.spec = row.spec
        self.peak = self.spec.peak_flops(row.precision)
        self.conv_peak = self.spec.peak_flops(row.precision.convolution)

    def seconds(self, eff: Efficiency) -> float:
        """forward + backward + update roofline seconds, as `srift.estimate.roofline` computes them."""
        bandwidth = eff.bandwidth(self.spec)
        matmul = np.maximum(
            self.flops / (self.peak * eff.compute) + self.conv_flops / (self.conv_peak * eff.compute),
            self.matmul_bytes / (bandwidth * eff.matmul_memory),
        )
        other = (self.other_bytes + self.update_bytes) / (bandwidth * eff.other_memory)
        floor = (self.kernels_fw + self.kernels_bw) * eff.kernel_s
        return max(float(matmul.sum()) + other, floor)


_WORKS: dict[tuple[Row, int], tuple[ModelStructure, _Work]] = {}
_WORKS_HELD = 4096


def _work(row: Row, structure: ModelStructure) -> _Work:
    """`_Work(row, structure)`, remembered per row and structure object (kept alive with it, so its id is
    not reused): `calibrate` fits the same rows once per left-out GPU model, and `nested_spreads` once per
    pair, each fit reading every row's structure sums again; a _Work is never changed once made."""
    key = (row, id(structure))
    found = _WORKS.get(key)
    if found is not None and found[0] is structure:
        return found[1]
    if len(_WORKS) >= _WORKS_HELD:
        _WORKS.clear()
    work = _Work(row, structure)
    _WORKS[key] = (structure, work)
    return work


def _key(row: Row) -> str:
    return f"{row.model}/{precision_group(row.precision)}"


@dataclass(frozen=True, slots=True)
class Fit:
    """What `fit` learns from single-GPU rows: the roofline's efficiencies and the per-(model, precision
    group) time factors."""

    efficiency: Efficiency
    factors: dict[str, float]

    def calibration(
        self, *, name: str, spreads: dict[str, float], fitted_on: str = "", kernel_source: str = ""
    ) -> Calibration:
        """This fit, unrounded, as the calibration the estimator takes (held-out checks estimate with a fit
        that left rows out; `calibrate` rounds the shipped one), with `spreads` for its estimates' bands."""
        return Calibration(
            name=name,
            efficiency=self.efficiency,
            factors=self.factors,
            spreads=spreads,
            fitted_on=fitted_on,
            kernel_source=kernel_source,
        )


def fit(rows: Sequence[Row], structure_of: StructureOf, *, kernel_s: float) -> Fit:
    """Efficiencies and per-(model, group) factors from single-GPU rows (module docstring)."""
    singles = [r for r in rows if r.gpus == 1]
    grouped: dict[tuple[str, str, Precision], list[Row]] = {}
    for r in singles:
        grouped.setdefault((r.gpu, r.model, r.precision), []).append(r)
    obs = []
    for (_, model, precision), members in sorted(grouped.items()):
        first = members[0]
        measured = statistics.geometric_mean(m.samples_per_s for m in members)
        obs.append((_work(first, structure_of(model, precision)), _key(first), measured))
    keys = sorted({k for _, k, _ in obs})
    index = {k: i for i, k in enumerate(keys)}
    groups = {g: [index[k] for k in keys if k.endswith("/" + g)] for g in GROUPS}

    def unpack(x: np.ndarray) -> tuple[Efficiency, np.ndarray]:
        eff = Efficiency(
            compute=float(np.exp(x[0])),
            matmul_memory=float(np.exp(x[1])),
            other_memory=float(np.exp(x[2])),
            kernel_s=kernel_s,
            hbm_bandwidth=float(np.exp(x[3])),
        )
        raw = np.asarray(x[4:], dtype=float)
        centred = raw.copy()
        for members in groups.values():
            if members:
                centred[members] -= raw[members].mean()
        return eff, centred

    def residuals(x: np.ndarray) -> np.ndarray:
        eff, logf = unpack(x)
        return np.array(
            [
                math.log(work.batch / (work.seconds(eff) * math.exp(logf[index[key]]))) - math.log(measured)
                for work, key, measured in obs
            ]
        )

    start = np.array([math.log(0.5)] * 3 + [0.0] + [0.0] * len(keys))
    lower = np.array([math.log(0.01)] * 3 + [math.log(0.25)] + [-3.0] * len(keys))
    upper = np.array([0.0] * 3 + [math.log(4.0)] + [3.0] * len(keys))
    result = least_squares(residuals, start, bounds=(lower, upper), x_scale=1.0)
    eff, logf = unpack(result.x)
    return Fit(eff, {k: float(math.exp(logf[index[k]])) for k in keys})


def predict_single(row: Row, structure: ModelStructure, efficiency: Efficiency, factor: float) -> float:
    """Samples/s of one GPU for `row` with these efficiencies and time factor."""
    return row.per_gpu_batch / (_work(row, structure).seconds(efficiency) * factor)


@dataclass(frozen=True, slots=True)
class HeldOutPrediction:
    """One held-out single-GPU row predicted three ways (module docstring); errors are relative."""

    row: Row
    model_error: float
    pooled_error: float
    scaled_errors: tuple[float, ...]
    fit: Fit


def leave_one_accelerator_out(
    rows: Sequence[Row], structure_of: StructureOf, *, kernel_s: float
) -> list[HeldOutPrediction]:
    """Every single-GPU row predicted with a calibration its GPU model took no part in."""
    out: list[HeldOutPrediction] = []
    singles = [r for r in rows if r.gpus == 1]
    for gpu in sorted({r.gpu for r in singles}):
        train = [r for r in singles if r.gpu != gpu]
        fitted = fit(train, structure_of, kernel_s=kernel_s)
        for row in (r for r in singles if r.gpu == gpu):
            structure = structure_of(row.model, row.precision)
            factor = fitted.factors.get(_key(row), 1.0)
            model = predict_single(row, structure, fitted.efficiency, factor)
            pooled = predict_single(row, structure, fitted.efficiency, 1.0)
            scaled = []
            for anchor in (r for r in train if r.model == row.model and r.precision == row.precision):
                t_anchor = anchor.per_gpu_batch / anchor.samples_per_s
                r_anchor = _work(anchor, structure).seconds(fitted.efficiency)
                r_row = _work(row, structure).seconds(fitted.efficiency)
                predicted = row.per_gpu_batch / (r_row * t_anchor / r_anchor)
                scaled.append(predicted / row.samples_per_s - 1)
            out.append(
                HeldOutPrediction(
                    row=row,
                    model_error=model / row.samples_per_s - 1,
                    pooled_error=pooled / row.samples_per_s - 1,
                    scaled_errors=tuple(scaled),
                    fit=fitted,
                )
            )
    return out


def log_sigma(errors: Sequence[float]) -> float:
    """Root mean square of log(1 + error): the relative 1-σ of a multiplicative error."""
    return math.sqrt(statistics.fmean(math.log1p(e) ** 2 for e in errors)) if errors else 0.0


def spreads_of(checks: Sequence[HeldOutPrediction]) -> dict[str, float]:
    """The three modes' log σ (`log_sigma`) over leave-one-accelerator-out checks: what `calibrate` ships
    as the spreads (unrounded here)."""
    return {
        "model": log_sigma([c.model_error for c in checks]),
        "pooled": log_sigma([c.pooled_error for c in checks]),
        "scaled": log_sigma([e for c in checks for e in c.scaled_errors]),
    }


def nested_spreads(
    rows: Sequence[Row], structure_of: StructureOf, *, kernel_s: float
) -> dict[str, dict[str, float]]:
    """Per GPU model g of the single-GPU rows: the spreads `calibrate` would ship had g not been in the
    table (leave-one-accelerator-out over the other GPU models' rows only, `spreads_of`). A band for g's
    held-out predictions built from them rests on nothing measured on g, so its coverage is out of sample."""
    singles = [r for r in rows if r.gpus == 1]
    out: dict[str, dict[str, float]] = {}
    for gpu in sorted({r.gpu for r in singles}):
        others = [r for r in singles if r.gpu != gpu]
        out[gpu] = spreads_of(leave_one_accelerator_out(others, structure_of, kernel_s=kernel_s))
    return out


def estimate_band(spread: float) -> Band:
    """The band the product gives a compute-only prediction (one GPU) from an estimate of log-spread
    `spread`: one compute term whose sigma is the spread (`srift.sim.band` reruns the fleet one spread
    slower, ln(T_slower / T) = spread when compute is all the time)."""
    term = SpreadTerm(source="estimate", spread=spread, sigma=spread, measured_by="leave one accelerator out")
    return Band.of((term,))


def within_band(error: float, spread: float) -> bool:
    """Whether a measurement lies inside the p10–p90 band of an estimate that is off by `error`
    (predicted throughput / measured − 1): the measured step time is the predicted one × (1 + error), and
    the band is the predicted step × `Band.factor(0.1)` … × `Band.factor(0.9)` (`estimate_band`)."""
    band = estimate_band(spread)
    return band.factor(0.1) <= 1.0 + error <= band.factor(0.9)


def band_coverage(cases: Sequence[tuple[float, float]]) -> float:
    """The share of (error, spread) cases whose measurement lies inside the p10–p90 band (`within_band`);
    nan without cases."""
    if not cases:
        return math.nan
    return sum(1 for error, spread in cases if within_band(error, spread)) / len(cases)


def calibrate(structure_of: StructureOf, *, registry: Registry | None = None) -> Calibration:
    """The shipped calibration from what the measurement registry lists, and nothing else: the fit on its
    `fit` rows of the table, with its measured host time per kernel; spreads from the leave-one-out checks
    of the same rows."""
    reg = registry or shipped_registry()
    rows = registered_rows(Use.FIT, registry=reg)
    multi = [r.id for r in rows if r.gpus != 1]
    if multi:
        raise ConfigurationError(
            f"the registry lists multi-GPU rows as fit rows of the roofline: {', '.join(multi[:3])}",
            hint="the roofline fits single-GPU rows; list multi-GPU rows in a check set",
            field="rows",
        )
    kernel_s = reg.value(KERNEL_SET, f"{__name__}.EAGER_KERNEL_S")
    kernel_source = EAGER_KERNEL_SOURCE
    fitted = fit(rows, structure_of, kernel_s=kernel_s)
    checks = leave_one_accelerator_out(rows, structure_of, kernel_s=kernel_s)
    spreads = {mode: round(sigma, 4) for mode, sigma in spreads_of(checks).items()}
    mape = {
        "model": round(100 * statistics.fmean(abs(c.model_error) for c in checks), 2),
        "pooled": round(100 * statistics.fmean(abs(c.pooled_error) for c in checks), 2),
        "scaled": round(100 * statistics.fmean(abs(e) for c in checks for e in c.scaled_errors), 2),
    }
    singles = [r for r in rows if r.gpus == 1]
    return Calibration(
        name="lambdal-0551cb70",
        efficiency=Efficiency(
            compute=round(fitted.efficiency.compute, 4),
            matmul_memory=round(fitted.efficiency.matmul_memory, 4),
            other_memory=round(fitted.efficiency.other_memory, 4),
            kernel_s=kernel_s,
            hbm_bandwidth=round(fitted.efficiency.hbm_bandwidth, 4),
        ),
        factors={k: round(v, 4) for k, v in fitted.factors.items()},
        spreads=spreads,
        fitted_on=(
            f"{len(singles)} single-GPU rows ({len({r.gpu for r in singles})} GPU models; ResNet-50 and "
            f"BERT-base, fp32/TF32 and fp16) of {TABLE_SOURCE}; multi-GPU rows only check"
        ),
        kernel_source=kernel_source,
        checks={"leave_one_accelerator_out_mape_percent": mape},
    )
