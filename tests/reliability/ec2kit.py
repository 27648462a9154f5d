"""Helpers for tests that run EC2 jobs against the moto server (conftest.py): submit, watch instances,
start and SIGKILL a real `srift worker`, recover with another worker."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta

import boto3
from sqlalchemy import func, select

from srift.catalog.store import get_offers
from srift.db.session import session_factory, transaction
from srift.db.tables import Job, ProbeSample, utcnow
from srift.domain import MarketChoice
from srift.jobs import service
from srift.jobs.ec2 import TAG_JOB
from srift.jobs.worker import Worker, WorkerConfig
from srift.settings import Settings

REGION = "us-east-1"
EC2 = {"image_id": "ami-12c6146b", "results_url": "http://10.0.0.5:8000", "region": REGION}


def submit(settings: Settings, *, max_cost_usd: float, timeout_s: float = 600) -> int:
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


def worst_case_usd(settings: Settings) -> float:
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


def instances(job_id: int) -> dict[str, str]:
    client = boto3.client("ec2", region_name=REGION)
    found: dict[str, str] = {}
    pages = client.describe_instances(Filters=[{"Name": f"tag:{TAG_JOB}", "Values": [str(job_id)]}])
    for reservation in pages["Reservations"]:
        for instance in reservation["Instances"]:
            found[instance["InstanceId"]] = instance["State"]["Name"]
    return found


def live(job_id: int) -> list[str]:
    return [i for i, state in instances(job_id).items() if state not in ("terminated", "shutting-down")]


def job(settings: Settings, job_id: int) -> Job:
    with session_factory(settings.resolved_database_url)() as s:
        row = s.get(Job, job_id)
        assert row is not None
        return row


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
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


def wait_for_live(job_id: int, *, count: int, worker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(live(job_id)) < count:
        assert worker.poll() is None, "the worker exited before launching"
        time.sleep(0.1)
    assert len(live(job_id)) == count, instances(job_id)


def sigkill(worker: subprocess.Popen[bytes]) -> None:
    """SIGKILL: the worker runs none of its cleanup (no finally, no terminate, no requeue)."""
    if worker.poll() is None:
        os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL


def kill_once_launched(settings: Settings, job_id: int, *, count: int) -> None:
    worker = start_worker(settings)
    try:
        wait_for_live(job_id, count=count, worker=worker)
    finally:
        sigkill(worker)


def recovering_worker(settings: Settings, *, max_attempts: int) -> Worker:
    """A worker whose clock runs a minute ahead: the dead worker's last heartbeat is stale to it at once
    (an injected clock instead of sleeping past `stale_after_s`)."""
    config = WorkerConfig(stale_after_s=30.0, max_attempts=max_attempts, ec2_poll_s=0.05, heartbeat_s=0.2)
    return Worker(
        settings,
        config,
        ec2_client=lambda region: boto3.client("ec2", region_name=region),
        now=lambda: utcnow() + timedelta(minutes=1),
    )


def samples(settings: Settings) -> int:
    with session_factory(settings.resolved_database_url)() as s:
        return int(s.scalar(select(func.count()).select_from(ProbeSample)) or 0)


def job_token(instance_id: str) -> str:
    """The job token a launched instance was given (it is in the instance's user data)."""
    client = boto3.client("ec2", region_name=REGION)
    raw = client.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"][
        "Value"
    ]
    found = re.search(r"echo (srift_job_\S+) > /opt/srift/token", base64.b64decode(raw).decode())
    assert found is not None
    return found.group(1)
