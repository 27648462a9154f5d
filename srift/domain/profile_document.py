"""The one reader of compute profile documents: a pydantic model whose schema states every rule, read into
the frozen ModelProfile.

POST /v1/profiles, inline `profiles` of plans and predictions, stored rows and files the CLI reads all go
through `read_profile`; the frozen value (srift.domain.profile) knows nothing of its document, so this
module imports it and never the other way round. Besides types and bounds, a profile must be
physically plausible: each pass takes between MIN_PASS_S and MAX_PASS_S, no breakpoint lies above
`max_batch` (a batch that did not fit cannot have been timed), and the
gradients are no larger than the parameters they belong to. Rules JSON Schema can state are in the schema;
the others (ordering across items, relations across fields) are in the descriptions and the error's hint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_validator,
)

from srift.documents import (
    NO_NUL,
    NOT_BLANK,
    FreeJson,
    StrictModel,
    publish_rules,
    rule_error,
    validated,
)
from srift.domain.profile import (
    LAYERS_KIND,
    MAX_OVERLAP_SLOWDOWN,
    MAX_QUOTA_BURST_CPU_S,
    MAX_QUOTA_CORES,
    MAX_QUOTA_PERIOD_S,
    ComputeCurve,
    EstimateInfo,
    InputPipeline,
    LayerGrad,
    ModelProfile,
    is_finite_number,
)
from srift.domain.structure import Affine, LayerWork, MemoryUse, ModelStructure, PassWork, Precision
from srift.errors import InvalidInput
from srift.limits import MAX_LAYERS_PER_PROFILE, MAX_NAME_CHARS, MAX_STRUCTURE_LAYERS

MAX_SAFE_INT = 2**53 - 1
MAX_BATCH = 1_000_000_000
MAX_BREAKPOINTS = 64
MIN_PASS_S = 1e-6
"""The shortest plausible forward or backward pass: a pass runs at least one kernel, and one eager PyTorch
kernel costs 7.21 µs of host time (benchmarks/eager_overhead.py, docs/BENCHMARKS.md 'eager kernel
overhead'); replayed CUDA graphs launch faster, so the floor is 1 µs. Shorter times are not measurements,
and arithmetic on them (iterations per second, spot rates) overflows."""
MAX_PASS_S = 86_400.0
"""The longest plausible pass at one breakpoint: a day (a step that takes longer trains nothing)."""

MAX_CREATED_AT_CHARS = 100
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
"""How an ISO 8601 date-time begins: the calendar date. pydantic's datetime parsing checks the rest, and
would also take a bare number of seconds ("1700000000"), which this refuses."""


@cache
def _datetimes() -> TypeAdapter[datetime]:
    return TypeAdapter(datetime)


def _iso_date_time(value: str) -> str:
    """`created_at` as written, when empty (not recorded) or an ISO 8601 date-time as pydantic's datetime
    parsing reads it (2026-12-06T14:08:45+00:00, with Z or no offset, fractions of a second; a date alone
    is midnight); otherwise an error naming the field says why not (a `rule_error`, so the REST answer and
    document readers word it alike). The text is kept, not reformatted, so a document reads and
    writes back the same."""
    if not value:
        return value
    reason = "it does not start with a date, YYYY-MM-DD"
    if _ISO_DATE.match(value):
        try:
            _datetimes().validate_python(value)
            return value
        except ValidationError as lax:
            reason = str(lax.errors()[0]["msg"])
        try:  # strict parsing words the reason better ("hour value is outside expected range of 0-23")
            _datetimes().validate_strings(value, strict=True)
        except ValidationError as strict:
            reason = str(strict.errors()[0]["msg"]).removeprefix("Input should be a valid datetime, ")
    raise rule_error(
        f"created_at {value!r} is not an ISO 8601 date-time ({reason})",
        field="",
        hint="write it like 2026-12-06T14:08:45+00:00 (what `srift profile` writes), or leave it out",
    )


CreatedAt = Annotated[
    str,
    Field(max_length=MAX_CREATED_AT_CHARS),
    AfterValidator(_iso_date_time),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time", "maxLength": MAX_CREATED_AT_CHARS},
                {"type": "string", "maxLength": 0},
            ]
        }
    ),
]
"""When a profile was made: an ISO 8601 date-time, or empty when not recorded (the schema: format
date-time, or the empty string)."""

Batch = Annotated[int, Field(ge=1, le=MAX_BATCH)]
PassSeconds = Annotated[float, Field(ge=MIN_PASS_S, le=MAX_PASS_S)]
Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]


def _no_nul(value: Any, where: str) -> None:
    """Reject NUL characters anywhere in strings (PostgreSQL text cannot hold them). The schemas state the
    same rule as a `pattern`; checking first, before pydantic, keeps this message."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where} contains a NUL character")
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_nul(k, where)
            _no_nul(v, where)
    elif isinstance(value, list):
        for v in value:
            _no_nul(v, where)


