"""Training a bandwidth model version through the service (POST /v1/bandwidth-models, `srift models
train`): a provider filter that neither the catalog nor the stored samples name is a 404 on `providers[i]`
listing the known providers; a known provider with no samples stays the 409 "nothing to train on"."""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from srift.bandwidth.records import BACKENDS, ProbeRecord, parse_jsonl
from srift.bandwidth.samples import sample_instance_types, sample_providers, store_samples
from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory
from srift.settings import Settings, get_settings
from tests.bandwidth.helpers import run_cli

SAMPLES = Path(__file__).resolve().parents[1] / "bandwidth" / "data" / "testbed_samples.jsonl.gz"


@pytest.fixture
def stored_testbed(db_url: str) -> list[ProbeRecord]:
    """A few real testbed gloo samples, stored: their provider `testbed` is one the catalog need not list."""
    text = gzip.decompress(SAMPLES.read_bytes()).decode()
    records = parse_jsonl(text, source=SAMPLES.name)[:8]
    with session_factory(db_url)() as session:
        store_samples(session=session, records=records, origin="jsonl")
        session.commit()
    return records


def test_an_unknown_provider_is_a_404_naming_its_position_and_the_known_ones(
    client: TestClient, settings: Settings, write_headers: dict[str, str], stored_testbed: list[ProbeRecord]
) -> None:
    load_shipped_catalog(settings)
    r = client.post("/v1/bandwidth-models", json={"providers": ["testbed", "IBM"]}, headers=write_headers)
    assert r.status_code == 404, r.text
    body = r.json()
    assert body["error"] == "not_found" and body["field"] == "providers[1]"
    assert "'ibm'" in body["detail"]
    assert "aws, azure, gcp, testbed" in body["hint"] and "leave `providers` out" in body["hint"]

    empty = client.post("/v1/bandwidth-models", json={"providers": ["gcp"]}, headers=write_headers)
    assert empty.status_code == 409 and "no stored probe samples" in empty.json()["detail"]


def test_sample_providers_lists_each_stored_provider_once(
    db_url: str, stored_testbed: list[ProbeRecord]
) -> None:
    with session_factory(db_url)() as session:
        assert sample_providers(session=session) == ["testbed"]


def test_sample_instance_types_counts_a_mixed_ring_as_each_member(
    db_url: str, stored_testbed: list[ProbeRecord]
) -> None:
    plain = stored_testbed[0].instance_type
    ring = dataclasses.replace(stored_testbed[0], instance_type=f"{plain}+tb-other", run_id="mixed-ring")
    with session_factory(db_url)() as session:
        store_samples(session=session, records=[ring], origin="jsonl")
        assert sample_instance_types(session=session) == sorted({plain, "tb-other"})


