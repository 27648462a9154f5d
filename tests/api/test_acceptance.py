"""The issue's acceptance, on the real routes: an unauthenticated write is a 401, a job's token used for
another job is a 403, an oversized body is a 413."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from srift.settings import Settings


def _probe_job(client: TestClient, headers: dict[str, str]) -> tuple[int, str]:
    body = {"provider": "local", "instance_type": "local", "node_counts": [2], "sizes": [4096]}
    r = client.post("/v1/probe-jobs", json=body, headers=headers)
    assert r.status_code in (200, 201, 202), r.text
    return int(r.json()["id"]), str(r.json()["token"])


def _sample() -> dict[str, Any]:
    return {"provider": "local", "instance_type": "local", "backend": "gloo", "buffer_bytes": 4096}


def test_unauthenticated_writes_are_401(client: TestClient) -> None:
    for path, body in (
        ("/v1/profiles", {"model": "m"}),
        ("/v1/plans", {"global_batch": 8, "iterations": 1}),
        ("/v1/probe-jobs", {"provider": "local"}),
        ("/v1/probe-results", {"samples": []}),
        ("/v1/bandwidth-models", {}),
    ):
        r = client.post(path, json=body)
        assert r.status_code == 401, (path, r.text)
        assert r.json()["error"] == "unauthorized"


def test_a_job_token_used_for_another_job_is_403(client: TestClient, write_headers: dict[str, str]) -> None:
    job_a, token_a = _probe_job(client, write_headers)
    job_b, token_b = _probe_job(client, write_headers)
    sample = {**_sample(), "world_size": 2, "time_s": 0.001}
    r = client.post(
        "/v1/probe-results",
        json={"job_id": job_b, "samples": [sample], "final": True},
        headers={"Authorization": f"Bearer {token_a}"},
    )
    assert r.status_code == 403 and r.json()["field"] == "job_id", r.text
    r = client.post(
        "/v1/probe-results",
        json={"job_id": job_b, "samples": [sample], "final": True},
        headers={"Authorization": f"Bearer {token_b}"},
    )
    assert r.status_code == 200, r.text
    assert job_a != job_b


def test_an_oversized_body_is_413(
    client: TestClient, settings: Settings, write_headers: dict[str, str]
) -> None:
    sample = {**_sample(), "world_size": 2, "time_s": 0.001, "run_id": "x" * 200}
    count = settings.max_body_bytes // 250 + 100
    r = client.post("/v1/probe-results", json={"samples": [sample] * count}, headers=write_headers)
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert "request body size" in r.json()["detail"]
