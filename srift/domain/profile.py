"""Compute profiles: forward/backward time curves and per-layer gradient readiness, per model/accelerator."""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from typing import Any

from srift.domain.spread import drift_spreads, interpolated, pass_spreads, sample_spreads
from srift.domain.structure import ModelStructure, Precision, parse_precision
from srift.errors import InvalidInput, require_number
from srift.limits import LAYERS_PER_PROFILE

PROFILE_SCHEMA_VERSION = 1
LAYERS_KIND = "layers"
"""The `kind` of a layers-only profile document (`srift profile --layers-only`); full profiles have none."""


@dataclass(frozen=True, slots=True)
class ComputeCurve:
    """A piecewise-linear time curve over per-device batch size.

    `batches` are the breakpoints in samples (strictly increasing, usually 1, ⅓, ⅔ and all of max_batch);
    `times_s` the measured seconds at each. Between breakpoints the curve interpolates; outside it
    extends the nearest segment, never below zero.
    """

    batches: tuple[int, ...]
    times_s: tuple[float, ...]

    def __post_init__(self) -> None:
        validate_curve(self.batches, self.times_s, field_name="curve")

    def time_s(self, batch: float) -> float:
        xs, ys = self.batches, self.times_s
        if len(xs) == 1:
            return ys[0] * batch / xs[0]
        i = min(max(bisect_right(xs, batch) - 1, 0), len(xs) - 2)
        x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
        value = y0 + (y1 - y0) * (batch - x0) / (x1 - x0)
        return max(value, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"batches": list(self.batches), "times_s": list(self.times_s)}


MAX_OVERLAP_SLOWDOWN = 10.0
"""A compute slowdown under a concurrent allreduce above this is a broken measurement, not a host."""
MAX_QUOTA_CORES = 4096.0
"""A CPU quota above this many cores is not a quota a training host runs under."""
MAX_QUOTA_PERIOD_S = 1.0
"""The kernel's longest CFS period (cpu.cfs_period_us ≤ 1 s)."""
MAX_QUOTA_BURST_CPU_S = 60.0
"""The largest CPU burst after idle (`extra["cpu_quota"]["burst_cpu_s"]`) a profile may state: a sanity
bound, a minute of one CPU."""


def validate_curve(batches: tuple[int, ...], times_s: tuple[float, ...], *, field_name: str) -> None:
    if len(batches) == 0 or len(batches) != len(times_s):
        raise InvalidInput(
            f"needs as many breakpoints as times (got {len(batches)} and {len(times_s)})",
            hint="give one time per breakpoint batch size",
            field=field_name,
        )
    for i, b in enumerate(batches):
        if b < 1:
            raise InvalidInput(
                f"breakpoint {b} is below 1", hint="use batch sizes ≥ 1", field=f"{field_name}.batches[{i}]"
            )
        if i and b <= batches[i - 1]:
            raise InvalidInput(
                f"breakpoints must increase strictly ({batches[i - 1]} then {b})",
                hint="list breakpoints in increasing order without repeats",
                field=f"{field_name}.batches[{i}]",
            )
    for i, t in enumerate(times_s):
        require_number(
            t, field=f"{field_name}.times_s[{i}]", hint="times are seconds > 0", positive=True, what="time"
        )


@dataclass(frozen=True, slots=True)
class LayerGrad:
    """One trainable layer: gradient size and when, as a fraction of the backward pass, it is ready."""

    name: str
    grad_bytes: int
    ready_frac: float
    exec_prob: float = 1.0


MEASURED = "measured"


