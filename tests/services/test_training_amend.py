"""A training run in `needs_input` (no plan fits after an interruption) resumes once its limits are raised:
POST /v1/jobs/{id}/amendments re-plans the rest under the new limits; an amendment no plan fits is refused
(409) and changes nothing, while an interruption no plan fits is still recorded."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.documents import read_document
from srift.domain.records import PlanRecord
from srift.domain.requests import Amendment, InterruptionReport, PlanQuery
from srift.domain.states import TrainingState
from srift.optimize.solver import PlanInfeasible
from srift.services import training_jobs as service
from srift.services.plans import create_plan
from srift.settings import Settings

from .test_plans import _seed, _srift_54


def _stuck_run(client: TestClient, db_url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """A run of Srift §5.4's plan interrupted at 420 s of its 500 s: re-planning cannot meet the deadline."""
    ids = _seed(db_url, "resnet50")
    first = client.post("/v1/plans", json=_srift_54(ids), headers=headers).json()
    job_id = client.post("/v1/jobs", json={"plan_id": first["id"]}, headers=headers).json()["id"]
    lost = first["choices"][0]["instance_type"]
    r = client.post(
        f"/v1/jobs/{job_id}/interruptions",
        json={"instance_type": lost, "count": 1, "iterations_done": 200, "elapsed_s": 420, "spent_usd": 1.0},
        headers=headers,
    )
    assert r.status_code == 409 and r.json()["field"] == "time_limit_s", r.text
    assert client.get(f"/v1/jobs/{job_id}", headers=headers).json()["state"] == "needs_input"
    return job_id, first


