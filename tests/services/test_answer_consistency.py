"""What a user comparing Srift's answers takes for granted, checked through the API on the shipped catalog
with the ResNet-50 reference model: a prediction of a plan's fleet (and of its CAP and TAP baselines) gives
the plan's figures, a sweep gives each single prediction, a stored plan reads back as posted, its launch file
starts exactly its fleet, and a run that progresses as predicted is neither re-planned nor warned. For spot:
the expected cost is at least the uninterrupted rent, a prediction gives the uninterrupted figures (and says
so), P(meets the deadline) falls as the deadline tightens, and the on-demand fallback is the on-demand plan.

tests/services/test_plan_properties.py checks the planner against itself; this module checks its answers
against the other endpoints'."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.commands.plan import EXAMPLE
from srift.refmodels.shipped import load_reference_profiles
from srift.services.predictions import SPOT_NOT_PRICED
from srift.settings import Settings

AVAILABILITY = {"g4dn.xlarge": 3, "g5.xlarge": 2, "g6e.xlarge": 1, "p4de.24xlarge": 1}
FIGURES = (
    "iteration_s",
    "iteration_p10_s",
    "iteration_p50_s",
    "iteration_p90_s",
    "total_time_s",
    "total_time_p10_s",
    "total_time_p90_s",
    "cost_usd",
    "cost_p10_usd",
    "cost_p90_usd",
)
NODE_LINE = re.compile(r"^# node \d+: (\S+) \((\w+)\), ranks \S+, batch (\d+)", re.MULTILINE)


def _plan_body(**changes: Any) -> dict[str, Any]:
    body = yaml.safe_load(EXAMPLE)
    assert isinstance(body, dict)
    body.update(
        {
            "availability": AVAILABILITY,
            "mode": "exhaustive",
            "solve_budget_s": 5.0,
            "time_limit_s": 20000,
            "budget_usd": None,
            **changes,
        }
    )
    return body


def _fleet(choices: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("instance_type", "market", "count", "batch")
    return {"choices": [{k: c[k] for k in keys} for c in choices]}


def _prediction_body(plan: dict[str, Any]) -> dict[str, Any]:
    """The prediction request of the plan's own settings (model, precision, iterations, location, network,
    seed), without a fleet."""
    request = plan["request"]
    same = ("model", "precision", "iterations", "provider", "region", "seed", "exchange", "bucket_cap_mb")
    optional = ("input_pipeline", "read_gbps")
    return {
        **{k: request[k] for k in same},
        **{k: request[k] for k in optional if request[k] is not None},
        "network": {k: v for k, v in request["network"].items() if v is not None},
    }


def _figures(predicted: dict[str, Any]) -> dict[str, Any]:
    return {k: pytest.approx(predicted[k], rel=1e-12) for k in FIGURES}


class _Api:
    """Posts and gets through the test client with a write token, checking the status."""

    def __init__(self, client: TestClient, headers: dict[str, str]) -> None:
        self.client = client
        self.headers = headers

    def post(self, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        return _answer(self.client.post(path, json=body, headers=self.headers), status)

    def get(self, path: str) -> dict[str, Any]:
        return _answer(self.client.get(path, headers=self.headers), 200)


def _answer(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture
def api(settings: Settings, client: TestClient, write_headers: dict[str, str]) -> _Api:
    """The API with the shipped catalog and the reference models' profiles loaded."""
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    return _Api(client, write_headers)


