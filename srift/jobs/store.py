"""The job queue in the `jobs` table: submit, claim atomically, heartbeat, finish, recover dead workers.

Claiming is one `UPDATE jobs SET state='running' ... WHERE id = :id AND state = 'queued'` whose row count
says who won, so several workers (SQLite or PostgreSQL) never run one job twice. A running job whose
heartbeat is older than `stale_after_s` belongs to a dead worker: it is requeued while attempts remain,
else failed. Only the worker holding a job (its `worker_id`) can heartbeat or finish it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from srift.db.tables import Job, utcnow
from srift.db.tokens import issue_job_token
from srift.domain.states import JobKind, JobState
from srift.errors import InvalidInput, NotFound
from srift.jobs.spec import JobProvider, ProbeJobSpec, ProfileJobSpec

MAX_LOG_CHARS = 64_000


def create_job(*, session: Session, spec: ProbeJobSpec | ProfileJobSpec) -> tuple[Job, str]:
    """Queue a job; returns the row and its token (shown once; only its hash is stored)."""
    kind = JobKind.PROBE if isinstance(spec, ProbeJobSpec) else JobKind.PROFILE
    job = Job(
        kind=kind.value,
        provider=spec.provider.value,
        state=JobState.QUEUED.value,
        request=spec.to_dict(),
        attempts=0,
        log="",
        result={},
    )
    token = issue_job_token(job)
    session.add(job)
    session.flush()
    return job, token


def get_job(*, session: Session, job_id: int, kind: JobKind | None = None) -> Job:
    job = session.get(Job, job_id)
    if job is None or (kind is not None and job.kind != kind.value):
        what = f"{kind.value} job" if kind else "job"
        raise NotFound(f"no {what} with id {job_id}", hint="list jobs with `srift jobs list`", field="job_id")
    return job


def list_jobs(
    *,
    session: Session,
    kind: JobKind | None = None,
    state: JobState | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Job], int]:
    """Jobs newest first, and how many match in total."""
    query = select(Job)
    count = select(func.count()).select_from(Job)
    if kind is not None:
        query = query.where(Job.kind == kind.value)
        count = count.where(Job.kind == kind.value)
    if state is not None:
        query = query.where(Job.state == state.value)
        count = count.where(Job.state == state.value)
    rows = list(session.scalars(query.order_by(Job.id.desc()).limit(limit).offset(offset)))
    return rows, int(session.scalar(count) or 0)


def claim_next(
    *,
    session: Session,
    worker_id: str,
    kinds: Sequence[JobKind] = tuple(JobKind),
    providers: Sequence[JobProvider] = tuple(JobProvider),
) -> Job | None:
    """Take the oldest queued job this worker can run; None when there is none. The caller commits."""
    candidates = session.scalars(
        select(Job.id)
        .where(
            Job.state == JobState.QUEUED.value,
            Job.kind.in_([k.value for k in kinds]),
            Job.provider.in_([p.value for p in providers]),
        )
        .order_by(Job.id)
        .limit(20)
    ).all()
    for job_id in candidates:
        now = utcnow()
        won = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.state == JobState.QUEUED.value)
            .values(
                state=JobState.RUNNING.value,
                worker_id=worker_id,
                started_at=now,
                heartbeat_at=now,
                attempts=Job.attempts + 1,
                error=None,
            )
            .execution_options(synchronize_session=False)
        )
        if won.rowcount == 1:  # type: ignore[attr-defined]
            job = session.get(Job, job_id, populate_existing=True)
            assert job is not None
            return job
    return None


def heartbeat(*, session: Session, job_id: int, worker_id: str, log: str | None = None) -> bool:
    """Mark the job alive (and save its log); False when this worker no longer holds it."""
    values: dict[str, Any] = {"heartbeat_at": utcnow()}
    if log is not None:
        values["log"] = log[-MAX_LOG_CHARS:]
    done = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING.value)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def finish(
    *,
    session: Session,
    job_id: int,
    worker_id: str,
    state: JobState,
    log: str,
    error: str | None = None,
    result: dict[str, Any] | None = None,
) -> bool:
    """Move a running job held by `worker_id` to succeeded or failed; False when it no longer holds it.

    Runs in the caller's transaction, so a caller can store the job's outputs in the same commit.
    """
    job = session.get(Job, job_id, populate_existing=True, with_for_update=True)
    if job is None or job.state != JobState.RUNNING.value or job.worker_id != worker_id:
        return False
    merged = dict(job.result or {})
    merged.update(result or {})
    job.result = merged
    job.state = state.value
    job.error = error
    job.log = log[-MAX_LOG_CHARS:]
    job.finished_at = utcnow()
    job.heartbeat_at = job.finished_at
    session.flush()
    return True


def requeue(*, session: Session, job_id: int, worker_id: str, log: str) -> bool:
    """Give a running job back to the queue (its worker is stopping); False when it no longer holds it."""
    done = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING.value)
        .values(
            state=JobState.QUEUED.value,
            worker_id=None,
            heartbeat_at=None,
            started_at=None,
            log=log[-MAX_LOG_CHARS:],
        )
        .execution_options(synchronize_session=False)
    )
    return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def update_result(*, session: Session, job_id: int, **items: Any) -> None:
    """Merge keys into a job's `result` (e.g. the EC2 instances it launched, before anything else)."""
    job = session.get(Job, job_id, populate_existing=True, with_for_update=True)
    if job is None:
        raise NotFound(f"no job with id {job_id}", hint="it may have been deleted", field="job_id")
    merged = dict(job.result or {})
    merged.update(items)
    job.result = merged
    session.flush()


