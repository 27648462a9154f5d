"""Model registry on both databases: train, list, activate, roll back (API and CLI), shipped models."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.bandwidth import registry
from srift.bandwidth.learner import BusBandwidthRegressor
from srift.bandwidth.prior import SOURCE as PRIOR
from srift.bandwidth.records import ProbeRecord, records_to_jsonl
from srift.bandwidth.samples import count_samples, store_samples
from srift.db.session import session_factory
from srift.domain import InstanceType, Interconnect
from srift.settings import Settings

from .helpers import run_cli


def tb_instance(name: str, rate_mbit: float) -> InstanceType:
    return InstanceType(
        provider="testbed",
        name=name,
        gpu_model=None,
        gpu_count=0,
        gpu_memory_gib=0,
        vcpus=1,
        memory_gib=4,
        network_gbps=rate_mbit / 1000,
        network_burst=False,
        interconnect=Interconnect.NONE,
        interconnect_gbps=0,
        efa=False,
    )


T4_AWS = InstanceType(
    provider="aws",
    name="g4dn.xlarge",
    gpu_model="T4",
    gpu_count=1,
    gpu_memory_gib=16,
    vcpus=4,
    memory_gib=16,
    network_gbps=25,
    network_burst=True,
    interconnect=Interconnect.NONE,
    interconnect_gbps=0,
    efa=False,
)


@pytest.fixture
def few_records(testbed_records: list[ProbeRecord]) -> list[ProbeRecord]:
    """One link shape (bw.r100.d2) on two hosts, to keep each training run near a second."""
    return [r for r in testbed_records if r.instance_type == "bw.r100.d2" and r.world_size == 2]


def _store(url: str, records: list[ProbeRecord]) -> None:
    with session_factory(url)() as session:
        store_samples(session=session, records=records, origin="jsonl")
        session.commit()


def test_train_list_activate_and_roll_back_through_the_api(
    client: TestClient,
    db_url: str,
    settings: Settings,
    write_headers: dict[str, str],
    few_records: list[ProbeRecord],
) -> None:
    assert (
        client.post("/v1/bandwidth-models", json={}, headers=write_headers).status_code == 409
    )  # no samples
    _store(db_url, few_records)
    assert client.post("/v1/bandwidth-models", json={}).status_code == 401

    first = client.post(
        "/v1/bandwidth-models",
        json={"providers": ["testbed"], "seed": 1, "tune": False},
        headers=write_headers,
    )
    assert first.status_code == 201, first.text
    v1 = first.json()
    assert v1["is_active"] is False and v1["source"] == "xgb:" + v1["version"]
    assert v1["covers"] == ["testbed/bw.r100.d2"]
    metrics = v1["metrics"]
    for key in ("test_mape_small", "test_mape_large", "noise_floor_small", "noise_floor_large"):
        assert 0 <= metrics[key] < 1, key
    assert metrics["n_samples"] == len(few_records)
    assert v1["hyperparams"]["small"] and len(v1["hyperparams"]["grid"]) == 1
    assert {"small.json", "large.json", "metadata.json"} <= {
        p.name for p in (settings.models_dir / v1["version"]).iterdir()
    }

    second = client.post(
        "/v1/bandwidth-models", json={"activate": True, "tune": False}, headers=write_headers
    )
    assert second.status_code == 201, second.text
    v2 = second.json()
    listing = client.get("/v1/bandwidth-models").json()
    assert listing["active"] == v2["version"] and listing["prior"] == PRIOR
    assert [m["version"] for m in listing["models"]] == [v2["version"], v1["version"]]

    shape = {"world_size": 3, "nodes": 3, "buffer_bytes": [4, 1 << 20]}
    with session_factory(db_url)() as session:
        model = registry.active_model(session=session, settings=settings)
        assert model.predict(instance=tb_instance("bw.r100.d2", 100), **shape).source == v2["source"]  # type: ignore[arg-type]
        uncovered = model.predict(instance=T4_AWS, **shape)  # type: ignore[arg-type]
        assert uncovered.source == PRIOR and all(b > 0 for b in uncovered.busbw_gbps)

    rollback = client.post(f"/v1/bandwidth-models/{v1['version']}/activate", headers=write_headers)
    assert rollback.status_code == 200 and rollback.json()["is_active"] is True
    assert client.get("/v1/bandwidth-models").json()["active"] == v1["version"]
    with session_factory(db_url)() as session:
        model = registry.active_model(session=session, settings=settings)
        estimate = model.predict(instance=tb_instance("bw.r100.d2", 100), **shape)  # type: ignore[arg-type]
        assert estimate.source == v1["source"]
        busbw_1m = estimate.busbw_gbps[1]
    assert 0.05 < busbw_1m < 0.105  # a 100 Mbit/s link: busbw tops out near 0.1 Gbit/s


def test_api_errors(client: TestClient, write_headers: dict[str, str]) -> None:
    missing = client.post("/v1/bandwidth-models/20990101-000000-abcdef/activate", headers=write_headers)
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert client.post("/v1/bandwidth-models/x/activate").status_code == 401
    extra = client.post("/v1/bandwidth-models", json={"colour": "red"}, headers=write_headers)
    assert extra.status_code == 422
    unknown = client.post("/v1/bandwidth-models", json={"instance_types": ["p9.mega"]}, headers=write_headers)
    assert unknown.status_code == 404 and unknown.json()["field"] == "instance_types[0]"
    # The hint's route is one this API serves (it named GET /v1/catalog, which is a 404 of its own).
    assert "GET /v1/instance-types" in unknown.json()["hint"], unknown.json()["hint"]
    served = set(client.get("/openapi.json").json()["paths"])
    assert set(re.findall(r"/v1/[a-z-]+", unknown.json()["hint"])) <= served
    empty = client.post("/v1/bandwidth-models", json={}, headers=write_headers)
    assert empty.status_code == 409 and "no stored probe samples" in empty.json()["detail"]
    assert client.get("/v1/bandwidth-models").json() == {"active": None, "prior": PRIOR, "models": []}


def test_models_cli_train_list_activate(
    cli_db: str, few_records: list[ProbeRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    _store(cli_db, few_records)
    code, out, err = run_cli(
        capsys, "models", "train", "--instance-type", "bw.r100.d2", "--no-tune", "--json"
    )
    assert code == 0, err
    trained = json.loads(out)
    assert trained["covers"] == ["testbed/bw.r100.d2"] and trained["is_active"] is False

    code, out, _ = run_cli(capsys, "models", "activate", trained["version"], "--json")
    assert code == 0 and json.loads(out)["is_active"] is True
    code, out, _ = run_cli(capsys, "models", "list", "--json")
    rows = json.loads(out)
    assert [r["version"] for r in rows if r["is_active"]] == [trained["version"]]

    code, table, _ = run_cli(capsys, "models", "list")
    assert code == 0 and trained["version"] in table and "MAPE" in table

    code, _, err = run_cli(capsys, "models", "activate", "19990101-000000-000000")
    assert code == 2 and "no bandwidth model version" in err


def test_shipped_models_register_once_and_activate(
    session: Session, tmp_path: Path, few_records: list[ProbeRecord]
) -> None:
    from srift.bandwidth.tuning import tune_and_fit

    model, report = tune_and_fit(few_records, grid=[{"n_estimators": 40, "max_depth": 3}])
    import datetime as dt

    created = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    directory = tmp_path / "shipped" / "testbed-test"
    registry.write_artifacts(
        directory,
        model=model,
        version="testbed-test",
        created_at=created,
        training_query={"covers": ["testbed/bw.r100.d2"]},
        hyperparams=report.hyperparams(),
        metrics=report.metrics(),
        origin="shipped",
    )
    (directory / registry.SHIPPED_SAMPLES).write_bytes(gzip.compress(records_to_jsonl(few_records).encode()))
    assert registry.register_shipped(session=session, directories=[tmp_path / "shipped"]) == ["testbed-test"]
    assert registry.register_shipped(session=session, directories=[tmp_path / "shipped"]) == []
    active = registry.active_version(session=session)
    assert (
        active is not None
        and active.version == "testbed-test"
        and active.created_at == created.replace(tzinfo=None)
    )
    assert count_samples(session=session) == len(few_records)
    metadata = json.loads((directory / "metadata.json").read_text())
    assert metadata["format"] == registry.FORMAT and metadata["metrics"] == report.metrics()
    assert isinstance(BusBandwidthRegressor.load(directory, metadata["learner"]), BusBandwidthRegressor)


def test_the_repositorys_shipped_model_serves_testbed_types(settings: Settings) -> None:
    registry.load_shipped_models(settings)
    with session_factory(settings.resolved_database_url)() as session:
        active = registry.active_version(session=session)
        assert active is not None and active.version.startswith("testbed-")
        assert "testbed/bw.r1000.d05" in active.covers
        assert active.metrics["test_mape_large"] <= 0.12 and active.metrics["test_mape_small"] <= 0.25
        model = registry.active_model(session=session, settings=settings)
        sizes = [4, 1 << 10, 1 << 20, 32 << 20]
        for name, rate in (("bw.r100.d2", 100), ("bw.r1000.d05", 1000)):
            estimate = model.predict(
                instance=tb_instance(name, rate), world_size=4, nodes=4, buffer_bytes=sizes
            )
            assert estimate.source == active.source
            assert all(b > 0 for b in estimate.busbw_gbps)
            assert 0.6 * rate / 1000 < estimate.busbw_gbps[-1] < 1.1 * rate / 1000  # near the link rate
    registry.load_shipped_models(settings)  # idempotent


def test_a_moved_data_folder_serves_its_trained_model_not_the_prior(
    session: Session, settings: Settings, tmp_path: Path, few_records: list[ProbeRecord]
) -> None:
    """A data folder restored elsewhere (a validation run's work folder unpacked from an archive) keeps its
    versions under its models folder while the database still names the old path: the learned model must
    answer, not the α-β prior (re-scoring stored runs silently fell back to the prior)."""
    import shutil

    _store(settings.resolved_database_url, few_records)
    trained = registry.train_version(session=session, settings=settings, tune=False, activate_it=True)
    session.commit()
    moved = tmp_path / "restored" / "models"
    shutil.copytree(settings.models_dir, moved)
    shutil.rmtree(settings.models_dir)
    assert not Path(registry.active_version(session=session).artifact_dir).exists()  # type: ignore[union-attr]
    instance = tb_instance("bw.r100.d2", 100)

    restored = settings.model_copy(update={"models_dir": moved})
    model = registry.active_model(session=session, settings=restored)
    estimate = model.predict(instance=instance, world_size=2, nodes=2, buffer_bytes=[1 << 20])
    assert estimate.source == trained.source != PRIOR

    gone = settings.model_copy(update={"models_dir": tmp_path / "nowhere"})
    fallback = registry.active_model(session=session, settings=gone)
    assert fallback.predict(instance=instance, world_size=2, nodes=2, buffer_bytes=[1 << 20]).source == PRIOR
