"""Probe and profile jobs as an application service: queue them, read the queue, take their hosts' results.

Submission, the queue and result intake live in `srift.jobs` (the worker uses them too); this module is
what the REST routes and the CLI call, and it hands them JobRecords, never database rows. Result intake
(`post_probe_results`, `post_profile_result`) takes and returns domain values already, so this module
names those functions rather than wrapping them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from srift.db.tables import Job
from srift.documents import copy_fields
from srift.domain.records import JobRecord
from srift.domain.states import JobKind, JobState
from srift.jobs import service, store
from srift.jobs.results import post_probe_results as post_probe_results
from srift.jobs.results import post_profile_result as post_profile_result
from srift.jobs.spec import ProbeJobSpec, ProfileJobSpec


def job_record(job: Job) -> JobRecord:
    """A job row as a record; samples staged by an unfinished attempt are counted, not listed."""
    result = dict(job.result or {})
    staged = result.pop("staged_samples", None)
    if staged is not None:
        result["staged"] = len(staged)
    return copy_fields(JobRecord, job, state=JobState(job.state), log=job.log or "", result=result)


def job_document(record: JobRecord) -> dict[str, Any]:
    """The record as JSON-ready data (JobOut's fields)."""
    return {
        "id": record.id,
        "kind": record.kind,
        "provider": record.provider,
        "state": record.state.value,
        "request": dict(record.request),
        "attempts": record.attempts,
        "worker_id": record.worker_id,
        "created_at": record.created_at,
        "started_at": record.started_at,
        "heartbeat_at": record.heartbeat_at,
        "finished_at": record.finished_at,
        "error": record.error,
        "log": record.log,
        "result": dict(record.result),
    }


def submit_job(*, session: Session, spec: ProbeJobSpec | ProfileJobSpec) -> dict[str, Any]:
    """Check a probe or profile job against the catalog and its caps, and queue it: the job's document
    (`job_document`) with the job's token, shown this once (JobCreated's fields)."""
    job, token = service.submit(session=session, spec=spec)
    return {**job_document(job_record(job)), "token": token}


def list_jobs(
    *, session: Session, kind: JobKind | None, state: JobState | None, limit: int, offset: int = 0
) -> tuple[list[JobRecord], int]:
    """A page of the queue, newest first, and how many jobs match."""
    jobs, total = store.list_jobs(session=session, kind=kind, state=state, limit=limit, offset=offset)
    return [job_record(j) for j in jobs], total


def job_page(
    *, session: Session, kind: JobKind | None, state: JobState | None, limit: int, offset: int = 0
) -> dict[str, Any]:
    """A page of the queue (`list_jobs`) as JSON-ready data (JobList's fields): its jobs' documents and how
    many jobs match. GET /v1/probe-jobs and GET /v1/profile-jobs (only profile jobs) both answer it."""
    jobs, total = list_jobs(session=session, kind=kind, state=state, limit=limit, offset=offset)
    return {"jobs": [job_document(j) for j in jobs], "total": total}


def get_job(*, session: Session, job_id: int, kind: JobKind | None = None) -> JobRecord:
    """One job (of `kind` when given); NotFound otherwise."""
    return job_record(store.get_job(session=session, job_id=job_id, kind=kind))
