"""Plans and tracked jobs through the API: real catalog, profiles, simulator and optimizer on the test DB."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.catalog.custom import import_document
from srift.db.session import session_factory
from srift.optimize.solver import usd_up
from srift.optimize.synthetic import synthetic_profile
from srift.profiling.store import save_profile

PAPER_TYPES = [
    # name, gpu model, gpus, network Gbit/s, interconnect, on-demand, spot (Srift Table 4)
    ("p3.8xlarge", "V100", 4, 10, "nvlink", 800, 12.24, 3.68),
    ("g3.8xlarge", "M60", 2, 10, "pcie", 126, 2.28, 0.69),
    ("g4dn.8xlarge", "T4", 1, 50, "none", 0, 2.176, 0.72),
]


def _catalog() -> dict[str, Any]:
    types = []
    for name, gpu, count, net, link, link_gbps, od, spot in PAPER_TYPES:
        types.append(
            {
                "name": name,
                "gpu_model": gpu,
                "gpu_count": count,
                "gpu_memory_gib": 16,
                "vcpus": 32,
                "memory_gib": 128,
                "network_gbps": net,
                "interconnect": link,
                "interconnect_gbps": link_gbps,
                "prices": {"r1": {"on_demand": od, "spot": spot}},
            }
        )
    return {
        "provider": "testcloud",
        "snapshot": "testcloud-paper",
        "source": "Srift Table 4 spot prices and AWS list prices, for tests",
        "as_of": "2020-08-20",
        "instance_types": types,
    }


def _seed(db_url: str, model: str) -> list[int]:
    session: Session = session_factory(db_url)()
    try:
        import_document(session=session, document=_catalog(), origin="test")
        ids = [
            save_profile(session=session, profile=synthetic_profile(model, gpu))
            for gpu in ("V100", "M60", "T4")
        ]
        session.commit()
        return ids
    finally:
        session.close()


def _request(ids: list[int], **over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "profile_ids": ids,
        "global_batch": 1024,
        "iterations": 400,
        "objective": "min_cost",
        "time_limit_s": 500,
        "provider": "testcloud",
        "region": "r1",
        "availability": {"p3.8xlarge": 4, "g3.8xlarge": 8, "g4dn.8xlarge": 8},
        "mode": "exhaustive",
        "solve_budget_s": 5,
    }
    body.update(over)
    return body


def test_plan_roundtrip_with_baselines_and_pareto(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "shufflenet_v2_x2_0")
    body = _request(ids, global_batch=6144, iterations=1000, time_limit_s=600, budget_usd=3.0)
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert sum(c * b for c, b in zip(plan["counts"], plan["batches"], strict=True)) == 6144
    assert plan["predicted"]["total_time_s"] <= 600
    assert plan["predicted"]["cost_usd"] <= 3.0
    assert plan["headroom"]["time_s"] == pytest.approx(600 - plan["predicted"]["total_time_s"])
    assert plan["headroom"]["budget_usd"] == pytest.approx(3.0 - plan["predicted"]["cost_usd"])
    assert plan["mode"] == "exhaustive" and plan["proven_optimal"] is True
    assert {c["market"] for c in plan["choices"]} == {"spot"}
    for name in ("cap", "tap"):
        base = plan["baselines"][name]
        assert base is not None
        assert sum(c["count"] * c["batch"] for c in base["choices"]) == 6144
    # CAP takes the cheapest VMs (g3 at $0.69) first, fully loaded; TAP the fastest (p3) first.
    assert plan["baselines"]["cap"]["choices"][0]["instance_type"] == "g3.8xlarge"
    assert plan["baselines"]["tap"]["choices"][0]["instance_type"] == "p3.8xlarge"
    assert plan["pareto_total"] == plan["configs_evaluated"] == len(plan["pareto"])
    chosen = [p for p in plan["pareto"] if p["chosen"]]
    assert len(chosen) == 1 and chosen[0]["feasible"]
    front = [p for p in plan["pareto"] if p["on_front"]]
    for p in plan["pareto"]:
        assert (
            not any(q["total_time_s"] <= p["total_time_s"] and q["cost_usd"] < p["cost_usd"] for q in front)
            or not p["on_front"]
        )
    assert any(s.startswith("profile:") for s in plan["sources"])
    assert any(s.startswith("prior:") or s.startswith("xgb") for s in plan["sources"])
    got = client.get(f"/v1/plans/{plan['id']}", headers=write_headers)
    assert got.status_code == 200
    assert got.json()["choices"] == plan["choices"]
    assert got.json()["request"]["global_batch"] == 6144


def test_plan_reports_its_band_and_the_chance_of_meeting_its_limits(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "shufflenet_v2_x2_0")
    body = _request(ids, global_batch=6144, iterations=1000, time_limit_s=600, budget_usd=3.0)
    safe = client.post("/v1/plans", json=body, headers=write_headers).json()
    assert safe["confidence"] == 0.9  # the default
    pred = safe["predicted"]
    assert pred["total_time_p10_s"] <= pred["total_time_s"] <= pred["total_time_p90_s"]
    assert pred["cost_p10_usd"] <= pred["cost_usd"] <= pred["cost_p90_usd"]
    assert (
        pred["iteration_p10_s"] <= pred["iteration_p50_s"] == pred["iteration_s"] <= pred["iteration_p90_s"]
    )
    assert {t["source"] for t in pred["band"]["terms"]} >= {"network"}  # the α-β prior's calibration spread
    chance = safe["probability"]
    assert chance["meets_time_limit"] >= 0.9 and chance["within_budget"] >= 0.9
    assert chance["total_time_s_at_confidence"] <= 600 and chance["cost_usd_at_confidence"] <= 3.0
    for name in ("cap", "tap"):
        base = safe["baselines"][name]["probability"]
        assert 0.0 <= base["meets_time_limit"] <= 1.0 and 0.0 <= base["within_budget"] <= 1.0
    median = client.post("/v1/plans", json={**body, "confidence": 0.5}, headers=write_headers).json()
    assert median["confidence"] == 0.5
    assert median["predicted"]["cost_usd"] <= pred["cost_usd"]
    assert median["probability"]["meets_time_limit"] >= 0.5
    schema = client.get("/openapi.json").json()["components"]["schemas"]["PlanRequest"]["properties"]
    assert schema["confidence"]["minimum"] == 0.5 and schema["confidence"]["maximum"] == 0.99


def test_plan_needs_a_write_token(client: TestClient, db_url: str) -> None:
    ids = _seed(db_url, "resnet50")
    r = client.post("/v1/plans", json=_request(ids))
    assert r.status_code == 401


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"global_batch": 1023, "batch_policy": "pow2"}, "global_batch"),
        ({"global_batch": 200_000}, "global_batch"),
        ({"time_limit_s": -5}, "time_limit_s"),
        ({"budget_usd": -1}, "budget_usd"),
        ({"availability": {"p3.8xlarge": 2, "p9.mega": 3}}, "availability.p9.mega"),
        ({"solve_budget_s": 1000}, "solve_budget_s"),
        ({"solve_budget_s": 45}, "solve_budget_s"),
        ({"profile_ids": [999]}, "profile_ids[0]"),
        ({"confidence": 0.3}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_input_names_the_field(
    client: TestClient, db_url: str, write_headers: dict[str, str], over: dict[str, Any], field: str
) -> None:
    ids = _seed(db_url, "resnet50")
    r = client.post("/v1/plans", json=_request(ids, **over), headers=write_headers)
    missing = field in ("availability.p9.mega", "profile_ids[0]")  # what the request names is not stored
    assert r.status_code == (404 if missing else 422), r.text
    assert r.json()["field"] == field
    assert r.json()["error"] == ("not_found" if missing else "invalid_input")


def test_stored_profiles_in_another_precision_are_a_conflict_not_invalid_input(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """A schema-valid request naming stored fp32 profiles by id but asking for fp16: the request breaks no
    rule, the stored data cannot answer it (409, as for profiles of different models), and the field names
    the profile at fault."""
    ids = _seed(db_url, "resnet50")
    r = client.post("/v1/plans", json=_request(ids, precision="fp16"), headers=write_headers)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "conflict" and r.json()["field"] == "profile_ids[0].precision"
    assert "ask for precision fp32" in r.json()["hint"]


def test_infeasible_says_which_limit_and_the_nearest_relaxations(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    r = client.post("/v1/plans", json=_request(ids, time_limit_s=20, budget_usd=0.05), headers=write_headers)
    assert r.status_code == 409, r.text
    err = r.json()
    assert err["error"] == "infeasible"
    assert err["field"] == "time_limit_s"
    fastest = err["relaxations"]["fastest_time_s"]
    assert fastest is not None and fastest > 20
    assert f"{fastest:.0f} s" in err["detail"]
    assert err["relaxations"]["least_budget_for_deadline_usd"] is None
    assert err["proven"] is True  # the search covered every configuration: no plan meets the limits
    r = client.post("/v1/plans", json=_request(ids, time_limit_s=400, budget_usd=0.05), headers=write_headers)
    err = r.json()
    assert r.status_code == 409 and err["field"] == "budget_usd"
    least = err["relaxations"]["least_budget_for_deadline_usd"]
    assert least is not None and least > 0.05
    # The message names the least budget rounded up to the cent (`usd_up`: a budget it names suffices).
    assert usd_up(least) in err["detail"]
    assert err["relaxations"]["fastest_time_within_budget_s"] is None or (
        err["relaxations"]["fastest_time_within_budget_s"] > 400
    )


def test_min_time_under_budget_prefers_spot(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "inception_v3")
    body = _request(ids, objective="min_time", time_limit_s=None, budget_usd=5.0, market="any")
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert plan["predicted"]["cost_usd"] <= 5.0
    assert all(c["market"] == "spot" for c in plan["choices"])
    r = client.post("/v1/plans", json={**body, "market": "on_demand"}, headers=write_headers)
    assert r.status_code == 201, r.text
    assert all(c["market"] == "on_demand" for c in r.json()["choices"])
    # The spot plan's time is an expectation over interruptions; the same fleet on demand never waits for
    # one, so compare with the spot fleet's uninterrupted run.
    assert r.json()["predicted"]["total_time_s"] >= plan["predicted"]["uninterrupted_time_s"] * (1 - 1e-12)
    assert plan["predicted"]["total_time_s"] >= plan["predicted"]["uninterrupted_time_s"]
    spot = plan["spot"]
    assert spot is not None and spot["expected_time_s"] >= spot["uninterrupted_time_s"] * (1 - 1e-12)


def test_a_mistyped_type_in_interruption_rates_or_measured_gbps_is_named_not_dropped_silently(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """A key whose type no offer of the request has is ignored, and the plan's warnings say so with the
    offered names closest to it; a key that names an offered type (alone or as provider/region/type) draws
    no such warning, and the rate it gives is used."""
    ids = _seed(db_url, "inception_v3")
    body = _request(
        ids,
        market="any",
        interruption_rates={"g4dn.8xlarg": 0.5, "testcloud/r1/p3.8xlarge": 0.2},
        network={"measured_gbps": {"p3.8xlarge": 9.0, "p3.8xlarg": 9.0}},
    )
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    ignored = [w for w in plan["warnings"] if " ignored: no offer of this request is a " in w]
    assert sorted(ignored) == [
        "interruption_rates.g4dn.8xlarg ignored: no offer of this request is a g4dn.8xlarg "
        "(closest offered: g4dn.8xlarge, g3.8xlarge, p3.8xlarge)",
        "network.measured_gbps.p3.8xlarg ignored: no offer of this request is a p3.8xlarg "
        "(closest offered: p3.8xlarge, g3.8xlarge, g4dn.8xlarge)",
    ]
    rates = {rate["instance_type"]: rate for rate in plan["spot"]["rates"]}
    assert rates["p3.8xlarge"]["band"] == "given" and rates["p3.8xlarge"]["monthly_fraction"] == 0.2


def test_get_missing_plan_is_404(client: TestClient) -> None:
    r = client.get("/v1/plans/12345")
    assert r.status_code == 404
    assert r.json()["field"] == "plan_id"


def _srift_54(ids: list[int], **over: Any) -> dict[str, Any]:
    """Srift §5.4: ResNet50, global batch 1024, 400 iterations, 500 s, minimum cost, no availability given."""
    body = _request(ids, availability=None, max_count_per_type=8, mode="eager", solve_budget_s=1.0)
    body.update(over)
    return body


def test_interruption_at_200_of_400_replans_within_the_original_deadline(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    r = client.post("/v1/plans", json=_srift_54(ids), headers=write_headers)
    assert r.status_code == 201, r.text
    first = r.json()
    assert first["predicted"]["total_time_s"] <= 500
    job = client.post("/v1/jobs", json={"plan_id": first["id"]}, headers=write_headers)
    assert job.status_code == 201, job.text
    job_id = job.json()["id"]
    launch = 138.0
    r = client.post(
        f"/v1/jobs/{job_id}/progress",
        json={
            "iterations_done": 200,
            "elapsed_s": launch + first["predicted"]["total_time_s"] / 2,
            "spent_usd": 0.5,
        },
        headers=write_headers,
    )
    assert r.status_code == 200, r.text
    elapsed = r.json()["elapsed_s"]
    lost = first["choices"][0]["instance_type"]
    held_before = first["choices"][0]["count"]
    r = client.post(
        f"/v1/jobs/{job_id}/interruptions", json={"instance_type": lost, "count": 1}, headers=write_headers
    )
    remaining_s = 500 - elapsed - 150
    if r.status_code == 409:
        err = r.json()
        assert err["error"] == "infeasible"
        assert f"{remaining_s:.0f} s left" in err["detail"] and " over" in err["detail"]
        state = client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()
        assert state["state"] == "needs_input"
        assert state["events"][-1]["kind"] == "interruption" and "error" in state["events"][-1]["payload"]
        return
    assert r.status_code == 200, r.text
    new = r.json()["plan"]
    assert new["iterations"] == 200
    assert new["predicted"]["total_time_s"] <= remaining_s
    assert new["limits"]["time_limit_s"] == pytest.approx(remaining_s)
    kept = [c for c in new["choices"] if c["instance_type"] == lost]
    assert sum(c["count"] for c in kept) <= held_before - 1
    state = client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()
    assert state["current_plan_id"] == new["id"]
    assert state["excluded_types"] == [lost]
    assert [p["id"] for p in state["plans"]] == [first["id"], new["id"]]
    assert [e["kind"] for e in state["events"]] == ["started", "progress", "interruption"]


def test_interruption_too_late_says_by_how_much(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    ids = _seed(db_url, "resnet50")
    first = client.post("/v1/plans", json=_srift_54(ids), headers=write_headers).json()
    job_id = client.post("/v1/jobs", json={"plan_id": first["id"]}, headers=write_headers).json()["id"]
    lost = first["choices"][0]["instance_type"]
    r = client.post(
        f"/v1/jobs/{job_id}/interruptions",
        json={"instance_type": lost, "count": 1, "iterations_done": 200, "elapsed_s": 420, "spent_usd": 1.0},
        headers=write_headers,
    )
    assert r.status_code == 409, r.text
    err = r.json()
    assert err["error"] == "infeasible" and err["field"] == "time_limit_s"
    assert err["relaxations"]["time_short_s"] == pytest.approx(420 + 150 - 500)
    assert err["proven"] is True  # the time already spent is past the limit
    assert "70 s past" in err["detail"]
    state = client.get(f"/v1/jobs/{job_id}", headers=write_headers).json()
    assert state["state"] == "needs_input"
    assert state["iterations_done"] == 200


def test_job_progress_rules(client: TestClient, db_url: str, write_headers: dict[str, str]) -> None:
    ids = _seed(db_url, "resnet50")
    first = client.post("/v1/plans", json=_srift_54(ids), headers=write_headers).json()
    assert client.post("/v1/jobs", json={"plan_id": 999}, headers=write_headers).json()["field"] == "plan_id"
    job_id = client.post("/v1/jobs", json={"plan_id": first["id"]}, headers=write_headers).json()["id"]
    ok = {"iterations_done": 100, "elapsed_s": 100, "spent_usd": 0.2}
    assert client.post(f"/v1/jobs/{job_id}/progress", json=ok, headers=write_headers).status_code == 200
    back = client.post(
        f"/v1/jobs/{job_id}/progress", json={**ok, "iterations_done": 50}, headers=write_headers
    )
    assert back.status_code == 409 and back.json()["field"] == "iterations_done"
    past = client.post(
        f"/v1/jobs/{job_id}/progress", json={**ok, "iterations_done": 401}, headers=write_headers
    )
    assert past.status_code == 409 and past.json()["field"] == "iterations_done"
    wrong = client.post(
        f"/v1/jobs/{job_id}/interruptions", json={"instance_type": "nope", "count": 1}, headers=write_headers
    )
    assert wrong.status_code == 409 and wrong.json()["field"] == "instance_type"
    done = client.post(
        f"/v1/jobs/{job_id}/progress",
        json={**ok, "iterations_done": 400, "elapsed_s": 300},
        headers=write_headers,
    )
    assert done.json()["state"] == "completed"
    assert client.get("/v1/jobs/777").status_code == 404


def test_cli_plan_prints_a_table_and_json(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import json

    import yaml

    from srift.cli import main
    from srift.settings import get_settings

    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        request = {
            "profiles": [synthetic_profile("inception_v3", "T4").to_dict()],
            "global_batch": 1024,
            "iterations": 1000,
            "objective": "min_time",
            "provider": "aws",
            "region": "us-east-1",
            "snapshot": "srift-paper-2020",
            "market": "spot",
            "availability": {"g4dn.8xlarge": 16},
        }
        path = tmp_path / "plan.yaml"
        path.write_text(yaml.safe_dump(request))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path)])
        out = capsys.readouterr().out
        assert done.value.code == 0, out
        assert "× g4dn.8xlarge @" in out and "CAP" in out and "TAP" in out and "Pareto front" in out
        assert "p10–p90" in out and "limits checked at p90" in out
        path.write_text(yaml.safe_dump({**request, "time_limit_s": 1e6}))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path), "--confidence", "0.95"])
        out = capsys.readouterr().out
        assert done.value.code == 0, out
        assert "limits checked at p95" in out and "P(deadline)" in out
        path.write_text(yaml.safe_dump(request))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path), "--json"])
        plan = json.loads(capsys.readouterr().out)
        assert done.value.code == 0
        assert plan["choices"][0]["instance_type"] == "g4dn.8xlarge"
        path.write_text(yaml.safe_dump({**request, "time_limit_s": 1}))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path)])
        err = capsys.readouterr().err
        assert done.value.code == 2
        assert "time_limit_s" in err and "To fix" in err
    finally:
        get_settings.cache_clear()


def test_profiles_of_an_accelerator_nobody_offers_are_infeasible_not_invalid(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """A valid request whose profiles no offer can run is an answer (infeasible), not a malformed request."""
    _seed(db_url, "resnet50")
    unseen = {**synthetic_profile("resnet50", "V100").to_dict(), "accelerator": "Imaginary GPU 9000"}
    body = {**_request([]), "profile_ids": None, "profiles": [unseen]}
    del body["availability"]
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 409, r.text
    err = r.json()
    assert err["error"] == "infeasible" and err["field"] == "profiles"
    assert "Imaginary GPU 9000" in err["detail"] and err["hint"]


def test_keys_of_type_maps_are_stated_as_property_names(client: TestClient) -> None:
    """pydantic's `patternProperties` lets a key that misses the pattern through; the server refuses it."""
    plan = client.get("/openapi.json").json()["components"]["schemas"]["PlanRequest"]["properties"]
    for name in ("availability", "interruption_rates"):
        mapping = next(branch for branch in plan[name]["anyOf"] if branch.get("type") == "object")
        assert "patternProperties" not in mapping and mapping["propertyNames"]["pattern"], name


def test_a_spot_plan_reads_each_stored_profile_once_for_its_on_demand_fallback(
    client: TestClient, db_url: str, write_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The on-demand fallback is the same request on another market: it reuses the profiles the spot
    plan's preparation read (it read each stored profile twice), and its plan is the on-demand request's."""
    from srift.profiling import store

    ids = _seed(db_url, "inception_v3")
    body = _request(ids, objective="min_time", time_limit_s=None, budget_usd=5.0, market="spot")
    reads: list[int] = []
    real = store.get_profile

    def counted(**kwargs: Any) -> Any:
        reads.append(kwargs["profile_id"])
        return real(**kwargs)

    monkeypatch.setattr(store, "get_profile", counted)
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert all(c["market"] == "spot" for c in plan["choices"])
    assert plan["fallback"] is not None
    assert sorted(reads) == sorted(ids)
    r = client.post("/v1/plans", json={**body, "market": "on_demand"}, headers=write_headers)
    assert r.status_code == 201, r.text
    assert plan["fallback"]["label"] == r.json()["label"]
    assert plan["fallback"]["predicted"] == r.json()["predicted"]