def _nul_free(*fields: str, where: str | None = None) -> Any:
    """A before-validator of `fields` that rejects NUL characters (`_no_nul`), naming `where` in the
    message (default: the first field). Assign it in a model's body: `_name = _nul_free("name")`."""

    def check(value: Any) -> Any:
        _no_nul(value, where or fields[0])
        return value

    return field_validator(*fields, mode="before")(check)


class _DocumentPart(StrictModel):
    """A part of a profile document: unknown fields are refused, and so are NaN and infinities."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _equal_lengths(schema: dict[str, Any]) -> None:
    """State "as many times as breakpoints" in JSON Schema: one branch per length."""
    schema["anyOf"] = [
        {
            "properties": {
                "batches": {"minItems": n, "maxItems": n},
                "times_s": {"minItems": n, "maxItems": n},
            }
        }
        for n in range(1, MAX_BREAKPOINTS + 1)
    ]


class CurveIn(_DocumentPart):
    """Piecewise-linear time curve: batch breakpoints in samples and the seconds of one pass at each.

    As many times as breakpoints (the schema's `anyOf` states it), no breakpoint twice (`uniqueItems`);
    the points may come in any order and are read sorted by batch. Times may fall between breakpoints:
    `srift profile` on a busy host can time a tiny model's batch 1 slower than its batch 2 (warm-up), and
    such profiles are real."""

    model_config = ConfigDict(json_schema_extra=_equal_lengths)

    batches: list[Batch] = Field(
        min_length=1,
        max_length=MAX_BREAKPOINTS,
        description="breakpoints in samples, each once (any order: read sorted, with their times)",
        json_schema_extra={"uniqueItems": True},
    )
    times_s: list[PassSeconds] = Field(
        min_length=1,
        max_length=MAX_BREAKPOINTS,
        description=f"seconds of one pass at each breakpoint, in [{MIN_PASS_S:g}, {MAX_PASS_S:g}]",
    )

    @model_validator(mode="after")
    def _paired(self) -> CurveIn:
        if len(self.batches) != len(self.times_s):
            raise rule_error(
                f"needs as many breakpoints as times (got {len(self.batches)} and {len(self.times_s)})",
                field="times_s",
                hint="give one time per breakpoint batch size",
            )
        seen: dict[int, int] = {}
        for i, b in enumerate(self.batches):
            if b in seen:
                raise rule_error(
                    f"breakpoint {b} is given twice (items {seen[b]} and {i})",
                    field=f"batches[{i}]",
                    hint="give each breakpoint batch size once, with the median of its timings",
                )
            seen[b] = i
        pairs = sorted(zip(self.batches, self.times_s, strict=True))
        self.batches = [b for b, _ in pairs]
        self.times_s = [t for _, t in pairs]
        return self

    def to_curve(self) -> ComputeCurve:
        return ComputeCurve(tuple(self.batches), tuple(self.times_s))


class LayerIn(_DocumentPart):
    """One trainable layer: gradient size and readiness."""

    name: str = Field(
        min_length=1,
        max_length=1000,
        pattern=NO_NUL,
        description="module path, e.g. encoder.layers.0.linear1",
    )
    grad_bytes: Count = Field(description="bytes of this layer's gradients")
    ready_frac: float = Field(
        ge=0, le=1, description="when its gradients are ready, as a fraction of backward"
    )
    exec_prob: float = Field(default=1.0, ge=0, le=1, description="share of iterations in which it runs")

    _name = _nul_free("name")


AffineIn = Annotated[
    list[Annotated[float, Field(ge=0)]],
    Field(min_length=2, max_length=2, description="[fixed, per_sample]: value = fixed + per_sample · batch"),
]


def _affine(pair: list[float]) -> Affine:
    return Affine(float(pair[0]), float(pair[1]))


class PassWorkIn(_DocumentPart):
    """One layer's work in one pass: FLOPs and bytes of matrix products, bytes of other operators, kernels."""

    matmul_flops: AffineIn
    matmul_bytes: AffineIn
    other_bytes: AffineIn
    kernels: Count
    conv_flops: AffineIn = Field(
        default_factory=lambda: [0.0, 0.0],
        description="the convolutions' part of matmul_flops (cuDNN runs float32 convolutions in TF32 by "
        "default); absent: none kept apart",
    )
    unaligned_flops: AffineIn = Field(
        default_factory=lambda: [0.0, 0.0],
        description="the part of matmul_flops done by fp16/bf16 matrix products with a leading dimension "
        "that is not a multiple of 16 bytes (cuBLAS's tensor-core alignment); recorded, not priced apart; "
        "absent: none recorded",
    )

    def to_work(self) -> PassWork:
        return PassWork(
            matmul_flops=_affine(self.matmul_flops),
            matmul_bytes=_affine(self.matmul_bytes),
            other_bytes=_affine(self.other_bytes),
            kernels=self.kernels,
            conv_flops=_affine(self.conv_flops),
            unaligned_flops=_affine(self.unaligned_flops),
        )


class LayerWorkIn(_DocumentPart):
    """The work one module does itself (not its children), forward and backward."""

    name: str = Field(min_length=1, max_length=1000, pattern=NO_NUL, description="module path")
    forward: PassWorkIn
    backward: PassWorkIn
    backward_order: Count = Field(description="rank by when the layer's backward work ends (0 first)")
    grad_bytes: Count = Field(default=0, description="bytes of the gradients of the module's own parameters")

    def to_work(self) -> LayerWork:
        return LayerWork(
            name=self.name,
            forward=self.forward.to_work(),
            backward=self.backward.to_work(),
            backward_order=self.backward_order,
            grad_bytes=self.grad_bytes,
        )

    _name = _nul_free("name")


class MemoryUseIn(_DocumentPart):
    """Bytes one device needs to train the model (see srift.domain.structure.MemoryUse)."""

    parameter_bytes: Count
    gradient_bytes: Count = Field(description="in the gradients' dtype")
    optimizer_state_bytes: Count
    optimizer: str = Field(default="", max_length=1000, pattern=NO_NUL)
    activation_bytes: AffineIn = Field(description="peak bytes of a step beyond parameters, gradients, state")
    saved_bytes: AffineIn = Field(description="the part saved for backward")

    _optimizer = _nul_free("optimizer")


class StructureIn(_DocumentPart):
    """Per-layer FLOPs and bytes moved and memory per sample: what estimates for other GPUs rest on."""

    precision: Precision = Field(default=Precision.FP32)
    method: str = Field(default="", max_length=1000, pattern=NO_NUL, description="how it was counted")
    memory: MemoryUseIn
    update_bytes: Count = Field(description="bytes the optimizer step moves")
    update_kernels: Count
    layers: list[LayerWorkIn] = Field(min_length=1, max_length=MAX_STRUCTURE_LAYERS)

    _method = _nul_free("method")

    def to_structure(self) -> ModelStructure:
        m = self.memory
        return ModelStructure(
            precision=self.precision,
            layers=tuple(layer.to_work() for layer in self.layers),
            memory=MemoryUse(
                parameter_bytes=m.parameter_bytes,
                gradient_bytes=m.gradient_bytes,
                optimizer_state_bytes=m.optimizer_state_bytes,
                optimizer=m.optimizer,
                activation_bytes=_affine(m.activation_bytes),
                saved_bytes=_affine(m.saved_bytes),
            ),
            update_bytes=self.update_bytes,
            update_kernels=self.update_kernels,
            method=self.method,
        )


class EstimateIn(_DocumentPart):
    """How an estimated profile was made (absent for measured ones)."""

    method: Literal["roofline", "scaled"]
    spread: float = Field(ge=0, le=5, description="relative 1-σ error of such estimates, out of sample")
    calibration: str = Field(default="", max_length=200, pattern=NO_NUL)
    based_on: str | None = Field(
        default=None, max_length=MAX_NAME_CHARS, pattern=NO_NUL, description="accelerator measured on"
    )

    _strings = _nul_free("calibration", "based_on", where="value")

    def to_info(self) -> EstimateInfo:
        return EstimateInfo(
            method=self.method, spread=self.spread, calibration=self.calibration, based_on=self.based_on
        )


class ProfileInputPipelineIn(_DocumentPart):
    """What feeding one sample costs: decode rate per CPU core and bytes read per sample."""

    samples_per_s_per_core: float = Field(gt=0, le=1e9, description="samples/s one CPU core delivers")
    bytes_per_sample: float = Field(default=0.0, ge=0, le=1e12, description="bytes read per sample")
    source: str = Field(
        default="user", max_length=500, pattern=NO_NUL, description="where the figures come from"
    )

    def to_pipeline(self) -> InputPipeline:
        return InputPipeline(
            samples_per_s_per_core=self.samples_per_s_per_core,
            bytes_per_sample=self.bytes_per_sample,
            source=self.source or "user",
        )


MIN_QUOTA_S = 0.001
"""The kernel's smallest CFS quota and period, 1 ms (Linux Documentation/scheduler/sched-bwc.rst: "The
minimum quota allowed for the quota or period is 1ms"): cores ≥ 1 ms / 1 s, period_s ≥ 1 ms."""
MIN_QUOTA_CORES = MIN_QUOTA_S / MAX_QUOTA_PERIOD_S
MIN_BURST_CPU_S = 1e-6
"""A burst shorter than a microsecond of CPU is no measurement (the clock `srift profile` reads it with)."""

QUOTA_SCHEMA = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "cores": {"type": "number", "minimum": MIN_QUOTA_CORES, "maximum": MAX_QUOTA_CORES},
                "period_s": {"type": "number", "minimum": MIN_QUOTA_S, "maximum": MAX_QUOTA_PERIOD_S},
                "burst_cpu_s": {
                    "type": "number",
                    "minimum": MIN_BURST_CPU_S,
                    "maximum": MAX_QUOTA_BURST_CPU_S,
                },
            },
            "required": ["cores", "period_s"],
            "additionalProperties": False,
        },
        {"type": "null"},
    ],
    "description": "the CFS quota `srift profile` read from its cgroup (cores: share of a CPU, period_s: CFS "
    "period) and the CPU seconds a thread ran unthrottled after idle (burst_cpu_s)",
}


