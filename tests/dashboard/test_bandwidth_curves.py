"""GET /v1/bandwidth-models/{version}/curves: model curves per world size beside the stored samples."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.bandwidth.records import ProbeRecord, busbw_gbps
from srift.bandwidth.samples import store_samples
from srift.catalog.shipped import load_shipped_catalog
from srift.documents import RULES_KEY
from srift.domain.rings import RING_TYPES_ONCE
from srift.services.dashboard import BUFFER_GRID, stored_samples
from srift.settings import Settings
from tests.fuzz.contract import RULES, broken_rule


def _records(instance_type: str, world_size: int, nodes: int) -> list[ProbeRecord]:
    records = []
    for i, size in enumerate((1 << 12, 1 << 16, 1 << 20, 1 << 24)):
        time_s = 50e-6 + size * 8 / 20e9
        records.append(
            ProbeRecord(
                run_id="dash-test",
                provider="aws",
                instance_type=instance_type,
                backend="gloo",
                buffer_bytes=size,
                world_size=world_size,
                nodes=nodes,
                ranks_per_node=world_size // nodes,
                time_s=time_s,
                algbw_gbps=size * 8 / time_s / 1e9,
                busbw_gbps=busbw_gbps(buffer_bytes=size, world_size=world_size, time_s=time_s),
                repeat=i,
            )
        )
    return records


def _one_ms(provider: str, instance_type: str, size: int, **facts: Any) -> ProbeRecord:
    """A sample of `size` bytes across two hosts of one rank each that took 1 ms, with host `facts`."""
    return ProbeRecord(
        run_id=f"{provider}/{instance_type}",
        provider=provider,
        instance_type=instance_type,
        backend="gloo",
        buffer_bytes=size,
        world_size=2,
        nodes=2,
        ranks_per_node=1,
        time_s=1e-3,
        algbw_gbps=size * 8 / 1e-3 / 1e9,
        busbw_gbps=busbw_gbps(buffer_bytes=size, world_size=2, time_s=1e-3),
        **facts,
    )


def test_curves_of_the_active_model_come_with_the_samples_of_that_type(
    client: TestClient, settings: Settings, session: Session
) -> None:
    load_shipped_catalog(settings)
    store_samples(session=session, records=_records("g4dn.xlarge", 2, 2), origin="jsonl")
    store_samples(session=session, records=_records("g4dn.xlarge", 4, 4), origin="jsonl")
    store_samples(session=session, records=_records("p3.2xlarge", 2, 2), origin="jsonl")
    session.commit()

    r = client.get(
        "/v1/bandwidth-models/active/curves", params={"provider": "aws", "instance_type": "g4dn.xlarge"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["instance_type"] == "g4dn.xlarge"
    assert [s["world_size"] for s in body["series"]] == [2, 4]
    for series in body["series"]:
        assert series["buffer_bytes"] == list(BUFFER_GRID)
        assert len(series["busbw_gbps"]) == len(BUFFER_GRID)
        assert all(math.isfinite(v) and v > 0 for v in series["busbw_gbps"])
        assert series["busbw_gbps"][-1] > series["busbw_gbps"][0], "bandwidth grows with the buffer"
        assert series["source"]
    assert len(body["samples"]) == 8 and not body["samples_truncated"]
    assert {(g["instance_type"], g["world_size"], g["count"]) for g in body["groups"]} == {
        ("g4dn.xlarge", 2, 4),
        ("g4dn.xlarge", 4, 4),
        ("p3.2xlarge", 2, 4),
    }

    r = client.get(
        "/v1/bandwidth-models/active/curves",
        params=[("instance_type", "p3.2xlarge"), ("world_size", "8"), ("world_size", "2")],
    )
    assert r.status_code == 200
    assert [(s["world_size"], s["nodes"]) for s in r.json()["series"]] == [(2, 2), (8, 8)]
    assert {p["world_size"] for p in r.json()["samples"]} == {2}


def test_without_samples_the_first_catalog_type_is_drawn_at_one_to_eight_nodes(
    client: TestClient, settings: Settings
) -> None:
    load_shipped_catalog(settings)
    r = client.get(
        "/v1/bandwidth-models/active/curves", params={"provider": "aws", "instance_type": "p3.8xlarge"}
    )
    assert r.status_code == 200, r.text
    assert [(s["world_size"], s["nodes"]) for s in r.json()["series"]] == [(4, 1), (8, 2), (16, 4), (32, 8)]
    assert r.json()["samples"] == []
    r = client.get("/v1/bandwidth-models/active/curves")
    assert r.status_code == 200
    assert r.json()["instance_type"]


def test_bad_world_size_unknown_type_and_unknown_version_name_the_field(
    client: TestClient, settings: Settings
) -> None:
    load_shipped_catalog(settings)
    r = client.get(
        "/v1/bandwidth-models/active/curves", params={"instance_type": "g4dn.xlarge", "world_size": 1}
    )
    assert r.status_code == 422
    assert r.json()["field"] == "world_size[0]", "the schema bounds each world size (2 … 4096)"
    r = client.get("/v1/bandwidth-models/active/curves", params={"instance_type": "g4dn.xlargeX"})
    assert r.status_code == 404 and r.json()["field"] == "instance_type", "the query parameter at fault"
    assert "g4dn.xlarge" in r.json()["hint"] + r.json()["detail"]
    r = client.get("/v1/bandwidth-models/no-such-version/curves", params={"instance_type": "g4dn.xlarge"})
    assert r.status_code == 404


def test_a_probed_type_the_catalog_lacks_is_drawn_from_its_samples_host_facts(
    client: TestClient, settings: Settings, session: Session
) -> None:
    load_shipped_catalog(settings)
    tiny = [
        _one_ms("testbed", "tb.small", size, cpu_cores=2, memory_gib=4.0, rated_gbps=0.5)
        for size in (4, 1 << 20)
    ]
    store_samples(session=session, records=tiny, origin="jsonl")
    session.commit()

    r = client.get("/v1/bandwidth-models/active/curves")
    assert r.status_code == 200, r.text
    assert r.json()["provider"] == "aws", "a cloud user's page opens on the catalog's GPU types"
    r = client.get("/v1/bandwidth-models/active/curves", params={"provider": "testbed"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["provider"], body["instance_type"]) == ("testbed", "tb.small")
    (series,) = body["series"]
    assert (series["world_size"], series["nodes"]) == (2, 2)
    assert series["buffer_bytes"][0] <= 4 < BUFFER_GRID[0] and series["buffer_bytes"][-1] >= BUFFER_GRID[-1]
    assert all(v > 0 for v in series["busbw_gbps"])
    assert len(body["samples"]) == 2
    r = client.get(
        "/v1/bandwidth-models/active/curves", params={"provider": "testbed", "instance_type": "tb.nope"}
    )
    assert r.status_code == 404


def test_the_default_type_is_a_catalog_gpu_type_with_the_most_samples_else_the_catalogs_first(
    client: TestClient, settings: Settings, session: Session
) -> None:
    """Not the testbed's 0.1 Gbit/s types, whatever the active model covers: a cloud GPU type, with the prior
    where no learned model covers it, and the samples imported for it."""
    load_shipped_catalog(settings)
    r = client.get("/v1/bandwidth-models/active/curves")
    assert r.status_code == 200, r.text
    first = r.json()
    gpu_types = [
        t["name"]
        for t in items(client.get("/v1/instance-types", params={"provider": "aws"}).json())
        if t["gpu_count"] > 0
    ]
    assert first["provider"] == "aws" and first["instance_type"] in gpu_types
    assert first["samples"] == [] and {s["source"] for s in first["series"]} == {"prior:alpha-beta"}
    records = _records("p3.8xlarge", 8, 2)
    store_samples(
        session=session, records=[*records, *_records("g4dn.xlarge", 2, 2)[:2]], origin="nccl-tests"
    )
    session.commit()
    body = client.get("/v1/bandwidth-models/active/curves").json()
    assert (body["provider"], body["instance_type"]) == ("aws", "p3.8xlarge")
    assert len(body["samples"]) == len(records)
    assert [s["world_size"] for s in body["series"]] == [8]


def items(body: Any) -> list[dict[str, Any]]:
    """A list answer, bare or wrapped."""
    if isinstance(body, list):
        return body
    return next(v for v in body.values() if isinstance(v, list))


def test_a_rings_plus_written_bare_in_the_query_string_is_a_404_saying_to_write_2b(
    client: TestClient, settings: Settings, session: Session
) -> None:
    """`?instance_type=a+b` arrives as `a b` (a bare '+' in a query string is a space). That found nothing
    and said to use one of the probed types; it now says why and how to write it (%2B), and is not read
    as the ring. Written %2B (as httpx's `params` and the dashboard's URLSearchParams write it), the ring
    is drawn. The parameter's OpenAPI description says so."""
    load_shipped_catalog(settings)
    ring = [_one_ms("aws", "g4dn.12xlarge+g5.12xlarge", size, gpu_name="T4") for size in (4096, 1 << 20)]
    store_samples(session=session, records=ring, origin="jsonl")
    session.commit()
    url = "/v1/bandwidth-models/active/curves"

    r = client.get(f"{url}?provider=aws&instance_type=g5.12xlarge+g4dn.12xlarge")
    assert r.status_code == 404, r.text
    body = r.json()
    assert body["field"] == "instance_type" and "'g5.12xlarge g4dn.12xlarge'" in body["detail"]
    assert "a '+' written as it is means a space" in body["detail"]
    assert "instance_type=g5.12xlarge%2Bg4dn.12xlarge" in body["hint"]

    r = client.get(url, params={"provider": "aws", "instance_type": "g5.12xlarge+g4dn.12xlarge"})
    assert r.status_code == 200, r.text
    assert r.json()["instance_type"] == "g4dn.12xlarge+g5.12xlarge" and len(r.json()["samples"]) == 2

    (parameter,) = [
        p
        for p in client.get("/openapi.json").json()["paths"][url.replace("active", "{version}")]["get"][
            "parameters"
        ]
        if p["name"] == "instance_type"
    ]
    assert "%2B" in parameter["description"]


