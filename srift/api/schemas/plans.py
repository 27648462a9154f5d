"""Request and response schemas for plans (POST/GET /v1/plans) and tracked training jobs (/v1/jobs)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from srift.api.schemas.network import NetworkIn, NetworkOut
from srift.api.schemas.types import Timestamp, check_one_of, one_of, parse_request
from srift.documents import read_document
from srift.domain import MarketChoice, Objective, SearchMode
from srift.domain.planning import DEFAULT_CONFIDENCE, MAX_CONFIDENCE, MIN_CONFIDENCE
from srift.domain.requests import InterruptionReport, PlanQuery, ProgressReport
from srift.domain.states import TrainingState
from srift.domain.structure import Precision
from srift.limits import (
    MAX_COUNT,
    MAX_GLOBAL_BATCH,
    MAX_INSTANCE_TYPES_PER_REQUEST,
    MAX_NAME_CHARS,
    MAX_PROFILES_PER_REQUEST,
    MAX_SOLVE_BUDGET_S,
)
from srift.optimize.space import BatchPolicy

PROFILE_SELECTION = ("profile_ids", "profiles", "model")
ProfileId = Annotated[int, Field(ge=1, le=2**31 - 1)]
SELECTION_TYPES = {"profile_ids": "array", "profiles": "array", "model": "string"}
TypeName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^\x00]+$")]
CountCap = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class PlanRequest(BaseModel):
    """What to optimize. Give the model's compute profiles as `profile_ids`, inline `profiles`, or `model`
    (all stored profiles of that model); limits are optional, objective decides what is minimised."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=one_of(*PROFILE_SELECTION, types=SELECTION_TYPES)
    )

    profile_ids: list[ProfileId] | None = Field(
        default=None, min_length=1, max_length=MAX_PROFILES_PER_REQUEST, description="stored profile ids"
    )
    profiles: list[dict[str, Any]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROFILES_PER_REQUEST,
        description="inline profile documents as written by `srift profile`",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="use every stored profile of this model",
    )
    precision: Precision | None = Field(
        default=None,
        description=(
            "arithmetic the model trains in: fp32, tf32, fp16 or bf16 (autocast); the profiles used are "
            "those in it (default: the profiles' own; for a model stored in several, fp32)"
        ),
    )

    @model_validator(mode="after")
    def _one_selection(self) -> PlanRequest:
        check_one_of(self, *PROFILE_SELECTION)
        return self

    global_batch: int = Field(
        ge=1, le=MAX_GLOBAL_BATCH, description="samples per iteration over the whole fleet"
    )
    iterations: int = Field(ge=1, le=1_000_000_000, description="iterations to train (N)")
    objective: Objective = Field(default=Objective.MIN_COST, description="min_cost or min_time")
    time_limit_s: float | None = Field(
        default=None, gt=0, le=1e9, description="N·t_iter must not exceed this"
    )
    budget_usd: float | None = Field(
        default=None, gt=0, le=1e9, description="total cost must not exceed this"
    )
    provider: str = Field(default="aws", min_length=1, max_length=64)
    region: str | None = Field(
        default=None, max_length=64, description="default: the service's default_region"
    )
    snapshot: str | None = Field(
        default=None, max_length=200, description="catalog snapshot to price with (e.g. srift-paper-2020)"
    )
    market: MarketChoice = Field(
        default=MarketChoice.ANY, description="spot, on_demand or any (cheaper per type)"
    )
    availability: dict[TypeName, CountCap] | None = Field(
        default=None,
        max_length=MAX_INSTANCE_TYPES_PER_REQUEST,
        description="instance type → max count; only these types are used",
    )
    max_count_per_type: int = Field(
        default=16, ge=1, le=MAX_COUNT, description="count cap for types when availability is not given"
    )
    mode: SearchMode = Field(default=SearchMode.AUTO, description="exhaustive, eager or auto")
    solve_budget_s: float = Field(
        default=2.0, gt=0, le=MAX_SOLVE_BUDGET_S, description="seconds the search may take"
    )
    batch_policy: BatchPolicy = Field(
        default=BatchPolicy.POW2_SPLIT, description="per-VM batches: pow2_split, pow2 or any"
    )
    eager_k: int = Field(
        default=8, ge=1, le=MAX_COUNT, description="eager: VMs of one type tried before the next"
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="seed of the simulator's straggler sampling")
    confidence: float = Field(
        default=DEFAULT_CONFIDENCE,
        ge=MIN_CONFIDENCE,
        le=MAX_CONFIDENCE,
        description="the quantile of predicted time and cost that must meet time_limit_s and budget_usd "
        "(0.5: the prediction itself; 0.9: nine runs in ten, by the prediction's measured spreads)",
    )
    network: NetworkIn = Field(
        default_factory=NetworkIn,
        description="transport between nodes and measured rates; with transport efa only EFA types are used",
    )

    def to_domain(self) -> PlanQuery:
        """The validated request as the services' PlanQuery."""
        return read_document(PlanQuery, self.model_dump())


