"""A provider or region a request body names that the catalog does not hold: POST /v1/plans and POST
/v1/predictions answer it alike (404 `not_found`, `field` naming it, the hint listing the known ones), as
docs/limits.md and both routes' OpenAPI responses say."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.refmodels.shipped import load_reference_profiles
from srift.settings import Settings

PLAN = {"model": "bert-base", "global_batch": 128, "iterations": 100, "availability": {"g4dn.xlarge": 2}}
PREDICTION = {
    "model": "bert-base",
    "iterations": 100,
    "config": {"choices": [{"instance_type": "g4dn.xlarge", "count": 2, "batch": 64}]},
}


@pytest.fixture
def shipped(settings: Settings) -> None:
    """The shipped catalog and reference profiles (bert-base) in the test database."""
    load_shipped_catalog(settings)
    assert load_reference_profiles(settings) > 0


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ({"region": "mars-1"}, ("region", "us-east-1")),
        ({"provider": "azure", "region": "us-east-1"}, ("region", "eastus")),
        ({"provider": "oracle"}, ("provider", "gcp")),
    ],
)
def test_plans_and_predictions_answer_an_unknown_location_alike(
    client: TestClient,
    write_headers: dict[str, str],
    shipped: None,
    where: dict[str, Any],
    named: tuple[str, str],
) -> None:
    field, known = named
    plan = client.post("/v1/plans", json={**PLAN, **where}, headers=write_headers)
    prediction = client.post("/v1/predictions", json={**PREDICTION, **where}, headers=write_headers)
    assert plan.status_code == prediction.status_code == 404, (plan.text, prediction.text)
    assert plan.json() == prediction.json()
    answer = plan.json()
    assert answer["error"] == "not_found" and answer["field"] == field
    assert repr(where[field]) in answer["detail"] and known in answer["hint"]


def test_the_openapi_responses_say_an_unknown_region_is_404(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/plans", "/v1/predictions"):
        answers = paths[path]["post"]["responses"]
        assert "`region`" in answers["404"]["description"], path
