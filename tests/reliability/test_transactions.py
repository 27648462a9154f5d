"""Storage is crash-safe: SQLite runs in WAL mode with foreign keys on, readers are not blocked by a writer,
a request that fails rolls back everything it wrote, and a process SIGKILLed inside a transaction leaves
none of it behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from srift.api.app import create_app
from srift.api.deps import SessionDep
from srift.db.session import get_engine, session_factory
from srift.db.tables import ApiToken
from srift.db.tokens import Scope, create_token
from srift.errors import InvalidInput
from srift.settings import Settings


def test_sqlite_runs_in_wal_mode_with_foreign_keys(sqlite_url: str) -> None:
    with get_engine(sqlite_url).connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    assert Path(sqlite_url.split("///", 1)[1] + "-wal").exists()


def test_reader_is_not_blocked_by_an_open_write(sqlite_url: str) -> None:
    writer = session_factory(sqlite_url)()
    try:
        create_token(session=writer, name="pending", scope=Scope.READ)
        started = time.monotonic()
        with session_factory(sqlite_url)() as reader:
            count = reader.scalar(select(func.count()).select_from(ApiToken))
        assert count == 0 and time.monotonic() - started < 2.0
    finally:
        writer.rollback()
        writer.close()


def _count_tokens(db_url: str) -> int:
    with session_factory(db_url)() as s:
        return int(s.scalar(select(func.count()).select_from(ApiToken)) or 0)


def test_failed_request_rolls_back_everything(settings: Settings, db_url: str) -> None:
    app = create_app(settings)
    router = APIRouter()

    @router.post("/half-then-crash")
    def half_then_crash(session: SessionDep) -> None:
        for i in range(5):
            create_token(session=session, name=f"partial-{i}", scope=Scope.READ)
        raise RuntimeError("crash after writing")

    @router.post("/half-then-reject")
    def half_then_reject(session: SessionDep) -> None:
        create_token(session=session, name="partial", scope=Scope.READ)
        raise InvalidInput("rejected late", hint="none")

    @router.post("/whole")
    def whole(session: SessionDep) -> dict[str, int]:
        for i in range(3):
            create_token(session=session, name=f"whole-{i}", scope=Scope.READ)
        return {"ok": 3}

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as c:
        assert c.post("/half-then-crash").status_code == 500
        assert _count_tokens(db_url) == 0
        assert c.post("/half-then-reject").status_code == 422
        assert _count_tokens(db_url) == 0
        assert c.post("/whole").status_code == 200
        assert _count_tokens(db_url) == 3


def test_commit_happens_before_the_response(settings: Settings, db_url: str) -> None:
    """A 2xx means committed: a failure at commit time is a 500, never a 200 for data that was not stored."""
    app = create_app(settings)
    router = APIRouter()

    @router.post("/fails-at-commit")
    def fails_at_commit(session: SessionDep) -> dict[str, bool]:
        session.add(ApiToken(name="a", scope="read", token_hash="same", prefix="x"))
        session.add(ApiToken(name="b", scope="read", token_hash="same", prefix="x"))
        return {"ok": True}

    @router.post("/commits")
    def commits(session: SessionDep) -> dict[str, bool]:
        session.add(ApiToken(name="c", scope="read", token_hash="unique", prefix="x"))
        return {"ok": True}

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as c:
        assert c.post("/fails-at-commit").status_code == 500
        assert _count_tokens(db_url) == 0
        assert c.post("/commits").status_code == 200
        assert _count_tokens(db_url) == 1
        assert c.post("/commits").status_code == 500
        assert _count_tokens(db_url) == 1


_WRITER = textwrap.dedent(
    """
    import sys, time
    from srift.db.tokens import Scope, create_token
    from srift.db.session import session_factory
    session = session_factory(sys.argv[1])()
    for i in range(2000):
        create_token(session=session, name=f"doomed-{i}", scope=Scope.READ)
    session.flush()
    print("flushed", flush=True)
    time.sleep(60)
    session.commit()
    """
)


@pytest.mark.slow
def test_sigkill_inside_a_transaction_leaves_nothing(sqlite_url: str, tmp_path: Path) -> None:
    with session_factory(sqlite_url)() as s:
        create_token(session=s, name="committed-before", scope=Scope.READ)
        s.commit()
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    proc = subprocess.Popen([sys.executable, str(script), sqlite_url], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "flushed"
        db_path = Path(sqlite_url.split("///", 1)[1])
        assert Path(f"{db_path}-wal").stat().st_size > 0
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    get_engine(sqlite_url).dispose()
    with get_engine(sqlite_url).connect() as conn:
        assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        names = [r[0] for r in conn.execute(text("SELECT name FROM api_tokens"))]
    assert names == ["committed-before"]
    with session_factory(sqlite_url)() as s:
        create_token(session=s, name="after-crash", scope=Scope.READ)
        s.commit()
    assert _count_tokens(sqlite_url) == 2
