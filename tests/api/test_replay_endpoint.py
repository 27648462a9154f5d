"""GET /v1/plans/{id}/replay on the real app and database: a stored spot plan is replayed through the
imported trace set once traces cover its fleet, with the distribution of finish times and costs beside the
plan's own prediction; before that, and for a plan without spot VMs, the answer says plainly why not and
what the prediction rests on; a bad or unknown plan id is a 4xx naming `plan_id`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory
from srift.optimize.synthetic import synthetic_profile
from srift.profiling.store import save_profile
from srift.services.replays import replay_plan
from srift.services.traces import import_traces
from srift.settings import Settings
from srift.spot.traces import SpotTrace
from srift.testing.spot import drawn_traces, p3_fleet_traces

TIME_LIMIT_S = 36 * 3600.0


def _profile(db_url: str) -> int:
    with session_factory(db_url)() as session:
        profile_id = save_profile(session=session, profile=synthetic_profile("resnet50", "V100"))
        session.commit()
    return profile_id


def spot_body(profile_id: int, **over: Any) -> dict[str, Any]:
    """4 × p3.2xlarge (one V100 each, at most 128 samples) for a global batch of 512: 4 h of work, which
    the shipped laws' capacity gaps for four VMs stretch to 10 h expected with re-planning, and to about a
    day restarting in place (what the search prices, 26 h at 90 % confidence): a limit of a day and a half
    (a day was enough only while the closed form took the laws as exponential, 2026-12-07). Spot in
    us-east-1, with its on-demand fallback; `over` replaces or adds fields."""
    return {
        "profile_ids": [profile_id],
        "global_batch": 512,
        "iterations": 30_000,
        "time_limit_s": TIME_LIMIT_S,
        "provider": "aws",
        "region": "us-east-1",
        "market": "spot",
        "availability": {"p3.2xlarge": 4},
        "mode": "exhaustive",
        "spot_samples": 200,
        **over,
    }


def fleet_history(tick_s: float = 300.0) -> list[SpotTrace]:
    """The seed-7 history of 4 × p3.2xlarge in us-east-1 (`p3_fleet_traces`) these API tests' spot plans are
    replayed through or conditioned on."""
    return p3_fleet_traces(seed=7, tick_s=tick_s)


def _plan(client: TestClient, headers: dict[str, str], profile_id: int, **over: Any) -> dict[str, Any]:
    body = spot_body(profile_id, **over)
    r = client.post("/v1/plans", json=body, headers=headers)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    return plan


@pytest.fixture
def spot_plan(
    client: TestClient, settings: Settings, db_url: str, write_headers: dict[str, str]
) -> dict[str, Any]:
    load_shipped_catalog(settings)
    plan = _plan(client, write_headers, _profile(db_url))
    assert [(c["instance_type"], c["market"], c["count"]) for c in plan["choices"]] == [
        ("p3.2xlarge", "spot", 4)
    ]
    assert plan["spot"] is not None and plan["fallback"] is not None
    return plan


def test_a_spot_plan_is_replayed_once_imported_traces_cover_its_fleet(
    client: TestClient, settings: Settings, write_headers: dict[str, str], spot_plan: dict[str, Any]
) -> None:
    path = f"/v1/plans/{spot_plan['id']}/replay"
    # Nothing imported yet: not replayed, and the answer says why and what the prediction rests on.
    before = client.get(path, headers=write_headers)
    assert before.status_code == 200, before.text
    got = before.json()
    assert got["status"] == "no_trace" and got["replay"] is None and got["imported_traces"] == 0
    assert got["reason"] == "no trace covers 4 × p3.2xlarge in aws/us-east-1 (the traces cover nothing)"
    assert "srift traces import" not in got["hint"] and "traces of that type and region" in got["hint"]
    assert [r["band"] for r in got["rates"]] == ["traces"]
    assert "fitted to traces of p3.2xlarge" in got["rates"][0]["source"]
    assert got["plan_predicted"]["expected_cost_usd"] == spot_plan["spot"]["expected_cost_usd"]

    # Two zones' history (of the four): a replay through several traces, each planned on its own law (about
    # a second a trace, twice here: the API's replay and the CLI's; all four took 7.9 s, two 4 s).
    traces = fleet_history()[:2]
    # Another type's trace in the same region does not cover the fleet.
    others = drawn_traces(
        provider="aws",
        region="us-east-1",
        instance_type="r5.16xlarge",
        nodes=4,
        days=2.0,
        seed=7,
        tick_s=300.0,
    )
    assert len(traces) >= 2 and others
    import_traces(settings=settings, traces=[*traces, *others])

    after = client.get(path, headers=write_headers)
    assert after.status_code == 200, after.text
    got = after.json()
    assert got["status"] == "replayed" and got["reason"] is None
    assert got["imported_traces"] == len(traces) + len(others)
    assert got["fleet"] == {
        "instance_type": "p3.2xlarge",
        "nodes": 4,
        "provider": "aws",
        "region": "us-east-1",
    }
    rep = got["replay"]
    assert rep["traces"] == len(traces) and sorted(rep["trace_names"]) == sorted(t.name for t in traces)
    assert rep["deadline_s"] == TIME_LIMIT_S and rep["deadline_rule"] == "the plan's time limit"
    # Eight days of 5-minute ticks (2,304), windows of the limit (a day and a half) and a tick (433) every
    # 30 minutes (6 ticks): (2,304 - 433) // 6 + 1 = 312 per trace.
    assert rep["windows"] == len(traces) * 312
    by = {p["policy"]: p for p in rep["policies"]}
    assert set(by) == {"on_demand", "spot_only", "spot_then_on_demand", "uniform_progress", "srift"}
    srift = by["srift"]["replayed"]
    assert srift["runs"] == rep["windows"] and srift["traces"] == len(traces)
    assert srift["finish_p10_s"] <= srift["finish_p50_s"] <= srift["finish_p90_s"]
    assert srift["cost_p10_usd"] <= srift["cost_p50_usd"] <= srift["cost_p90_usd"]
    # The distribution is Srift's policy's, over the same windows, weighted as its quantiles are.
    for name, lo, hi in (
        ("finish_s", "finish_p10_s", "finish_p90_s"),
        ("cost_usd", "cost_p10_usd", "cost_p90_usd"),
    ):
        hist = rep["distribution"][name]
        assert len(hist["edges"]) == len(hist["shares"]) + 1 == len(hist["counts"]) + 1 == 21
        assert sum(hist["counts"]) == srift["runs"] and sum(hist["shares"]) == pytest.approx(1.0)
        assert hist["edges"][0] <= srift[lo] <= srift[hi] <= hist["edges"][-1]
    # On-demand never misses a day's deadline for 4 h of work; Srift's policy falls back in time.
    assert by["on_demand"]["replayed"]["deadline_misses"] == 0
    assert srift["deadline_misses"] == 0
    assert srift["mean_cost_usd"] <= by["on_demand"]["replayed"]["mean_cost_usd"]
    # Beside it, the plan's own outlook and its gap to the replay.
    spot = spot_plan["spot"]
    assert rep["plan_predicted"]["expected_time_s"] == spot["expected_time_s"]
    assert rep["plan_predicted"]["p_meets_time_limit"] == spot["p_meets_time_limit"]
    assert rep["plan_gap"]["expected_cost_pct"] == pytest.approx(
        100.0 * (spot["expected_cost_usd"] / srift["mean_cost_usd"] - 1.0)
    )
    assert got["replay_s"] > 0
    # Same plan, same traces: the same replay, and the one `srift plan --replay-traces` prints.
    again = client.get(path, headers=write_headers).json()
    assert again["replay"] == rep
    cli = replay_plan(spot_plan, [*traces, *others], provider="aws", region="us-east-1")
    assert json.loads(json.dumps(cli)) == rep


def test_a_plan_without_spot_vms_says_so_and_bad_ids_name_plan_id(
    client: TestClient, settings: Settings, db_url: str, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    plan = _plan(client, write_headers, _profile(db_url), market="on_demand")
    got = client.get(f"/v1/plans/{plan['id']}/replay", headers=write_headers).json()
    assert got["status"] == "no_spot" and got["fleet"] is None and got["replay"] is None
    assert got["reason"] == "the plan runs no spot VMs, so there is nothing to replay"
    assert got["rates"] == [] and got["plan_predicted"] is None
    missing = client.get(f"/v1/plans/{plan['id'] + 1000}/replay", headers=write_headers)
    assert missing.status_code == 404 and missing.json()["field"] == "plan_id"
    for bad in ("0", "x", str(2**31)):
        r = client.get(f"/v1/plans/{bad}/replay", headers=write_headers)
        assert r.status_code == 422 and r.json()["field"] == "plan_id", (bad, r.text)
        assert r.json()["hint"]


def test_the_openapi_document_states_the_replay_and_its_statuses(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/v1/plans/{plan_id}/replay"]["get"]
    assert {"200", "404", "422"} <= set(op["responses"])
    plan_id = next(p for p in op["parameters"] if p["name"] == "plan_id")
    assert plan_id["schema"]["minimum"] == 1 and plan_id["schema"]["maximum"] == 2**31 - 1
    status = doc["components"]["schemas"]["ReplayStatus"]
    assert set(status["enum"]) == {
        "replayed",
        "no_spot",
        "several_fleets",
        "no_fallback",
        "no_trace",
        "too_short",
    }
