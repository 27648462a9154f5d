"""Response schema of GET /v1/plans/{id}/replay: a stored plan's spot run replayed through the imported
spot traces (srift.services.replays.plan_replay), beside the plan's own prediction."""

from __future__ import annotations

from pydantic import BaseModel, Field

from srift.api.schemas.plans import SpotRateOut
from srift.domain.states import ReplayStatus
from srift.spot.policy import DeadlinePolicy


class ReplayFiguresOut(BaseModel):
    """One policy's runs pooled over the traces, each trace weighing the same (srift.spot.replay.pooled)."""

    runs: int = Field(description="windows replayed (or runs drawn from the fitted law, for `predicted`)")
    traces: int
    p_meets_deadline: float = Field(description="share of runs that finished by the deadline")
    deadline_misses: int = Field(description="runs that finished after the deadline")
    mean_cost_usd: float
    cost_p10_usd: float
    cost_p50_usd: float
    cost_p90_usd: float
    mean_finish_s: float
    finish_p10_s: float
    finish_p50_s: float
    finish_p90_s: float
    mean_preemptions: float
    mean_spot_share: float = Field(description="share of the run's billed time on spot")
    past_window: int = Field(description="runs still unfinished when their window ended (finished on-demand)")


class ReplayGapOut(BaseModel):
    """Predicted (the model fitted to these same traces) against replayed, for one policy."""

    p_meets_deadline_points: float
    mean_cost_pct: float
    mean_finish_pct: float


class ReplayTraceOut(BaseModel):
    """One trace's share of a policy's replay."""

    trace: str
    zone: str
    windows: int
    law: str = Field(description="where the law predicting the trace comes from")
    replayed_p_meets_deadline: float
    replayed_mean_cost_usd: float
    predicted_p_meets_deadline: float
    predicted_mean_cost_usd: float


class ReplayPolicyOut(BaseModel):
    """A deadline policy (srift.spot.policy) replayed through every window, and predicted."""

    policy: DeadlinePolicy
    replayed: ReplayFiguresOut
    predicted: ReplayFiguresOut
    gap: ReplayGapOut | None = None
    traces: list[ReplayTraceOut]


class HistogramOut(BaseModel):
    """A distribution in equal bins between its smallest and largest value, trace-weighted."""

    edges: list[float] = Field(description="bin edges (one more than the bins), in the figure's unit")
    shares: list[float] = Field(description="each bin's share of the runs (summing to 1)")
    counts: list[int] = Field(description="runs in each bin")


class ReplayDistributionOut(BaseModel):
    """Srift's policy replayed: finish times (s) and costs (USD)."""

    finish_s: HistogramOut
    cost_usd: HistogramOut


class PlanSpotPredictionOut(BaseModel):
    """The plan's own spot outlook (its `spot` section), shown beside the replay."""

    expected_cost_usd: float | None = None
    expected_time_s: float | None = None
    p_meets_time_limit: float | None = None
    time_p10_s: float | None = None
    time_p50_s: float | None = None
    time_p90_s: float | None = None
    cost_p90_usd: float | None = None
    uninterrupted_time_s: float | None = None
    uninterrupted_cost_usd: float | None = None


class PlanGapOut(BaseModel):
    """The plan's outlook against Srift's policy replayed."""

    expected_cost_pct: float = Field(description="expected cost over the replayed mean, in percent")
    p_meets_time_limit_points: float | None = Field(
        description="P(meets the time limit) predicted minus replayed, in points (null without a limit)"
    )


class ReplayOut(BaseModel):
    """The replay itself (srift.spot.replay.Replay.to_dict and the plan beside it)."""

    instance_type: str
    provider: str
    region: str
    nodes: int = Field(description="VMs of the spot fleet; a trace covers it when it traced at least as many")
    half: str = Field(description='which part of each trace was replayed ("all")')
    deadline_s: float
    deadline_rule: str = Field(description="where the deadline comes from")
    slack: float = Field(description="deadline over the on-demand fallback's time with one restart")
    on_demand_cost_usd: float
    windows: int = Field(description="windows replayed, over all traces")
    traces: int = Field(description="traces replayed")
    trace_names: list[str]
    policies: list[ReplayPolicyOut]
    distribution: ReplayDistributionOut
    plan_predicted: PlanSpotPredictionOut
    plan_gap: PlanGapOut | None = None
    nowcast: str | None = Field(
        default=None,
        description="when the prediction was conditioned on each window's past (srift.spot.nowcast): its "
        "constants and how they were chosen; absent: each window got its period's law",
    )


class ReplayFleetOut(BaseModel):
    instance_type: str
    nodes: int
    provider: str
    region: str


class PlanReplayOut(BaseModel):
    """A plan's spot run replayed through the imported traces, or why it was not."""

    plan_id: int
    status: ReplayStatus = Field(
        description="replayed; or why not: no_spot (the plan runs no spot VMs), several_fleets (more than "
        "one spot type or location), no_fallback (no on-demand fallback to fall back to), no_trace (no "
        "imported trace covers the fleet's type, region and VM count), too_short (the traces are shorter "
        "than the deadline)"
    )
    reason: str | None = Field(description="when not replayed: why, in words")
    hint: str | None = Field(description="when not replayed: what would let it be")
    imported_traces: int = Field(description="traces in the imported set (`srift traces import`)")
    fleet: ReplayFleetOut | None = Field(description="the spot fleet replayed (null: none to replay)")
    rates: list[SpotRateOut] = Field(
        description="what the plan's spot prediction rests on, per spot type: the model fitted to the "
        "shipped public traces, or (no trace covers it) the fallback band, widened"
    )
    plan_predicted: PlanSpotPredictionOut | None = Field(
        description="the plan's own spot outlook (null: interruptions were not priced)"
    )
    spot_model: str | None = Field(
        default=None,
        description='which model produced the plan\'s spot outlook ("fitted law", or "nowcast(...)" for a '
        "plan conditioned on a recent market); the replay's prediction uses the same choice (a nowcast "
        "plan's replay predicts each window from the trace before its start: `replay.nowcast`)",
    )
    replay: ReplayOut | None = Field(description="the replay (null when `status` is not replayed)")
    replay_s: float = Field(description="seconds this answer took")
