"""Read-only views for the dashboard: bandwidth curves beside probe samples; the list of training runs."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from srift.db.tables import ProbeSample, TrainingJob, TrainingJobEvent
from srift.domain import BusBandwidthModel, InstanceType
from srift.errors import InvalidInput
from srift.settings import Settings

ACTIVE = "active"
MAX_WORLD_SIZES = 12
MAX_WORLD_SIZE = 4096
MAX_SAMPLES = 4000
# Buffer sizes 1 KiB … 1 GiB in steps of √2: enough points for a smooth log-x curve.
BUFFER_GRID: tuple[int, ...] = tuple(round(2 ** (10 + i / 2)) for i in range(41))


@dataclass(frozen=True, slots=True)
class CurveSeries:
    world_size: int
    nodes: int
    buffer_bytes: tuple[int, ...]
    busbw_gbps: tuple[float, ...]
    source: str
    residual_cv: float


@dataclass(frozen=True, slots=True)
class SamplePoint:
    world_size: int
    nodes: int
    buffer_bytes: int
    busbw_gbps: float
    async_count: int
    backend: str
    origin: str


@dataclass(frozen=True, slots=True)
class SampleGroup:
    provider: str
    instance_type: str
    world_size: int
    nodes: int
    count: int


@dataclass(frozen=True, slots=True)
class BandwidthCurves:
    version: str
    provider: str
    instance_type: str
    series: tuple[CurveSeries, ...]
    samples: tuple[SamplePoint, ...]
    samples_truncated: bool
    groups: tuple[SampleGroup, ...]


def sample_groups(*, session: Session) -> list[SampleGroup]:
    """Every (provider, instance type, world size, nodes) with probe samples, and how many."""
    rows = session.execute(
        select(
            ProbeSample.provider,
            ProbeSample.instance_type,
            ProbeSample.world_size,
            ProbeSample.nodes,
            func.count(ProbeSample.id),
        )
        .group_by(ProbeSample.provider, ProbeSample.instance_type, ProbeSample.world_size, ProbeSample.nodes)
        .order_by(ProbeSample.provider, ProbeSample.instance_type, ProbeSample.world_size, ProbeSample.nodes)
    ).all()
    return [
        SampleGroup(provider=p, instance_type=t, world_size=w, nodes=n, count=c) for p, t, w, n, c in rows
    ]


def default_world_sizes(instance: InstanceType, groups: Sequence[SampleGroup]) -> list[int]:
    """The world sizes probed on this type, else 1–8 nodes' worth of its devices (at least 2 ranks)."""
    probed = sorted({g.world_size for g in groups if g.instance_type == instance.name})
    if probed:
        return probed[:MAX_WORLD_SIZES]
    sizes = [instance.devices * nodes for nodes in (1, 2, 4, 8)]
    return [w for w in sizes if w >= 2]


def check_world_sizes(world_sizes: Sequence[int]) -> list[int]:
    """Validate requested world sizes (2 … 4096, at most 12) and return them sorted, without repeats."""
    if len(set(world_sizes)) > MAX_WORLD_SIZES:
        raise InvalidInput(
            f"{len(set(world_sizes))} world sizes asked for; at most {MAX_WORLD_SIZES} are drawn",
            hint="ask for fewer world sizes",
            field="world_size",
        )
    for w in world_sizes:
        if not 2 <= w <= MAX_WORLD_SIZE:
            raise InvalidInput(
                f"world size {w} is outside 2 … {MAX_WORLD_SIZE}",
                hint="an allreduce needs at least 2 ranks",
                field="world_size",
            )
    return sorted(set(world_sizes))


def nodes_for(instance: InstanceType, world_size: int) -> int:
    """Instances needed to host `world_size` ranks, one per device."""
    return max(1, math.ceil(world_size / instance.devices))


def model_curves(
    model: BusBandwidthModel, *, instance: InstanceType, world_sizes: Sequence[int]
) -> list[CurveSeries]:
    """The model's busbw over BUFFER_GRID for each world size."""
    series = []
    for world_size in world_sizes:
        nodes = nodes_for(instance, world_size)
        estimate = model.predict(
            instance=instance, world_size=world_size, nodes=nodes, buffer_bytes=BUFFER_GRID
        )
        series.append(
            CurveSeries(
                world_size=world_size,
                nodes=nodes,
                buffer_bytes=BUFFER_GRID,
                busbw_gbps=tuple(float(v) for v in estimate.busbw_gbps),
                source=estimate.source,
                residual_cv=float(estimate.residual_cv),
            )
        )
    return series