@pytest.mark.parametrize("name", ["g5.12xlarge+", "+g5.12xlarge", "g4dn.12xlarge++g5.12xlarge", "a+ +b"])
def test_a_ring_with_an_empty_type_is_refused_by_the_query_parameters_schema_as_by_the_server(
    client: TestClient, settings: Settings, name: str
) -> None:
    """The instance_type parameter's schema states the ring's pattern (srift.domain.rings.TYPE_OR_RING_TEXT),
    so a schema-valid query is never a 422 for an empty type between '+' signs; the server's refusal keeps
    its wording. A ring's name in any order matches it."""
    load_shipped_catalog(settings)
    path = "/v1/bandwidth-models/{version}/curves"
    (parameter,) = [
        p
        for p in client.get("/openapi.json").json()["paths"][path]["get"]["parameters"]
        if p["name"] == "instance_type"
    ]
    pattern = parameter["schema"]["pattern"]
    assert re.fullmatch(pattern, "g5.12xlarge+g4dn.12xlarge") and re.fullmatch(pattern, " g5.12xlarge ")
    assert re.fullmatch(pattern, name) is None
    r = client.get(path.format(version="active"), params={"provider": "aws", "instance_type": name})
    assert r.status_code == 422 and "empty type between its '+' signs" in r.json()["detail"], r.text


