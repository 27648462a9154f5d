"""POST /v1/jobs/{id}/amendments: an amendment that no plan fits is answered 409 and changes nothing."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.refmodels.shipped import load_reference_profiles
from srift.settings import Settings

PLAN = {
    "model": "bert-base",
    "precision": "fp16",
    "global_batch": 128,
    "iterations": 2000,
    "time_limit_s": 36000,
    "availability": {"g4dn.xlarge": 8},
    "market": "on_demand",
    "mode": "exhaustive",
    "solve_budget_s": 1.0,
}


@pytest.fixture(autouse=True)
def _shipped(settings: Settings) -> None:
    """The shipped catalog and reference profiles (bert-base) in the test database."""
    load_shipped_catalog(settings)
    assert load_reference_profiles(settings) > 0


@pytest.mark.parametrize(
    ("amendment", "refused"),
    [
        # 150 s of launch overhead alone is past a 100 s deadline
        ({"time_limit_s": 100}, ("time_limit_s", "time_short_s")),
        # the search finds no fleet for 2000 iterations within a tenth of a cent
        ({"budget_usd": 0.001, "launch_overhead_s": 0}, ("budget_usd", "least_budget_for_deadline_usd")),
    ],
)
def test_a_refused_amendment_leaves_the_run_as_it_was(
    client: TestClient, write_headers: dict[str, str], amendment: dict[str, float], refused: tuple[str, str]
) -> None:
    field, short = refused
    plan = client.post("/v1/plans", json=PLAN, headers=write_headers)
    assert plan.status_code == 201, plan.text
    started = client.post("/v1/jobs", json={"plan_id": plan.json()["id"]}, headers=write_headers)
    assert started.status_code == 201, started.text
    job_id = started.json()["id"]
    before = client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()

    r = client.post(f"/v1/jobs/{job_id}/amendments", json=amendment, headers=write_headers)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "infeasible" and r.json()["field"] == field
    assert r.json()["relaxations"][short] > 0

    after = client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()
    assert after == before
    assert after["state"] == "running" and after["current_plan_id"] == plan.json()["id"]
    assert (after["time_limit_s"], after["budget_usd"]) == (36000, None)
    assert [e["kind"] for e in after["events"]] == ["started"]