@dataclass(frozen=True, slots=True)
class EstimateInfo:
    """How an estimated profile was made: not measured on its accelerator, but derived (`srift.estimate`).

    `method` is "roofline" (the model's FLOPs and bytes with the accelerator's specs, calibrated on public
    measurements) or "scaled" (a profile measured on `based_on`, scaled by the two accelerators' roofline
    times). `spread` is the relative 1-σ error of such estimates, measured out of sample (leave one
    accelerator out on the public table); it widens the prediction's band. `calibration` names the
    calibration used.
    """

    method: str
    spread: float
    calibration: str
    based_on: str | None = None

    @property
    def source(self) -> str:
        return f"estimate:{self.method}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class InputPipeline:
    """What feeding one sample costs: decode rate per CPU core and bytes read from storage or the network.

    `samples_per_s_per_core` is what one core of the user's DataLoader delivers (measured by `srift profile
    --loader`, or given); `bytes_per_sample` what each sample reads. `source` says which (`measured: ...`
    or `user`).
    """

    samples_per_s_per_core: float
    bytes_per_sample: float
    source: str = "user"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """How one model runs on one accelerator; the simulator's compute input.

    `layers` are in the order their gradients become ready (ascending `ready_frac`). `straggler_cv` is
    std/mean of iteration time. `max_batch` is the largest per-device batch that fits. `update_s` is one
    optimizer step (plain SGD as profiled), which runs after the gradients are reduced; 0 when not measured.
    `precision` is the arithmetic it ran in; `structure` (when recorded) the model's per-layer FLOPs, bytes
    and memory, which lets Srift estimate other accelerators; `estimate` is set when the curves were not
    measured on `accelerator` but estimated (see EstimateInfo); `source` says which.
    `input_pipeline` (optional) is what feeding a sample costs; with it the simulator bounds each VM by
    its vCPUs' decode rate and its read rate.
    """

    model: str
    accelerator: str
    max_batch: int
    forward: ComputeCurve
    backward: ComputeCurve
    layers: tuple[LayerGrad, ...]
    straggler_cv: float
    schema_version: int = PROFILE_SCHEMA_VERSION
    torch_version: str = ""
    device: str = "cpu"
    threads: int | None = None
    created_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    update_s: float = 0.0
    precision: Precision = Precision.FP32
    structure: ModelStructure | None = field(default=None, compare=False, hash=False)
    estimate: EstimateInfo | None = None
    input_pipeline: InputPipeline | None = None

    @property
    def total_grad_bytes(self) -> int:
        return sum(layer.grad_bytes for layer in self.layers)

    @property
    def source(self) -> str:
        """ "measured" or "estimate:<method>"."""
        return self.estimate.source if self.estimate is not None else MEASURED

    @property
    def is_estimate(self) -> bool:
        return self.estimate is not None

    def compute_s(self, batch: float) -> float:
        """Forward plus backward seconds at a per-device batch."""
        return self.forward.time_s(batch) + self.backward.time_s(batch)

    def compute_floor_s(self, batch: float) -> float:
        """The least forward plus backward seconds the simulator shows an iteration at a per-device batch
        (the optimizer's bounds use it): `compute_s`, since every member computes at least its curve."""
        return self.compute_s(batch)

    def compute_spread(self, batch: float, *, runs: int = 1) -> float:
        """How far the mean forward+backward time of `runs` runs (taken at independent times) may fall
        from the curve at `batch`: a log-spread.

        In order of preference: `extra["compute_spread"]` (a profile that was estimated rather than measured
        says how sure it is), else an estimate's `estimate.spread`; from timing passes taken at different
        times (`extra["measured_passes"]`, three or more) that kept their samples, the drift of the host's
        speed between passes net of the passes' own sampling noise, over `runs`, plus the curve's error as the
        mean of the passes (`srift.domain.spread.drift_spreads`); from passes without samples (pooled by older
        code) the robust spread of their means; else the spread of the profile's own samples
        (`extra["measured"]`). Robust spreads are 1.4826 × the median absolute deviation of the logs, widened
        by √(1 + 1/n) for a new observation. Measured at each breakpoint and interpolated between
        them; 0 without samples. The iterations' own spread is the straggler term's, not this one's.
        """
        spread = self._spread_source(runs)
        if isinstance(spread, float):
            return spread
        return interpolated(spread, batch) if spread else 0.0

    def least_compute_spread(self, *, runs: int = 1) -> float:
        """The least `compute_spread` at any batch: the per-breakpoint spreads are interpolated between
        breakpoints and held beyond them, so none lies below the least breakpoint's (the optimizer's
        bounds of a prediction's quantile rest on it, srift.optimize.exhaustive)."""
        spread = self._spread_source(runs)
        if isinstance(spread, float):
            return spread
        return max(0.0, min(v for _, v in spread)) if spread else 0.0

    def _spread_source(self, runs: int) -> float | list[tuple[int, float]]:
        """`compute_spread`'s source, in its order of preference: one spread for every batch, or spreads
        per breakpoint (empty: none)."""
        extra = self.extra or {}
        given = extra.get("compute_spread")
        if isinstance(given, int | float) and not isinstance(given, bool) and math.isfinite(given):
            return max(0.0, float(given))
        if self.estimate is not None:
            return max(0.0, self.estimate.spread)
        passes = extra.get("measured_passes")
        return (
            drift_spreads(passes, runs=runs) or pass_spreads(passes) or sample_spreads(extra.get("measured"))
        )

    def overlap_slowdown(self) -> tuple[float, float]:
        """How much slower compute runs while an allreduce overlaps it, and the log-spread of that factor.

        Measured on the instance type by `probes/overlap.py` (backward timed alone and with a concurrent
        allreduce; its `compute_slowdown` and `compute_slowdown_spread`) and kept in the profile's
        `extra["overlap_slowdown"]` / `extra["overlap_slowdown_spread"]`; (1, 0) when not measured.
        """
        extra = self.extra or {}
        factor = extra.get("overlap_slowdown")
        spread = extra.get("overlap_slowdown_spread")
        return (
            float(factor) if isinstance(factor, int | float) and is_finite_number(factor) else 1.0,
            float(spread) if isinstance(spread, int | float) and is_finite_number(spread) else 0.0,
        )

    def comm_overlap_slowdown(self) -> float:
        """How much slower an allreduce runs while this member computes: `probes/overlap.py`'s
        `comm_slowdown` (allreduce time with concurrent forward+backward over allreduce time alone) on the
        instance type, kept in `extra["comm_overlap_slowdown"]`; 1 when not measured. The simulator slows
        the exchange by it while the member computes (srift.sim.overlap)."""
        factor = (self.extra or {}).get("comm_overlap_slowdown")
        return float(factor) if isinstance(factor, int | float) and is_finite_number(factor) else 1.0

    def loop_overhead_s(self, *, distributed: bool) -> float:
        """Seconds per iteration a training loop spends beyond forward, backward and the optimizer step,
        measured by the profiler (`extra["loop_overhead_s"]`: `zero_grad` freeing the gradients;
        `extra["ddp_overhead_s"]`: that plus DDP's copies into its buckets and back, used when the fleet
        exchanges gradients, else the plain value). 0 when not measured."""
        extra = self.extra or {}
        plain = extra.get("loop_overhead_s")
        value = extra.get("ddp_overhead_s") if distributed else None
        if not (isinstance(value, int | float) and is_finite_number(value)):
            value = plain
        return float(value) if isinstance(value, int | float) and is_finite_number(value) else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "model": self.model,
            "accelerator": self.accelerator,
            "max_batch": self.max_batch,
            "forward": self.forward.to_dict(),
            "backward": self.backward.to_dict(),
            "layers": [_layer_dict(x) for x in self.layers],
            "straggler_cv": self.straggler_cv,
            "update_s": self.update_s,
            "torch_version": self.torch_version,
            "device": self.device,
            "threads": self.threads,
            "created_at": self.created_at,
            "precision": self.precision.value,
            "source": self.source,
            "estimate": self.estimate.to_dict() if self.estimate is not None else None,
            "structure": self.structure.to_dict() if self.structure is not None else None,
            "extra": self.extra,
            **({"input_pipeline": self.input_pipeline.to_dict()} if self.input_pipeline else {}),
        }


