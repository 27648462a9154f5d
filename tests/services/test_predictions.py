"""Predictions service and POST /v1/predictions: fleets from profiles + catalog + bandwidth model; 422s."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sim.kit import TableBandwidth, member, profile
from sqlalchemy.orm import Session

from srift.api.schemas.predictions import parse_prediction_request
from srift.catalog.custom import import_document
from srift.documents import to_document
from srift.domain.requests import PredictionQuery
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput, NotFound
from srift.profiling.store import save_profile
from srift.services.predictions import SPOT_NOT_PRICED, predict, predict_sweep
from srift.settings import Settings
from srift.sim import simulate

LAB = {
    "provider": "lab",
    "snapshot": "lab-test",
    "source": "lab rate card (test)",
    "as_of": "2026-11-01",
    "instance_types": [
        {
            "name": "v100x1",
            "gpu_model": "V100",
            "gpu_count": 1,
            "gpu_memory_gib": 16,
            "vcpus": 8,
            "memory_gib": 61,
            "network_gbps": 10,
            "interconnect": "none",
            "interconnect_gbps": 0,
            "efa": False,
            "prices": {"lab-1": {"on_demand": 3.06, "spot": 0.918}},
        },
        {
            "name": "v100x4",
            "gpu_model": "V100",
            "gpu_count": 4,
            "gpu_memory_gib": 16,
            "vcpus": 32,
            "memory_gib": 244,
            "network_gbps": 10,
            "interconnect": "nvlink",
            "interconnect_gbps": 300,
            "efa": False,
            "prices": {"lab-1": {"on_demand": 12.24}},
        },
        {
            "name": "t4x1",
            "gpu_model": "T4",
            "gpu_count": 1,
            "gpu_memory_gib": 16,
            "vcpus": 4,
            "memory_gib": 16,
            "network_gbps": 5,
            "interconnect": "none",
            "interconnect_gbps": 0,
            "efa": False,
            "prices": {"lab-1": {"on_demand": 0.526}},
        },
    ],
}
PROFILE = profile(fw_s=0.1, bw_s=0.2, layers=((400_000_000, 0.3), (600_000_000, 0.9)), cv=0.03)


@pytest.fixture
def lab(session: Session) -> Session:
    import_document(session=session, document=LAB, origin="test")
    session.commit()
    return session


def _request(**over: Any) -> PredictionQuery:
    doc: dict[str, Any] = {
        "profiles": [PROFILE.to_dict()],
        "config": {"choices": [{"instance_type": "v100x1", "market": "spot", "count": 4, "batch": 64}]},
        "iterations": 1000,
        "provider": "lab",
        "region": "lab-1",
    }
    doc.update(over)
    return parse_prediction_request(doc).to_domain()


def test_predicts_and_prices_a_fleet(lab: Session, settings: Settings) -> None:
    model = TableBandwidth({1: 8.0})
    out = predict(session=lab, settings=settings, query=_request(), bandwidth=model).document()
    fleet = [member(_lab_type(lab, "v100x1"), 4, 64, PROFILE)]
    expected = simulate(fleet, bandwidth=TableBandwidth({1: 8.0}), config=PER_LAYER)
    assert out["predicted"]["iteration_s"] == pytest.approx(expected.iteration_s, rel=1e-12)
    assert out["predicted"]["total_time_s"] == pytest.approx(1000 * expected.iteration_s)
    assert out["usd_per_hr"] == pytest.approx(4 * 0.918)
    assert out["predicted"]["cost_usd"] == pytest.approx(1000 * expected.iteration_s * 4 * 0.918 / 3600)
    assert out["label"] == "4×v100x1@64"
    assert out["choices"][0] == {
        "instance_type": "v100x1",
        "market": "spot",
        "count": 4,
        "batch": 64,
        "gpus": 1,
        "per_gpu_batch": 64.0,
        "price_usd_per_hr": 0.918,
        "instance_gpus": 1,
        "compute": "measured",
        "compute_spread": None,
        "memory_per_gpu_bytes": None,  # the toy profile has no memory model
        "gpu_memory_bytes": 16 * 2**30,
        "batch_limit": None,
    }
    assert out["sources"][0] == "profile:inline toy@V100"
    assert "table:test" in out["sources"]
    assert any(s.startswith("price:lab rate card (test)") for s in out["sources"])
    b = out["breakdown"]
    parts = b["compute_s"] + b["straggler_wait_s"] + b["exposed_intra_s"] + b["exposed_network_s"]
    assert parts == pytest.approx(out["predicted"]["iteration_s"])


def test_what_the_request_gives_and_no_fleet_uses_is_named_in_the_warnings(
    lab: Session, settings: Settings
) -> None:
    """A measured rate keyed by a type no fleet has (a typo) and parameter servers under allreduce were
    dropped without a word; the warnings now name them (with the closest fleet type). A key of a type one
    fleet of a sweep has draws no warning in another fleet of that sweep."""
    model = TableBandwidth({1: 8.0})
    query = _request(network={"measured_gbps": {"v100x": 4.0}}, ps_servers=2)
    out = predict(session=lab, settings=settings, query=query, bandwidth=model).document()
    assert out["warnings"][:2] == [
        "network.measured_gbps.v100x ignored: no fleet of this request has a v100x (closest: v100x1)",
        "ps_servers 2 ignored: it counts parameter servers, and comm is allreduce (give comm "
        "parameter_server to use them)",
    ]
    fleets = [
        {"choices": [{"instance_type": "v100x1", "market": "spot", "count": 2, "batch": 64}]},
        {"choices": [{"instance_type": "v100x4", "market": "on_demand", "count": 2, "batch": 64}]},
    ]
    sweep = _request(config=None, configs=fleets, network={"measured_gbps": {"v100x4": 4.0}})
    answer = predict_sweep(session=lab, settings=settings, query=sweep, bandwidth=model).document()
    assert not any("ignored" in w for p in answer["predictions"] for w in p["warnings"])
    used = predict(session=lab, settings=settings, query=_request(), bandwidth=model).document()
    assert not any("ignored" in w for w in used["warnings"])


def test_a_fleet_with_spot_vms_says_its_interruptions_are_not_priced_in(
    lab: Session, settings: Settings
) -> None:
    """A spot plan's total time and cost are expected over interruptions; a prediction of the same fleet
    gave the uninterrupted run's, a little lower, and nothing said which it was (found by invariants19b).
    Each fleet of a sweep that has spot VMs now says so; an on-demand fleet does not."""
    fleets = [
        {"choices": [{"instance_type": "v100x1", "market": "spot", "count": 2, "batch": 64}]},
        {"choices": [{"instance_type": "v100x4", "market": "on_demand", "count": 2, "batch": 64}]},
    ]
    query = _request(config=None, configs=fleets)
    answer = predict_sweep(session=lab, settings=settings, query=query, bandwidth=TableBandwidth({1: 8.0}))
    spot, on_demand = (p["warnings"] for p in answer.document()["predictions"])
    assert SPOT_NOT_PRICED in spot
    assert SPOT_NOT_PRICED not in on_demand


def _lab_type(session: Session, name: str) -> Any:
    from srift.catalog.store import get_instance_type

    return get_instance_type(session=session, provider="lab", name=name)


def test_stored_profiles_by_id_and_by_model_pick_the_matching_accelerator(
    lab: Session, settings: Settings
) -> None:
    t4 = profile(accelerator="T4", fw_s=0.3, bw_s=0.6, layers=((400_000_000, 0.3), (600_000_000, 0.9)))
    v100_id = save_profile(session=lab, profile=PROFILE)
    t4_id = save_profile(session=lab, profile=t4)
    lab.commit()
    mixed = {
        "choices": [
            {"instance_type": "v100x4", "market": "on_demand", "count": 1, "batch": 256},
            {"instance_type": "t4x1", "market": "on_demand", "count": 2, "batch": 32},
        ]
    }
    by_id = predict(
        session=lab,
        settings=settings,
        query=_request(profiles=None, profile_ids=[t4_id, v100_id], config=mixed),
    ).document()
    by_model = predict(
        session=lab, settings=settings, query=_request(profiles=None, model="toy", config=mixed)
    ).document()
    assert by_id["predicted"] == by_model["predicted"]
    assert by_id["sources"][:2] == [f"profile:{v100_id} toy@V100", f"profile:{t4_id} toy@T4"]
    assert by_id["breakdown"]["compute_s"] == pytest.approx(0.9 * 32 / 64)
    assert by_id["usd_per_hr"] == pytest.approx(12.24 + 2 * 0.526)
    assert "prior:alpha-beta" in by_id["sources"]


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        (
            {"config": {"choices": [{"instance_type": "t4x1", "count": 1, "batch": 8}]}},
            "config.choices[0].instance_type",
            "no profile for t4x1's accelerator 'T4'",
        ),
        (
            {"config": {"choices": [{"instance_type": "v100x4", "count": 1, "batch": 4 * 65}]}},
            "config.choices[0].batch",
            "above the profile's max_batch 64",
        ),
        (
            {"config": {"choices": [{"instance_type": "v100x", "count": 1, "batch": 8}]}},
            "config.choices[0].instance_type",
            "no instance type 'v100x'",
        ),
        (
            {"config": {"choices": [{"instance_type": "v100x4", "market": "spot", "count": 1, "batch": 8}]}},
            "config.choices[0].market",
            "no spot price",
        ),
        (
            {
                "config": {
                    "choices": [
                        {"instance_type": "v100x1", "count": 1, "batch": 8},
                        {"instance_type": "v100x1", "count": 2, "batch": 8},
                    ]
                }
            },
            "config.choices[1].instance_type",
            "listed twice",
        ),
        ({"region": "mars-1"}, "region", "mars-1"),
        ({"profiles": None, "profile_ids": [999]}, "profile_ids[0]", "no profile with id 999"),
        ({"profiles": [{"model": "x"}]}, "profiles[0].accelerator", "Field required"),
        (
            {
                "comm": "parameter_server",
                "config": {"choices": [{"instance_type": "v100x1", "count": 65, "batch": 8}]},
            },
            "comm",
            "at most 64 VMs",
        ),
    ],
)
def test_bad_requests_name_the_field_and_the_fix(
    lab: Session, settings: Settings, over: dict[str, Any], field: str, words: str
) -> None:
    missing = field in ("region", "profile_ids[0]") or "no instance type" in words  # names what is not stored
    with pytest.raises(NotFound if missing else InvalidInput) as err:
        predict(session=lab, settings=settings, query=_request(**over), bandwidth=TableBandwidth({1: 8.0}))
    assert err.value.field == field
    assert words in err.value.detail
    assert err.value.hint


def test_requests_that_would_run_for_minutes_are_refused(lab: Session, settings: Settings) -> None:
    big = profile(layers=[(4096, (i + 1) / 3000) for i in range(3000)])
    with pytest.raises(InvalidInput) as err:
        predict(
            session=lab,
            settings=settings,
            query=_request(profiles=[big.to_dict()], mc_samples=1000),
            bandwidth=TableBandwidth({1: 8.0}),
        )
    assert err.value.field == "mc_samples"
    assert "mc_samples ≤ 666" in err.value.hint


def test_request_schema_rejects_counts_below_one() -> None:
    with pytest.raises(InvalidInput) as err:
        _request(config={"choices": [{"instance_type": "v100x1", "count": 0, "batch": 8}]})
    assert err.value.field == "config.choices[0].count"


def test_post_predictions(client: TestClient, lab: Session) -> None:
    body = {k: v for k, v in to_document(_request()).items() if k != "owner"}  # who asks: the token
    ok = client.post("/v1/predictions", json=body)
    assert ok.status_code == 200, ok.text
    data = ok.json()
    assert data["predicted"]["iteration_p10_s"] <= data["predicted"]["iteration_p90_s"]
    assert data["comm"] == "allreduce"
    assert "prior:alpha-beta" in data["sources"]
    body["config"]["choices"][0]["batch"] = 65
    bad = client.post("/v1/predictions", json=body)
    assert bad.status_code == 422
    assert bad.json()["field"] == "config.choices[0].batch"
    assert "max_batch" in bad.json()["detail"]
    zero = client.post(
        "/v1/predictions",
        json={**body, "config": {"choices": [{**body["config"]["choices"][0], "count": 0}]}},
    )
    assert zero.status_code == 422
    assert zero.json()["field"] == "config.choices[0].count"


def test_cli_predict_prints_a_table_and_json(
    sqlite_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from srift.cli import build_app
    from srift.db.session import transaction
    from srift.settings import get_settings

    monkeypatch.setenv("SRIFT_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    with transaction(sqlite_url) as s:
        import_document(session=s, document=LAB, origin="test")
    request = tmp_path / "req.json"
    request.write_text(json.dumps({k: v for k, v in to_document(_request()).items() if k != "owner"}))
    runner = CliRunner()
    app = build_app()
    table = runner.invoke(app, ["predict", str(request)])
    assert table.exit_code == 0, table.output
    assert "4×v100x1@64" in table.output
    assert "exposed network" in table.output
    as_json = runner.invoke(app, ["predict", str(request), "--json", "--mc-samples", "20"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["label"] == "4×v100x1@64"
    assert data["predicted"]["iteration_p10_s"] <= data["predicted"]["iteration_p90_s"]
    example = runner.invoke(app, ["predict", "--example"])
    assert "config:" in example.output
    get_settings.cache_clear()
