"""Request and response schemas of /v1/profiles (compute profiles written by `srift profile`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, field_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from srift.api.schemas.types import NO_NUL, NOT_BLANK, FreeObject
from srift.documents import StrictModel
from srift.domain.profile import (
    MAX_OVERLAP_SLOWDOWN,
    MAX_QUOTA_BURST_CPU_S,
    MAX_QUOTA_CORES,
    MAX_QUOTA_PERIOD_S,
)
from srift.domain.structure import Precision
from srift.limits import MAX_LAYERS_PER_PROFILE, MAX_NAME_CHARS

MAX_SAFE_INT = 2**53 - 1
MAX_BATCH = 1_000_000_000
NAME_CHARS = MAX_NAME_CHARS

Batch = Annotated[int, Field(ge=1, le=MAX_BATCH)]
Seconds = Annotated[float, Field(gt=0)]

NAME_PATTERN = NOT_BLANK
"""A name: some character that is not whitespace (Python's `str.isspace`, which the profile reader strips),
and no NUL."""


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


class _ExtraStated:
    """States in `extra`'s schema the bounds of the keys that ModelProfile.from_dict checks."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = dict(handler(core_schema))
        bounded = {
            "overlap_slowdown": (1.0, MAX_OVERLAP_SLOWDOWN),
            "overlap_slowdown_spread": (0.0, 1.0),
            "comm_overlap_slowdown": (1.0, MAX_OVERLAP_SLOWDOWN),
            "loop_overhead_s": (0.0, 3600.0),
            "ddp_overhead_s": (0.0, 3600.0),
        }
        schema["properties"] = {
            key: {"anyOf": [{"type": "number", "minimum": low, "maximum": high}, {"type": "null"}]}
            for key, (low, high) in bounded.items()
        }
        quota = {
            "type": "object",
            "properties": {
                "cores": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_QUOTA_CORES},
                "period_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_QUOTA_PERIOD_S},
                "burst_cpu_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_QUOTA_BURST_CPU_S},
            },
            "required": ["cores", "period_s"],
            "additionalProperties": False,
        }
        schema["properties"]["cpu_quota"] = {"anyOf": [quota, {"type": "null"}]}
        return schema


class CurveIn(StrictModel):
    """Piecewise-linear time curve: strictly increasing batch breakpoints and the seconds at each (`times_s`
    has as many entries as `batches`; both rules span items, which JSON Schema cannot state)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    batches: list[Batch] = Field(
        min_length=1, max_length=64, description="breakpoints in samples, increasing"
    )
    times_s: list[Seconds] = Field(min_length=1, max_length=64, description="seconds at each breakpoint, > 0")


class LayerIn(StrictModel):
    """One trainable layer: gradient size and readiness."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(
        min_length=1,
        max_length=1000,
        pattern=NO_NUL,
        description="module path, e.g. encoder.layers.0.linear1",
    )
    grad_bytes: int = Field(ge=0, le=MAX_SAFE_INT, description="bytes of this layer's gradients")
    ready_frac: float = Field(
        ge=0, le=1, description="when its gradients are ready, as a fraction of backward"
    )
    exec_prob: float = Field(default=1.0, ge=0, le=1, description="share of iterations in which it runs")

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: str) -> str:
        _no_nul(value, "name")
        return value


Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
AffineIn = Annotated[
    list[Annotated[float, Field(ge=0)]],
    Field(min_length=2, max_length=2, description="[fixed, per_sample]: value = fixed + per_sample · batch"),
]


class PassWorkIn(StrictModel):
    """One layer's work in one pass: FLOPs and bytes of matrix products, bytes of other operators, kernels."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    matmul_flops: AffineIn
    matmul_bytes: AffineIn
    other_bytes: AffineIn
    kernels: Count


class LayerWorkIn(StrictModel):
    """The work one module does itself (not its children), forward and backward."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=1000, pattern=NO_NUL, description="module path")
    forward: PassWorkIn
    backward: PassWorkIn
    backward_order: Count = Field(description="rank by when the layer's backward work ends (0 first)")
    grad_bytes: Count = Field(default=0, description="bytes of the gradients of the module's own parameters")

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: str) -> str:
        _no_nul(value, "name")
        return value


class MemoryUseIn(StrictModel):
    """Bytes one device needs to train the model (see srift.domain.structure.MemoryUse)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    parameter_bytes: Count
    gradient_bytes: Count = Field(description="in the gradients' dtype")
    optimizer_state_bytes: Count
    optimizer: str = Field(default="", max_length=1000, pattern=NO_NUL)

    @field_validator("optimizer", mode="before")
    @classmethod
    def _optimizer(cls, value: Any) -> Any:
        _no_nul(value, "optimizer")
        return value

    activation_bytes: AffineIn = Field(description="peak bytes of a step beyond parameters, gradients, state")
    saved_bytes: AffineIn = Field(description="the part saved for backward")


class StructureIn(StrictModel):
    """Per-layer FLOPs and bytes moved and memory per sample: what estimates for other GPUs rest on."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    precision: Precision = Field(default=Precision.FP32)
    method: str = Field(default="", max_length=1000, pattern=NO_NUL, description="how it was counted")
    memory: MemoryUseIn
    update_bytes: Count = Field(description="bytes the optimizer step moves")
    update_kernels: Count
    layers: list[LayerWorkIn] = Field(min_length=1, max_length=MAX_LAYERS_PER_PROFILE)

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, value: str) -> str:
        _no_nul(value, "method")
        return value