def _structure(data: dict[str, Any]) -> ModelStructure | None:
    raw = data.get("structure")
    return None if raw is None else ModelStructure.from_dict(raw)


@dataclass(frozen=True, slots=True)
class LayerProfile:
    """A model's gradient layers without compute times (`srift profile --layers-only`).

    `layers` are in readiness order (ascending `ready_frac`), as in ModelProfile; the fractions were measured
    on the device named in `device` and are assumed to carry over to the accelerator a compute table is
    imported for. `trainable_bytes` counts shared parameters once. Its document has `kind: "layers"`.
    `structure` (per-layer FLOPs, bytes and memory in `precision`) is carried into imported profiles.
    """

    model: str
    layers: tuple[LayerGrad, ...]
    trainable_bytes: int
    schema_version: int = PROFILE_SCHEMA_VERSION
    torch_version: str = ""
    device: str = "cpu"
    created_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    precision: Precision = Precision.FP32
    structure: ModelStructure | None = field(default=None, compare=False, hash=False)

    @property
    def total_grad_bytes(self) -> int:
        return sum(layer.grad_bytes for layer in self.layers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": LAYERS_KIND,
            "schema_version": self.schema_version,
            "model": self.model,
            "layers": [_layer_dict(x) for x in self.layers],
            "trainable_bytes": self.trainable_bytes,
            "torch_version": self.torch_version,
            "device": self.device,
            "created_at": self.created_at,
            "precision": self.precision.value,
            **({"structure": self.structure.to_dict()} if self.structure is not None else {}),
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: Any) -> LayerProfile:
        """Parse a layers-only document or take a full profile's layers; InvalidInput names the field."""
        if not isinstance(data, dict):
            raise InvalidInput(
                "a layers profile must be a JSON object",
                hint="pass the file written by `srift profile --layers-only`",
            )
        kind = data.get("kind")
        if kind not in (None, LAYERS_KIND):
            raise InvalidInput(
                f"unknown document kind {kind!r}",
                hint=f"give a `srift profile --layers-only` file (kind {LAYERS_KIND!r}) or a full profile",
                field="kind",
            )
        version = _get(data, "schema_version", int, default=PROFILE_SCHEMA_VERSION)
        if version != PROFILE_SCHEMA_VERSION:
            raise InvalidInput(
                f"schema version {version} is not supported (this Srift reads {PROFILE_SCHEMA_VERSION})",
                hint="re-run `srift profile --layers-only` with this version of Srift",
                field="schema_version",
            )
        model = _get(data, "model", str)
        if not model.strip():
            raise InvalidInput("is empty", hint="name the model", field="model")
        raw_layers = data.get("layers")
        if not isinstance(raw_layers, list) or not raw_layers:
            raise InvalidInput("must be a non-empty list", hint="list every trainable layer", field="layers")
        LAYERS_PER_PROFILE.check(len(raw_layers), field="layers")
        layers = tuple(_layer(raw, i) for i, raw in enumerate(raw_layers))
        total = sum(x.grad_bytes for x in layers)
        trainable = _get(data, "trainable_bytes", int, default=total)
        if trainable < 0:
            raise InvalidInput(
                f"{trainable} is negative", hint="trainable_bytes counts bytes", field="trainable_bytes"
            )
        extra = data.get("extra") or {}
        if not isinstance(extra, dict):
            raise InvalidInput(
                "must be an object", hint="give extra as a JSON object or omit it", field="extra"
            )
        return cls(
            model=model,
            layers=tuple(sorted(layers, key=lambda x: x.ready_frac)),
            trainable_bytes=trainable,
            schema_version=version,
            torch_version=str(data.get("torch_version") or ""),
            device=str(data.get("device") or "cpu"),
            created_at=str(data.get("created_at") or ""),
            extra=extra,
            precision=parse_precision(data.get("precision") or "fp32"),
            structure=_structure(data),
        )


