"""Response schemas of the read endpoints the dashboard needs beyond the areas' own (bandwidth curves)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from srift.api.schemas.types import Timestamp
from srift.domain.records import ProbeGroup, ProbePoint
from srift.domain.states import TrainingState


class CurveSeries(BaseModel):
    """A bandwidth model's predicted bus bandwidth over buffer sizes for one world size."""

    world_size: int = Field(description="ranks taking part in the allreduce")
    nodes: int = Field(description="instances those ranks span")
    buffer_bytes: list[int]
    busbw_gbps: list[float] = Field(description="predicted bus bandwidth, gigabits/s, one per buffer size")
    source: str = Field(description="which model answered, e.g. 'prior:alpha-beta' or a learned version")
    residual_cv: float = Field(description="the model's relative error spread at these points")


class BandwidthCurves(BaseModel):
    """Model curves and probe samples for one instance type, plus every sample group (to pick from)."""

    version: str = Field(description="the model version asked for ('active' for the serving model)")
    provider: str
    instance_type: str
    series: list[CurveSeries]
    samples: list[ProbePoint]
    samples_truncated: bool = Field(description="true when more samples exist than were returned")
    groups: list[ProbeGroup]


class TrainingRunSummary(BaseModel):
    """One tracked training run in a listing (GET /v1/jobs/{id} has its plans and every event)."""

    id: int
    plan_id: int = Field(description="the plan the run started from")
    current_plan_id: int = Field(description="the plan it runs now (differs after a re-plan)")
    state: TrainingState
    created_at: Timestamp
    iterations_done: int
    elapsed_s: float
    spent_usd: float
    interruptions: int = Field(description="interruptions reported")
    replans: int = Field(description="interruptions that produced a new plan")


class TrainingRunList(BaseModel):
    """A page of tracked training runs, newest first."""

    runs: list[TrainingRunSummary]
    total: int = Field(description="runs matching the filter, all pages")
