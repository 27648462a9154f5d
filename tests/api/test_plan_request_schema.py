"""srift.api.schemas.plans: the published PlanRequest schema states the rules the planner enforces on a
field's values, so a client that validates against /openapi.json sends nothing the server then refuses."""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from srift.api.app import create_app
from srift.catalog.geo import shipped_spot
from srift.catalog.shipped import load_shipped_catalog
from srift.domain.geo import Location
from srift.errors import InvalidInput
from srift.services.placement import price_interruptions
from srift.settings import Settings
from srift.testing.server import profile_document


@cache  # the schema is the code's, the same for every share; building the app's OpenAPI takes ~0.4 s
def _interruption_rates_schema() -> dict[str, Any]:
    schema = create_app(Settings(database_url="sqlite://")).openapi()
    prop = schema["components"]["schemas"]["PlanRequest"]["properties"]["interruption_rates"]
    (rates,) = [s for s in prop["anyOf"] if s.get("type") == "object"]
    return dict(rates)


def _planner_accepts(share: float) -> bool:
    try:
        price_interruptions(
            (),
            facts=shipped_spot(),
            default_location=Location("aws", "us-east-1"),
            overrides={"p3.8xlarge": share},
        )
    except InvalidInput as refused:
        assert refused.field == "interruption_rates.p3.8xlarge"
        return False
    return True


@pytest.mark.parametrize("share", [-0.1, 0, 0.075, 0.999, 1, 1.5])
def test_interruption_rates_schema_states_the_share_range_the_planner_enforces(share: float) -> None:
    """The planner refuses a monthly share outside [0, 1) while the schema said only `number`; the schema
    now states `minimum` 0 and `exclusiveMaximum` 1, and accepts exactly the shares the planner does."""
    rates = _interruption_rates_schema()
    assert rates["additionalProperties"] == {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
    valid = jsonschema.Draft202012Validator(rates).is_valid({"p3.8xlarge": share})
    assert valid == _planner_accepts(share)


@pytest.mark.parametrize("field", ["providers", "regions"])
def test_an_empty_location_list_is_refused_naming_it_as_empty_profile_ids_are(
    client: TestClient, write_headers: dict[str, str], field: str
) -> None:
    """`providers: []` or `regions: []` answered 201 as if left out; like `profile_ids: []` (min_length 1),
    an empty list is now a 422 naming the field, and the schema says to leave it out for the default."""
    body = {"model": "resnet50", "global_batch": 256, "iterations": 100, field: []}
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    prop = client.get("/openapi.json").json()["components"]["schemas"]["PlanRequest"]["properties"][field]
    (listed,) = [s for s in prop["anyOf"] if s.get("type") == "array"]
    assert listed["minItems"] == 1 and "leave it out for the default" in prop["description"]


@pytest.mark.parametrize(
    ("name", "kept"), [("us-east-1", True), ("aws/us-east-1", True), ("aws/us-east-1/us-east-1a", False)]
)
def test_the_regions_schema_refuses_a_zone_as_the_server_does(
    client: TestClient, settings: Settings, write_headers: dict[str, str], name: str, kept: bool
) -> None:
    """A plan places VMs by region: `regions: ["0/0/0"]` was schema-valid (a location's pattern allows a
    zone) and refused 422 "names a zone"; the schema's item pattern now says region or provider/region."""
    prop = client.get("/openapi.json").json()["components"]["schemas"]["PlanRequest"]["properties"]["regions"]
    (listed,) = [s for s in prop["anyOf"] if s.get("type") == "array"]
    assert jsonschema.Draft202012Validator(listed).is_valid([name]) is kept
    if not kept:
        load_shipped_catalog(settings)
        profiles = [profile_document("NVIDIA T4", seconds_scale=1.0)]
        body = {"profiles": profiles, "global_batch": 256, "iterations": 100, "regions": [name]}
        r = client.post("/v1/plans", json=body, headers=write_headers)
        assert r.status_code == 422 and r.json()["field"] == "regions[0]", r.text
        assert "names a zone" in r.json()["detail"]