@dataclass(frozen=True, slots=True)
class Recovered:
    """A job taken back from a dead worker: requeued (resumable) or failed."""

    job_id: int
    kind: str
    provider: str
    attempts: int
    state: JobState
    worker_id: str | None
    result: dict[str, Any]


def stale_jobs(*, session: Session, stale_after_s: float, now: datetime | None = None) -> list[Job]:
    cutoff = (now or utcnow()) - timedelta(seconds=stale_after_s)
    return list(
        session.scalars(
            select(Job).where(Job.state == JobState.RUNNING.value, Job.heartbeat_at < cutoff).order_by(Job.id)
        )
    )


def release_stale(
    *, session: Session, job: Job, max_attempts: int, reason: str, results_ready: bool = False
) -> Recovered | None:
    """Requeue or fail one stale job (only if it is still the same stale run); the caller commits.

    A job whose results were already posted (EC2) is marked succeeded instead: its samples are stored.
    Requeued or failed, it drops the samples the dead attempt staged (`final: false`): they are partial.
    """
    worker = job.worker_id
    if results_ready:
        target = JobState.SUCCEEDED
    else:
        target = JobState.QUEUED if job.attempts < max_attempts else JobState.FAILED
    line = f"\n[{utcnow().isoformat(timespec='seconds')}] {reason}; job {target.value}"
    values: dict[str, Any] = {"state": target.value, "log": ((job.log or "") + line)[-MAX_LOG_CHARS:]}
    if target is JobState.QUEUED:
        values.update(worker_id=None, heartbeat_at=None, started_at=None)
    else:
        values.update(finished_at=utcnow(), error=None if target is JobState.SUCCEEDED else reason)
    if target is not JobState.SUCCEEDED:  # a dead attempt's staged partial samples must never be stored
        values["result"] = {k: v for k, v in (job.result or {}).items() if k != "staged_samples"}
    done = session.execute(
        update(Job)
        .where(Job.id == job.id, Job.state == JobState.RUNNING.value, Job.worker_id == worker)
        .where(Job.heartbeat_at == job.heartbeat_at)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]
        return None
    return Recovered(
        job_id=job.id,
        kind=job.kind,
        provider=job.provider,
        attempts=job.attempts,
        state=target,
        worker_id=worker,
        result=dict(job.result or {}),
    )


def check_page(limit: int, offset: int) -> None:
    if not 1 <= limit <= 500:
        raise InvalidInput(
            f"limit must be in [1, 500], got {limit}", hint="use a smaller page", field="limit"
        )
    if offset < 0:
        raise InvalidInput("offset must be ≥ 0", hint="use 0 or more", field="offset")
