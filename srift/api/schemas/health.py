"""Response schemas of GET /v1/health: ready (200) or database unreachable (503)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from srift.api.limits import ErrorBody


class ActiveSnapshot(BaseModel):
    """An active catalog snapshot: the prices plans are computed with."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="snapshot name, e.g. aws-2025-05")
    provider: str = Field(description="cloud provider, e.g. aws")
    as_of: str = Field(description="ISO date the snapshot's prices were valid")
    source: str = Field(description="where the prices come from")


class HealthOut(BaseModel):
    """The service can answer plans: the database answers; the active catalogs and bandwidth models."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok"] = "ok"
    version: str = Field(description="Srift version")
    database: Literal["ok"] = "ok"
    catalog: list[ActiveSnapshot] = Field(description="active catalog snapshots (empty: plans fail)")
    bandwidth_models: list[str] = Field(
        description="versions of the active bandwidth models (empty: plans use the α-β prior)"
    )


class HealthUnavailable(ErrorBody):
    """The database cannot be reached: the usual error body plus status "unavailable"."""

    status: Literal["unavailable"] = "unavailable"