class EstimateIn(StrictModel):
    """How an estimated profile was made (absent for measured ones)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    method: Literal["roofline", "scaled"]
    spread: float = Field(ge=0, le=5, description="relative 1-σ error of such estimates, out of sample")
    calibration: str = Field(default="", max_length=200, pattern=NO_NUL)
    based_on: str | None = Field(
        default=None, max_length=NAME_CHARS, pattern=NO_NUL, description="accelerator measured on"
    )

    @field_validator("calibration", "based_on", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        _no_nul(value, "value")
        return value


class ProfileIn(StrictModel):
    """A compute profile document as written by `srift profile --out` (schema version 1)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: Literal[1] = Field(default=1, description="profile format version (this Srift reads 1)")
    model: str = Field(
        min_length=1,
        max_length=NAME_CHARS,
        pattern=NAME_PATTERN,
        description="model name (not blank); profiles group under it",
    )
    accelerator: str = Field(
        min_length=1,
        max_length=NAME_CHARS,
        pattern=NAME_PATTERN,
        description="GPU device name, cpu:<model>:<threads>t, or instance type",
    )
    max_batch: int = Field(ge=1, le=MAX_BATCH, description="largest per-device batch that fits")
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
    created_at: str = Field(
        default="", max_length=100, pattern=NO_NUL, description="ISO 8601 time the profile was made"
    )
    precision: Precision = Field(
        default=Precision.FP32, description="fp32, tf32, fp16 or bf16 (autocast) as profiled"
    )
    source: Literal["measured", "estimate:roofline", "estimate:scaled"] | None = Field(
        default=None, description="measured, or estimate:<method> (must agree with `estimate`)"
    )
    estimate: EstimateIn | None = Field(default=None, description="set when the curves are estimates")
    structure: StructureIn | None = Field(
        default=None, description="per-layer FLOPs, bytes and memory (lets Srift estimate other GPUs)"
    )
    extra: Annotated[FreeObject, _ExtraStated] = Field(
        default_factory=dict,
        description="free-form facts (raw measurements, budget); those it reads are `overlap_slowdown` (in "
        f"[1, {MAX_OVERLAP_SLOWDOWN:g}]), `overlap_slowdown_spread` (in [0, 1]), `comm_overlap_slowdown` "
        f"(in [1, {MAX_OVERLAP_SLOWDOWN:g}]), `loop_overhead_s` and "
        "`ddp_overhead_s` (seconds in [0, 3600]), `cpu_quota` ({cores, period_s, optional burst_cpu_s}: the "
        "CFS quota `srift profile` read from its cgroup and the CPU seconds a thread ran unthrottled after "
        "idle) and `idle_compute` ({gaps_s: increasing seconds in (0, 60], ratio: "
        "one value in [0.05, 2] per gap})",
    )

    @field_validator("model", "accelerator", "torch_version", "device", "created_at", "extra", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        _no_nul(value, "value")
        return value


class ProfileCreated(BaseModel):
    """Answer to POST /v1/profiles; `created` is false when the same document was already stored."""

    id: int
    model: str
    accelerator: str
    created: bool


class CurveOut(BaseModel):
    batches: list[int]
    times_s: list[float]


class LayerOut(BaseModel):
    name: str
    grad_bytes: int
    ready_frac: float
    exec_prob: float


class ProfileOut(BaseModel):
    """A stored profile: its id and the full document."""

    id: int
    schema_version: int
    model: str
    accelerator: str
    max_batch: int
    forward: CurveOut
    backward: CurveOut
    layers: list[LayerOut] = Field(description="in the order their gradients become ready")
    straggler_cv: float
    update_s: float = Field(default=0.0, description="seconds of one optimizer step (0: not measured)")
    torch_version: str
    device: str
    threads: int | None
    created_at: str
    precision: Precision = Precision.FP32
    source: str = Field(default="measured", description="measured or estimate:<method>")
    estimate: dict[str, Any] | None = None
    structure: dict[str, Any] | None = None
    extra: dict[str, Any]


class ProfileSummaryOut(BaseModel):
    """One profile in a listing."""

    id: int
    model: str
    accelerator: str
    device: str
    threads: int | None
    max_batch: int
    ms_per_sample_at_max_batch: float = Field(
        description="forward+backward milliseconds per sample at max_batch"
    )
    layers: int = Field(description="number of trainable layers")
    total_grad_bytes: int
    straggler_cv: float
    torch_version: str
    created_at: str
    precision: Precision = Field(default=Precision.FP32, description="fp32, tf32, fp16 or bf16 (autocast)")
    source: str = Field(default="measured", description="measured or estimate:<method>")
    reference: bool = Field(
        default=False, description="a shipped reference model's estimated profile (stored at start-up)"
    )


class ModelProfilesOut(BaseModel):
    """All stored profiles of one model (typically one per accelerator)."""

    model: str
    accelerators: list[str]
    profiles: list[ProfileSummaryOut]


class ProfileListOut(BaseModel):
    """Stored profiles grouped by model name."""

    models: list[ModelProfilesOut]
    count: int = Field(description="profiles in this page")
