"""Read-only views for the dashboard: bandwidth curves beside probe samples; the list of training runs."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Literal

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from srift.bandwidth.samples import each_measurement_once, record_from_row
from srift.db.tables import PlanRow, ProbeSample, TrainingJob, TrainingJobEvent
from srift.documents import copy_fields
from srift.domain import BusBandwidthModel, InstanceType, Interconnect
from srift.domain.records import ProbeGroup, ProbePoint
from srift.domain.rings import canonical_instance_type, spaced_name_not_found
from srift.domain.states import TrainingState
from srift.errors import InvalidInput, NotFound
from srift.settings import Settings

ACTIVE = "active"
MAX_WORLD_SIZES = 12
MAX_WORLD_SIZE = 4096
MAX_SAMPLES = 4000
# Buffer sizes 1 KiB … 1 GiB in steps of √2: enough points for a smooth log-x curve.
BUFFER_GRID: tuple[int, ...] = tuple(round(2 ** (10 + i / 2)) for i in range(41))
DEFAULT_PROVIDER = "aws"


@dataclass(frozen=True, slots=True)
class ModelCurve:
    """A bandwidth model's predicted bus bandwidth over the buffer sizes, at one world size."""

    world_size: int
    nodes: int
    buffer_bytes: tuple[int, ...]
    busbw_gbps: tuple[float, ...]
    source: str
    residual_cv: float


@dataclass(frozen=True, slots=True)
class CurvesView:
    """A bandwidth model's curves for one instance type, with the stored samples beside them."""

    version: str
    provider: str
    instance_type: str
    series: tuple[ModelCurve, ...]
    samples: tuple[ProbePoint, ...]
    samples_truncated: bool
    groups: tuple[ProbeGroup, ...]


def sample_groups(*, session: Session) -> list[ProbeGroup]:
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
    return [ProbeGroup(provider=p, instance_type=t, world_size=w, nodes=n, count=c) for p, t, w, n, c in rows]


def default_world_sizes(instance: InstanceType, groups: Sequence[ProbeGroup]) -> list[int]:
    """The world sizes probed on this type, else 1–8 nodes' worth of its devices (at least 2 ranks)."""
    probed = sorted({g.world_size for g in _groups_of(instance, groups)})
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


def _groups_of(instance: InstanceType, groups: Sequence[ProbeGroup]) -> list[ProbeGroup]:
    return [g for g in groups if g.provider == instance.provider and g.instance_type == instance.name]


def nodes_for(instance: InstanceType, world_size: int, groups: Sequence[ProbeGroup] = ()) -> int:
    """Instances the probes spread `world_size` ranks over, else those needed at one rank per device."""
    probed = [g for g in _groups_of(instance, groups) if g.world_size == world_size]
    if probed:
        return max(probed, key=lambda g: g.count).nodes
    return max(1, math.ceil(world_size / instance.devices))


def buffer_grid(smallest_bytes: int | None = None, largest_bytes: int | None = None) -> tuple[int, ...]:
    """BUFFER_GRID, widened in √2 steps to cover the sampled sizes when they fall outside it."""
    low = min(BUFFER_GRID[0], smallest_bytes or BUFFER_GRID[0])
    high = max(BUFFER_GRID[-1], largest_bytes or BUFFER_GRID[-1])
    first = math.floor(2 * math.log2(max(low, 1)))
    last = math.ceil(2 * math.log2(high))
    return tuple(sorted({max(1, round(2 ** (k / 2))) for k in range(first, last + 1)}))


