"""The queue: atomic claims under concurrency, heartbeats, and recovery of jobs from dead workers."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import update

from srift.db.session import session_factory, transaction
from srift.db.tables import Job, utcnow
from srift.domain.states import JobState
from srift.jobs import store
from srift.jobs.spec import JobProvider, parse_probe_job


def _queue(url: str, n: int) -> list[int]:
    spec = parse_probe_job({"provider": "local", "instance_type": "local", "node_counts": [2], "sizes": [4]})
    ids = []
    with transaction(url) as session:
        for _ in range(n):
            job, _token = store.create_job(session=session, spec=spec)
            ids.append(job.id)
    return ids


def test_concurrent_workers_never_claim_one_job_twice(db_url: str) -> None:
    ids = _queue(db_url, 12)
    claimed: dict[str, list[int]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def worker(name: str) -> None:
        got: list[int] = []
        try:
            start.wait()
            while True:
                with transaction(db_url) as session:
                    job = store.claim_next(session=session, worker_id=name)
                    if job is None:
                        break
                    got.append(job.id)
        except BaseException as exc:
            errors.append(exc)
        claimed[name] = got

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    everything = [j for got in claimed.values() for j in got]
    assert sorted(everything) == ids
    with transaction(db_url) as session:
        rows = {j.id: j for j in session.query(Job).all()}
        for name, got in claimed.items():
            for job_id in got:
                assert rows[job_id].worker_id == name and rows[job_id].attempts == 1
                assert rows[job_id].state == JobState.RUNNING.value


def test_only_the_holding_worker_heartbeats_or_finishes(db_url: str) -> None:
    (job_id,) = _queue(db_url, 1)
    with transaction(db_url) as session:
        job = store.claim_next(session=session, worker_id="a", providers=(JobProvider.LOCAL,))
        assert job is not None and job.id == job_id
    with transaction(db_url) as session:
        assert store.heartbeat(session=session, job_id=job_id, worker_id="a", log="hello")
        assert not store.heartbeat(session=session, job_id=job_id, worker_id="b")
        assert not store.finish(
            session=session, job_id=job_id, worker_id="b", state=JobState.SUCCEEDED, log=""
        )
    with transaction(db_url) as session:
        assert store.finish(
            session=session, job_id=job_id, worker_id="a", state=JobState.SUCCEEDED, log="done"
        )
    with transaction(db_url) as session:
        row = session.get(Job, job_id)
        assert row is not None and row.state == "succeeded" and row.log == "done"
        assert store.claim_next(session=session, worker_id="c") is None


def test_stale_jobs_are_requeued_then_failed_after_max_attempts(db_url: str) -> None:
    (job_id,) = _queue(db_url, 1)
    for attempt, expected in ((1, JobState.QUEUED), (2, JobState.FAILED)):
        with transaction(db_url) as session:
            job = store.claim_next(session=session, worker_id=f"dead{attempt}")
            assert job is not None and job.attempts == attempt
        with transaction(db_url) as session:
            session.execute(update(Job).values(heartbeat_at=utcnow() - timedelta(seconds=120)))
        with transaction(db_url) as session:
            (stale,) = store.stale_jobs(session=session, stale_after_s=60)
            done = store.release_stale(session=session, job=stale, max_attempts=2, reason="worker died")
            assert done is not None and done.state is expected
    s = session_factory(db_url)()
    try:
        row = s.get(Job, job_id)
        assert row is not None and row.state == "failed" and row.error == "worker died"
        assert "job queued" in row.log and "job failed" in row.log
    finally:
        s.close()


def test_a_fresh_heartbeat_is_not_stale(db_url: str) -> None:
    _queue(db_url, 1)
    with transaction(db_url) as session:
        assert store.claim_next(session=session, worker_id="alive") is not None
    with transaction(db_url) as session:
        assert store.stale_jobs(session=session, stale_after_s=60) == []