def _cpu_quota(value: Any) -> Any:
    """`extra.cpu_quota` as QUOTA_SCHEMA states it; None passes."""
    if value is None:
        return value
    if not (
        isinstance(value, dict)
        and {"cores", "period_s"} <= set(value) <= {"cores", "period_s", "burst_cpu_s"}
        and all(is_finite_number(v) for v in value.values())
        and MIN_QUOTA_CORES <= float(value["cores"]) <= MAX_QUOTA_CORES
        and MIN_QUOTA_S <= float(value["period_s"]) <= MAX_QUOTA_PERIOD_S
        and (
            "burst_cpu_s" not in value
            or MIN_BURST_CPU_S <= float(value["burst_cpu_s"]) <= MAX_QUOTA_BURST_CPU_S
        )
    ):
        raise rule_error(
            f"{value!r} is not a CPU quota",
            field="",
            hint=f"give {{cores: share of a CPU in [{MIN_QUOTA_CORES:g}, {MAX_QUOTA_CORES:g}], period_s: CFS "
            f"period in [{MIN_QUOTA_S:g}, {MAX_QUOTA_PERIOD_S:g}], burst_cpu_s (optional): CPU seconds in "
            f"[{MIN_BURST_CPU_S:g}, {MAX_QUOTA_BURST_CPU_S:g}]}} as `srift profile` measures it in the "
            "cgroup, or omit it",
        )
    return value


