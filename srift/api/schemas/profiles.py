"""Request and response schemas of /v1/profiles (compute profiles written by `srift profile`).

The request document is the domain's one profile reader, srift.domain.profile_document (re-exported here).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from srift.domain.profile_document import CurveIn, LayerIn, ProfileIn
from srift.domain.structure import Precision

__all__ = ["CurveIn", "LayerIn", "ProfileIn"]

ProfileSource = Annotated[str, Field(description="measured or estimate:<method>")]
"""A stored profile's `source`, in its full document and in listings alike (ModelProfile.source)."""


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
    source: ProfileSource = "measured"
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
    source: ProfileSource = "measured"
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
    total: int = Field(
        description="profiles of the listing over all pages (same filters): more than offset + count means "
        "there is a next page (`offset` + `limit`)"
    )
