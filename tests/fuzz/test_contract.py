"""The rules across fields: the schema publishes each one the server enforces, the harness has a predicate
for each published one, and a body that breaks one (and only that one) is refused naming its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.api.app import create_app
from srift.catalog.shipped import load_shipped_catalog
from srift.documents import RULES_KEY
from srift.domain.rings import RING_TYPES_ONCE
from srift.settings import Settings
from srift.testing.server import profile_document
from tests.fuzz.contract import RULES, broken_rule, published_rules


def test_every_published_rule_has_a_predicate_and_every_predicate_a_published_rule() -> None:
    schema = create_app(Settings(database_url="sqlite://")).openapi()
    assert published_rules(schema) == set(RULES)
    profile = schema["components"]["schemas"]["ProfileIn"]
    assert {r["id"] for r in profile["x-srift-rules"]} == {
        "breakpoints-within-max-batch",
        "gradients-within-parameters",
    }
    assert all(r["rule"] for r in profile["x-srift-rules"])


def test_a_rings_name_is_one_rule_under_one_id_wherever_a_schema_takes_one() -> None:
    """A mixed ring names each of its types once, whether it is a probe sample's instance_type, an entry of a
    training request's instance_types or the curves query's instance_type: one rule, so one id and one
    sentence (they were published as ring-members-once and ring-types-once)."""
    schema = create_app(Settings(database_url="sqlite://")).openapi()
    components = schema["components"]["schemas"]
    (curves,) = [
        p["schema"]
        for p in schema["paths"]["/v1/bandwidth-models/{version}/curves"]["get"]["parameters"]
        if p["name"] == "instance_type"
    ]
    places = (components["ProbeSampleDocument"], components["TrainRequest"], curves)
    rings = {(r["id"], r["rule"]) for place in places for r in place[RULES_KEY] if "ring" in r["id"]}
    assert rings == {RING_TYPES_ONCE}
    assert {rule for rule in RULES if "ring" in rule} == {RING_TYPES_ONCE[0]}


def _sample(**changes: Any) -> dict[str, Any]:
    base = {
        "provider": "local",
        "instance_type": "local",
        "backend": "gloo",
        "buffer_bytes": 1_000_000,
        "world_size": 4,
        "nodes": 2,
        "ranks_per_node": 2,
        "time_s": 0.001,
        "algbw_gbps": 8.0,
        "busbw_gbps": 12.0,
    }
    return {**base, **changes}


_T4 = {"instance_type": "g4dn.xlarge", "count": 1, "batch": 64}


def _prediction(*choices: dict[str, Any]) -> dict[str, Any]:
    profile = profile_document("NVIDIA T4", seconds_scale=1.0)
    return {"profiles": [profile], "config": {"choices": list(choices)}, "iterations": 100}


def _broken_profile(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(profile_document("NVIDIA T4", seconds_scale=1.0))
    doc.update(changes)
    return doc


CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("breakpoints-within-max-batch", "/v1/profiles", _broken_profile(max_batch=128), "forward.batches"),
    (
        "world-size-is-nodes-times-ranks",
        "/v1/probe-results",
        {"samples": [_sample(world_size=6, algbw_gbps=None, busbw_gbps=None)]},
        "samples[0].world_size",
    ),
    ("bandwidths-agree-with-time", "/v1/probe-results", {"samples": [_sample(busbw_gbps=8.0)]}, "samples[0]"),
    ("choices-distinct", "/v1/predictions", _prediction(_T4, _T4), "config.choices[1].instance_type"),
    (
        "one-gpus-per-type",
        "/v1/predictions",
        _prediction(_T4, {**_T4, "market": "spot", "gpus": 1}),
        "config.choices[1].gpus",
    ),
    (
        "parameter-server-fleet-size",
        "/v1/predictions",
        {**_prediction({**_T4, "count": 65}), "comm": "parameter_server"},
        "comm",
    ),
    (
        "checkpointing-needs-strategy",
        "/v1/predictions",
        {**_prediction(_T4), "checkpointing": True},
        "checkpointing",
    ),
    (
        "strategy-as-planned",
        "/v1/predictions",
        {**_prediction(_T4), "strategy": "zero2", "mc_samples": 10},
        "mc_samples",
    ),
    (
        "probe-grid-size",
        "/v1/probe-jobs",
        {
            "provider": "local",
            "instance_type": "local",
            "node_counts": [2, 3],
            "sizes": list(range(4, 4100, 4)),
        },
        "grid",
    ),
    (
        "ring-types-once",
        "/v1/bandwidth-models",
        {"instance_types": ["p3.8xlarge", "g5.12xlarge+p3.8xlarge+g5.12xlarge"]},
        "instance_types[1]",
    ),
    (
        "ring-types-once",
        "/v1/probe-results",
        {"samples": [_sample(), _sample(instance_type="tb.large + tb.small+tb.large")]},
        "samples[1].instance_type",
    ),
]


@pytest.mark.parametrize(("rule", "path", "body", "field"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_a_body_breaking_one_rule_is_flagged_and_refused(
    rule: str,
    path: str,
    body: dict[str, Any],
    field: str,
    settings: Settings,
    client: TestClient,
    write_headers: dict[str, str],
) -> None:
    if path == "/v1/predictions":
        load_shipped_catalog(settings)  # fleet rules are checked on catalog types
    assert broken_rule(body, set(RULES)) == rule
    r = client.post(path, json=body, headers=write_headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"].startswith(field)


def test_kept_rules_pass_the_predicates() -> None:
    assert broken_rule(_broken_profile(), set(RULES)) is None
    assert broken_rule({"samples": [_sample()]}, set(RULES)) is None
    assert broken_rule({"samples": [_sample(instance_type=" tb.small + tb.large")]}, set(RULES)) is None
    assert (
        broken_rule({"samples": [_sample(nodes=None, ranks_per_node=None, world_size=4)]}, set(RULES)) is None
    )
    assert broken_rule(_prediction(_T4, {**_T4, "market": "spot"}), set(RULES)) is None
    assert (
        broken_rule(
            {**_prediction(_T4), "strategy": "ddp", "checkpointing": False, "mc_samples": 9}, set(RULES)
        )
        is None
    )
