"""The worker end to end on this machine (provider local), and a worker killed with SIGKILL mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from process_gate import ProcessGate
from sqlalchemy import func, select

from srift.db.session import session_factory, transaction
from srift.db.tables import Job, ProbeSample, utcnow
from srift.jobs import service
from srift.jobs.backends import JobOutput, LocalBackend
from srift.jobs.run import JobRun, job_marker
from srift.jobs.service import TypeFacts
from srift.jobs.spec import JobProvider, ProbeJobSpec, ProfileJobSpec
from srift.jobs.worker import Worker, WorkerConfig
from srift.settings import Settings

from .conftest import register_testbed_types

# Runs or recovers job processes: one worker, with the root tests (tests/conftest.py, GROUP_OF_MARKER).
pytestmark = pytest.mark.xdist_group("serial")


def _submit(url: str, **body: object) -> int:
    request = {"provider": "local", "instance_type": "local", **body}
    with transaction(url) as session:
        job, _ = service.submit_probe_job(session=session, data=request)
        return job.id


def _job(url: str, job_id: int) -> Job:
    s = session_factory(url)()
    try:
        job = s.get(Job, job_id)
        assert job is not None
        return job
    finally:
        s.close()


def _samples(url: str, job_id: int) -> list[ProbeSample]:
    s = session_factory(url)()
    try:
        return list(s.scalars(select(ProbeSample).where(ProbeSample.job_id == job_id)))
    finally:
        s.close()


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() + b"-" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_local_probe_job_runs_end_to_end(worker_settings: Settings) -> None:
    url = worker_settings.resolved_database_url
    job_id = _submit(url, node_counts=[2], sizes=[4, 4096], repeats=2, warmup=1)
    outcome = Worker(worker_settings, WorkerConfig(heartbeat_s=0.5)).run_once()
    assert outcome is not None and outcome.job_id == job_id
    job = _job(url, job_id)
    assert job.state == "succeeded", job.log
    samples = _samples(url, job_id)
    assert sorted((s.world_size, s.buffer_bytes) for s in samples) == [(2, 4), (2, 4), (2, 4096), (2, 4096)]
    assert job.result["samples_stored"] == 4
    assert all(s.provider == "local" and s.origin == "job" for s in samples)
    assert "probe: 2 nodes gave 4 samples" in job.log
    assert Worker(worker_settings).run_once() is None


def test_a_failing_job_is_failed_with_its_reason_and_stores_nothing(worker_settings: Settings) -> None:
    url = worker_settings.resolved_database_url
    register_testbed_types(url)
    with transaction(url) as session:
        job, _ = service.submit_probe_job(
            session=session,
            data={
                "provider": "testbed",
                "instance_type": "tb.small",
                "node_counts": [2],
                "testbed_prefix": "absent",
            },
        )
        job_id = job.id
    outcome = Worker(worker_settings).run_once()
    assert outcome is not None and outcome.state == "failed"
    failed = _job(url, job_id)
    assert failed.state == "failed" and "no testbed 'absent' is up" in (failed.error or "")
    assert "failed: " in failed.log
    assert _samples(url, job_id) == []


def _start_worker(settings: Settings, gate: ProcessGate, *extra: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **gate.env(),
        "SRIFT_DATABASE_URL": settings.resolved_database_url,
        "SRIFT_DATA_DIR": str(settings.data_dir),
    }
    return subprocess.Popen(
        [sys.executable, "-c", "from srift.cli import main; main()", "worker", "--poll-s", "0.2", *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_worker_killed_mid_job_leaves_it_resumable_with_nothing_stored(
    worker_settings: Settings, tmp_path: Path
) -> None:
    """The job's two probe ranks are held at start-up (tests/process_gate.py), so the job is provably
    running when the worker is killed; recovery then judges the heartbeat by an injected clock."""
    url = worker_settings.resolved_database_url
    job_id = _submit(url, node_counts=[2], sizes=[4, 1 << 20], repeats=3, time_budget_s=120)
    gate = ProcessGate(tmp_path / "gate")
    worker = _start_worker(worker_settings, gate, "--heartbeat-s", "0.3")
    marker = job_marker(job_id, 1)
    try:
        held = gate.wait_held(2)
        assert sorted(held) == sorted(_marked(marker)), "the held processes are the job's ranks"
        assert _job(url, job_id).state == "running"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
        gate.close()
    assert worker.returncode == -signal.SIGKILL
    assert _job(url, job_id).state == "running"
    assert _samples(url, job_id) == []
    fresh = Worker(worker_settings, WorkerConfig(stale_after_s=60.0, max_attempts=2))
    assert fresh.recover() == [], "a job whose heartbeat is recent is not taken"
    later = Worker(
        worker_settings,
        WorkerConfig(stale_after_s=60.0, max_attempts=2),
        now=lambda: utcnow() + timedelta(seconds=61),
    )
    recovered = later.recover()
    assert [(r.job_id, r.state.value) for r in recovered] == [(job_id, "queued")]
    job = _job(url, job_id)
    assert job.state == "queued" and job.attempts == 1 and job.worker_id is None
    assert "stopped heartbeating" in job.log
    assert _marked(marker) == [], "the dead attempt's probe processes are still running"
    assert _samples(url, job_id) == []
    with transaction(url) as session:
        assert session.scalar(select(func.count()).select_from(ProbeSample)) == 0


def test_sigterm_gives_the_running_job_back_to_the_queue(worker_settings: Settings, tmp_path: Path) -> None:
    url = worker_settings.resolved_database_url
    job_id = _submit(url, node_counts=[2], sizes=[4, 1 << 20], repeats=3, time_budget_s=120)
    gate = ProcessGate(tmp_path / "gate")
    worker = _start_worker(worker_settings, gate)
    marker = job_marker(job_id, 1)
    try:
        gate.wait_held(2)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
        gate.close()
    job = _job(url, job_id)
    assert job.state == "queued" and job.worker_id is None, job.log
    assert "given back to the queue" in job.log
    assert _marked(marker) == []
    assert _samples(url, job_id) == []


class _TakenAfterRun:
    """The real local backend; when its probe has finished, recovery by another worker (its clock a minute
    on) takes the job back to the queue, as if this worker's heartbeat had lapsed meanwhile."""

    def __init__(self, settings: Settings) -> None:
        self.inner = LocalBackend()
        self.provider = JobProvider.LOCAL
        self.settings = settings

    def run_probe(self, run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> JobOutput:
        output = self.inner.run_probe(run, spec, facts)
        assert output.records, "the probe really ran"
        later = Worker(
            self.settings, WorkerConfig(stale_after_s=30.0), now=lambda: utcnow() + timedelta(minutes=1)
        )
        assert [(r.job_id, r.state.value) for r in later.recover()] == [(run.job_id, "queued")]
        return output

    def run_profiles(self, run: JobRun, spec: ProfileJobSpec, facts: Sequence[TypeFacts]) -> JobOutput:
        raise AssertionError("probe jobs only")

    def cleanup(self, *, job_id: int, kind: str, attempt: int, request: Mapping[str, Any]) -> None:
        self.inner.cleanup(job_id=job_id, kind=kind, attempt=attempt, request=request)


def test_a_worker_that_lost_its_job_never_reports_it_succeeded_and_stores_nothing(
    worker_settings: Settings,
) -> None:
    url = worker_settings.resolved_database_url
    job_id = _submit(url, node_counts=[2], sizes=[4, 1024], repeats=2, time_budget_s=60)
    worker = Worker(
        worker_settings,
        WorkerConfig(heartbeat_s=30.0),
        backends={JobProvider.LOCAL: _TakenAfterRun(worker_settings)},
    )
    outcome = worker.run_once()
    assert outcome is not None and outcome.job_id == job_id
    assert outcome.state == "failed" and "taken from this worker" in (outcome.error or "")
    job = _job(url, job_id)
    assert job.state == "queued" and job.worker_id is None and "succeeded" not in job.log
    assert _samples(url, job_id) == []