def parse_plan_request(data: Any) -> PlanRequest:
    """Validate a plan request document (CLI files), raising InvalidInput that names the field."""
    return parse_request(PlanRequest, data)


class ChoiceOut(BaseModel):
    instance_type: str
    market: str
    count: int
    batch: int = Field(description="samples per VM per iteration")
    gpus: int = Field(description="GPUs used per VM")
    per_gpu_batch: float
    price_usd_per_hr: float
    instance_gpus: int | None = Field(default=None, description="GPUs the instance type has")
    compute: str | None = Field(
        default=None,
        description="measured (a profile made on this accelerator) or estimate:roofline / estimate:scaled",
    )
    compute_spread: float | None = Field(
        default=None, description="relative 1-σ error of an estimated compute time (null when measured)"
    )


class EstimatedCandidateOut(BaseModel):
    method: str = Field(description="estimate:roofline or estimate:scaled")
    accelerator: str = Field(description="the accelerator spec the estimate is for")
    based_on: str | None = Field(description="the accelerator a scaled estimate was measured on")
    spread: float = Field(description="relative 1-σ error, measured leaving one accelerator out")


class EstimatedOut(BaseModel):
    """Which numbers rest on estimated compute rather than a profile measured on the accelerator."""

    in_plan: list[str] = Field(description="chosen instance types whose compute is estimated")
    candidates: dict[str, EstimatedCandidateOut] = Field(
        description="every candidate type whose compute is estimated"
    )


class SpreadTermOut(BaseModel):
    source: str = Field(description="compute, network, stragglers or a modelled term")
    spread: float = Field(description="the source's own measured spread (standard deviation of its log)")
    sigma: float = Field(description="what it adds to the log-spread of the mean iteration time")
    measured_by: str


class BandOut(BaseModel):
    sigma: float = Field(description="log-spread of the mean iteration time: √Σ term sigma²")
    terms: list[SpreadTermOut] = Field(default_factory=list)


class PredictedOut(BaseModel):
    iteration_s: float
    iteration_p10_s: float = Field(description="p10 of the run's mean iteration time (the band)")
    iteration_p50_s: float
    iteration_p90_s: float = Field(description="p90 of the run's mean iteration time (the band)")
    total_time_s: float
    total_time_p10_s: float | None = None
    total_time_p90_s: float | None = None
    cost_usd: float
    cost_p10_usd: float | None = None
    cost_p90_usd: float | None = None
    band: BandOut | None = Field(default=None, description="the measured spreads the band rests on")


class ProbabilityOut(BaseModel):
    meets_time_limit: float | None = Field(description="P(total time ≤ time_limit_s); null without a limit")
    within_budget: float | None = Field(description="P(cost ≤ budget_usd); null without a budget")
    total_time_s_at_confidence: float = Field(description="the total time's quantile at the confidence")
    cost_usd_at_confidence: float = Field(description="the cost's quantile at the confidence")


class BreakdownOut(BaseModel):
    forward_s: float
    backward_s: float
    compute_s: float
    straggler_wait_s: float
    exposed_intra_s: float
    exposed_network_s: float
    communication_s: float
    granularity: float | None = Field(
        description="compute / communication; null when there is no communication"
    )
    warnings: list[str] = Field(default_factory=list)