@pytest.fixture
def cli_env(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SRIFT_DATABASE_URL", db_url)
    monkeypatch.setenv("SRIFT_MODELS_DIR", str(tmp_path / "cli-models"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--provider", "ibm"], ["providers[0]", "unknown provider 'ibm'", "testbed"]),
        (["--backend", "openmpi"], ["backends[0]", "unknown backend 'openmpi'", "nccl-tests"]),
        (["--instance-type", "tb-nope"], ["instance_types[0]", "unknown instance type 'tb-nope'"]),
    ],
)
def test_the_cli_refuses_an_unknown_filter_the_same_way(
    cli_env: None,
    stored_testbed: list[ProbeRecord],
    capsys: pytest.CaptureFixture[str],
    option: list[str],
    said: list[str],
) -> None:
    code, _, err = run_cli(capsys, "models", "train", *option, "--no-tune")
    assert code == 2, err
    flat = " ".join(err.split())
    assert all(words in flat for words in said), flat


def test_the_backend_filter_is_an_enum_of_the_stored_backends(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    items = spec["components"]["schemas"]["TrainRequest"]["properties"]["backends"]["items"]
    assert tuple(items["enum"]) == BACKENDS


def test_an_unknown_backend_is_a_422_naming_its_position(
    client: TestClient, write_headers: dict[str, str], stored_testbed: list[ProbeRecord]
) -> None:
    r = client.post("/v1/bandwidth-models", json={"backends": ["gloo", "openmpi"]}, headers=write_headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "backends[1]" and "'nccl-tests'" in r.json()["detail"]
    assert client.get("/v1/bandwidth-models").json()["models"] == []


def test_an_unknown_instance_type_is_a_404_naming_its_position_and_close_names(
    client: TestClient, settings: Settings, write_headers: dict[str, str], stored_testbed: list[ProbeRecord]
) -> None:
    load_shipped_catalog(settings)
    stored = stored_testbed[0].instance_type
    r = client.post(
        "/v1/bandwidth-models",
        json={"instance_types": [stored, "p3.8xlarge", "p3.8xlarg"]},
        headers=write_headers,
    )
    assert r.status_code == 404, r.text
    body = r.json()
    assert body["error"] == "not_found" and body["field"] == "instance_types[2]"
    assert "'p3.8xlarg'" in body["detail"] and "p3.8xlarge" in body["hint"]
    assert "leave `instance_types` out" in body["hint"]
    known = client.post(
        "/v1/bandwidth-models", json={"instance_types": ["p3.8xlarge"]}, headers=write_headers
    )
    assert known.status_code == 409 and "no stored probe samples" in known.json()["detail"]


def _ring_copy(records: list[ProbeRecord], ring: str, *, slower: float) -> list[ProbeRecord]:
    """The records as measured on the mixed ring `ring` (same nodes and sizes), `slower` times as long."""
    return [
        dataclasses.replace(r, instance_type=ring, run_id=f"ring:{r.run_id}", time_s=r.time_s * slower)
        for r in records
    ]


def test_a_rings_name_selects_that_ring_and_its_types_and_a_measurement_stored_twice_trains_once(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """A ring's name in `instance_types` matched no stored name (its samples were selected only by listing
    its types); it now selects that ring's samples, in either order of its types, and its types' own (what
    the ring is measured against), and no other ring of those types. A measurement stored under both
    orders of a ring's types (before names were sorted), which migration 0006 keeps as two rows of one
    name, counts once."""
    from sqlalchemy import insert

    from srift.bandwidth.samples import _row
    from srift.db.tables import ProbeSample

    records = parse_jsonl(gzip.decompress(SAMPLES.read_bytes()).decode(), source=SAMPLES.name)
    small = [r for r in records if r.instance_type == "bw.r100.d2"]
    ring = _ring_copy(
        [*small, *(r for r in records if r.instance_type == "bw.r500.d5")],
        "bw.r100.d2+bw.r500.d5",
        slower=1.05,
    )
    other = [dataclasses.replace(r, instance_type="bw.other", run_id="other") for r in small]
    other_ring = _ring_copy(small, "bw.other+bw.r100.d2", slower=1.1)
    twice = ring[0]
    with session_factory(db_url)() as session:
        store_samples(session=session, records=[*records, *ring, *other, *other_ring], origin="jsonl")
        old_print = dataclasses.replace(twice, instance_type="bw.r500.d5+bw.r100.d2").fingerprint()
        session.execute(
            insert(ProbeSample), [_row(twice, fingerprint=old_print, origin="jsonl", job_id=None)]
        )
        session.commit()

    body = {"instance_types": ["bw.r500.d5+bw.r100.d2"], "tune": False}
    r = client.post("/v1/bandwidth-models", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    query = r.json()["training_query"]
    assert query["instance_types"] == ["bw.r100.d2+bw.r500.d5"], "recorded in the ring's one spelling"
    assert query["n_samples"] == len(records), "the ring's types' own samples, not bw.other's"
    assert query["n_mixed_samples"] == len(ring), "that ring's samples once each; not bw.other+bw.r100.d2"
    assert list(r.json()["metrics"]["mixed_rings"]) == ["testbed/bw.r100.d2+bw.r500.d5"]


@pytest.mark.parametrize(
    ("names", "status", "field", "words"),
    [
        (["bw.r100.d2+bw.r100.d2"], 422, "instance_types[0]", "names 'bw.r100.d2' more than once"),
        (["bw.r100.d2", "bw.r100.d2+bw.nope"], 404, "instance_types[1]", "unknown instance type 'bw.nope'"),
        (["p3.8xlarge+p3.2xlarge"], 404, "instance_types[0]", "no stored probe sample is of the mixed ring"),
    ],
)
def test_a_bad_or_unprobed_ring_in_the_filter_names_its_position(
    client: TestClient,
    settings: Settings,
    write_headers: dict[str, str],
    stored_testbed: list[ProbeRecord],
    names: list[str],
    status: int,
    field: str,
    words: str,
) -> None:
    load_shipped_catalog(settings)
    r = client.post("/v1/bandwidth-models", json={"instance_types": names}, headers=write_headers)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field and words in r.json()["detail"] and r.json()["hint"]
    assert client.get("/v1/bandwidth-models").json()["models"] == []