IDLE_SCHEMA = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "gaps_s": {
                    "type": "array",
                    "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 60},
                    "minItems": 1,
                    "maxItems": 16,
                    "uniqueItems": True,
                },
                "ratio": {
                    "type": "array",
                    "items": {"type": "number", "minimum": 0.05, "maximum": 2.0},
                    "minItems": 1,
                    "maxItems": 16,
                },
            },
            "required": ["gaps_s", "ratio"],
            "additionalProperties": {"$ref": "#/components/schemas/FreeJson"},
            "propertyNames": {"pattern": NO_NUL},
            "anyOf": [
                {
                    "properties": {
                        "gaps_s": {"minItems": n, "maxItems": n},
                        "ratio": {"minItems": n, "maxItems": n},
                    }
                }
                for n in range(1, 17)
            ],
        },
        {"type": "null"},
    ],
    "description": "compute after idle gaps over compute without them: {gaps_s: seconds in (0, 60], each "
    "once (read sorted), ratio: one value in [0.05, 2] per gap}",
}


def _idle_compute(value: Any) -> Any:
    """`extra.idle_compute` as IDLE_SCHEMA states it, its gaps sorted (other keys kept); None passes."""
    if value is None:
        return value
    gaps = value.get("gaps_s") if isinstance(value, dict) else None
    ratios = value.get("ratio") if isinstance(value, dict) else None
    if not (
        isinstance(gaps, list)
        and isinstance(ratios, list)
        and 0 < len(gaps) == len(ratios) <= 16
        and all(is_finite_number(g) and 0 < float(g) <= 60 for g in gaps)
        and len({float(g) for g in gaps}) == len(gaps)
        and all(is_finite_number(r) and 0.05 <= float(r) <= 2.0 for r in ratios)
    ):
        raise rule_error(
            f"{value!r} is not an idle-compute measurement",
            field="",
            hint="give {gaps_s: [distinct seconds in (0, 60]], ratio: [one value in [0.05, 2] per "
            "gap]} as `srift profile` writes it, or omit it",
        )
    pairs = sorted(zip(gaps, ratios, strict=True), key=lambda pair: float(pair[0]))
    return {**value, "gaps_s": [g for g, _ in pairs], "ratio": [r for _, r in pairs]}


