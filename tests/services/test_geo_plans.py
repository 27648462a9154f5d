"""Plans across regions and clouds, data-loading limits and spot outlooks, on the shipped catalog."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.optimize.synthetic import synthetic_profile
from srift.settings import Settings


@pytest.fixture
def t4(settings: Settings) -> dict[str, Any]:
    load_shipped_catalog(settings)
    return synthetic_profile("resnet50", "T4").to_dict()


def _body(profile: dict[str, Any], **over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "profiles": [profile],
        "global_batch": 512,
        "iterations": 2000,
        "objective": "min_cost",
        "market": "spot",
    }
    body.update(over)
    return body


def test_two_regions_two_providers_plan_has_egress_on_its_cost_line(
    client: TestClient, write_headers: dict[str, str], t4: dict[str, Any]
) -> None:
    """The request of benchmarks/geo_plan_time.py, which measures its time (< 1 s) on a quiet machine."""
    # Four T4 VMs per location at most (batch ≤ 64 each), so a global batch of 512 needs both clouds.
    body = _body(
        t4,
        providers=["aws", "gcp"],
        regions=["aws/us-east-1", "gcp/us-central1"],
        availability={"g4dn.xlarge": 4, "n1-standard-8-1xt4": 4},
    )
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert {c["location"] for c in plan["choices"]} == {"aws/us-east-1", "gcp/us-central1"}
    assert [loc["location"] for loc in plan["locations"]] == ["aws/us-east-1", "gcp/us-central1"]
    assert sum(loc["vms"] for loc in plan["locations"]) == sum(plan["counts"])
    cost = plan["cost"]
    assert cost["egress_usd"] > 0 and cost["instances_usd"] > 0
    assert cost["total_usd"] == pytest.approx(cost["instances_usd"] + cost["egress_usd"])
    assert cost["egress_share"] == pytest.approx(cost["egress_usd"] / cost["total_usd"])
    routes = {(e["source"], e["destination"]): e for e in plan["egress"]}
    # AWS → GCP and GCP → AWS leave the provider: internet egress at each provider's price.
    assert routes[("aws/us-east-1", "gcp/us-central1")]["route"] == "internet"
    assert routes[("aws/us-east-1", "gcp/us-central1")]["usd_per_gb"] == 0.09
    assert routes[("gcp/us-central1", "aws/us-east-1")]["usd_per_gb"] == 0.12
    assert "[aws/us-east-1]" in plan["label"] and "[gcp/us-central1]" in plan["label"]
    assert plan["breakdown"]["exposed_location_s"] >= 0


def test_one_location_is_cheaper_when_nothing_forces_a_second(
    client: TestClient, write_headers: dict[str, str], t4: dict[str, Any]
) -> None:
    body = _body(t4, providers=["aws", "gcp"], regions=["aws/us-east-1", "gcp/us-central1"])
    plan = client.post("/v1/plans", json=body, headers=write_headers).json()
    assert len({c["location"] for c in plan["choices"]}) == 1
    assert plan["cost"]["egress_usd"] == 0.0


def test_a_profile_whose_loader_cannot_feed_a_small_vm_avoids_it_and_says_why(
    client: TestClient, write_headers: dict[str, str], t4: dict[str, Any]
) -> None:
    # 20 samples/s per core: g4dn.xlarge leaves 3 cores to the loader (60 samples/s) while its T4 trains
    # ~130 samples/s at batch 64: it stalls and costs more per iteration than g4dn.2xlarge (7 cores, 140/s).
    fast_enough = _body(t4, availability={"g4dn.xlarge": 8, "g4dn.2xlarge": 8}, global_batch=256)
    baseline = client.post("/v1/plans", json=fast_enough, headers=write_headers).json()
    assert {c["instance_type"] for c in baseline["choices"]} == {"g4dn.xlarge"}
    starved = {**fast_enough, "input_pipeline": {"samples_per_s_per_core": 20, "bytes_per_sample": 110_000}}
    plan = client.post("/v1/plans", json=starved, headers=write_headers).json()
    assert {c["instance_type"] for c in plan["choices"]} == {"g4dn.2xlarge"}
    assert any("g4dn.xlarge is data-loading bound" in w and "3 loader vCPU(s)" in w for w in plan["warnings"])
    feeds = {f["instance_type"]: f for f in plan["data_loading"]}
    assert feeds["g4dn.xlarge"]["loader_cores"] == 3 and feeds["g4dn.2xlarge"]["loader_cores"] == 7
    assert feeds["g4dn.xlarge"]["stalls_above_batch"] is not None
    assert plan["breakdown"]["data_stall_s"] == 0.0


def test_a_spot_plan_reports_expected_and_uninterrupted_time_and_cost(
    client: TestClient, write_headers: dict[str, str], t4: dict[str, Any]
) -> None:
    body = _body(
        t4,
        market="any",
        iterations=40_000,
        time_limit_s=30_000,
        availability={"g4dn.xlarge": 8},
        interruption_rates={"g4dn.xlarge": 0.99},
        spot_samples=500,
    )
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    spot = plan["spot"]
    assert spot is not None, plan["warnings"]
    assert spot["expected_time_s"] > spot["uninterrupted_time_s"]
    assert spot["expected_cost_usd"] > 0 and 0 <= spot["p_meets_time_limit"] <= 1
    assert spot["rates"][0]["band"] == "given" and spot["rates"][0]["monthly_fraction"] == 0.99
    assert plan["fallback"] is not None and all(
        c["market"] == "on_demand" for c in plan["fallback"]["choices"]
    )
    assert plan["predicted"]["uninterrupted_time_s"] == pytest.approx(spot["uninterrupted_time_s"])


def test_unknown_regions_and_providers_are_404_naming_the_field(
    client: TestClient, write_headers: dict[str, str], t4: dict[str, Any]
) -> None:
    """A region or provider the catalog does not hold is data not stored (404, as predictions and the
    catalog answer it); a provider/region whose provider the request leaves out is an invalid request."""
    r = client.post("/v1/plans", json=_body(t4, regions=["mars-1"]), headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "regions[0]" and "us-east-1" in r.json()["hint"]
    r = client.post("/v1/plans", json=_body(t4, regions=["aws/mars-1"]), headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "regions[0]" and "us-east-1" in r.json()["hint"]
    r = client.post("/v1/plans", json=_body(t4, providers=["aws", "oracle"]), headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "providers[1]" and "gcp" in r.json()["hint"]
    r = client.post(
        "/v1/plans", json=_body(t4, providers=["aws"], regions=["gcp/us-central1"]), headers=write_headers
    )
    assert r.status_code == 422 and r.json()["field"] == "regions[0]" and "providers" in r.json()["hint"]


def test_cli_plan_shows_locations_the_cost_line_egress_and_the_spot_outlook(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from srift.cli import main
    from srift.settings import get_settings

    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        request = _body(
            synthetic_profile("resnet50", "T4").to_dict(),
            providers=["aws", "gcp"],
            regions=["aws/us-east-1", "gcp/us-central1"],
            availability={"g4dn.xlarge": 4, "n1-standard-8-1xt4": 4},
            spot_samples=200,
        )
        path = tmp_path / "geo.yaml"
        path.write_text(yaml.safe_dump(request))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path)])
        out = capsys.readouterr().out
        assert done.value.code == 0, out
        assert "VMs per location" in out and "aws/us-east-1" in out and "gcp/us-central1" in out
        assert "cost: instances $" in out and "egress" in out and "internet" in out
        flat = " ".join(out.split())
        assert "headline's time and cost restart the fleet in place after each interruption" in flat
        assert "with §4.5 re-planning instead: expected" in flat and "uninterrupted" in flat
        assert "on-demand fallback:" in out
    finally:
        get_settings.cache_clear()
