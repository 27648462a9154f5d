"""Schemas of launch files, measured iteration reports, and the corrections learned from them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from srift.api.schemas.plans import TrainingJobOut
from srift.api.schemas.types import Timestamp
from srift.documents import WHOLE, StrictModel
from srift.domain.requests import IterationReport
from srift.launch.emit import EmitFormat

MAX_STEPS = 10_000


class LaunchFileOut(BaseModel):
    name: str = Field(description="a suggested file name")
    text: str = Field(description="the file, with comments saying which plan assumption each setting carries")


class LaunchOut(BaseModel):
    plan_id: int
    format: EmitFormat
    files: list[LaunchFileOut] = Field(
        description="torchrun: one shell file, a line per VM; skypilot: one task per instance type and "
        "location; kubernetes: one JobSet per location"
    )


class StepIn(StrictModel):
    model_config = ConfigDict(extra="forbid")

    step: Annotated[int, Field(ge=0, le=2**31 - 1), WHOLE] = Field(description="the step's index in the run")
    iteration_s: float = Field(gt=0, le=86_400, allow_inf_nan=False, description="its measured wall time")


class IterationsIn(StrictModel):
    """Measured iteration times (the helper's background reporter sends these)."""

    model_config = ConfigDict(extra="forbid")

    plan_id: Annotated[
        int | None,
        Field(ge=1, le=2**31 - 1, description="the plan the steps ran (default: the run's current plan)"),
        WHOLE,
    ] = None
    steps: list[StepIn] = Field(
        max_length=MAX_STEPS,
        description="a step already stored counts once; may be empty: with `final`, the reporter's closing "
        "report when every step was already sent (the run's steps become the observation); without it, "
        "an empty report stores and changes nothing",
    )
    elapsed_s: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="seconds since the run started (moves progress)"
    )
    final: bool = Field(
        False, description="the run has stopped reporting: its steps become an observation of the plan"
    )

    def to_domain(self) -> IterationReport:
        return IterationReport(
            steps=tuple((s.step, s.iteration_s) for s in self.steps),
            plan_id=self.plan_id,
            elapsed_s=self.elapsed_s,
            final=self.final,
        )


class ObservationOut(BaseModel):
    id: int
    source: str
    model: str
    network_key: str
    types: dict[str, float] = Field(description="each instance type's share of the fleet's ranks")
    predicted_s: float = Field(description="the plan's uncorrected mean iteration time")
    measured_s: float = Field(description="the run's measured mean iteration time (after warm-up)")
    error: float = Field(description="predicted / measured − 1")
    steps: int


class IterationsOut(BaseModel):
    job_id: int
    plan_id: int
    accepted: int = Field(description="steps stored by this report")
    duplicates: int = Field(description="steps already stored (not counted again)")
    steps_stored: int
    iterations_done: int
    state: str
    observation: ObservationOut | None = Field(
        None, description="when the run completed or the report was final: what it measured"
    )


class SeriesStepOut(BaseModel):
    step: int
    iteration_s: float


class SeriesOut(BaseModel):
    plan_id: int
    predicted_s: float | None
    predicted_p10_s: float | None
    predicted_p90_s: float | None
    steps: list[SeriesStepOut]


class RunIterationsOut(BaseModel):
    job_id: int
    series: list[SeriesOut] = Field(description="per plan the run followed: its measured steps")


class CorrectionOut(BaseModel):
    model: str
    instance_type: str
    network_key: str
    runs: int = Field(description="observations since the last reset that include this type")
    weight: float = Field(description="their summed share of this type's ranks")
    compute_factor: float
    comm_factor: float
    log_mean: list[float]
    log_cov: list[list[float]]
    prior_sigma: float
    between_sigma: float = Field(description="run-to-run spread of the log ratio, from the observations")
    observation_ids: list[int]
    updated_at: Timestamp


class CorrectionList(BaseModel):
    corrections: list[CorrectionOut]


class CorrectionResetIn(StrictModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=200)
    instance_type: str = Field(min_length=1, max_length=128)
    network_key: str | None = Field(None, max_length=200, description="default: every network setting")


class JobStartOut(TrainingJobOut):
    token: str | None = Field(
        None,
        description="the run's own token, shown once: the training-script helper reports iteration times "
        "with it (SRIFT_RUN_TOKEN)",
    )


def launch_document(plan_id: int, fmt: EmitFormat, files: list[Any]) -> LaunchOut:
    return LaunchOut(
        plan_id=plan_id, format=fmt, files=[LaunchFileOut(name=f.name, text=f.text) for f in files]
    )