class LimitsOut(BaseModel):
    time_limit_s: float | None
    budget_usd: float | None


class HeadroomOut(BaseModel):
    time_s: float | None = Field(description="time_limit_s − predicted total time")
    budget_usd: float | None = Field(description="budget_usd − predicted cost")


class BaselineOut(BaseModel):
    policy: str
    label: str
    choices: list[ChoiceOut]
    predicted: PredictedOut
    breakdown: BreakdownOut
    feasible: bool
    probability: ProbabilityOut | None = None


class BaselinesOut(BaseModel):
    cap: BaselineOut | None
    tap: BaselineOut | None


class ParetoPointOut(BaseModel):
    label: str
    total_time_s: float
    cost_usd: float
    feasible: bool
    on_front: bool
    chosen: bool


class PlanResult(BaseModel):
    """The optimizer's answer as stored and returned."""

    label: str
    objective: Objective
    mode: SearchMode = Field(
        description="the search that produced the plan (auto resolves to one of the two)"
    )
    proven_optimal: bool
    choices: list[ChoiceOut]
    counts: list[int]
    batches: list[int]
    global_batch: int
    iterations: int
    predicted: PredictedOut
    confidence: float | None = Field(
        default=None, description="the quantile of time and cost the limits were checked against"
    )
    probability: ProbabilityOut | None = None
    limits: LimitsOut
    headroom: HeadroomOut
    breakdown: BreakdownOut
    baselines: BaselinesOut
    pareto: list[ParetoPointOut]
    pareto_total: int
    solve_time_s: float
    configs_evaluated: int
    network: NetworkOut | None = Field(
        default=None, description="what was assumed between nodes (null in plans stored before it existed)"
    )
    sources: list[str]
    warnings: list[str]
    precision: str | None = Field(default=None, description="the arithmetic the profiles are in")
    estimated: EstimatedOut | None = Field(
        default=None, description="which numbers rest on estimated compute (absent in plans made before)"
    )


class PlanOut(PlanResult):
    id: int
    created_at: Timestamp
    request: dict[str, Any]


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan_id: int = Field(ge=1, le=2**31 - 1, description="the plan being run")


class ProgressIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    iterations_done: int = Field(ge=0, le=1_000_000_000)
    elapsed_s: float = Field(ge=0, le=1e9, description="seconds since the job started, launch included")
    spent_usd: float = Field(ge=0, le=1e9, description="money spent so far")

    def to_domain(self) -> ProgressReport:
        return read_document(ProgressReport, self.model_dump())


class InterruptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_type: str = Field(min_length=1, max_length=128)
    count: int = Field(ge=1, le=MAX_COUNT, description="VMs of that type lost")
    iterations_done: int | None = Field(default=None, ge=0, le=1_000_000_000)
    elapsed_s: float | None = Field(default=None, ge=0, le=1e9)
    spent_usd: float | None = Field(default=None, ge=0, le=1e9)
    launch_overhead_s: float = Field(default=150.0, ge=0, le=1e6, description="time to boot replacement VMs")

    def to_domain(self) -> InterruptionReport:
        return read_document(InterruptionReport, self.model_dump())


class JobEventOut(BaseModel):
    id: int
    kind: str
    created_at: Timestamp
    payload: dict[str, Any]


class JobPlanOut(BaseModel):
    id: int
    label: str
    iterations: int
    total_time_s: float
    cost_usd: float


class JobOut(BaseModel):
    id: int
    plan_id: int
    current_plan_id: int
    state: TrainingState = Field(description="needs_input: a re-plan could not meet the limits")
    created_at: Timestamp
    iterations_total: int
    iterations_done: int
    elapsed_s: float
    spent_usd: float
    time_limit_s: float | None
    budget_usd: float | None
    excluded_types: list[str]
    plans: list[JobPlanOut]
    events: list[JobEventOut]


class InterruptionOut(BaseModel):
    job: JobOut
    plan: PlanOut


class ErrorOut(BaseModel):
    error: str
    detail: str
    hint: str
    field: str | None
    relaxations: dict[str, float | None] | None = None
