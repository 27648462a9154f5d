"""A worker SIGKILLed mid-job: the job is resumed (requeued) or failed on recovery, and none of the dead
attempt's partial samples reach the samples table, so no bandwidth model is ever trained on them.

The scenario is an EC2 probe job on the moto server: a real `srift worker` launches the fleet, the
instances stage a partial batch of samples (`final: false`) with their job token, and the worker is
SIGKILLed. tests/jobs/test_jobs_worker.py covers the local provider (its processes killed, nothing stored).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import ec2kit as kit
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from srift.api.app import create_app
from srift.db.session import session_factory
from srift.db.tables import ProbeSample
from srift.db.tokens import Scope, create_token
from srift.jobs.worker import Outcome
from srift.settings import Settings

# Runs or recovers job processes: one worker, with the root tests (tests/conftest.py, GROUP_OF_MARKER).
pytestmark = pytest.mark.xdist_group("serial")


def _samples(tag: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "run_id": tag,
            "provider": "aws",
            "region": kit.REGION,
            "instance_type": "g4dn.xlarge",
            "backend": "gloo",
            "buffer_bytes": 1024,
            "world_size": 2,
            "nodes": 2,
            "ranks_per_node": 1,
            "time_s": 0.002 + i * 1e-4,
            "repeat": i,
        }
        for i in range(count)
    ]


def _stored_runs(settings: Settings) -> dict[str, int]:
    with session_factory(settings.resolved_database_url)() as s:
        rows = s.scalars(select(ProbeSample)).all()
        runs: dict[str, int] = {}
        for row in rows:
            runs[row.zone] = runs.get(row.zone, 0) + 1
        return runs


def _tagged(tag: str, count: int) -> list[dict[str, Any]]:
    return [{**sample, "zone": tag} for sample in _samples(tag, count)]


def _master_token(job_id: int, exclude: set[str]) -> str:
    fresh = sorted(set(kit.live(job_id)) - exclude)
    assert fresh, kit.instances(job_id)
    return kit.job_token(fresh[0])


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_partial_samples_of_a_killed_attempt_never_reach_the_samples_table(cloud_settings: Settings) -> None:
    job_id = kit.submit(cloud_settings, max_cost_usd=20.0)
    api = TestClient(create_app(cloud_settings), raise_server_exceptions=False)

    worker = kit.start_worker(cloud_settings)
    try:
        kit.wait_for_live(job_id, count=2, worker=worker)
        first = set(kit.instances(job_id))
        token1 = _master_token(job_id, exclude=set())
        staged = api.post(
            "/v1/probe-results",
            json={"job_id": job_id, "samples": _tagged("attempt-1", 5), "final": False},
            headers={"Authorization": f"Bearer {token1}"},
        )
        assert staged.status_code == 200 and staged.json()["staged"] == 5, staged.text
    finally:
        kit.sigkill(worker)

    recovering = kit.recovering_worker(cloud_settings, max_attempts=2)
    assert [r.state.value for r in recovering.recover()] == ["queued"]
    assert kit.live(job_id) == [] and _stored_runs(cloud_settings) == {}

    outcomes: list[Outcome | None] = []
    attempt = threading.Thread(target=lambda: outcomes.append(recovering.run_once()), daemon=True)
    attempt.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(set(kit.live(job_id)) - first) < 2:
        time.sleep(0.1)
    token2 = _master_token(job_id, exclude=first)
    assert token2 != token1

    late = api.post(
        "/v1/probe-results",
        json={"job_id": job_id, "samples": _tagged("attempt-1-late", 3), "final": True},
        headers={"Authorization": f"Bearer {token1}"},
    )
    assert late.status_code == 401, late.text
    final = api.post(
        "/v1/probe-results",
        json={"job_id": job_id, "samples": _tagged("attempt-2", 4), "final": True},
        headers={"Authorization": f"Bearer {token2}"},
    )
    assert final.status_code == 200, final.text
    attempt.join(timeout=60)
    assert outcomes and outcomes[0] is not None and outcomes[0].state.value == "succeeded"

    assert _stored_runs(cloud_settings) == {"attempt-2": 4}
    assert kit.live(job_id) == []
    shown = api.get(f"/v1/probe-jobs/{job_id}").text
    row = kit.job(cloud_settings, job_id)
    for token in (token1, token2):
        assert token not in shown and token not in row.log and token not in str(row.result)


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_a_killed_job_out_of_attempts_fails_and_refuses_late_results(cloud_settings: Settings) -> None:
    job_id = kit.submit(cloud_settings, max_cost_usd=20.0)
    api = TestClient(create_app(cloud_settings), raise_server_exceptions=False)
    worker = kit.start_worker(cloud_settings)
    try:
        kit.wait_for_live(job_id, count=2, worker=worker)
        token = _master_token(job_id, exclude=set())
        auth = {"Authorization": f"Bearer {token}"}
        staged = api.post(
            "/v1/probe-results",
            json={"job_id": job_id, "samples": _tagged("partial", 5), "final": False},
            headers=auth,
        )
        assert staged.status_code == 200, staged.text
    finally:
        kit.sigkill(worker)

    assert [r.state.value for r in kit.recovering_worker(cloud_settings, max_attempts=1).recover()] == [
        "failed"
    ]
    late = api.post(
        "/v1/probe-results",
        json={"job_id": job_id, "samples": _tagged("late", 2), "final": True},
        headers=auth,
    )
    assert late.status_code == 403 and "failed" in late.json()["detail"]
    assert _stored_runs(cloud_settings) == {}
    assert "staged_samples" not in kit.job(cloud_settings, job_id).result
    with session_factory(cloud_settings.resolved_database_url)() as s:
        _, plain = create_token(session=s, name="trainer", scope=Scope.WRITE)
        s.commit()
    trained = api.post(
        "/v1/bandwidth-models", json={"providers": ["aws"]}, headers={"Authorization": f"Bearer {plain}"}
    )
    assert trained.status_code == 409 and "no stored probe samples" in trained.json()["detail"]