@pytest.mark.parametrize(
    ("name", "twice"),
    [
        ("g5.12xlarge+g5.12xlarge", True),
        ("g4dn.12xlarge + g5.12xlarge+g4dn.12xlarge", True),
        ("g5.12xlarge + g4dn.12xlarge", False),
    ],
)
def test_a_ring_naming_a_type_twice_is_refused_by_the_rule_the_query_parameters_schema_publishes(
    client: TestClient, settings: Settings, name: str, twice: bool
) -> None:
    """A ring naming a type twice matches the instance_type parameter's pattern, yet the server refuses it
    (a 422, as for a probe sample or a training request): the parameter's schema publishes the rule that
    says so (ring-types-once), which the contract harness reads (tests/fuzz/contract.py), so a query the
    schema and its published rules allow is never refused for its ring's name. It published none."""
    load_shipped_catalog(settings)
    path = "/v1/bandwidth-models/{version}/curves"
    (parameter,) = [
        p
        for p in client.get("/openapi.json").json()["paths"][path]["get"]["parameters"]
        if p["name"] == "instance_type"
    ]
    schema = parameter["schema"]
    assert re.fullmatch(schema["pattern"], name)
    assert [(r["id"], r["rule"]) for r in schema.get(RULES_KEY, ())] == [RING_TYPES_ONCE]
    query = {"provider": "aws", "instance_type": name}
    assert broken_rule(query, set(RULES)) == (RING_TYPES_ONCE[0] if twice else None)
    r = client.get(path.format(version="active"), params=query)
    if twice:
        assert r.status_code == 422 and r.json()["field"] == "instance_type", r.text
        assert "more than once" in r.json()["detail"], r.text
    else:  # no samples of this ring are stored: not found, never refused
        assert r.status_code == 404, r.text


def test_a_measurement_stored_under_both_orders_of_a_ring_is_listed_once(db_url: str) -> None:
    """Before ring names were sorted, one measurement imported as `b+a` and as `a+b` was stored twice, and
    migration 0006 kept both rows under the sorted name. The curves' sample listing shows it once, as
    training loads it (srift.bandwidth.samples.each_measurement_once); distinct measurements all stay, and
    the limit counts measurements, not rows."""
    from dataclasses import replace

    from srift.db.session import session_factory
    from tests.bandwidth.helpers import store_before_canonical_names

    small, large = (_one_ms("testbed", "tb.small+tb.large", size) for size in (1 << 16, 1 << 20))
    store_before_canonical_names(
        db_url,
        [
            small,
            replace(small, instance_type="tb.large+tb.small"),  # the same measurement in the other order
            large,
            replace(large, instance_type="tb.large+tb.small"),
            replace(large, repeat=1),
        ],
    )
    with session_factory(db_url)() as session:
        ring = {"session": session, "provider": "testbed", "instance_type": "tb.large+tb.small"}
        points, more = stored_samples(**ring, world_sizes=[2])
        assert ([p.buffer_bytes for p in points], more) == ([1 << 16, 1 << 20, 1 << 20], False)
        points, more = stored_samples(**ring, world_sizes=[2], limit=2)
        assert ([p.buffer_bytes for p in points], more) == ([1 << 16, 1 << 20], True)
        points, more = stored_samples(**ring, world_sizes=[2], limit=3)
        assert (len(points), more) == (3, False)
