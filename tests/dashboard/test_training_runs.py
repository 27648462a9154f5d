"""GET /v1/jobs: tracked training runs listed newest first, with interruption and re-plan counts."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.db.tables import PlanRow, TrainingJob, TrainingJobEvent


def _run(session: Session, *, state: str, interruptions: list[dict[str, object]]) -> int:
    plan = PlanRow(request={"iterations": 100}, result={"label": "1×t@1"})
    session.add(plan)
    session.flush()
    job = TrainingJob(
        plan_id=plan.id, current_plan_id=plan.id, state=state, iterations_done=40, excluded_types=[]
    )
    session.add(job)
    session.flush()
    session.add(TrainingJobEvent(job_id=job.id, kind="progress", payload={"iterations_done": 40}))
    for payload in interruptions:
        session.add(TrainingJobEvent(job_id=job.id, kind="interruption", payload=payload))
    session.flush()
    return job.id


def test_runs_are_listed_newest_first_with_their_replans(client: TestClient, session: Session) -> None:
    first = _run(session, state="running", interruptions=[{"plan_id": 7}, {"error": {"detail": "no plan"}}])
    second = _run(session, state="needs_input", interruptions=[])
    session.commit()

    body = client.get("/v1/jobs").json()
    assert body["total"] == 2
    assert [r["id"] for r in body["runs"]] == [second, first]
    by_id = {r["id"]: r for r in body["runs"]}
    assert (by_id[first]["interruptions"], by_id[first]["replans"]) == (2, 1)
    assert (by_id[second]["interruptions"], by_id[second]["replans"]) == (0, 0)
    assert by_id[first]["iterations_done"] == 40

    only = client.get("/v1/jobs", params={"state": "needs_input"}).json()
    assert [r["id"] for r in only["runs"]] == [second] and only["total"] == 1
    page = client.get("/v1/jobs", params={"limit": 1, "offset": 1}).json()
    assert [r["id"] for r in page["runs"]] == [first] and page["total"] == 2
    assert client.get("/v1/jobs", params={"state": "bogus"}).status_code == 422
