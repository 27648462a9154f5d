"""SQLAlchemy 2 typed tables; Alembic migrations in migrations/ mirror this file."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    """The current UTC time without tzinfo: every DateTime column stores naive UTC, on every database."""
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class CatalogSnapshot(Base):
    """A named, dated set of instance types and prices from one source (shipped file, AWS refresh, import)."""

    __tablename__ = "catalog_snapshots"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    provider: Mapped[str] = mapped_column(String(64), index=True)
    source: Mapped[str] = mapped_column(String(500))
    as_of: Mapped[date] = mapped_column(Date)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)


class InstanceTypeRow(Base):
    """One instance type inside a snapshot (units as in srift.domain.InstanceType)."""

    __tablename__ = "instance_types"
    __table_args__ = (UniqueConstraint("snapshot_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("catalog_snapshots.id", ondelete="CASCADE"), index=True
    )
    provider: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    gpu_model: Mapped[str | None] = mapped_column(String(64), nullable=True)
    gpu_count: Mapped[int] = mapped_column(Integer)
    gpu_memory_gib: Mapped[float] = mapped_column(Float)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_gib: Mapped[float] = mapped_column(Float)
    network_gbps: Mapped[float] = mapped_column(Float)
    network_burst: Mapped[bool] = mapped_column(Boolean)
    interconnect: Mapped[str] = mapped_column(String(16))
    interconnect_gbps: Mapped[float] = mapped_column(Float)
    efa: Mapped[bool] = mapped_column(Boolean)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class PriceRow(Base):
    """Price of one instance type in one region and market, with its source and as-of date."""

    __tablename__ = "prices"
    __table_args__ = (UniqueConstraint("snapshot_id", "instance_type", "region", "market"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("catalog_snapshots.id", ondelete="CASCADE"), index=True
    )
    instance_type: Mapped[str] = mapped_column(String(128))
    region: Mapped[str] = mapped_column(String(64), index=True)
    market: Mapped[str] = mapped_column(String(16))
    price_usd_per_hr: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(500))
    as_of: Mapped[date] = mapped_column(Date)


class ModelProfileRow(Base):
    """A stored compute profile (document as written by `srift profile`), grouped by model name.

    `owner` is the name of the API token that uploaded it (None: a reference profile, one stored before
    profiles had owners, or one uploaded with authentication off: everyone's). `shared` lets other owners
    name it by id; only its owner's and unowned profiles answer a `model` lookup."""

    __tablename__ = "model_profiles"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(200), index=True)
    accelerator: Mapped[str] = mapped_column(String(200))
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    shared: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)


class ProbeSample(Base):
    """One allreduce measurement (from a probe job, a JSONL import or an nccl-tests import)."""

    __tablename__ = "probe_samples"
    __table_args__ = (
        UniqueConstraint("fingerprint"),
        Index("ix_probe_samples_lookup", "instance_type", "world_size", "buffer_bytes"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), nullable=True, index=True
    )
    origin: Mapped[str] = mapped_column(String(32))
    provider: Mapped[str] = mapped_column(String(64))
    region: Mapped[str] = mapped_column(String(64), default="")
    zone: Mapped[str] = mapped_column(String(64), default="")
    instance_type: Mapped[str] = mapped_column(String(128))
    backend: Mapped[str] = mapped_column(String(16))
    buffer_bytes: Mapped[int] = mapped_column(BigInteger)
    world_size: Mapped[int] = mapped_column(Integer)
    nodes: Mapped[int] = mapped_column(Integer)
    ranks_per_node: Mapped[int] = mapped_column(Integer)
    async_count: Mapped[int] = mapped_column(Integer, default=1)
    time_s: Mapped[float] = mapped_column(Float)
    algbw_gbps: Mapped[float] = mapped_column(Float)
    busbw_gbps: Mapped[float] = mapped_column(Float)
    features: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class BandwidthModelRow(Base):
    """A trained bus-bandwidth model version; artifacts live under the models directory."""

    __tablename__ = "bandwidth_models"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    is_active: Mapped[bool] = mapped_column(Boolean, default=False)
    training_query: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    hyperparams: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    artifact_dir: Mapped[str] = mapped_column(String(500))


class PlanRow(Base):
    """A stored plan: the request and the optimizer's answer; `owner` as for profiles (None: everyone's)."""

    __tablename__ = "plans"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)


class TrainingJob(Base):
    """A tracked training run of a plan, re-planned on interruptions."""

    __tablename__ = "training_jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id"), index=True)
    current_plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id"))
    state: Mapped[str] = mapped_column(String(16), default="running")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    iterations_done: Mapped[int] = mapped_column(Integer, default=0)
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    spent_usd: Mapped[float] = mapped_column(Float, default=0.0)
    excluded_types: Mapped[list[Any]] = mapped_column(JSON, default=list)
    token_hash: Mapped[str | None] = mapped_column(String(128), nullable=True)


class TrainingJobEvent(Base):
    """History of a training job: progress reports, interruptions and the plans they produced."""

    __tablename__ = "training_job_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("training_jobs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class RunIteration(Base):
    """One measured iteration of a tracked training run, against the plan it ran (a step counts once)."""

    __tablename__ = "run_iterations"
    __table_args__ = (UniqueConstraint("job_id", "plan_id", "step"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("training_jobs.id", ondelete="CASCADE"), index=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id"))
    step: Mapped[int] = mapped_column(Integer)
    iteration_s: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CalibrationObservation(Base):
    """What one run (or validation case) measured against the prediction that planned it.

    `types` maps each instance type of the fleet to its share of the ranks; `source` names the run once
    (e.g. "run 4, plan 9"), so a run is never counted twice.
    """

    __tablename__ = "calibration_observations"
    __table_args__ = (UniqueConstraint("source"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(200), index=True)
    network_key: Mapped[str] = mapped_column(String(200))
    types: Mapped[dict[str, Any]] = mapped_column(JSON)
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("training_jobs.id", ondelete="SET NULL"), nullable=True, index=True
    )
    plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id"), nullable=True)
    predicted_s: Mapped[float] = mapped_column(Float)
    compute_s: Mapped[float] = mapped_column(Float)
    comm_s: Mapped[float] = mapped_column(Float)
    measured_s: Mapped[float] = mapped_column(Float)
    log_variance: Mapped[float] = mapped_column(Float)
    prior_sigma: Mapped[float] = mapped_column(Float)
    steps: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CorrectionRow(Base):
    """The learned correction of one model, instance type and network setting (recomputed from the
    observations since `reset_after_id` whenever one lands; reset by moving that id forward)."""

    __tablename__ = "corrections"
    __table_args__ = (UniqueConstraint("model", "instance_type", "network_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    instance_type: Mapped[str] = mapped_column(String(128))
    network_key: Mapped[str] = mapped_column(String(200))
    runs: Mapped[float] = mapped_column(Float, default=0.0)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reset_after_id: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Job(Base):
    """A probe or profile job run by `srift worker`: queued → running → succeeded | failed."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    provider: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    token_hash: Mapped[str | None] = mapped_column(String(128), nullable=True)
    worker_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    log: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ApiToken(Base):
    """An API token, stored only as a hash."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    scope: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class DataRevision(Base):
    """A random token per watched area, replaced by database triggers on every write to the area's tables.

    Caches key their entries by these tokens (srift.db.revisions), so no write — by the API, the CLI, a
    worker or plain SQL — can leave a cache answering from data that has changed. Migration 0003 installs
    the triggers.
    """

    __tablename__ = "data_revisions"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    token: Mapped[str] = mapped_column(String(64))
