"""HTTP caching of reads: ETag and Cache-Control on GETs under /v1, 304 for a current copy, and a new answer
(new ETag) as soon as the catalog changes, whoever changed it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from srift.api import caching
from srift.api.app import create_app
from srift.catalog import store
from srift.catalog.document import PriceData, SnapshotData, TypeData
from srift.catalog.shipped import load_shipped_catalog
from srift.db import session as db_session
from srift.db.session import ASYNC_READER_NAME, transaction
from srift.domain.catalog import InstanceType, Interconnect, Market
from srift.settings import Settings

PATH = "/v1/instance-types"


def _snapshot(*, price: float) -> SnapshotData:
    instance = InstanceType(
        provider="aws",
        name="x9.cache",
        gpu_model="T4",
        gpu_count=1,
        gpu_memory_gib=16.0,
        vcpus=4,
        memory_gib=16.0,
        network_gbps=10.0,
        network_burst=False,
        interconnect=Interconnect.PCIE,
        interconnect_gbps=16.0,
        efa=False,
    )
    return SnapshotData(
        name="cache-test",
        provider="aws",
        source="test",
        as_of=date(2030, 1, 1),
        active=True,
        types=(TypeData(instance),),
        prices=(PriceData("x9.cache", "us-east-1", Market.ON_DEMAND, price, "test", date(2030, 1, 1)),),
    )


def _price(client: TestClient, etag: str | None = None) -> tuple[int, str, float | None]:
    headers = {"If-None-Match": etag} if etag else {}
    r = client.get(PATH, params={"gpu": "T4", "region": "us-east-1"}, headers=headers)
    if r.status_code == 304:
        assert r.content == b""
        return 304, r.headers["etag"], None
    assert r.status_code == 200, r.text
    mine = [x for x in r.json() if x["name"] == "x9.cache"]
    return 200, r.headers["etag"], mine[0]["prices"]["on_demand"]["price_usd_per_hr"] if mine else None


def test_catalog_read_has_etag_and_answers_304_until_the_catalog_changes(
    settings: Settings, client: TestClient
) -> None:
    load_shipped_catalog(settings)
    first = client.get(PATH)
    assert first.status_code == 200
    etag = first.headers["etag"]
    assert etag.startswith('"') and first.headers["cache-control"] == "no-cache"
    again = client.get(PATH, headers={"If-None-Match": f'W/"other", {etag}'})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert client.get(PATH, headers={"If-None-Match": '"stale"'}).status_code == 200

    status, tag, price = _price(client)
    assert (status, price) == (200, None)
    assert _price(client, tag)[0] == 304
    url = settings.resolved_database_url
    for new_price in (1.25, 2.5):  # a write outside the API (a CLI, another process) is seen at once
        with transaction(url) as session:
            store.save_snapshot(session=session, snapshot=_snapshot(price=new_price), replace=True)
        status, new_tag, price = _price(client, tag)
        assert (status, price) == (200, new_price) and new_tag != tag
        tag = new_tag
    with transaction(url) as session:
        snapshot_id = next(s.id for s in store.list_snapshots(session=session) if s.name == "cache-test")
        store.delete_snapshot(session=session, snapshot_id=snapshot_id)
    assert _price(client, tag)[0:3:2] == (200, None)
    assert client.get(PATH).headers["etag"] == etag  # back to the shipped catalog: the same answer


def test_other_reads_get_etags_errors_and_writes_do_not(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    r = client.get("/v1/profiles")
    assert r.status_code == 200 and r.headers["etag"] and r.headers["cache-control"] == "no-cache"
    assert client.get("/v1/profiles", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    bad = client.get(PATH, params={"provider": "nowhere"})
    assert bad.status_code == 404 and "etag" not in bad.headers
    missing = client.get("/v1/plans/99")
    assert missing.status_code == 404 and "etag" not in missing.headers
    posted = client.post("/v1/profiles", json={}, headers=write_headers)
    assert posted.status_code == 422 and "etag" not in posted.headers
    health = client.get("/v1/health")
    assert health.headers["cache-control"] == "no-store"


def test_cache_control_follows_the_settings(settings: Settings, tmp_path: Path) -> None:
    tuned = settings.model_copy(update={"cache_max_age_s": 60, "read_requires_token": True})
    with TestClient(create_app(tuned), raise_server_exceptions=False) as c:
        assert c.get("/v1/health").headers["cache-control"] == "no-store"
        r = c.get("/openapi.json")
        assert "etag" not in r.headers  # outside /v1
    open_reads = settings.model_copy(update={"cache_max_age_s": 60})
    with TestClient(create_app(open_reads), raise_server_exceptions=False) as c:
        assert c.get(PATH).headers["cache-control"] == "max-age=60"
    private = settings.model_copy(update={"read_requires_token": True})
    from srift.api.caching import cache_control

    assert cache_control(private) == "private, no-cache"


def test_postgres_catalog_hits_await_their_tokens_and_survive_a_dropped_connection(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a cached catalog read awaits its tokens on the event loop (no thread-pool task, the read
    tail on a busy host); a connection the server dropped costs one read in the pool, not an error; the
    app's asyncio connections close with it."""
    url = settings.resolved_database_url
    if not url.startswith("postgresql"):
        pytest.skip("SQLite is read in-process, in the pool")
    load_shipped_catalog(settings)
    pooled: list[object] = []

    async def counted(fn: Callable[[], Response]) -> Response:
        pooled.append(fn)
        return await run_in_threadpool(fn)

    monkeypatch.setattr(caching, "run_in_threadpool", counted)
    readers = text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
    with TestClient(create_app(settings)) as client:
        first = client.get(PATH)
        assert first.status_code == 200 and len(pooled) == 1  # the miss builds in the pool
        for _ in range(3):
            assert client.get(PATH).content == first.content
        assert len(pooled) == 1
        with transaction(url) as session:
            assert session.execute(readers, {"name": ASYNC_READER_NAME}).scalar_one() >= 1
            session.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name"),
                {"name": ASYNC_READER_NAME},
            )
        again = client.get(PATH)
        assert again.status_code == 200 and again.content == first.content and len(pooled) == 2
        assert client.get(PATH).content == first.content and len(pooled) == 2  # reconnected
        engines = [engine for (of, _), (_, engine) in db_session._async_readers.items() if of == url]
        assert len(engines) == 1 and engines[0].pool.checkedin() >= 1
    assert engines[0].pool.checkedin() == 0  # closed at shutdown (the server side ends a moment later)
    assert not any(of == url for of, _ in db_session._async_readers)
