"""A schema-level 422 says the concrete fix its error calls for (the values an enum takes, the bound a number
broke, the field it misses or should not have), not the generic "correct the named field", and a CLI file of
the same request gets the same hint (srift.documents.error_hint, shared by both)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sim.kit import profile as toy_profile

from srift.api.schemas.plans import PlanRequest
from srift.api.schemas.predictions import PredictionRequest
from srift.api.schemas.types import parse_request
from srift.domain.simulation import MAX_BUCKET_CAP_MB
from srift.errors import InvalidInput

PROFILE = toy_profile(fw_s=0.1, bw_s=0.2, layers=((400_000_000, 0.3), (600_000_000, 0.9)), cv=0.03).to_dict()
PREDICTION = {
    "profiles": [PROFILE],
    "iterations": 100,
    "config": {"choices": [{"instance_type": "p3.2xlarge", "count": 1, "batch": 16}]},
}
PLAN = {"profiles": [PROFILE], "global_batch": 32, "iterations": 100}
CASES = [
    # (error kind, change to the body (None drops the field), field, hint)
    ("enum", {"network": {"transport": "udp"}}, "network.transport", "use one of: tcp, efa"),
    ("literal", {"comm": "ring"}, "comm", "use one of: allreduce, parameter_server"),
    ("greater_than_equal", {"mc_samples": -1}, "mc_samples", "give a number ≥ 0"),
    ("greater_than", {"bucket_cap_mb": 0}, "bucket_cap_mb", "give a number > 0"),
    ("less_than_equal", {"bucket_cap_mb": 1e9}, "bucket_cap_mb", f"give a number ≤ {MAX_BUCKET_CAP_MB:g}"),
    ("missing", {"iterations": None}, "iterations", "add iterations"),
    ("string_too_short", {"provider": ""}, "provider", "give at least 1 character"),
    ("string_too_long", {"provider": "a" * 65}, "provider", "shorten it to at most 64 characters"),
    ("too_short", {"config": None, "configs": []}, "configs", "give at least 1 entry"),
    ("whole_number", {"seed": "7"}, "seed", "give a whole number, without quotes (e.g. 3)"),
    ("number", {"bucket_cap_mb": "25"}, "bucket_cap_mb", "give a number, without quotes (e.g. 2.5)"),
    (
        "boolean",
        {"network": {"placement_group": "yes"}},
        "network.placement_group",
        "give true or false, without quotes",
    ),
    (
        "extra_forbidden",
        {"iteraions": 100},
        "iteraions",
        "remove iteraions (it is not a field of the request; did you mean iterations?)",
    ),
    (
        "extra_forbidden_nested",
        {"network": {"transprt": "efa"}},
        "network.transprt",
        "remove network.transprt (it is not a field of network; did you mean transport?)",
    ),
]


def _changed(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {**base, **change}.items() if v is not None}


@pytest.mark.parametrize(("kind", "change", "field", "hint"), CASES, ids=[c[0] for c in CASES])
def test_a_schema_error_says_its_concrete_fix(
    client: TestClient, kind: str, change: dict[str, Any], field: str, hint: str
) -> None:
    body = _changed(PREDICTION, change)
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert r.json()["hint"] == hint, r.text
    with pytest.raises(InvalidInput) as caught:
        parse_request(PredictionRequest, body)
    assert caught.value.field == field and caught.value.hint == hint


@pytest.mark.parametrize(
    ("change", "field", "hint"),
    [
        (
            {"stack": {"torch": "two"}},
            "stack.torch",
            "give stack.torch as described: PyTorch version, e.g. 2.13",
        ),
        (
            {"providers": ["AWS"]},
            "providers[0]",
            "give providers[0] matching the pattern ^[a-z0-9][a-z0-9-]*$",
        ),
    ],
    ids=["described", "undescribed"],
)
def test_a_pattern_is_said_by_the_fields_description_else_shown(
    client: TestClient, write_headers: dict[str, str], change: dict[str, Any], field: str, hint: str
) -> None:
    body = _changed(PLAN, change)
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert r.json()["hint"] == hint, r.text
    with pytest.raises(InvalidInput) as caught:
        parse_request(PlanRequest, body)
    assert caught.value.hint == hint


def test_a_query_parameter_is_told_its_fix_and_a_rule_keeps_its_own_hint(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    query = client.get("/v1/probe-jobs", params={"limit": "x"})
    assert query.status_code == 422 and query.json()["field"] == "limit"
    assert query.json()["hint"] == "give a whole number, without quotes (e.g. 3)"
    both = client.post("/v1/plans", json={**PLAN, "model": "resnet50"}, headers=write_headers)
    assert both.status_code == 422 and both.json()["field"] == "profile_ids", both.text
    assert both.json()["hint"] == "keep only one of profiles, model and drop the rest"
    ruled = client.post(
        "/v1/plans",
        json={**PLAN, "recent_market": {"trace": "x"}, "market": "on_demand"},
        headers=write_headers,
    )
    assert ruled.status_code == 422 and ruled.json()["field"] == "recent_market", ruled.text
    assert ruled.json()["hint"].endswith("; change market or drop recent_market")
