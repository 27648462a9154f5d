"""Results posted to the API: probe samples (`POST /v1/probe-results`) and profiles from EC2 instances.

Samples for a job may arrive in several batches (`final: false` stages them on the job); the final batch
stores every staged sample with the job in one transaction, so a job is never half-ingested. A queued job
that receives its final results (someone ran the probe by hand with the job's token) succeeds at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from srift.bandwidth.mixed import ring_members
from srift.bandwidth.records import ProbeRecord
from srift.bandwidth.samples import store_samples
from srift.db.tables import Job, utcnow
from srift.domain.profile import ModelProfile
from srift.domain.states import JobKind, JobState
from srift.errors import Conflict, InvalidInput, NotFound
from srift.jobs.spec import ProbeJobSpec, parse_probe_job
from srift.limits import PROBE_RESULTS_PER_BATCH

MAX_STAGED_SAMPLES = 200_000
UNCATALOGUED = ("local",)


@dataclass(frozen=True, slots=True)
class ResultsOutcome:
    parsed: int
    stored: int
    staged: int
    job_state: str | None


def check_batch(records: Sequence[ProbeRecord]) -> None:
    """Refuse a batch above the per-request limit (the REST schema states it too)."""
    PROBE_RESULTS_PER_BATCH.check(len(records), field="samples")


def _check_catalogued(session: Session, records: Sequence[ProbeRecord]) -> None:
    """Refuse samples whose provider or instance type the catalog does not list (NotFound naming
    `samples[i].provider` or `samples[i].instance_type`); provider local is exempt. A mixed ring's samples
    ("a+b", srift.bandwidth.mixed) need each member type in the catalog, as `srift probe import` does: the
    ring's name is never a catalog type."""
    from srift.catalog.store import get_instance_type

    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(records):
        members = ring_members(r.instance_type)
        for member in members:
            key = (r.provider, member)
            if key in seen or r.provider in UNCATALOGUED:
                continue
            seen.add(key)
            try:
                get_instance_type(session=session, provider=r.provider, name=member)
            except (NotFound, InvalidInput) as exc:
                if exc.field == "provider":  # the catalog knows no such provider: name it, not the type
                    raise NotFound(
                        f"samples[{i}]: {exc.detail}", hint=exc.hint, field=f"samples[{i}].provider"
                    ) from exc
                ring = f" (a member of the mixed ring {r.instance_type!r})" if len(members) > 1 else ""
                raise NotFound(
                    f"samples[{i}]: unknown instance type {member!r} of provider {r.provider!r}{ring}",
                    hint=exc.hint,
                    field=f"samples[{i}].instance_type",
                ) from exc


def check_answers_job(spec: ProbeJobSpec, records: Sequence[ProbeRecord]) -> None:
    """Refuse samples that do not answer the probe job they are posted to: each must carry the job's
    provider (its catalog provider: ec2 samples are aws's) and instance type (a mixed ring's name, as the
    job names it), one of its node counts, that count × the job's ranks_per_node as world size, and the job's
    backend and collective (both always stated: a job document defaults them to gloo and allreduce).
    A Conflict with the job (409) naming `samples[i].<field>`; checked before anything is staged or stored,
    so samples of another type or fleet never land under this job nor finish it."""
    for i, record in enumerate(records):
        mismatch = _mismatch(spec, record)
        if mismatch is not None:
            name, wanted = mismatch
            raise Conflict(
                f"samples[{i}].{name} is {getattr(record, name)!r}, but the probe job asked for {wanted}",
                hint=f"post only the samples of this job's probe ({spec.provider.value} {spec.instance_type} "
                f"on {list(spec.node_counts)} nodes); store other samples with a write token and no job_id",
                field=f"samples[{i}].{name}",
            )


def _mismatch(spec: ProbeJobSpec, record: ProbeRecord) -> tuple[str, str] | None:
    """The first field of `record` the job did not ask for, and what it asked (None: it answers the job)."""
    provider = spec.provider.catalog_provider or spec.provider.value
    if record.provider != provider:
        return "provider", repr(provider)
    members = ring_members(spec.instance_type)
    if sorted(ring_members(record.instance_type)) != sorted(members):  # a ring's types in any order
        ring = f" (the ring of {', '.join(members)})" if len(members) > 1 else ""
        return "instance_type", f"{spec.instance_type!r}{ring}"
    if record.nodes not in spec.node_counts:
        return "nodes", f"one of {list(spec.node_counts)}"
    if record.world_size != record.nodes * spec.ranks_per_node:
        return "world_size", f"{record.nodes} nodes × {spec.ranks_per_node} rank(s) per node"
    if record.backend != spec.backend:
        return "backend", repr(spec.backend)
    if record.collective != spec.collective:
        return "collective", repr(spec.collective)
    return None


