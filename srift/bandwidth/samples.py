"""Probe samples in the database: idempotent storage (by fingerprint) and loading by query.

The values themselves (ProbeRecord, the JSON-lines form, SampleQuery) are in `srift.bandwidth.records`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from sqlalchemy import insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from srift.bandwidth.mixed import SEPARATOR, ring_members
from srift.bandwidth.records import ProbeRecord as ProbeRecord
from srift.bandwidth.records import SampleQuery as SampleQuery
from srift.bandwidth.records import algbw_gbps as algbw_gbps
from srift.bandwidth.records import busbw_gbps as busbw_gbps
from srift.bandwidth.records import parse_jsonl as parse_jsonl
from srift.bandwidth.records import records_to_jsonl as records_to_jsonl
from srift.db.lookups import stored_among
from srift.db.tables import Job, ProbeSample
from srift.domain.rings import canonical_instance_type
from srift.errors import Conflict, InvalidInput, NotFound


def store_samples(
    *, session: Session, records: Sequence[ProbeRecord], origin: str, job_id: int | None = None
) -> int:
    """Add the records not stored before (by fingerprint) in the caller's transaction; return how many.

    Nothing is committed here: the caller's transaction stores all of them or none. A mixed ring's name is
    stored in its one spelling, its types sorted (InvalidInput for a ring naming a type twice). `origin`
    says where they came from ("probe", "jsonl", "nccl-tests", "job", "shipped").
    """
    if not origin or len(origin) > 32:
        raise InvalidInput(
            "origin must be 1–32 characters", hint="name the source, e.g. 'jsonl'", field="origin"
        )
    if job_id is not None and session.get(Job, job_id) is None:
        raise NotFound(f"no job {job_id}", hint="store samples against an existing probe job", field="job_id")
    by_print: dict[str, ProbeRecord] = {}
    for record in records:
        record = _canonical(record)
        by_print.setdefault(record.fingerprint(), record)
    prints = list(by_print)
    existing = stored_among(session, ProbeSample.fingerprint, prints)
    new = [p for p in prints if p not in existing]
    # One multi-row INSERT of plain rows (after a flush of what the session holds), not an ORM object per
    # sample: a new data folder stores the shipped models' thousands of samples at start-up
    # (srift.bandwidth.registry.register_shipped), where building and flushing objects took most of 0.8 s.
    rows = [_row(by_print[p], fingerprint=p, origin=origin, job_id=job_id) for p in new]
    try:
        session.flush()
        if rows:
            session.execute(insert(ProbeSample), rows)
    except IntegrityError as exc:
        raise Conflict(
            "some of these samples were stored by another import at the same moment",
            hint="retry: samples already stored are skipped",
        ) from exc
    return len(new)


def _canonical(record: ProbeRecord) -> ProbeRecord:
    """`record` under its ring's one spelling (`srift.domain.rings`): documents arrive so already, records a
    caller built itself (an nccl-tests import) are put so here, so no writer stores a second name."""
    name = canonical_instance_type(record.instance_type)
    return record if name == record.instance_type else replace(record, instance_type=name)


def _row(record: ProbeRecord, *, fingerprint: str, origin: str, job_id: int | None) -> dict[str, Any]:
    """The `probe_samples` row (column: value) that stores `record` (created_at: the column's default)."""
    return dict(
        fingerprint=fingerprint,
        job_id=job_id,
        origin=origin,
        provider=record.provider,
        region=record.region,
        zone=record.zone,
        instance_type=record.instance_type,
        backend=record.backend,
        buffer_bytes=record.buffer_bytes,
        world_size=record.world_size,
        nodes=record.nodes,
        ranks_per_node=record.ranks_per_node,
        async_count=record.async_count,
        time_s=record.time_s,
        algbw_gbps=record.algbw_gbps,
        busbw_gbps=record.busbw_gbps,
        features={
            "run_id": record.run_id,
            "repeat": record.repeat,
            "gpu_name": record.gpu_name,
            "cpu_name": record.cpu_name,
            "cpu_cores": record.cpu_cores,
            "memory_gib": record.memory_gib,
            "rated_gbps": record.rated_gbps,
            **({"collective": record.collective} if record.collective != "allreduce" else {}),
        },
    )


def record_from_row(row: ProbeSample) -> ProbeRecord:
    """The record a stored row was made from."""
    feats = row.features or {}
    return ProbeRecord(
        run_id=str(feats.get("run_id", "")),
        provider=row.provider,
        instance_type=row.instance_type,
        backend=row.backend,
        buffer_bytes=row.buffer_bytes,
        world_size=row.world_size,
        nodes=row.nodes,
        ranks_per_node=row.ranks_per_node,
        time_s=row.time_s,
        algbw_gbps=row.algbw_gbps,
        busbw_gbps=row.busbw_gbps,
        async_count=row.async_count,
        repeat=int(feats.get("repeat", 0)),
        region=row.region,
        zone=row.zone,
        gpu_name=str(feats.get("gpu_name", "")),
        cpu_name=str(feats.get("cpu_name", "")),
        cpu_cores=int(feats.get("cpu_cores", 0)),
        memory_gib=float(feats.get("memory_gib", 0.0)),
        rated_gbps=float(feats.get("rated_gbps", 0.0)),
        collective=str(feats.get("collective", "allreduce")),
    )


def load_samples(*, session: Session, query: SampleQuery = SampleQuery()) -> list[ProbeRecord]:
    """Stored samples matching `query`, oldest first, each measurement once (`each_measurement_once`).

    A query of instance types selects those types' samples and a mixed ring's ("a+b", `srift.bandwidth.
    mixed`) when each of its types is among them. A ring's name in the query (any order) selects that
    ring's samples and its types' own, which the ring is measured against; other rings of those types are
    selected only by naming them, or by listing their types alone."""
    stmt = select(ProbeSample).where(ProbeSample.world_size >= query.min_world_size).order_by(ProbeSample.id)
    if query.providers:
        stmt = stmt.where(ProbeSample.provider.in_(query.providers))
    plain = {name for name in query.instance_types if SEPARATOR not in name}
    rings = {canonical_instance_type(name) for name in query.instance_types if SEPARATOR in name}
    types = plain | {member for ring in rings for member in ring_members(ring)}
    if query.instance_types:
        mixed = ProbeSample.instance_type.contains(SEPARATOR)
        stmt = stmt.where(or_(ProbeSample.instance_type.in_(sorted(types)), mixed))
    if query.backends:
        stmt = stmt.where(ProbeSample.backend.in_(query.backends))
    records = [record_from_row(row) for row in session.scalars(stmt)]
    if query.collective is not None:
        records = [r for r in records if r.collective == query.collective]
    if query.instance_types:
        records = [
            r
            for r in records
            if r.instance_type in types
            or r.instance_type in rings
            or set(ring_members(r.instance_type)) <= plain
        ]
    return list(each_measurement_once(records, record=_itself))


class _Named(Protocol):
    """A stored sample as a row (ProbeSample) or its record (ProbeRecord): both name their instance type."""

    @property
    def instance_type(self) -> str: ...


_S = TypeVar("_S", bound=_Named)


def _itself(record: ProbeRecord) -> ProbeRecord:
    return record


def each_measurement_once(samples: Iterable[_S], *, record: Callable[[_S], ProbeRecord]) -> Iterator[_S]:
    """`samples` (rows or records, `record` reads one's record) without repeats of one measurement, lazily,
    in their order: a mixed ring's sample stored under both orders of its types (before
    `srift.domain.rings`) was renamed to the sorted spelling by migration 0006, but kept its old
    fingerprint (the column is unique) and its row, so it would be loaded, trained on and listed twice.
    Read back, both copies are the same record, so their fingerprints under the stored name agree: the
    measurement identity `store_samples` skips repeats by. The first given is kept (give them oldest
    first). Only rings were renamed, so only their samples are fingerprinted again."""
    seen: set[str] = set()
    for sample in samples:
        if SEPARATOR in sample.instance_type:
            fingerprint = record(sample).fingerprint()
            if fingerprint in seen:
                continue
            seen.add(fingerprint)
        yield sample


def sample_providers(*, session: Session) -> list[str]:
    """The providers the stored samples name, sorted (a testbed's or `local` ones need no catalog entry)."""
    return sorted(session.scalars(select(ProbeSample.provider).distinct()))


def sample_instance_types(*, session: Session) -> list[str]:
    """The instance types the stored samples name, sorted; a mixed ring's ("a+b") counts as each member."""
    names = session.scalars(select(ProbeSample.instance_type).distinct())
    return sorted({member for name in names for member in ring_members(name)})


def sample_ring_names(*, session: Session) -> list[str]:
    """The mixed rings the stored samples name ("a+b", as stored), sorted."""
    stmt = select(ProbeSample.instance_type).where(ProbeSample.instance_type.contains(SEPARATOR)).distinct()
    return sorted(session.scalars(stmt))


def count_samples(*, session: Session) -> int:
    from sqlalchemy import func

    return int(session.scalar(select(func.count()).select_from(ProbeSample)) or 0)
