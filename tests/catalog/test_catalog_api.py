"""GET /v1/instance-types: filters, prices with provenance, and 4xx answers that list valid values."""

from __future__ import annotations

from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.settings import Settings


def test_filters_and_errors(settings: Settings, client: TestClient) -> None:
    assert client.get("/v1/instance-types").json() == []
    load_shipped_catalog(settings)

    everything = client.get(
        "/v1/instance-types"
    )  # 108 AWS rows in us-east-1/us-west-2, 14 g4dn in the EU, 8 GCP/Azure
    assert everything.status_code == 200 and len(everything.json()) == 130

    r = client.get("/v1/instance-types", params={"provider": "aws", "region": "us-east-1", "gpu": "V100"})
    assert r.status_code == 200
    rows = r.json()
    assert [x["name"] for x in rows] == ["p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge"]
    p38 = rows[1]
    assert p38["interconnect"] == "nvlink" and p38["gpu_count"] == 4 and p38["accelerator"] == "V100"
    assert p38["prices"]["on_demand"] == {
        "price_usd_per_hr": 12.24,
        "source": p38["prices"]["on_demand"]["source"],
        "as_of": "2025-05-31",
    }
    assert "SkyPilot" in p38["prices"]["spot"]["source"]

    big = client.get(
        "/v1/instance-types", params={"region": "us-west-2", "min_gpus": 8, "market": "spot"}
    ).json()
    assert big and all(x["gpu_count"] >= 8 and x["prices"]["spot"] for x in big)

    paper = client.get("/v1/instance-types", params={"snapshot": "srift-paper-2020", "market": "spot"}).json()
    assert {x["name"]: x["prices"]["spot"]["price_usd_per_hr"] for x in paper} == {
        "p3.8xlarge": 3.68,
        "g3.8xlarge": 0.69,
        "g4dn.8xlarge": 0.72,
    }

    bad = client.get("/v1/instance-types", params={"provider": "oracle"})
    assert bad.status_code == 404 and bad.json()["field"] == "provider" and "aws" in bad.json()["hint"]
    bad = client.get("/v1/instance-types", params={"provider": "aws", "region": "moon-1"})
    assert bad.status_code == 404 and "us-west-2" in bad.json()["hint"]
    bad = client.get("/v1/instance-types", params={"snapshot": "nope\x00"})
    assert bad.status_code == 422 and bad.json()["field"] == "snapshot" and "NUL" in bad.json()["detail"]
    assert client.get("/v1/instance-types", params={"min_gpus": -1}).status_code == 422
    assert client.get("/v1/instance-types", params={"market": "reserved"}).status_code == 422
