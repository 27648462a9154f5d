"""Pooled PostgreSQL connections: one idle past IDLE_PING_S is pinged and replaced when its server process
is gone; one in steady use is not pinged (a round trip per request is the read tail on a busy host)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from srift.db import session as db_session


@pytest.mark.postgres
def test_a_dead_idle_connection_is_replaced_and_a_busy_one_is_not_pinged(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: SQLite connections are in-process")
    engine = db_session.make_engine(db_url)
    killer = db_session.make_engine(db_url)
    try:
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with killer.connect() as other:
            assert other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
        # Idle past IDLE_PING_S, the dead connection is pinged and replaced before the query runs.
        monkeypatch.setattr(db_session, "IDLE_PING_S", 0.0)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid
        monkeypatch.setattr(db_session, "IDLE_PING_S", 3600.0)
        with engine.connect() as conn:
            same = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar_one() == same
    finally:
        engine.dispose()
        killer.dispose()
