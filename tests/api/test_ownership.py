"""Owned data: a token's profiles answer its own plans, never another token's; reference estimates stay
everyone's; plans and runs are read by the token that made them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory
from srift.db.tokens import Scope, create_token
from srift.refmodels.shipped import load_reference_profiles
from srift.settings import Settings


def _headers(db_url: str, name: str) -> dict[str, str]:
    with session_factory(db_url)() as s:
        _, plain = create_token(session=s, name=name, scope=Scope.WRITE)
        s.commit()
    return {"Authorization": f"Bearer {plain}"}


PLAN = {
    "model": "bert-base",
    "precision": "fp16",
    "global_batch": 128,
    "iterations": 2000,
    "availability": {"g4dn.xlarge": 8},
    "market": "on_demand",
    "mode": "exhaustive",
    "solve_budget_s": 1.0,
}


def _upload(client: TestClient, headers: dict[str, str], **query: Any) -> int:
    """A measured fp16 profile named like the reference model, ten times slower than its estimate."""
    slow = {
        "model": "bert-base",
        "accelerator": "T4",
        "precision": "fp16",
        "max_batch": 32,
        "forward": {"batches": [1, 16, 32], "times_s": [0.05, 0.4, 0.8]},
        "backward": {"batches": [1, 16, 32], "times_s": [0.1, 0.8, 1.6]},
        "layers": [
            {"name": f"layer{i}", "grad_bytes": 40_000_000, "ready_frac": i / 10} for i in range(1, 11)
        ],
        "straggler_cv": 0.05,
    }
    r = client.post("/v1/profiles", json=slow, headers=headers, params=query)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _answer(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: plan[k] for k in ("choices", "predicted", "sources")}


@pytest.fixture
def owners(settings: Settings, db_url: str) -> tuple[dict[str, str], dict[str, str]]:
    load_shipped_catalog(settings)
    assert load_reference_profiles(settings) > 0
    return _headers(db_url, "alice"), _headers(db_url, "bob")


def test_an_upload_named_like_a_reference_model_changes_only_its_owners_plans(
    client: TestClient, owners: tuple[dict[str, str], dict[str, str]]
) -> None:
    alice, bob = owners
    before = client.post("/v1/plans", json=PLAN, headers=bob)
    assert before.status_code == 201, before.text
    profiles = [s for s in before.json()["sources"] if s.startswith("profile:")]
    assert profiles and all("(estimate:" in s for s in profiles)
    mine = _upload(client, alice)
    after = client.post("/v1/plans", json=PLAN, headers=bob)
    assert after.status_code == 201, after.text
    assert _answer(after.json()) == _answer(before.json())
    own = client.post("/v1/plans", json=PLAN, headers=alice)
    assert own.status_code == 201, own.text
    assert f"profile:{mine} bert-base@T4" in own.json()["sources"]
    assert own.json()["predicted"]["total_time_s"] > 1.5 * before.json()["predicted"]["total_time_s"]
    # Nobody else reads it, by id or in a listing; anonymous plans are everyone's too.
    assert client.get(f"/v1/profiles/{mine}", headers=bob).status_code == 404
    assert client.get(f"/v1/profiles/{mine}").status_code == 404
    assert client.get(f"/v1/profiles/{mine}", headers=alice).status_code == 200
    listed = client.get("/v1/profiles", params={"model": "bert-base", "limit": 1000}, headers=bob).json()
    assert mine not in {p["id"] for g in listed["models"] for p in g["profiles"]}
    by_id = {**PLAN, "model": None, "profile_ids": [mine]}
    refused = client.post("/v1/plans", json=by_id, headers=bob)
    assert refused.status_code == 404 and refused.json()["field"] == "profile_ids[0]"
    # Plans and the runs of them are their token's.
    plan_id = own.json()["id"]
    assert client.get(f"/v1/plans/{plan_id}", headers=bob).status_code == 404
    assert client.get(f"/v1/plans/{plan_id}", headers=alice).status_code == 200
    assert client.post("/v1/jobs", json={"plan_id": plan_id}, headers=bob).status_code == 404
    run = client.post("/v1/jobs", json={"plan_id": plan_id}, headers=alice)
    assert run.status_code == 201, run.text
    assert client.get(f"/v1/jobs/{run.json()['id']}", headers=bob).status_code == 404
    assert client.get(f"/v1/jobs/{run.json()['id']}", headers=alice).status_code == 200
    listed_runs = {r["id"] for r in client.get("/v1/jobs", headers=bob).json()["runs"]}
    assert run.json()["id"] not in listed_runs
    assert run.json()["id"] in {r["id"] for r in client.get("/v1/jobs", headers=alice).json()["runs"]}


def test_launch_files_and_iteration_times_are_their_owners_too(
    client: TestClient, owners: tuple[dict[str, str], dict[str, str]]
) -> None:
    """The launch files spell out a plan and the iteration times belong to a run: like GET /v1/plans/{id}
    and GET /v1/jobs/{id}, another token (or none) gets 404, and may not post steps into the run."""
    alice, bob = owners
    plan = client.post("/v1/plans", json=PLAN, headers=alice)
    assert plan.status_code == 201, plan.text
    plan_id = plan.json()["id"]
    for who in (bob, {}):
        refused = client.get(f"/v1/plans/{plan_id}/launch", headers=who)
        assert refused.status_code == 404 and refused.json()["field"] == "plan_id", refused.text
    assert client.get(f"/v1/plans/{plan_id}/launch", headers=alice).status_code == 200
    run = client.post("/v1/jobs", json={"plan_id": plan_id}, headers=alice).json()
    steps = {"steps": [{"step": 0, "iteration_s": 0.5}]}
    posted = client.post(f"/v1/jobs/{run['id']}/iterations", json=steps, headers=bob)
    assert posted.status_code == 404 and posted.json()["field"] == "job_id", posted.text
    for who in (bob, {}):
        read = client.get(f"/v1/jobs/{run['id']}/iterations", headers=who)
        assert read.status_code == 404 and read.json()["field"] == "job_id", read.text
    own = client.get(f"/v1/jobs/{run['id']}/iterations", headers=alice)
    assert own.status_code == 200 and all(not s["steps"] for s in own.json()["series"]), own.text
    # The run's own token and its owner's write token still report.
    mine = {"Authorization": f"Bearer {run['token']}"}
    assert client.post(f"/v1/jobs/{run['id']}/iterations", json=steps, headers=mine).status_code == 200
    again = {"steps": [{"step": 1, "iteration_s": 0.5}]}
    assert client.post(f"/v1/jobs/{run['id']}/iterations", json=again, headers=alice).status_code == 200


def test_a_shared_profile_is_named_by_id_never_taken_by_model(
    client: TestClient, owners: tuple[dict[str, str], dict[str, str]]
) -> None:
    alice, bob = owners
    before = client.post("/v1/plans", json=PLAN, headers=bob).json()
    shared = _upload(client, alice, shared="true")
    assert client.get(f"/v1/profiles/{shared}", headers=bob).status_code == 200
    after = client.post("/v1/plans", json=PLAN, headers=bob)
    assert _answer(after.json()) == _answer(before)
    by_id = client.post("/v1/plans", json={**PLAN, "model": None, "profile_ids": [shared]}, headers=bob)
    assert by_id.status_code == 201, by_id.text
    assert by_id.json()["sources"][0].startswith(f"profile:{shared} ")
    # Only its owner deletes it; then it is gone for everyone.
    assert client.delete(f"/v1/profiles/{shared}", headers=bob).status_code == 404
    assert client.delete(f"/v1/profiles/{shared}", headers=alice).status_code == 204
    assert client.get(f"/v1/profiles/{shared}", headers=alice).status_code == 404


def test_an_unknown_token_is_refused_even_where_reads_are_open(client: TestClient) -> None:
    r = client.get("/v1/profiles", headers={"Authorization": "Bearer srift_not-a-token"})
    assert r.status_code == 401 and "unknown" in r.json()["detail"]