def test_a_needs_input_run_resumes_after_its_limit_is_raised(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    job_id, first = _stuck_run(client, db_url, write_headers)
    lost = first["choices"][0]["instance_type"]
    short = client.post(f"/v1/jobs/{job_id}/amendments", json={"time_limit_s": 560}, headers=write_headers)
    assert short.status_code == 409 and short.json()["error"] == "infeasible", short.text
    assert "past" in short.json()["detail"]
    assert short.json()["relaxations"]["time_short_s"] == pytest.approx(420 + 150 - 560)
    waiting = client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()
    assert waiting["state"] == "needs_input" and waiting["time_limit_s"] == 500
    assert [e["kind"] for e in waiting["events"]] == ["started", "interruption"]
    r = client.post(f"/v1/jobs/{job_id}/amendments", json={"time_limit_s": 3000}, headers=write_headers)
    assert r.status_code == 200, r.text
    plan, run = r.json()["plan"], r.json()["job"]
    assert run["state"] == "running" and run["current_plan_id"] == plan["id"] != first["id"]
    assert run["time_limit_s"] == 3000 and run["excluded_types"] == [lost]
    assert plan["iterations"] == 200
    assert plan["limits"]["time_limit_s"] == pytest.approx(3000 - 420 - 150)
    assert plan["predicted"]["total_time_s"] <= 3000 - 420 - 150
    assert lost not in [c["instance_type"] for c in plan["choices"]] or all(
        c["count"] <= first["choices"][0]["count"] - 1 for c in plan["choices"] if c["instance_type"] == lost
    )
    assert [e["kind"] for e in run["events"]] == ["started", "interruption", "amended"]
    assert [p["id"] for p in run["plans"]] == [first["id"], plan["id"]]
    progress = client.post(
        f"/v1/jobs/{job_id}/progress",
        json={"iterations_done": 300, "elapsed_s": 900, "spent_usd": 2.0},
        headers=write_headers,
    )
    assert progress.status_code == 200 and progress.json()["state"] == "running"


def test_amendment_rules(client: TestClient, db_url: str, write_headers: dict[str, str]) -> None:
    job_id, _ = _stuck_run(client, db_url, write_headers)
    empty = client.post(f"/v1/jobs/{job_id}/amendments", json={}, headers=write_headers)
    assert empty.status_code == 422 and "nothing to amend" in empty.json()["detail"]
    bad = client.post(f"/v1/jobs/{job_id}/amendments", json={"time_limit_s": -1}, headers=write_headers)
    assert bad.status_code == 422 and bad.json()["field"] == "time_limit_s"
    assert client.post(f"/v1/jobs/{job_id}/amendments", json={"time_limit_s": 900}).status_code == 401
    assert (
        client.post("/v1/jobs/777/amendments", json={"time_limit_s": 900}, headers=write_headers).status_code
        == 404
    )
    fast = client.post(
        f"/v1/jobs/{job_id}/amendments",
        json={"objective": "min_time", "time_limit_s": 5000, "budget_usd": 50},
        headers=write_headers,
    )
    assert fast.status_code == 200, fast.text
    assert fast.json()["plan"]["objective"] == "min_time"
    assert fast.json()["job"]["objective"] == "min_time"
    assert client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()["objective"] == "min_time"
    assert fast.json()["job"]["budget_usd"] == 50


def _running_run(session: Session, settings: Settings, db_url: str) -> tuple[int, PlanRecord]:
    """A started run of Srift §5.4's plan (400 iterations within 500 s): its id and its plan."""
    plan = create_plan(
        session=session,
        settings=settings,
        query=read_document(PlanQuery, _srift_54(_seed(db_url, "resnet50"))),
    )
    run = service.start_job(session=session, plan_id=plan.id)
    session.commit()
    return run.id, plan


@pytest.mark.parametrize(
    ("amendment", "field"),
    [
        # 150 s of launch overhead is already past a 100 s deadline
        (Amendment(time_limit_s=100), "time_limit_s"),
        # the search finds no fleet for 400 iterations within a cent
        (Amendment(budget_usd=0.01, launch_overhead_s=0.0), "budget_usd"),
    ],
)
def test_an_amendment_no_plan_fits_is_refused_and_writes_nothing(
    session: Session, settings: Settings, db_url: str, amendment: Amendment, field: str
) -> None:
    job_id, plan = _running_run(session, settings, db_url)
    with pytest.raises(PlanInfeasible) as refused:
        service.amend(session=session, settings=settings, job_id=job_id, amendment=amendment)
    assert refused.value.field == field and refused.value.relaxations
    session.rollback()  # what the route and the CLI do with an error
    run = service.get_run(session=session, job_id=job_id)
    assert run.state is TrainingState.RUNNING and run.current_plan_id == plan.id
    assert (run.time_limit_s, run.budget_usd) == (500, None)
    assert [e.kind for e in run.events] == ["started"]


def test_an_interruption_no_plan_fits_is_still_recorded(
    session: Session, settings: Settings, db_url: str
) -> None:
    job_id, plan = _running_run(session, settings, db_url)
    lost = plan.result["choices"][0]["instance_type"]
    report = InterruptionReport(instance_type=lost, count=1, iterations_done=200, elapsed_s=420)
    with pytest.raises(PlanInfeasible):
        service.record_interruption(session=session, settings=settings, job_id=job_id, interruption=report)
    session.rollback()
    run = service.get_run(session=session, job_id=job_id)
    assert run.state is TrainingState.NEEDS_INPUT and run.iterations_done == 200
    assert [e.kind for e in run.events] == ["started", "interruption"]
    assert run.events[-1].payload["error"]["error"] == "infeasible"


def test_a_replans_hint_names_the_runs_own_limit_and_following_it_replans(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """The re-plan searches the time left (the limit less 420 s elapsed and 150 s to launch), so the planner's
    hint named a figure for the rest of the run ("raise time_limit_s to at least 300 s"), while an
    amendment's time_limit_s is the whole run's: followed as written, the amendment was refused again as
    already past. The hint now counts from the run's start, and following it re-plans."""
    import re

    job_id, _ = _stuck_run(client, db_url, write_headers)
    short = client.post(f"/v1/jobs/{job_id}/amendments", json={"time_limit_s": 600}, headers=write_headers)
    assert short.status_code == 409 and short.json()["field"] == "time_limit_s", short.text
    found = re.search(r"time_limit_s to at least (\d+) s", short.json()["hint"])
    assert found is not None, short.json()["hint"]
    limit_s = int(found.group(1))
    assert limit_s > 420 + 150
    followed = client.post(
        f"/v1/jobs/{job_id}/amendments", json={"time_limit_s": limit_s}, headers=write_headers
    )
    assert followed.status_code == 200, followed.text
    assert followed.json()["job"]["state"] == "running"
