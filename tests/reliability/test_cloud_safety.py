"""Cloud safety against a moto EC2 server shared by real processes: a `srift worker` SIGKILLed while its
instances run leaves them running only until the next worker recovers the job, which terminates every one;
and a job's cost cap bounds what all of its attempts together may launch.

(tests/jobs/test_jobs_ec2.py covers the live worker's own paths: success, failure, timeout, capacity and
throttling. These cover the worker that dies without running any of its cleanup.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from sqlalchemy import func, select

from srift.catalog.shipped import load_shipped_catalog
from srift.catalog.store import get_offers
from srift.db.session import session_factory, transaction
from srift.db.tables import Job, ProbeSample
from srift.domain import MarketChoice
from srift.jobs import service
from srift.jobs.ec2 import TAG_JOB
from srift.jobs.results import post_probe_results
from srift.jobs.worker import Outcome, Worker, WorkerConfig
from srift.settings import Settings

REGION = "us-east-1"
EC2 = {"image_id": "ami-12c6146b", "results_url": "http://10.0.0.5:8000", "region": REGION}


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A moto EC2 endpoint on loopback; AWS_* variables point boto3 here (in this process and children)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": url,
    }.items():
        monkeypatch.setenv(key, value)
    yield url
    server.stop()


@pytest.fixture
def cloud_settings(sqlite_url: str, tmp_path: Path) -> Settings:
    settings = Settings(database_url=sqlite_url, data_dir=tmp_path / "data", models_dir=tmp_path / "models")
    load_shipped_catalog(settings)
    return settings


def _submit(settings: Settings, *, max_cost_usd: float, timeout_s: float = 600) -> int:
    body = {
        "provider": "ec2",
        "instance_type": "g4dn.xlarge",
        "node_counts": [2],
        "sizes": [4, 1024],
        "repeats": 2,
        "ec2": {**EC2, "max_cost_usd": max_cost_usd, "timeout_s": timeout_s},
    }
    with transaction(settings.resolved_database_url) as session:
        job, _ = service.submit_probe_job(session=session, data=body)
        return job.id


def _worst_case_usd(settings: Settings) -> float:
    """What one attempt may cost: price × 2 instances × timeout (the cap the service checks at submit)."""
    with transaction(settings.resolved_database_url) as session:
        offers = get_offers(
            session=session,
            provider="aws",
            region=REGION,
            names=["g4dn.xlarge"],
            market=MarketChoice.ON_DEMAND,
        )
    assert offers
    return offers[0].price_usd_per_hr * 2 * 600 / 3600


def _instances(job_id: int) -> dict[str, str]:
    client = boto3.client("ec2", region_name=REGION)
    found: dict[str, str] = {}
    pages = client.describe_instances(Filters=[{"Name": f"tag:{TAG_JOB}", "Values": [str(job_id)]}])
    for reservation in pages["Reservations"]:
        for instance in reservation["Instances"]:
            found[instance["InstanceId"]] = instance["State"]["Name"]
    return found


def _live(job_id: int) -> list[str]:
    return [i for i, state in _instances(job_id).items() if state not in ("terminated", "shutting-down")]


def _job(settings: Settings, job_id: int) -> Job:
    with session_factory(settings.resolved_database_url)() as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job


def _start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SRIFT_DATABASE_URL": settings.resolved_database_url,
        "SRIFT_DATA_DIR": str(settings.data_dir),
    }
    args = ["worker", "--poll-s", "0.2", "--heartbeat-s", "0.3"]
    return subprocess.Popen(
        [sys.executable, "-c", "from srift.cli import main; main()", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _kill_once_launched(settings: Settings, job_id: int, *, count: int) -> None:
    worker = _start_worker(settings)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(_live(job_id)) < count:
            assert worker.poll() is None, "the worker exited before launching"
            time.sleep(0.1)
        assert len(_live(job_id)) == count, _instances(job_id)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL


def _recovering_worker(settings: Settings, *, max_attempts: int) -> Worker:
    config = WorkerConfig(stale_after_s=1.0, max_attempts=max_attempts, ec2_poll_s=0.05, heartbeat_s=0.2)
    return Worker(settings, config, ec2_client=lambda region: boto3.client("ec2", region_name=region))


def _samples(settings: Settings) -> int:
    with session_factory(settings.resolved_database_url)() as s:
        return int(s.scalar(select(func.count()).select_from(ProbeSample)) or 0)


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_sigkilled_worker_leaves_no_instance_running_after_recovery(cloud_settings: Settings) -> None:
    job_id = _submit(cloud_settings, max_cost_usd=20.0)
    _kill_once_launched(cloud_settings, job_id, count=2)

    # the dead worker ran no cleanup: its instances are still up, the job still says running
    assert len(_live(job_id)) == 2
    assert _job(cloud_settings, job_id).state == "running"

    time.sleep(1.5)
    recovered = _recovering_worker(cloud_settings, max_attempts=1).recover()
    assert [(r.job_id, r.state.value) for r in recovered] == [(job_id, "failed")]
    assert _live(job_id) == []
    assert set(_instances(job_id).values()) == {"terminated"}
    assert _samples(cloud_settings) == 0


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_cost_cap_bounds_the_launches_of_all_attempts(cloud_settings: Settings) -> None:
    """Cap room for one attempt's worst case but not two: after the first attempt dies, no relaunch."""
    worst = _worst_case_usd(cloud_settings)
    job_id = _submit(cloud_settings, max_cost_usd=worst * 1.05)
    _kill_once_launched(cloud_settings, job_id, count=2)
    first = set(_instances(job_id))

    time.sleep(1.5)
    worker = _recovering_worker(cloud_settings, max_attempts=3)
    worker.recover()
    assert _live(job_id) == [] and _job(cloud_settings, job_id).state == "queued"

    outcomes: list[Outcome | None] = []
    attempt = threading.Thread(target=lambda: outcomes.append(worker.run_once()), daemon=True)
    attempt.start()
    attempt.join(timeout=30)
    relaunched = set(_instances(job_id)) - first
    if attempt.is_alive():  # it launched and now waits for results: make the instances report failure
        with transaction(cloud_settings.resolved_database_url) as session:
            post_probe_results(session=session, job_id=job_id, samples=[], final=True, error="stop")
        attempt.join(timeout=60)
    assert not relaunched, "a second attempt launched beyond the job's cost cap"
    assert outcomes and outcomes[0] is not None and outcomes[0].state.value == "failed"
    assert "max_cost_usd" in (outcomes[0].error or "")
    assert _live(job_id) == []


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_cost_cap_with_room_for_retries_allows_the_next_attempt(cloud_settings: Settings) -> None:
    worst = _worst_case_usd(cloud_settings)
    job_id = _submit(cloud_settings, max_cost_usd=worst * 2.5)
    _kill_once_launched(cloud_settings, job_id, count=2)
    first = set(_instances(job_id))
    time.sleep(1.5)
    worker = _recovering_worker(cloud_settings, max_attempts=3)
    worker.recover()

    outcomes: list[Outcome | None] = []
    attempt = threading.Thread(target=lambda: outcomes.append(worker.run_once()), daemon=True)
    attempt.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(set(_live(job_id)) - first) < 2:
        time.sleep(0.1)
    assert len(set(_live(job_id)) - first) == 2, "the retry within the cap did not launch"
    with transaction(cloud_settings.resolved_database_url) as session:
        post_probe_results(session=session, job_id=job_id, samples=[], final=True, error="stop")
    attempt.join(timeout=60)
    assert outcomes and outcomes[0] is not None and outcomes[0].state.value == "failed"
    assert _live(job_id) == []
    assert _job(cloud_settings, job_id).log.count("ec2: reserved") == 2
