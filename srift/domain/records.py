"""Stored things as services hand them to the edges: a plan, a tracked training run, a probe/profile job,
stored probe samples as the dashboard plots and counts them.

A plan's request and result are the JSON documents stored with it (the result is PlanResult's fields); the
edges render these records into their response schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from srift.domain.planning import Objective
from srift.domain.states import JobState, TrainingState


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """A stored plan: its id, when, the request document it answered and the result document."""

    id: int
    created_at: datetime
    request: Mapping[str, Any]
    result: Mapping[str, Any]

    def document(self) -> dict[str, Any]:
        """The plan as POST/GET /v1/plans answer it: the result's fields, id, created_at and request."""
        return {**self.result, "id": self.id, "created_at": self.created_at, "request": dict(self.request)}


@dataclass(frozen=True, slots=True)
class TrainingRunPlan:
    """One plan a training run followed (its first and each re-plan)."""

    id: int
    label: str
    iterations: int
    total_time_s: float
    cost_usd: float


@dataclass(frozen=True, slots=True)
class TrainingRunEvent:
    """Something reported about a run: started, progress or interruption, with its payload."""

    id: int
    kind: str
    created_at: datetime
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TrainingRun:
    """A tracked training run with its limits, progress, plans and history."""

    id: int
    plan_id: int
    current_plan_id: int
    state: TrainingState
    created_at: datetime
    iterations_total: int
    iterations_done: int
    elapsed_s: float
    spent_usd: float
    time_limit_s: float | None
    budget_usd: float | None
    objective: Objective
    excluded_types: tuple[str, ...]
    plans: tuple[TrainingRunPlan, ...]
    events: tuple[TrainingRunEvent, ...]
    token: str | None = None
    """The run's own token, only in the answer that started the run (its hash is stored)."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A probe or profile job of the queue: state, attempts, log and result (staged samples counted)."""

    id: int
    kind: str
    provider: str
    state: JobState
    request: Mapping[str, Any]
    attempts: int
    worker_id: str | None
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    error: str | None
    log: str
    result: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ProbePoint:
    """A stored probe sample as the dashboard plots it (bus bandwidth in gigabits/s); GET
    /v1/bandwidth-models/{version}/curves answers with it as it is."""

    world_size: int
    nodes: int
    buffer_bytes: int
    busbw_gbps: float
    async_count: int
    backend: str
    origin: str


@dataclass(frozen=True, slots=True)
class ProbeGroup:
    """The count of stored probe samples of one (provider, instance type, world size, nodes); the curves
    endpoint lists these as they are, to pick from."""

    provider: str
    instance_type: str
    world_size: int
    nodes: int
    count: int