def is_finite_number(value: Any) -> bool:
    """Whether `value` is a finite int or float (not a bool): what a profile's free-form numbers must be."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _layer_dict(layer: LayerGrad) -> dict[str, Any]:
    return {
        "name": layer.name,
        "grad_bytes": layer.grad_bytes,
        "ready_frac": layer.ready_frac,
        "exec_prob": layer.exec_prob,
    }


def _get(data: dict[str, Any], key: str, kind: type, *, default: Any = ..., prefix: str = "") -> Any:
    name = f"{prefix}{key}"
    if key not in data or data[key] is None:
        if default is not ...:
            return default
        raise InvalidInput("is missing", hint=f"add `{key}`", field=name)
    value = data[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InvalidInput(
            f"{value!r} is not a {kind.__name__}", hint=f"give `{key}` as a {kind.__name__}", field=name
        )
    return value


def _layer(raw: Any, i: int) -> LayerGrad:
    prefix = f"layers[{i}]."
    if not isinstance(raw, dict):
        raise InvalidInput(
            "must be an object", hint="give {name, grad_bytes, ready_frac, exec_prob}", field=f"layers[{i}]"
        )
    name = _get(raw, "name", str, prefix=prefix)
    grad_bytes = _get(raw, "grad_bytes", int, prefix=prefix)
    if grad_bytes < 0:
        raise InvalidInput(
            f"{grad_bytes} is negative", hint="grad_bytes counts bytes, ≥ 0", field=f"{prefix}grad_bytes"
        )
    ready = _get(raw, "ready_frac", float, prefix=prefix)
    if not (0.0 <= ready <= 1.0) or math.isnan(ready):
        raise InvalidInput(
            f"{ready} is outside [0, 1]",
            hint="ready_frac is a fraction of the backward pass",
            field=f"{prefix}ready_frac",
        )
    prob = _get(raw, "exec_prob", float, default=1.0, prefix=prefix)
    if not (0.0 <= prob <= 1.0) or math.isnan(prob):
        raise InvalidInput(
            f"{prob} is outside [0, 1]", hint="exec_prob is a probability", field=f"{prefix}exec_prob"
        )
    return LayerGrad(name=name, grad_bytes=grad_bytes, ready_frac=ready, exec_prob=prob)