def test_an_on_demand_plan_agrees_with_predictions_launch_storage_and_its_run(api: _Api) -> None:
    plan = api.post("/v1/plans", _plan_body(market="on_demand"), status=201)
    assert api.get(f"/v1/plans/{plan['id']}") == plan

    fleets = [plan, plan["baselines"]["cap"], plan["baselines"]["tap"]]
    sweep = api.post(
        "/v1/predictions", {**_prediction_body(plan), "configs": [_fleet(f["choices"]) for f in fleets]}
    )
    for planned, swept in zip(fleets, sweep["predictions"], strict=True):
        single = api.post("/v1/predictions", {**_prediction_body(plan), "config": _fleet(planned["choices"])})
        assert single == swept
        assert single["label"] == planned["label"]
        assert _figures(single["predicted"]) == {k: planned["predicted"][k] for k in FIGURES}

    (launch,) = api.get(f"/v1/plans/{plan['id']}/launch")["files"]
    nodes = NODE_LINE.findall(launch["text"])
    wanted = Counter(
        (c["instance_type"], c["market"], str(c["batch"])) for c in plan["choices"] for _ in range(c["count"])
    )
    assert Counter(nodes) == wanted

    job = api.post("/v1/jobs", {"plan_id": plan["id"]}, status=201)
    iterations, predicted = plan["iterations"], plan["predicted"]
    for share in (0.25, 0.5, 1.0):
        progress = {
            "iterations_done": round(iterations * share),
            "elapsed_s": predicted["total_time_s"] * share,
            "spent_usd": predicted["cost_usd"] * share,
        }
        job = api.post(f"/v1/jobs/{job['id']}/progress", progress)
        assert [p["id"] for p in job["plans"]] == [plan["id"]]
        assert {e["kind"] for e in job["events"]} == {"started", "progress"}
    assert job["state"] == "completed"


def test_a_spot_plan_agrees_with_its_prediction_and_its_on_demand_fallback(api: _Api) -> None:
    rates = {"g4dn.xlarge": 0.95, "g5.xlarge": 0.95}
    body = _plan_body(
        market="spot",
        availability={"g4dn.xlarge": 3, "g5.xlarge": 2},
        iterations=100_000,
        global_batch=768,
        interruption_rates=rates,
        spot_samples=500,
    )
    chances = []
    for limit_s in (200_000, 120_000):
        plan = api.post("/v1/plans", {**body, "time_limit_s": limit_s}, status=201)
        spot, predicted = plan["spot"], plan["predicted"]
        assert plan["label"] == "3×g4dn.xlarge@256"
        assert spot["expected_interruptions"] > 0
        rent_usd_per_hr = sum(c["count"] * c["price_usd_per_hr"] for c in plan["choices"])
        assert spot["uninterrupted_cost_usd"] == pytest.approx(
            rent_usd_per_hr * spot["uninterrupted_time_s"] / 3600
        )
        assert spot["expected_cost_usd"] >= spot["uninterrupted_cost_usd"]
        assert predicted["cost_usd"] >= predicted["uninterrupted_cost_usd"]
        chance = plan["probability"]["meets_time_limit"]
        assert 0 <= chance <= 1 and 0 <= spot["p_meets_time_limit"] <= 1
        chances.append(chance)

        alone = api.post("/v1/predictions", {**_prediction_body(plan), "config": _fleet(plan["choices"])})
        assert alone["predicted"]["total_time_s"] == pytest.approx(
            predicted["uninterrupted_time_s"], rel=1e-12
        )
        assert alone["predicted"]["cost_usd"] == pytest.approx(predicted["uninterrupted_cost_usd"], rel=1e-12)
        assert SPOT_NOT_PRICED in alone["warnings"]

        on_demand = api.post(
            "/v1/plans", {**body, "time_limit_s": limit_s, "market": "on_demand"}, status=201
        )
        assert plan["fallback"]["label"] == on_demand["label"]
        assert plan["fallback"]["predicted"] == on_demand["predicted"]
    assert chances == sorted(chances, reverse=True) and chances[0] > chances[-1], chances


def test_a_plan_whose_loader_stalls_agrees_with_the_prediction_of_its_fleet(api: _Api) -> None:
    """A plan's `input_pipeline` and `read_gbps` bound its iteration; predictions refused both (422, extra
    inputs), so its fleet predicted came out 5× faster than planned, without the stall (found by
    invariants19b: 85333 s planned, 16794 s predicted)."""
    pipeline = {"samples_per_s_per_core": 20, "bytes_per_sample": 110_000}
    body = _plan_body(market="on_demand", time_limit_s=None, input_pipeline=pipeline, read_gbps=2.0)
    plan = api.post("/v1/plans", body, status=201)
    assert plan["breakdown"]["data_stall_s"] > 0
    alone = api.post("/v1/predictions", {**_prediction_body(plan), "config": _fleet(plan["choices"])})
    assert alone["breakdown"]["data_stall_s"] == pytest.approx(plan["breakdown"]["data_stall_s"], rel=1e-12)
    assert _figures(alone["predicted"]) == {k: plan["predicted"][k] for k in FIGURES}