class ProfileExtra(StrictModel):
    """Free-form facts of a profile (raw measurements, budget); the keys Srift reads are typed here."""

    model_config = ConfigDict(
        extra="allow", allow_inf_nan=False, json_schema_extra={"propertyNames": {"pattern": NO_NUL}}
    )
    __pydantic_extra__: dict[str, FreeJson] = Field(init=False)

    overlap_slowdown: float | None = Field(
        default=None,
        ge=1,
        le=MAX_OVERLAP_SLOWDOWN,
        description="compute time with a concurrent allreduce over compute time alone (probes/overlap.py)",
    )
    overlap_slowdown_spread: float | None = Field(default=None, ge=0, le=1, description="its log-spread")
    comm_overlap_slowdown: float | None = Field(
        default=None,
        ge=1,
        le=MAX_OVERLAP_SLOWDOWN,
        description="allreduce time with concurrent compute over allreduce time alone",
    )
    loop_overhead_s: float | None = Field(
        default=None, ge=0, le=3600, description="seconds per iteration the training loop adds"
    )
    ddp_overhead_s: float | None = Field(
        default=None, ge=0, le=3600, description="seconds per iteration DDP adds beyond the allreduce"
    )
    cpu_quota: Annotated[Any, AfterValidator(_cpu_quota), WithJsonSchema(QUOTA_SCHEMA)] = None
    idle_compute: Annotated[Any, AfterValidator(_idle_compute), WithJsonSchema(IDLE_SCHEMA)] = None

    @model_validator(mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        _no_nul(value, "extra")
        return value


BREAKPOINTS_FIT = (
    "breakpoints-within-max-batch",
    "every breakpoint in forward.batches and backward.batches is at most max_batch (a batch that did not fit "
    "cannot have been timed)",
)
GRADIENTS_FIT = (
    "gradients-within-parameters",
    "when structure is given, the layers' grad_bytes total at most structure.memory.parameter_bytes (a "
    "gradient has its parameter's shape and dtype)",
)


_CURVE_HINT = (
    f"times are seconds of one pass in [{MIN_PASS_S:g}, {MAX_PASS_S:g}], breakpoints batch sizes ≥ 1; "
    "give the file `srift profile` wrote"
)
_HINTS = {
    "forward": _CURVE_HINT,
    "backward": _CURVE_HINT,
    "max_batch": "max_batch is the largest per-device batch that fits, ≥ 1",
    "straggler_cv": "straggler_cv is std/mean of iteration time, in [0, 5]",
    "update_s": "update_s is the seconds of one optimizer step (0 when not measured), in [0, 3600]",
}


class ProfileIn(_DocumentPart):
    """A compute profile document as written by `srift profile --out` (schema version 1).

    Rules across fields (JSON Schema cannot state them; the schema lists them under `x-srift-rules` and the
    error's hint says how to fix each): no curve breakpoint lies above `max_batch`; the layers' gradients
    total at most `structure.memory.parameter_bytes` when a structure is given."""

    model_config = ConfigDict(json_schema_extra=publish_rules(BREAKPOINTS_FIT, GRADIENTS_FIT))

    FIELD_HINTS: ClassVar[Mapping[str, str]] = _HINTS
    """Hints by field for errors the schema finds (srift.documents.field_hint): CLI files and REST bodies."""

    schema_version: Literal[1] = Field(default=1, description="profile format version (this Srift reads 1)")
    model: str = Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        pattern=NOT_BLANK,
        description="model name (not blank); profiles group under it",
    )
    accelerator: str = Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        pattern=NOT_BLANK,
        description="GPU device name, cpu:<model>:<threads>t, or instance type",
    )
    max_batch: Batch = Field(description="largest per-device batch that fits (≥ every curve breakpoint)")
    forward: CurveIn
    backward: CurveIn
    layers: list[LayerIn] = Field(
        min_length=1, max_length=MAX_LAYERS_PER_PROFILE, description="trainable layers"
    )
    straggler_cv: float = Field(ge=0, le=5, description="std/mean of iteration time")
    update_s: float = Field(
        default=0.0, ge=0, le=3600, description="seconds of one optimizer step after the gradient exchange"
    )
    torch_version: str = Field(default="", max_length=100, pattern=NO_NUL)
    device: str = Field(
        default="cpu", max_length=100, pattern=NO_NUL, description="torch device the profile ran on"
    )
    threads: int | None = Field(default=None, ge=1, le=100_000, description="CPU threads used, if recorded")
    created_at: CreatedAt = Field(
        default="",
        description="when the profile was made: an ISO 8601 date-time (e.g. 2026-12-06T14:08:45+00:00), or "
        "empty when not recorded",
    )
    precision: Precision = Field(
        default=Precision.FP32, description="fp32, tf32, fp16 or bf16 (autocast) as profiled"
    )
    source: Literal["measured", "estimate:roofline", "estimate:scaled"] | None = Field(
        default=None,
        description="measured or estimate:<method>: derived from `estimate` (written for readers; the value "
        "read is ignored, so a document cannot contradict itself)",
    )
    estimate: EstimateIn | None = Field(default=None, description="set when the curves are estimates")
    structure: StructureIn | None = Field(
        default=None, description="per-layer FLOPs, bytes and memory (lets Srift estimate other GPUs)"
    )
    input_pipeline: ProfileInputPipelineIn | None = Field(
        default=None, description="what feeding one sample costs"
    )
    extra: ProfileExtra | None = Field(
        default=None, description="free-form facts (raw measurements, budget); the keys Srift reads are typed"
    )

    _strings = _nul_free("model", "accelerator", "torch_version", "device", "created_at", where="value")

    @field_serializer("extra")
    def _dump_extra(self, extra: ProfileExtra | None) -> dict[str, Any]:
        return {} if extra is None else extra.model_dump(mode="json", exclude_unset=True)

    @model_validator(mode="after")
    def _plausible(self) -> ProfileIn:
        for name in ("forward", "backward"):
            top = getattr(self, name).batches[-1]
            if top > self.max_batch:
                raise rule_error(
                    f"breakpoint {top} lies above max_batch {self.max_batch}",
                    field=f"{name}.batches[{len(getattr(self, name).batches) - 1}]",
                    hint="a batch that does not fit cannot have been timed: raise max_batch to the largest "
                    "batch that fits, or drop the breakpoints above it",
                )
        if self.structure is not None:
            grads = sum(layer.grad_bytes for layer in self.layers)
            params = self.structure.memory.parameter_bytes
            if grads > params:
                raise rule_error(
                    f"the layers' gradients total {grads} bytes, more than the model's {params} bytes of "
                    "parameters",
                    field="layers",
                    hint="a gradient has its parameter's shape and dtype: take layers and structure from "
                    "the same `srift profile` run",
                )
        return self

    def to_profile(self) -> ModelProfile:
        """The frozen domain value (layers in readiness order)."""
        layers = tuple(
            LayerGrad(name=x.name, grad_bytes=x.grad_bytes, ready_frac=x.ready_frac, exec_prob=x.exec_prob)
            for x in self.layers
        )
        structure = self.structure.to_structure() if self.structure is not None else None
        return ModelProfile(
            model=self.model,
            accelerator=self.accelerator,
            max_batch=self.max_batch,
            forward=self.forward.to_curve(),
            backward=self.backward.to_curve(),
            layers=tuple(sorted(layers, key=lambda x: x.ready_frac)),
            straggler_cv=self.straggler_cv,
            schema_version=self.schema_version,
            torch_version=self.torch_version,
            device=self.device or "cpu",
            threads=self.threads,
            created_at=self.created_at,
            extra={} if self.extra is None else self.extra.model_dump(mode="json", exclude_unset=True),
            update_s=self.update_s,
            precision=self.precision,
            structure=structure,
            estimate=self.estimate.to_info() if self.estimate is not None else None,
            input_pipeline=self.input_pipeline.to_pipeline() if self.input_pipeline is not None else None,
        )


def read_profile(data: Any) -> ModelProfile:
    """Read and check a profile document (a request body, a stored row, a file); InvalidInput names the field
    at fault and says how to fix it."""
    if isinstance(data, ProfileIn):
        return data.to_profile()
    if not isinstance(data, dict):
        raise InvalidInput("a profile must be a JSON object", hint="pass the file written by `srift profile`")
    if data.get("kind") == LAYERS_KIND:
        raise InvalidInput(
            "this is a layers-only profile (gradient sizes and readiness, no compute times)",
            hint="build a full profile: `srift profile import TIMES --layers FILE --accelerator NAME`",
            field="kind",
        )
    return validated(ProfileIn, data).to_profile()