def _job_for_update(session: Session, job_id: int, kind: JobKind) -> Job:
    job = session.get(Job, job_id, populate_existing=True, with_for_update=True)
    if job is None or job.kind != kind.value:
        raise NotFound(f"no {kind.value} job with id {job_id}", hint="check job_id", field="job_id")
    return job


def post_probe_results(
    *,
    session: Session,
    job_id: int | None,
    records: Sequence[ProbeRecord],
    final: bool,
    error: str | None,
) -> ResultsOutcome:
    """Store (or stage) posted samples, already read into records; the caller's transaction commits them."""
    check_batch(records)
    if job_id is None:
        if error or not final:
            raise InvalidInput(
                "error and final=false need a job_id", hint="post them with the job's token", field="job_id"
            )
        _check_catalogued(session, records)
        stored = store_samples(session=session, records=records, origin="api")
        return ResultsOutcome(parsed=len(records), stored=stored, staged=0, job_state=None)
    job = _job_for_update(session, job_id, JobKind.PROBE)
    result = dict(job.result or {})
    if error:
        result["results_error"] = error[:2000]
        job.result = result
        return ResultsOutcome(parsed=0, stored=0, staged=0, job_state=job.state)
    check_answers_job(parse_probe_job(job.request), records)
    staged_raw: list[dict[str, Any]] = list(result.get("staged_samples", []))
    if not final:
        if len(staged_raw) + len(records) > MAX_STAGED_SAMPLES:
            raise InvalidInput(
                f"more than {MAX_STAGED_SAMPLES} samples staged for job {job_id}",
                hint="post fewer repeats or sizes",
                field="samples",
            )
        result["staged_samples"] = staged_raw + [r.to_dict() for r in records]
        job.result = result
        return ResultsOutcome(
            parsed=len(records), stored=0, staged=len(result["staged_samples"]), job_state=job.state
        )
    everything = [*staged_records(staged_raw), *records]
    _check_catalogued(session, everything)
    stored = store_samples(session=session, records=everything, origin="job", job_id=job.id)
    result.pop("staged_samples", None)
    result.update(results_received=utcnow().isoformat(timespec="seconds"), samples_stored=stored)
    job.result = result
    if job.state == JobState.QUEUED.value:
        job.state = JobState.SUCCEEDED.value
        job.finished_at = utcnow()
        job.log = (job.log or "") + f"results posted with the job token: {stored} new samples\n"
    return ResultsOutcome(parsed=len(everything), stored=stored, staged=0, job_state=job.state)


def staged_records(staged: Sequence[Mapping[str, Any]]) -> list[ProbeRecord]:
    """The records staged on a job by earlier batches (written by ProbeRecord.to_dict)."""
    return [ProbeRecord.from_dict(raw, where=f"staged[{i}]") for i, raw in enumerate(staged)]


def post_profile_result(
    *,
    session: Session,
    job_id: int,
    instance_type: str | None,
    profile: ModelProfile | None,
    error: str | None,
) -> tuple[int | None, str]:
    """Store one instance's profile for a profile job; returns (profile id, job state).

    A profile for an instance type the job did not ask for is a Conflict with the job (409)."""
    from srift.profiling.store import save_profile

    job = _job_for_update(session, job_id, JobKind.PROFILE)
    result = dict(job.result or {})
    if error:
        result["results_error"] = error[:2000]
        job.result = result
        return None, job.state
    if profile is None or instance_type is None:
        raise InvalidInput(
            "give `profile` and `instance_type`, or `error`", hint="see the schema", field="profile"
        )
    wanted = list(job.request.get("instance_types", []))
    if instance_type not in wanted:
        raise Conflict(
            f"job {job_id} did not ask for instance type {instance_type!r}",
            hint=f"use one of {', '.join(wanted)}",
            field="instance_type",
        )
    profile_id = save_profile(session=session, profile=profile)
    received = dict(result.get("profiles_received", {}))
    received[instance_type] = profile_id
    result["profiles_received"] = received
    job.result = result
    return profile_id, job.state
