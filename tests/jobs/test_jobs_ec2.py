"""EC2 probe jobs against moto: launch (type, count, user-data), results by token, and termination after
success, failure and timeout; capacity errors retried with backoff, then a clear failure."""

from __future__ import annotations

import base64
import gzip
import re
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from fastapi.testclient import TestClient
from moto import mock_aws

from srift.api.app import create_app
from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory, transaction
from srift.db.tables import Job, ProbeSample, utcnow
from srift.jobs import service
from srift.jobs.ec2 import TAG_JOB, probe_user_data
from srift.jobs.runners import probe_script
from srift.jobs.spec import Ec2Options, JobProvider, ProbeJobSpec
from srift.jobs.worker import Outcome, Worker, WorkerConfig
from srift.settings import Settings

# Runs or recovers job processes: one worker, with the root tests (tests/conftest.py, GROUP_OF_MARKER).
pytestmark = pytest.mark.xdist_group("serial")


REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield


@pytest.fixture
def ec2_settings(worker_settings: Settings) -> Settings:
    load_shipped_catalog(worker_settings)
    return worker_settings


def _submit(settings: Settings, ec2_options: dict[str, Any], **ec2: Any) -> int:
    body = {
        "provider": "ec2",
        "instance_type": "g4dn.xlarge",
        "node_counts": [2, 3],
        "sizes": [4, 1024],
        "repeats": 2,
        "ec2": {**ec2_options, "max_cost_usd": 20.0, "timeout_s": 600, **ec2},
    }
    with transaction(settings.resolved_database_url) as session:
        job, _ = service.submit_probe_job(session=session, data=body)
        return job.id


def _instances(job_id: int) -> list[dict[str, Any]]:
    client = boto3.client("ec2", region_name=REGION)
    found = []
    for r in client.describe_instances(Filters=[{"Name": f"tag:{TAG_JOB}", "Values": [str(job_id)]}])[
        "Reservations"
    ]:
        found.extend(r["Instances"])
    return found


def _user_data(instance_id: str) -> str:
    client = boto3.client("ec2", region_name=REGION)
    value = client.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"][
        "Value"
    ]
    return base64.b64decode(value).decode()


