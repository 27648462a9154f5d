"""Response schemas of the read endpoints the dashboard needs beyond the areas' own (bandwidth curves)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CurveSeries(BaseModel):
    """A bandwidth model's predicted bus bandwidth over buffer sizes for one world size."""

    world_size: int = Field(description="ranks taking part in the allreduce")
    nodes: int = Field(description="instances those ranks span")
    buffer_bytes: list[int]
    busbw_gbps: list[float] = Field(description="predicted bus bandwidth, gigabits/s, one per buffer size")
    source: str = Field(description="which model answered, e.g. 'prior:alpha-beta' or a learned version")
    residual_cv: float = Field(description="the model's relative error spread at these points")


class SamplePoint(BaseModel):
    """One stored probe measurement (bandwidths in gigabits/s)."""

    world_size: int
    nodes: int
    buffer_bytes: int
    busbw_gbps: float
    async_count: int
    backend: str
    origin: str


class SampleGroup(BaseModel):
    """How many probe samples exist for one provider, instance type and world size."""

    provider: str
    instance_type: str
    world_size: int
    nodes: int
    count: int


class BandwidthCurves(BaseModel):
    """Model curves and probe samples for one instance type, plus every sample group (to pick from)."""

    version: str = Field(description="the model version asked for ('active' for the serving model)")
    provider: str
    instance_type: str
    series: list[CurveSeries]
    samples: list[SamplePoint]
    samples_truncated: bool = Field(description="true when more samples exist than were returned")
    groups: list[SampleGroup]
