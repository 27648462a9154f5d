"""Request and response schemas of /v1/bandwidth-models (bus-bandwidth model versions)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from srift.api.schemas.types import Timestamp
from srift.documents import StrictModel, publish_rules
from srift.domain.rings import RING_TYPES_ONCE

Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/+-]*$")]
_TYPE = r"[A-Za-z0-9][A-Za-z0-9._:/-]*"
TypeOrRing = Annotated[str, Field(min_length=1, max_length=128, pattern=rf"^{_TYPE}(\+{_TYPE})*$")]
"""An instance type, or a mixed ring's types joined by '+' (no empty type between the signs)."""
BackendName = Literal["gloo", "nccl", "mpi", "nccl-tests"]
"""A probe sample's backend, as stored (srift.bandwidth.records.BACKENDS; a test checks they agree)."""


class TrainRequest(StrictModel):
    """Which stored probe samples to train on (empty lists: all), and whether to activate the result."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=publish_rules(RING_TYPES_ONCE))

    providers: list[Name] = Field(default_factory=list, max_length=20, description="e.g. ['aws', 'testbed']")
    instance_types: list[TypeOrRing] = Field(
        default_factory=list,
        max_length=200,
        description="e.g. ['p3.8xlarge']; a mixed ring's samples count when each of its types is listed. A "
        "ring's name, its types joined by '+' in any order (['tb.large+tb.small']), selects that ring's "
        "samples and its types' own (what the ring is measured against); no stored sample of it is a 404",
    )
    backends: list[BackendName] = Field(
        default_factory=list, max_length=4, description="backends the samples were measured with"
    )
    activate: bool = Field(default=False, description="make the new version the one predictions use")
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="seed of the split and the search")
    tune: bool = Field(
        default=True, description="search hyperparameters by k-fold MAPE (false: defaults, faster)"
    )


class ModelMetrics(BaseModel):
    """Figures of one training run. MAPE values are fractions (0.08 = 8 %); null when not measurable."""

    model_config = ConfigDict(extra="allow")

    test_mape_small: float | None = Field(None, description="held-out MAPE below the MTU")
    test_mape_large: float | None = Field(None, description="held-out MAPE at or above the MTU")
    noise_floor_small: float | None = Field(
        None, description="MAPE of each sample vs its configuration's mean"
    )
    noise_floor_large: float | None = None
    cv_mape_small: float | None = Field(None, description="k-fold MAPE of the chosen hyperparameters")
    cv_mape_large: float | None = None
    residual_cv_small: float | None = None
    residual_cv_large: float | None = None
    n_samples: int | None = None
    n_train: int | None = None
    n_test: int | None = None
    n_small: int | None = None
    n_large: int | None = None
    train_s: float | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="training's warnings, e.g. fewer than 100 samples on one side of the MTU "
        "(docs/bandwidth.md)",
    )


class BandwidthModelOut(BaseModel):
    """A registered model version."""

    version: str
    source: str = Field(description="what predictions name as their bandwidth source, e.g. 'xgb:<version>'")
    created_at: Timestamp
    is_active: bool
    covers: list[str] = Field(
        description="'provider/instance_type' keys it was trained on; others get the prior"
    )
    training_query: dict[str, Any]
    hyperparams: dict[str, Any]
    metrics: ModelMetrics


class BandwidthModelList(BaseModel):
    """Every version (newest first), which one is active, and what answers when none covers a type."""

    active: str | None = Field(description="active version; null: the α-β prior answers everything")
    prior: str = Field(description="source name of the fallback prior")
    models: list[BandwidthModelOut]