def _wait_for(job_id: int, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = [i for i in _instances(job_id) if i["State"]["Name"] != "terminated"]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{count} instances never appeared: {_instances(job_id)}")


class _Run:
    """The worker's run_once in a thread (it waits for results like a real worker)."""

    def __init__(self, worker: Worker) -> None:
        self.outcome: Outcome | None = None
        self.thread = threading.Thread(target=self._go, args=(worker,))
        self.thread.start()

    def _go(self, worker: Worker) -> None:
        self.outcome = worker.run_once()

    def join(self) -> Outcome:
        self.thread.join(timeout=60)
        assert self.outcome is not None
        return self.outcome


def _worker(settings: Settings, client: Any = None, *, heartbeat_s: float = 0.2) -> Worker:
    config = WorkerConfig(ec2_poll_s=0.05, heartbeat_s=heartbeat_s, ec2_retry_delay_s=0.01)
    if client is None:
        return Worker(settings, config, ec2_client=lambda region: boto3.client("ec2", region_name=region))
    return Worker(settings, config, ec2_client=lambda _region: client, sleep=lambda _s: None)


def _job(settings: Settings, job_id: int) -> Job:
    s = session_factory(settings.resolved_database_url)()
    try:
        job = s.get(Job, job_id)
        assert job is not None
        return job
    finally:
        s.close()


def _all_terminated(job_id: int) -> bool:
    states = {i["State"]["Name"] for i in _instances(job_id)}
    return states == {"terminated"}


def _sample(repeat: int, world: int) -> dict[str, Any]:
    return {
        "run_id": f"ec2-run-{world}",
        "provider": "aws",
        "region": REGION,
        "instance_type": "g4dn.xlarge",
        "backend": "gloo",
        "buffer_bytes": 1024,
        "world_size": world,
        "nodes": world,
        "ranks_per_node": 1,
        "time_s": 0.002 + repeat * 1e-4,
        "repeat": repeat,
    }


@pytest.mark.usefixtures("aws")
def test_success_launches_the_fleet_ingests_results_and_terminates(
    ec2_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    job_id = _submit(ec2_settings, ec2_options)
    run = _Run(_worker(ec2_settings))
    instances = _wait_for(job_id, 3)
    assert {i["InstanceType"] for i in instances} == {"g4dn.xlarge"}
    roles = sorted(next(t["Value"] for t in i["Tags"] if t["Key"] == "srift-role") for i in instances)
    assert roles == ["master", "workers", "workers"]
    client = boto3.client("ec2", region_name=REGION)
    for i in instances:
        behaviour = client.describe_instance_attribute(
            InstanceId=i["InstanceId"], Attribute="instanceInitiatedShutdownBehavior"
        )["InstanceInitiatedShutdownBehavior"]["Value"]
        assert behaviour == "terminate"
    master = next(i for i in instances if any(t["Value"] == "master" for t in i["Tags"]))
    worker_node = next(i for i in instances if i is not master)
    script = _user_data(master["InstanceId"])
    assert script.startswith("#!/bin/bash") and "shutdown -h +" in script
    assert "python3 -m pip install --quiet srift" in script
    assert "http://10.0.0.5:8000" in script and "/v1/probe-results" in script
    embedded = re.search(r"echo (\S+) \| base64 -d \| gunzip > /opt/srift/allreduce.py", script)
    assert embedded is not None
    assert gzip.decompress(base64.b64decode(embedded.group(1))).decode() == probe_script().read_text()
    assert "--nnodes 2" in script and "--nnodes 3" in script and "--instance-type g4dn.xlarge" in script
    assert "MASTER=$(imds local-ipv4)" in script
    assert f"MASTER={master['PrivateIpAddress']}" in _user_data(worker_node["InstanceId"])
    token = re.search(r"echo (srift_job_\S+) > /opt/srift/token", script)
    assert token is not None
    with TestClient(create_app(ec2_settings)) as api:
        posted = api.post(
            "/v1/probe-results",
            json={"job_id": job_id, "samples": [_sample(r, w) for r in range(2) for w in (2, 3)]},
            headers={"Authorization": f"Bearer {token.group(1)}"},
        )
    assert posted.status_code == 200, posted.text
    assert posted.json()["stored"] == 4
    outcome = run.join()
    assert outcome.state == "succeeded"
    assert _all_terminated(job_id)
    job = _job(ec2_settings, job_id)
    assert job.state == "succeeded" and sorted(job.result["instances"]) == sorted(
        i["InstanceId"] for i in instances
    )
    s = session_factory(ec2_settings.resolved_database_url)()
    try:
        assert s.query(ProbeSample).filter(ProbeSample.job_id == job_id).count() == 4
    finally:
        s.close()


@pytest.mark.usefixtures("aws")
def test_failure_reported_by_the_instances_terminates_them(
    ec2_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    job_id = _submit(ec2_settings, ec2_options)
    run = _Run(_worker(ec2_settings))
    master = next(i for i in _wait_for(job_id, 3) if any(t["Value"] == "master" for t in i["Tags"]))
    token = re.search(r"echo (srift_job_\S+) > /opt/srift/token", _user_data(master["InstanceId"]))
    assert token is not None
    with TestClient(create_app(ec2_settings)) as api:
        r = api.post(
            "/v1/probe-results",
            json={"job_id": job_id, "error": "probe with 3 nodes failed"},
            headers={"Authorization": f"Bearer {token.group(1)}"},
        )
        assert r.status_code == 200
    outcome = run.join()
    assert outcome.state == "failed"
    assert _all_terminated(job_id)
    job = _job(ec2_settings, job_id)
    assert job.state == "failed" and "probe with 3 nodes failed" in (job.error or "")


@pytest.mark.usefixtures("aws")
def test_timeout_terminates_the_instances_and_fails_the_job(
    ec2_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    job_id = _submit(ec2_settings, ec2_options, timeout_s=0.5)
    outcome = _worker(ec2_settings).run_once()
    assert outcome is not None and outcome.state == "failed"
    assert len(_instances(job_id)) == 3 and _all_terminated(job_id)
    assert "no results from the instances within 0.5 s" in (_job(ec2_settings, job_id).error or "")


class _Flaky:
    """A moto-backed EC2 client whose run_instances fails with `code` for some calls."""

    def __init__(self, code: str, *, fail: Any) -> None:
        self.real = boto3.client("ec2", region_name=REGION)
        self.code = code
        self.fail = fail
        self.calls = 0

    def run_instances(self, **params: Any) -> Any:
        self.calls += 1
        if self.fail(self.calls, params):
            raise ClientError({"Error": {"Code": self.code, "Message": "simulated"}}, "RunInstances")
        return self.real.run_instances(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.usefixtures("aws")
def test_capacity_errors_are_retried_then_fail_clearly_and_terminate_what_started(
    ec2_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    job_id = _submit(ec2_settings, ec2_options)
    flaky = _Flaky("InsufficientInstanceCapacity", fail=lambda _n, p: "workers" in p["ClientToken"])
    outcome = _worker(ec2_settings, flaky).run_once()
    assert outcome is not None and outcome.state == "failed"
    assert flaky.calls == 1 + 6
    job = _job(ec2_settings, job_id)
    assert "no capacity for 2 × g4dn.xlarge" in (job.error or "") and "after 6 attempts" in (job.error or "")
    assert len(_instances(job_id)) == 1 and _all_terminated(job_id)


@pytest.mark.usefixtures("aws")
def test_throttling_is_retried_and_the_launch_goes_on(
    ec2_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    job_id = _submit(ec2_settings, ec2_options, timeout_s=0.3)
    flaky = _Flaky("RequestLimitExceeded", fail=lambda n, _p: n <= 2)
    outcome = _worker(ec2_settings, flaky).run_once()
    assert outcome is not None
    assert flaky.calls == 4
    assert len(_instances(job_id)) == 3 and _all_terminated(job_id)
    assert "ec2: RequestLimitExceeded; retrying" in _job(ec2_settings, job_id).log


class _TakenAfterResults:
    """The real EC2 backend; when it has the results, recovery by another worker (its clock a minute on)
    takes the job, as if this worker's heartbeat had lapsed meanwhile."""

    def __init__(self, inner: Any, settings: Settings) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.settings = settings

    def run_probe(self, run: Any, spec: Any, facts: Any) -> Any:
        output = self.inner.run_probe(run, spec, facts)
        later = Worker(
            self.settings, WorkerConfig(stale_after_s=30.0), now=lambda: utcnow() + timedelta(minutes=1)
        )
        assert [r.job_id for r in later.recover()] == [run.job_id]
        return output

    def run_profiles(self, run: Any, spec: Any, facts: Any) -> Any:
        raise AssertionError("probe jobs only")

    def cleanup(self, **kwargs: Any) -> None:
        self.inner.cleanup(**kwargs)


@pytest.mark.usefixtures("aws")
def test_a_worker_that_lost_its_ec2_job_never_reports_it_succeeded(
    ec2_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    job_id = _submit(ec2_settings, ec2_options)
    # A heartbeat that never comes within the test: the lapse is real, not a race between this worker's
    # heartbeat thread and the later worker's recovery (which a 0.2 s beat lost on a loaded host).
    worker = _worker(ec2_settings, heartbeat_s=3600.0)
    worker.backends = {
        **worker.backends,
        JobProvider.EC2: _TakenAfterResults(worker.backends[JobProvider.EC2], ec2_settings),
    }
    run = _Run(worker)
    instances = _wait_for(job_id, 3)
    master = next(i for i in instances if any(t["Value"] == "master" for t in i["Tags"]))
    token = re.search(r"echo (srift_job_\S+) > /opt/srift/token", _user_data(master["InstanceId"]))
    assert token is not None
    with TestClient(create_app(ec2_settings)) as api:
        posted = api.post(
            "/v1/probe-results",
            json={"job_id": job_id, "samples": [_sample(r, w) for r in range(2) for w in (2, 3)]},
            headers={"Authorization": f"Bearer {token.group(1)}"},
        )
    assert posted.status_code == 200, posted.text
    outcome = run.join()
    assert outcome.state == "failed" and "taken from this worker" in (outcome.error or "")
    job = _job(ec2_settings, job_id)
    assert job.state == "succeeded", "recovery, not the lost worker, marked it: the results were posted"
    assert "stopped heartbeating" in job.log and "results received and instances terminated" not in job.log
    assert _all_terminated(job_id)


def test_probe_user_data_times_the_jobs_collective() -> None:
    """An all_gather job's instances timed allreduces (the user-data left out --collective), and their
    samples were then refused as not answering the job."""
    spec = ProbeJobSpec(
        provider=JobProvider.EC2,
        instance_type="g4dn.xlarge",
        node_counts=(2,),
        collective="all_gather",
        ec2=Ec2Options(image_id="ami-0123456789abcdef0", results_url="http://srift.example"),
    )
    script = probe_user_data(job_id=1, attempt=1, spec=spec, token="t", probe_source="", master_ip=None)
    assert "/opt/srift/allreduce.py" in script and "--collective all_gather " in script