def stored_samples(
    *,
    session: Session,
    provider: str,
    instance_type: str,
    world_sizes: Sequence[int],
    limit: int = MAX_SAMPLES,
) -> tuple[list[SamplePoint], bool]:
    """Probe samples of one type at the given world sizes (at most `limit`), and whether more exist."""
    rows = session.scalars(
        select(ProbeSample)
        .where(
            ProbeSample.provider == provider,
            ProbeSample.instance_type == instance_type,
            ProbeSample.world_size.in_(list(world_sizes)),
        )
        .order_by(ProbeSample.world_size, ProbeSample.buffer_bytes, ProbeSample.id)
        .limit(limit + 1)
    ).all()
    points = [
        SamplePoint(
            world_size=r.world_size,
            nodes=r.nodes,
            buffer_bytes=r.buffer_bytes,
            busbw_gbps=r.busbw_gbps,
            async_count=r.async_count,
            backend=r.backend,
            origin=r.origin,
        )
        for r in rows[:limit]
    ]
    return points, len(rows) > limit


def bandwidth_curves(
    *,
    session: Session,
    settings: Settings,
    version: str,
    provider: str,
    instance_type: str | None,
    world_sizes: Sequence[int],
) -> BandwidthCurves:
    """Curves of model `version` ("active" for the serving model) for one instance type, with its samples.

    Without `instance_type` the first probed type of `provider` is shown (else its first catalog type);
    without `world_sizes`, the probed world sizes (else 1, 2, 4 and 8 nodes' worth of ranks).
    """
    from srift.bandwidth import registry
    from srift.catalog import store

    groups = sample_groups(session=session)
    name = instance_type or _default_type(session=session, provider=provider, groups=groups)
    instance = store.get_instance_type(session=session, provider=provider, name=name)
    sizes = check_world_sizes(world_sizes) if world_sizes else default_world_sizes(instance, groups)
    if version == ACTIVE:
        model = registry.active_model(session=session, settings=settings)
    else:
        model = registry.model_version(session=session, settings=settings, version=version)
    series = model_curves(model, instance=instance, world_sizes=sizes)
    samples, truncated = stored_samples(
        session=session, provider=provider, instance_type=name, world_sizes=sizes
    )
    return BandwidthCurves(
        version=version,
        provider=provider,
        instance_type=name,
        series=tuple(series),
        samples=tuple(samples),
        samples_truncated=truncated,
        groups=tuple(groups),
    )


def _default_type(*, session: Session, provider: str, groups: Sequence[SampleGroup]) -> str:
    from srift.catalog import store

    for group in groups:
        if group.provider == provider:
            return group.instance_type
    types = store.list_instance_types(session=session, provider=provider)
    if not types:
        raise InvalidInput(
            f"the catalog has no instance types for provider {provider!r}",
            hint="pick a provider listed by GET /v1/instance-types",
            field="provider",
        )
    return types[0].instance.name


@dataclass(frozen=True, slots=True)
class TrainingRunSummary:
    id: int
    plan_id: int
    current_plan_id: int
    state: str
    created_at: dt.datetime
    iterations_done: int
    elapsed_s: float
    spent_usd: float
    interruptions: int
    replans: int


def list_training_runs(
    *, session: Session, state: str | None = None, limit: int = 100, offset: int = 0
) -> tuple[list[TrainingRunSummary], int]:
    """Training runs, newest first, with how often each was interrupted and re-planned; and the total."""
    query = select(TrainingJob)
    counted = select(func.count(TrainingJob.id))
    if state is not None:
        query = query.where(TrainingJob.state == state)
        counted = counted.where(TrainingJob.state == state)
    jobs = session.scalars(query.order_by(TrainingJob.id.desc()).limit(limit).offset(offset)).all()
    total = int(session.scalar(counted) or 0)
    events: dict[int, list[TrainingJobEvent]] = {job.id: [] for job in jobs}
    if events:
        rows = session.scalars(
            select(TrainingJobEvent).where(
                TrainingJobEvent.job_id.in_(list(events)), TrainingJobEvent.kind == "interruption"
            )
        )
        for event in rows:
            events[event.job_id].append(event)
    summaries = [
        TrainingRunSummary(
            id=job.id,
            plan_id=job.plan_id,
            current_plan_id=job.current_plan_id,
            state=job.state,
            created_at=job.created_at,
            iterations_done=job.iterations_done,
            elapsed_s=job.elapsed_s,
            spent_usd=job.spent_usd,
            interruptions=len(events[job.id]),
            replans=sum(1 for e in events[job.id] if "plan_id" in (e.payload or {})),
        )
        for job in jobs
    ]
    return summaries, total