def model_curves(
    model: BusBandwidthModel,
    *,
    instance: InstanceType,
    world_sizes: Sequence[int],
    groups: Sequence[ProbeGroup] = (),
    grid: Sequence[int] = BUFFER_GRID,
) -> list[ModelCurve]:
    """The model's busbw over `grid` for each world size (on the nodes the probes used, if any)."""
    sizes = tuple(grid)
    series = []
    for world_size in world_sizes:
        nodes = nodes_for(instance, world_size, groups)
        estimate = model.predict(instance=instance, world_size=world_size, nodes=nodes, buffer_bytes=sizes)
        series.append(
            ModelCurve(
                world_size=world_size,
                nodes=nodes,
                buffer_bytes=sizes,
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
) -> tuple[list[ProbePoint], bool]:
    """Probe samples of one type at the given world sizes (at most `limit`), and whether more exist; each
    measurement once, as training loads them (`each_measurement_once`: a ring's sample stored under both
    spellings before canonical names is one measurement). Rows are read as they are needed, oldest first
    within a world size and buffer size, where a measurement's copies lie side by side."""
    found = session.scalars(
        select(ProbeSample)
        .where(
            ProbeSample.provider == provider,
            ProbeSample.instance_type == instance_type,
            ProbeSample.world_size.in_(list(world_sizes)),
        )
        .order_by(ProbeSample.world_size, ProbeSample.buffer_bytes, ProbeSample.id)
        .execution_options(yield_per=limit + 1)
    )
    try:
        rows = list(islice(each_measurement_once(found, record=record_from_row), limit + 1))
    finally:
        found.close()
    points = [copy_fields(ProbePoint, r) for r in rows[:limit]]
    return points, len(rows) > limit


def bandwidth_curves(
    *,
    session: Session,
    settings: Settings,
    version: str,
    provider: str | None,
    instance_type: str | None,
    world_sizes: Sequence[int],
) -> CurvesView:
    """Curves of model `version` ("active" for the serving model) for one instance type, with its samples;
    a mixed ring is found by its types in any order (`srift.domain.rings`).

    Without `instance_type`: a GPU type of the provider's catalog (default aws), the one with the most
    samples (imported or probed) first, else the catalog's first; only a provider without GPU types in the
    catalog (the testbed) opens on its probed types, one the active model covers first. Without
    `world_sizes`: the probed
    world sizes, else 1, 2, 4 and 8 nodes' worth of ranks. Probed types missing from the catalog (a
    testbed's) are described by the host facts their samples record.
    """
    from srift.bandwidth import registry

    groups = sample_groups(session=session)
    if instance_type is None:
        provider, name = _default_type(session=session, provider=provider, groups=groups)
    else:
        provider, name = provider or DEFAULT_PROVIDER, canonical_instance_type(instance_type)
    instance = _instance(session=session, provider=provider, name=name)
    sizes = check_world_sizes(world_sizes) if world_sizes else default_world_sizes(instance, groups)
    if version == ACTIVE:
        model = registry.active_model(session=session, settings=settings)
    else:
        model = registry.model_version(session=session, settings=settings, version=version)
    samples, truncated = stored_samples(
        session=session, provider=provider, instance_type=name, world_sizes=sizes
    )
    grid = buffer_grid(
        min((p.buffer_bytes for p in samples), default=None),
        max((p.buffer_bytes for p in samples), default=None),
    )
    series = model_curves(model, instance=instance, world_sizes=sizes, groups=groups, grid=grid)
    return CurvesView(
        version=version,
        provider=provider,
        instance_type=name,
        series=tuple(series),
        samples=tuple(samples),
        samples_truncated=truncated,
        groups=tuple(groups),
    )


def _default_type(*, session: Session, provider: str | None, groups: Sequence[ProbeGroup]) -> tuple[str, str]:
    from srift.bandwidth import registry
    from srift.catalog import store

    provider = provider or DEFAULT_PROVIDER
    try:
        types = store.list_instance_types(session=session, provider=provider)
    except NotFound:
        types = []
    gpu_types = [t.instance.name for t in types if t.instance.gpu_count > 0]
    if gpu_types:
        counts: dict[str, int] = {}
        for g in groups:
            if g.provider == provider and g.instance_type in gpu_types:
                counts[g.instance_type] = counts.get(g.instance_type, 0) + g.count
        return provider, max(gpu_types, key=lambda name: (counts.get(name, 0), -gpu_types.index(name)))
    active = registry.active_version(session=session)
    covered = set(active.covers) if active is not None else set()
    candidates = sorted(
        (g for g in groups if g.provider == provider),
        key=lambda g: f"{g.provider}/{g.instance_type}" not in covered,
    )
    if candidates:
        return candidates[0].provider, candidates[0].instance_type
    if not types:
        raise NotFound(
            f"the catalog has no instance types for provider {provider!r}",
            hint="pick a provider listed by GET /v1/instance-types",
            field="provider",
        )
    return provider, types[0].instance.name


def _instance(*, session: Session, provider: str, name: str) -> InstanceType:
    """The catalog's specs of a type, or, for a probed type the catalog lacks, those its samples record."""
    from srift.catalog import store

    try:
        return store.get_instance_type(session=session, provider=provider, name=name)
    except (NotFound, InvalidInput) as exc:
        row = session.scalars(
            select(ProbeSample)
            .where(ProbeSample.provider == provider, ProbeSample.instance_type == name)
            .order_by(ProbeSample.id.desc())
            .limit(1)
        ).first()
        spaced = spaced_name_not_found(name, provider=provider)
        if row is None and spaced is not None:  # a ring's '+' written bare in the query string
            raise spaced from exc
        if row is None:
            probed = sorted(
                set(
                    session.scalars(select(ProbeSample.instance_type).where(ProbeSample.provider == provider))
                )
            )
            if not probed:  # the catalog's own answer, naming the query parameter, not its argument
                raise NotFound(exc.detail, hint=exc.hint, field="instance_type") from exc
            raise NotFound(
                f"{provider} has no instance type {name!r} in the catalog or the probe samples",
                hint=f"use one of the probed types: {', '.join(probed[:12])}",
                field="instance_type",
            ) from exc
    facts = row.features or {}
    gpu = str(facts.get("gpu_name") or "") or None
    return InstanceType(
        provider=provider,
        name=name,
        gpu_model=gpu,
        gpu_count=row.ranks_per_node if gpu else 0,
        gpu_memory_gib=0.0,
        vcpus=max(1, int(facts.get("cpu_cores") or 1)),
        memory_gib=float(facts.get("memory_gib") or 1.0),
        network_gbps=float(facts.get("rated_gbps") or 1.0),
        network_burst=False,
        interconnect=Interconnect.NONE,
        interconnect_gbps=0.0,
        efa=False,
    )


@dataclass(frozen=True, slots=True)
class TrainingRunListing:
    """One row of the training-run list: the run's state, progress and how often it was re-planned."""

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
    *,
    session: Session,
    state: TrainingState | None = None,
    limit: int = 100,
    offset: int = 0,
    owner: str | Literal["*"] | None = "*",
) -> tuple[list[TrainingRunListing], int]:
    """Training runs, newest first, with how often each was interrupted and re-planned; and the total.

    `owner` (an API token's name, or None for anonymous) keeps the runs of its own plans and of everyone's;
    "*" (the CLI on the server) keeps every run."""
    query = select(TrainingJob)
    counted = select(func.count(TrainingJob.id))
    if owner != "*":
        mine = select(PlanRow.id).where(
            PlanRow.owner.is_(None) if owner is None else or_(PlanRow.owner.is_(None), PlanRow.owner == owner)
        )
        query = query.where(TrainingJob.plan_id.in_(mine))
        counted = counted.where(TrainingJob.plan_id.in_(mine))
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
        copy_fields(
            TrainingRunListing,
            job,
            interruptions=len(events[job.id]),
            replans=sum(1 for e in events[job.id] if "plan_id" in (e.payload or {})),
        )
        for job in jobs
    ]
    return summaries, total
