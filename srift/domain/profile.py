"""Compute profiles: forward/backward time curves and per-layer gradient readiness, per model/accelerator."""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from srift.errors import InvalidInput
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
        if not math.isfinite(t) or t <= 0:
            raise InvalidInput(
                f"time {t} is not a positive number",
                hint="times are seconds > 0",
                field=f"{field_name}.times_s[{i}]",
            )


@dataclass(frozen=True, slots=True)
class LayerGrad:
    """One trainable layer: gradient size and when, as a fraction of the backward pass, it is ready."""

    name: str
    grad_bytes: int
    ready_frac: float
    exec_prob: float = 1.0


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """How one model runs on one accelerator; the simulator's compute input.

    `layers` are in the order their gradients become ready (ascending `ready_frac`). `straggler_cv` is
    std/mean of iteration time. `max_batch` is the largest per-device batch that fits. `update_s` is one
    optimizer step (plain SGD as profiled), which runs after the gradients are reduced; 0 when not measured.
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

    @property
    def total_grad_bytes(self) -> int:
        return sum(layer.grad_bytes for layer in self.layers)

    def compute_s(self, batch: float) -> float:
        """Forward plus backward seconds at a per-device batch."""
        return self.forward.time_s(batch) + self.backward.time_s(batch)

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
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ModelProfile:
        """Parse and validate a profile document; raises InvalidInput naming the field at fault."""
        if not isinstance(data, dict):
            raise InvalidInput(
                "a profile must be a JSON object", hint="pass the file written by `srift profile`"
            )
        if data.get("kind") == LAYERS_KIND:
            raise InvalidInput(
                "this is a layers-only profile (gradient sizes and readiness, no compute times)",
                hint="build a full profile: `srift profile import TIMES --layers FILE --accelerator NAME`",
                field="kind",
            )
        version = _get(data, "schema_version", int, default=PROFILE_SCHEMA_VERSION)
        if version != PROFILE_SCHEMA_VERSION:
            raise InvalidInput(
                f"schema version {version} is not supported (this Srift reads {PROFILE_SCHEMA_VERSION})",
                hint="re-run `srift profile` with this version of Srift",
                field="schema_version",
            )
        model = _get(data, "model", str)
        accelerator = _get(data, "accelerator", str)
        if not model.strip():
            raise InvalidInput("is empty", hint="name the model", field="model")
        if not accelerator.strip():
            raise InvalidInput("is empty", hint="name the accelerator", field="accelerator")
        max_batch = _get(data, "max_batch", int)
        if max_batch < 1:
            raise InvalidInput(
                f"{max_batch} is below 1",
                hint="max_batch is the largest batch that fits, ≥ 1",
                field="max_batch",
            )
        curves = {name: _curve(data, name) for name in ("forward", "backward")}
        raw_layers = data.get("layers")
        if not isinstance(raw_layers, list) or not raw_layers:
            raise InvalidInput("must be a non-empty list", hint="list every trainable layer", field="layers")
        LAYERS_PER_PROFILE.check(len(raw_layers), field="layers")
        layers = tuple(_layer(raw, i) for i, raw in enumerate(raw_layers))
        cv = _get(data, "straggler_cv", float)
        if not math.isfinite(cv) or cv < 0 or cv > 5:
            raise InvalidInput(
                f"{cv} is outside [0, 5]",
                hint="straggler_cv is std/mean of iteration time",
                field="straggler_cv",
            )
        update_s = _get(data, "update_s", float, default=0.0)
        if not math.isfinite(update_s) or not 0 <= update_s <= 3600:
            raise InvalidInput(
                f"{update_s} is outside [0, 3600]",
                hint="update_s is the seconds of one optimizer step (0 when not measured)",
                field="update_s",
            )
        threads = data.get("threads")
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise InvalidInput(
                f"{threads!r} is not a positive integer",
                hint="give the thread count or null",
                field="threads",
            )
        extra = data.get("extra") or {}
        if not isinstance(extra, dict):
            raise InvalidInput(
                "must be an object", hint="give extra as a JSON object or omit it", field="extra"
            )
        return cls(
            model=model,
            accelerator=accelerator,
            max_batch=max_batch,
            forward=curves["forward"],
            backward=curves["backward"],
            layers=tuple(sorted(layers, key=lambda x: x.ready_frac)),
            straggler_cv=cv,
            schema_version=version,
            torch_version=str(data.get("torch_version") or ""),
            device=str(data.get("device") or "cpu"),
            threads=threads,
            created_at=str(data.get("created_at") or ""),
            extra=extra,
            update_s=update_s,
        )


@dataclass(frozen=True, slots=True)
class LayerProfile:
    """A model's gradient layers without compute times (`srift profile --layers-only`).

    `layers` are in readiness order (ascending `ready_frac`), as in ModelProfile; the fractions were measured
    on the device named in `device` and are assumed to carry over to the accelerator a compute table is
    imported for. `trainable_bytes` counts shared parameters once. Its document has `kind: "layers"`.
    """

    model: str
    layers: tuple[LayerGrad, ...]
    trainable_bytes: int
    schema_version: int = PROFILE_SCHEMA_VERSION
    torch_version: str = ""
    device: str = "cpu"
    created_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

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
        )


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


def _curve(data: dict[str, Any], name: str) -> ComputeCurve:
    raw = data.get(name)
    if not isinstance(raw, dict):
        raise InvalidInput(
            "is missing or not an object", hint="give {batches: [...], times_s: [...]}", field=name
        )
    batches = raw.get("batches")
    times = raw.get("times_s")
    if not isinstance(batches, list) or not all(
        isinstance(b, int) and not isinstance(b, bool) for b in batches
    ):
        raise InvalidInput(
            "must be a list of integers", hint="breakpoints are batch sizes", field=f"{name}.batches"
        )
    if not isinstance(times, list) or not all(
        isinstance(t, int | float) and not isinstance(t, bool) for t in times
    ):
        raise InvalidInput("must be a list of numbers", hint="times are seconds", field=f"{name}.times_s")
    validate_curve(tuple(batches), tuple(float(t) for t in times), field_name=name)
    return ComputeCurve(tuple(batches), tuple(float(t) for t in times))


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
