"""Lifecycle states of the things Srift tracks, and the outcome of a plan's replay, as the database and the
API spell them."""

from __future__ import annotations

from enum import StrEnum


class JobKind(StrEnum):
    """What a queued job does: allreduce probes, or `srift profile` on each instance type."""

    PROBE = "probe"
    PROFILE = "profile"


class JobState(StrEnum):
    """A probe or profile job: queued → running → succeeded | failed (a lost attempt goes back to queued)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def is_open(self) -> bool:
        """True while the job may still run (its job token is honoured)."""
        return self in (JobState.QUEUED, JobState.RUNNING)


class TrainingState(StrEnum):
    """A training run followed by re-planning: running, completed, or needs_input (no plan fits)."""

    RUNNING = "running"
    COMPLETED = "completed"
    NEEDS_INPUT = "needs_input"


class ReplayStatus(StrEnum):
    """Whether a plan could be replayed, and if not, why (GET /v1/plans/{id}/replay says which)."""

    REPLAYED = "replayed"
    NO_SPOT = "no_spot"
    SEVERAL_FLEETS = "several_fleets"
    NO_FALLBACK = "no_fallback"
    NO_TRACE = "no_trace"
    TOO_SHORT = "too_short"
