"""Runs that teach predictions: a run's own token, measured iteration times stored once per step, the
observation a finished run files, corrections that bring later predictions and plans closer to what was
measured (and say so), a band that narrows but still covers, re-planning on measured throughput, reset."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from services.test_plans import _request, _seed

FLEET = {"g4dn.8xlarge": 4}


def _plan(client: TestClient, ids: list[int], headers: dict[str, str], **over: Any) -> dict[str, Any]:
    body = _request(
        ids, **{"global_batch": 256, "iterations": 200, "time_limit_s": None, "availability": FLEET, **over}
    )
    r = client.post("/v1/plans", json=body, headers=headers)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    return plan


def _measured(predicted_s: float, *, ratio: float, steps: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {"step": k, "iteration_s": predicted_s * ratio * math.exp(rng.gauss(0, 0.03))} for k in range(steps)
    ]


def _run(
    client: TestClient, plan: dict[str, Any], headers: dict[str, str], *, ratio: float, seed: int
) -> dict[str, Any]:
    """Start a run of `plan`, report all its iterations with the run's token, and return the last answer."""
    started = client.post("/v1/jobs", json={"plan_id": plan["id"]}, headers=headers)
    assert started.status_code == 201, started.text
    token = started.json()["token"]
    assert token.startswith("srift_run_")
    steps = _measured(
        plan["calibration"]["raw"]["iteration_s"], ratio=ratio, steps=plan["iterations"], seed=seed
    )
    auth = {"Authorization": f"Bearer {token}"}
    url = f"/v1/jobs/{started.json()['id']}/iterations"
    half = len(steps) // 2
    r = client.post(url, json={"steps": steps[:half], "elapsed_s": 10.0}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == half and r.json()["observation"] is None
    again = client.post(url, json={"steps": steps[:half]}, headers=auth)
    assert again.json()["accepted"] == 0 and again.json()["duplicates"] == half
    last = client.post(url, json={"steps": steps[half - 5 :], "elapsed_s": 20.0}, headers=auth)
    assert last.status_code == 200, last.text
    answer: dict[str, Any] = last.json()
    assert answer["duplicates"] == 5 and answer["steps_stored"] == len(steps)
    assert answer["state"] == "completed" and answer["iterations_done"] == plan["iterations"]
    return answer


def _error(plan: dict[str, Any], measured_s: float) -> float:
    return abs(plan["predicted"]["iteration_s"] - measured_s) / measured_s


def test_each_run_brings_the_next_plan_closer_and_the_band_still_covers(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    plan = _plan(client, ids, write_headers)
    assert plan["calibration"]["runs"] == 0 and plan["calibration"]["text"] is None
    errors = []
    measured = []
    for k in range(4):
        answer = _run(client, plan, write_headers, ratio=1.5, seed=k)
        obs = answer["observation"]
        assert obs is not None and obs["source"] == f"run {answer['job_id']}, plan {plan['id']}"
        measured.append(obs["measured_s"])
        errors.append(_error(plan, obs["measured_s"]))
        if k > 0:  # the calibrated band of the plan this run followed covers what it measured
            p = plan["predicted"]
            low = p["total_time_p10_s"] / plan["iterations"]
            high = p["total_time_p90_s"] / plan["iterations"]
            assert low <= measured[-1] <= high
        if k == 3:
            break
        plan = _plan(client, ids, write_headers)
        assert plan["calibration"]["runs"] == k + 1
        assert f"calibrated on {k + 1} run" in plan["calibration"]["text"]
        assert any(s.startswith(f"calibration: calibrated on {k + 1} run") for s in plan["sources"])
    final_error = errors[-1]
    assert errors[0] == pytest.approx(1 / 1.5, abs=0.03) or errors[0] > 0.3
    # each run's error is no larger than the one before, or within the runs' own repeat noise
    noise = (max(measured) - min(measured)) / min(measured)
    assert all(b <= max(a, noise) for a, b in itertools.pairwise(errors))
    assert final_error <= errors[0] / 2
    band = plan["predicted"]["band"]
    assert band["terms"][0]["source"].startswith("calibrated on 3 runs")
    assert band["sigma"] == pytest.approx(band["terms"][0]["sigma"])

    listed = client.get("/v1/corrections").json()["corrections"]
    [entry] = [c for c in listed if c["instance_type"] == "g4dn.8xlarge"]
    assert entry["runs"] == 4 and entry["model"] == "resnet50"
    assert entry["network_key"] == "tcp/nccl/no-pg/flows-auto/ena-unknown"

    r = client.post(
        "/v1/corrections/reset",
        json={"model": "resnet50", "instance_type": "g4dn.8xlarge"},
        headers=write_headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["corrections"][0]["runs"] == 0
    fresh = _plan(client, ids, write_headers)
    assert fresh["calibration"]["runs"] == 0
    assert fresh["predicted"]["iteration_s"] == pytest.approx(fresh["calibration"]["raw"]["iteration_s"])


def test_predictions_use_the_correction_too(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    plan = _plan(client, ids, write_headers)
    body = {
        "profile_ids": ids,
        "provider": "testcloud",
        "region": "r1",
        "iterations": 200,
        "config": {
            "choices": [
                {k: c[k] for k in ("instance_type", "market", "count", "batch")} for c in plan["choices"]
            ]
        },
    }
    before = client.post("/v1/predictions", json=body).json()["predicted"]["iteration_s"]
    answer = _run(client, plan, write_headers, ratio=0.6, seed=9)
    after = client.post("/v1/predictions", json=body)
    assert after.status_code == 200, after.text
    measured = answer["observation"]["measured_s"]
    assert abs(after.json()["predicted"]["iteration_s"] - measured) < abs(before - measured)
    assert any("calibrated on 1 run" in s for s in after.json()["sources"])


def test_run_tokens_only_report_for_their_own_run(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    plan = _plan(client, ids, write_headers)
    a = client.post("/v1/jobs", json={"plan_id": plan["id"]}, headers=write_headers).json()
    b = client.post("/v1/jobs", json={"plan_id": plan["id"]}, headers=write_headers).json()
    body = {"steps": [{"step": 0, "iteration_s": 0.5}]}
    other = client.post(
        f"/v1/jobs/{b['id']}/iterations", json=body, headers={"Authorization": f"Bearer {a['token']}"}
    )
    assert other.status_code == 403 and other.json()["field"] == "job_id"
    unknown = client.post(
        f"/v1/jobs/{a['id']}/iterations", json=body, headers={"Authorization": "Bearer srift_run_nope"}
    )
    assert unknown.status_code == 401
    assert client.post(f"/v1/jobs/{a['id']}/iterations", json=body).status_code == 401
    assert client.post(f"/v1/jobs/{a['id']}/iterations", json=body, headers=write_headers).status_code == 200
    assert "token" not in client.get(f"/v1/jobs/{a['id']}").json()
    bad = client.post(
        f"/v1/jobs/{a['id']}/iterations",
        json={"steps": [{"step": 1, "iteration_s": -1}]},
        headers=write_headers,
    )
    assert bad.status_code == 422 and bad.json()["field"].startswith("steps")
    wrong_plan = client.post(
        f"/v1/jobs/{a['id']}/iterations", json={**body, "plan_id": 999}, headers=write_headers
    )
    assert wrong_plan.status_code == 409 and wrong_plan.json()["field"] == "plan_id"
    series = client.get(f"/v1/jobs/{a['id']}/iterations", headers=write_headers).json()["series"]
    assert series[0]["plan_id"] == plan["id"] and series[0]["steps"] == [{"step": 0, "iteration_s": 0.5}]
    assert series[0]["predicted_s"] == pytest.approx(plan["predicted"]["iteration_s"])


def test_an_interruption_replans_with_the_runs_measured_throughput(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    plan = _plan(client, ids, write_headers, availability={"g3.8xlarge": 8, "g4dn.8xlarge": 8})
    job = client.post("/v1/jobs", json={"plan_id": plan["id"]}, headers=write_headers).json()
    steps = _measured(plan["calibration"]["raw"]["iteration_s"], ratio=0.5, steps=60, seed=3)
    r = client.post(f"/v1/jobs/{job['id']}/iterations", json={"steps": steps}, headers=write_headers)
    assert r.status_code == 200 and r.json()["observation"] is None
    lost = plan["choices"][0]["instance_type"]
    r = client.post(
        f"/v1/jobs/{job['id']}/interruptions", json={"instance_type": lost, "count": 1}, headers=write_headers
    )
    assert r.status_code == 200, r.text
    state = client.get(f"/v1/jobs/{job['id']}", headers=write_headers).json()
    event = state["events"][-1]
    assert event["kind"] == "interruption"
    assert event["payload"]["measured_iteration_s"] == pytest.approx(
        sum(s["iteration_s"] for s in steps[6:]) / 54
    )
    # the surviving g3s keep running (measured twice as fast as predicted): the re-plan predicts them so
    replan = r.json()["plan"]
    assert replan["calibration"]["runs"] == 1
    measured = event["payload"]["measured_iteration_s"]
    assert abs(replan["predicted"]["iteration_s"] - measured) < abs(
        plan["predicted"]["iteration_s"] - measured
    )


def test_validation_cases_file_observations_once(session: Session) -> None:
    """`srift validate`'s scored rows (srift.validation.steps.run_matrix) become observations of their
    types; recording the same validation run again replaces them instead of counting twice."""
    from srift.services.calibration import list_corrections, record_validation_rows

    row = {
        "model": "cnn",
        "fleet": "2×tb.small@32 + 1×tb.large@64",
        "composition": "2×tb.small + 1×tb.large",
        "predicted": {
            "iteration_s": 0.1,
            "band": {"sigma": 0.1},
            "breakdown": {"compute_s": 0.07, "straggler_wait_s": 0.01, "exposed_network_s": 0.02},
        },
        "runs": [{"ok": True, "mean_iter_s": 0.12}, {"ok": True, "mean_iter_s": 0.125}, {"ok": False}],
    }
    lonely = {**row, "runs": [{"ok": True, "mean_iter_s": 0.12}]}
    for _ in range(2):
        filed = record_validation_rows(
            session=session, rows=[row, lonely], network={"library": "gloo"}, source="validate 7"
        )
    assert len(filed) == 1 and filed[0]["types"] == pytest.approx({"tb.small": 2 / 3, "tb.large": 1 / 3})
    assert filed[0]["measured_s"] == pytest.approx(0.1225)
    entries = {e.instance_type: e for e in list_corrections(session=session, model="cnn")}
    assert set(entries) == {"tb.small", "tb.large"}
    assert all(len(e.observation_ids) == 1 for e in entries.values())
    assert entries["tb.small"].correction.mean[0] > entries["tb.large"].correction.mean[0] > 0


def test_an_empty_report_changes_nothing_unless_final_and_the_schema_says_so(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """`steps: []` is the reporter's closing report when every step was sent (srift.launch.helper): with
    `final` it files the observation; without, it stores and changes nothing. The schema states both."""
    plan = _plan(client, _seed(db_url, "resnet50"), write_headers)
    run = client.post("/v1/jobs", json={"plan_id": plan["id"]}, headers=write_headers).json()
    url = f"/v1/jobs/{run['id']}/iterations"
    steps = _measured(plan["calibration"]["raw"]["iteration_s"], ratio=1.0, steps=40, seed=3)
    assert client.post(url, json={"steps": steps}, headers=write_headers).status_code == 200
    idle = client.post(url, json={"steps": [], "elapsed_s": 99.0}, headers=write_headers)
    assert idle.status_code == 200, idle.text
    assert idle.json()["accepted"] == 0 and idle.json()["iterations_done"] == 40
    assert idle.json()["observation"] is None
    closing = client.post(url, json={"steps": [], "final": True}, headers=write_headers)
    assert closing.status_code == 200, closing.text
    assert closing.json()["observation"]["steps"] == 36  # after warm-up: the first tenth is left out
    schema = client.get("/openapi.json").json()["components"]["schemas"]["IterationsIn"]
    assert "may be empty" in schema["properties"]["steps"]["description"]
