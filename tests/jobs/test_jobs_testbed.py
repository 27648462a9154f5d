"""Probe and profile jobs on the testbed, end to end through the worker (needs root; CI is root)."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import select

from srift.db.session import session_factory, transaction
from srift.db.tables import Job, ModelProfileRow, ProbeSample
from srift.jobs import service
from srift.jobs.worker import Worker, WorkerConfig
from srift.settings import Settings
from srift.testbed import system

from .conftest import register_testbed_types

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _must_be_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("testbed job tests need root (CI runs as root); run them with sudo")


def _run(settings: Settings, kind: str, body: dict[str, object]) -> Job:
    url = settings.resolved_database_url
    register_testbed_types(url)
    with transaction(url) as session:
        submit = service.submit_probe_job if kind == "probe" else service.submit_profile_job
        job, _ = submit(session=session, data=body)
        job_id = job.id
    outcome = Worker(settings, WorkerConfig(heartbeat_s=0.5)).run_once()
    assert outcome is not None and outcome.job_id == job_id
    s = session_factory(url)()
    try:
        row = s.get(Job, job_id)
        assert row is not None
        return row
    finally:
        s.close()


def test_probe_job_on_testbed_hosts_stores_its_samples(worker_settings: Settings) -> None:
    job = _run(
        worker_settings,
        "probe",
        {
            "provider": "testbed",
            "instance_type": "tb.large",
            "node_counts": [2],
            "sizes": [4, 65536],
            "repeats": 2,
        },
    )
    assert job.state == "succeeded", job.log
    s = session_factory(worker_settings.resolved_database_url)()
    try:
        samples = list(s.scalars(select(ProbeSample).where(ProbeSample.job_id == job.id)))
    finally:
        s.close()
    assert len(samples) == 4 and {x.buffer_bytes for x in samples} == {4, 65536}
    assert {(x.provider, x.region, x.instance_type, x.world_size) for x in samples} == {
        ("testbed", "local", "tb.large", 2)
    }
    assert f"testbed: j{job.id} removed" in job.log
    assert not [n for n in system.list_netns() if n.startswith(f"srift-j{job.id}-")]


def test_profile_job_profiles_on_a_host_of_the_type(worker_settings: Settings) -> None:
    job = _run(
        worker_settings,
        "profile",
        {
            "provider": "testbed",
            "instance_types": ["tb.large"],
            "model": "srift.profiling.testmodels:sequential",
            "input": "srift.profiling.testmodels:sequential_input",
            "max_batch": 4,
            "repeats": 1,
            "iterations": 2,
        },
    )
    assert job.state == "succeeded", job.log
    s = session_factory(worker_settings.resolved_database_url)()
    try:
        rows = list(
            s.scalars(select(ModelProfileRow).where(ModelProfileRow.id.in_(job.result["profile_ids"])))
        )
    finally:
        s.close()
    assert [r.accelerator for r in rows] == ["tb.large"]
    assert "profile: srift.profiling.testmodels:sequential on tb.large" in job.log
    assert not [n for n in system.list_netns() if n.startswith(f"srift-j{job.id}-")]
