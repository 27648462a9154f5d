"""A real `srift serve` SIGKILLed in the middle of ingesting a large batch of probe samples stores all of the
batch or none of it, and the database serves again afterwards.

The kill is aimed, not raced: the server runs behind a process gate (tests/process_gate.py) that holds it
as `store_samples` returns for the second batch, its rows flushed in the open transaction; the test checks
that the database shows that open write (SQLite: the write lock is taken; PostgreSQL: the server's backend
holds a transaction id while inserting into probe_samples) and kills the process there. Each batch tags
its samples with its own `zone`, so the test can count what survived per batch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from process_gate import ProcessGate
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.exc import OperationalError

from srift.api.app import create_app
from srift.db.session import dispose_engines, session_factory
from srift.db.tables import ProbeSample
from srift.settings import Settings
from srift.testing.server import Server, create_write_token, start_server

# Large enough that the server's fingerprint look-ups (store_samples asks in chunks of 500) take several
# queries inside the held transaction; the kill is aimed by the gate, so no size is needed to "catch" it.
BATCH = 1200


def _batch(tag: str) -> dict[str, Any]:
    samples = [
        {
            "run_id": tag,
            "provider": "local",
            "instance_type": "crash-test",
            "backend": "gloo",
            "zone": tag,
            "buffer_bytes": 1024 * (1 + i % 64),
            "world_size": 2,
            "nodes": 2,
            "ranks_per_node": 1,
            "repeat": i,
            "time_s": 0.001 + i * 1e-7,
        }
        for i in range(BATCH)
    ]
    return {"samples": samples, "final": True}


def _writer_active(database_url: str) -> bool:
    """True while another connection holds an open write transaction on probe_samples."""
    if database_url.startswith("sqlite"):
        path = database_url.split("///", 1)[1]
        import sqlite3

        conn = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()
    engine = _pg_engine(database_url)
    try:
        with engine.connect() as conn:
            busy = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                    "pid <> pg_backend_pid() AND backend_xid IS NOT NULL AND query ILIKE '%probe_samples%'"
                )
            ).scalar()
        return bool(busy)
    except OperationalError:
        return False


_pg_engines: dict[str, Any] = {}


def _pg_engine(url: str) -> Any:
    if url not in _pg_engines:
        _pg_engines[url] = create_engine(url, pool_size=1)
    return _pg_engines[url]


def _count(database_url: str, tag: str) -> int:
    with session_factory(database_url)() as s:
        return int(
            s.scalar(select(func.count()).select_from(ProbeSample).where(ProbeSample.zone == tag)) or 0
        )


def _post_in_background(server: Server, body: dict[str, Any], headers: dict[str, str]) -> threading.Thread:
    def post() -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(server.base_url + "/v1/probe-results", json=body, headers=headers, timeout=120)

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_server_killed_mid_ingestion_stores_all_or_nothing(db_url: str, tmp_path: Path) -> None:
    token = create_write_token(db_url)
    headers = {"Authorization": f"Bearer {token}"}
    env = {"SRIFT_MAX_BODY_BYTES": str(16_000_000)}
    gate = ProcessGate(tmp_path / "gate")
    # The second store_samples (the victim batch; the first is the warm one) is held as it returns: its
    # rows are flushed inside the request's transaction and not committed.
    env.update(gate.env(at="srift.bandwidth.samples:store_samples", event="return", nth=2))
    server = start_server(database_url=db_url, data_dir=tmp_path, bootstrap=False, extra_env=env)
    killed_mid_write = "victim"
    try:
        warm = httpx.post(
            server.base_url + "/v1/probe-results", json=_batch("warm"), headers=headers, timeout=120
        )
        assert warm.status_code == 200, warm.text
        assert warm.json()["stored"] == BATCH and _count(db_url, "warm") == BATCH
        thread = _post_in_background(server, _batch(killed_mid_write), headers)
        (held,) = gate.wait_held(1)
        assert _writer_active(db_url), "the held server is inside its write transaction"
        server.kill9()
        with contextlib.suppress(ProcessLookupError):
            os.kill(held, signal.SIGKILL)
        thread.join(timeout=60)
        assert server.process.returncode == -9
    finally:
        server.stop()
        gate.close()

    dispose_engines()
    survivors = _count(db_url, killed_mid_write)
    assert survivors == 0, "the killed transaction stored nothing"
    assert _count(db_url, "warm") == BATCH
    if db_url.startswith("sqlite"):
        with create_engine(db_url).connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"

    with TestClient(create_app(Settings(database_url=db_url, data_dir=tmp_path))) as restarted:
        assert restarted.get("/v1/health").status_code == 200
        again = restarted.post("/v1/probe-results", json=_batch(killed_mid_write), headers=headers)
        assert again.status_code == 200, again.text
        assert again.json()["stored"] == BATCH - survivors
    assert _count(db_url, killed_mid_write) == BATCH
    for engine in _pg_engines.values():
        engine.dispose()
    _pg_engines.clear()
