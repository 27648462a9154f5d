"""Engine and session handling; SQLite runs in WAL mode with foreign keys on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import Session, sessionmaker

from srift.errors import EnvironmentProblem

_engines: dict[str, Engine] = {}


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def make_engine(url: str) -> Engine:
    """Create an engine for `url`, creating the SQLite file's folder when needed."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url)
    event.listen(engine, "checkout", _ping_if_idle)
    event.listen(engine, "checkin", _note_return)
    return engine


IDLE_PING_S = 10.0
"""A pooled connection idle longer than this is pinged before use (a server restart or an idle timeout may
have closed it); one in steady use is not: a ping on every checkout is a round trip per request, and each
round trip waits for a PostgreSQL backend process to be scheduled, which on a busy host is the read tail."""


def _note_return(_dbapi_conn: Any, record: Any) -> None:
    record.info["returned_at"] = time.monotonic()


def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
    """Pessimistic disconnect handling for idle connections only: DisconnectionError makes the pool replace
    the connection and retry the checkout (SQLAlchemy's documented custom pre-ping)."""
    returned = record.info.get("returned_at")
    if returned is None or time.monotonic() - returned < IDLE_PING_S:
        return
    try:
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute("SELECT 1")
        finally:
            cursor.close()
        if not dbapi_conn.autocommit:
            dbapi_conn.rollback()
    except Exception as exc:
        raise DisconnectionError(f"stale pooled connection: {type(exc).__name__}") from exc


def get_engine(url: str) -> Engine:
    """One engine per URL for the life of the process."""
    if url not in _engines:
        _engines[url] = make_engine(url)
    return _engines[url]


def forget_engine(url: str) -> None:
    """Close `url`'s pooled connections and drop its engine (a later get_engine makes a new one): for a
    database that is done with, such as a test's, whose engine would otherwise stay for the life of the
    process with its compiled-statement cache (about 1,500 objects that each full garbage collection
    walks)."""
    engine = _engines.pop(url, None)
    _readers.pop(url, None)
    if engine is not None:
        engine.dispose()


def dispose_engines() -> None:
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()
    _readers.clear()


def session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


_readers: dict[str, Engine] = {}


def read_session_factory(url: str) -> sessionmaker[Session]:
    """Sessions for requests that only read: on PostgreSQL each statement runs in autocommit, so a cached
    read is one round trip (its revision tokens) instead of BEGIN, the query and COMMIT, each a wait for a
    server process on a busy host. Reads keep their order (tokens first, data after), which is all the
    revision caches need (srift.db.revisions). SQLite, in-process, keeps ordinary sessions."""
    if url.startswith("sqlite"):
        return session_factory(url)
    if url not in _readers:
        _readers[url] = get_engine(url).execution_options(isolation_level="AUTOCOMMIT")
    return sessionmaker(bind=_readers[url], expire_on_commit=False)


ASYNC_READER_NAME = "srift-reads-asyncio"
"""The application_name of those connections (pg_stat_activity shows them by it)."""
ASYNC_POOL_SIZE = 4
"""Connections an event loop keeps for token queries, and as many more under a burst: each query is one short
round trip, and a worker's loop waits for a free connection without blocking, so a few serve it; the bound
keeps PostgreSQL's connection count at most 8 more per worker than the thread pool's."""
_async_readers: dict[tuple[str, int], tuple[asyncio.AbstractEventLoop, AsyncEngine]] = {}


def async_reader(url: str) -> AsyncEngine | None:
    """An asyncio engine (autocommit) on `url` for the running event loop, or None for SQLite, which is read
    in-process and has no asyncio driver here. Its connections belong to the loop, so each loop gets its
    own; `dispose_async_readers` closes the current loop's when the app stops."""
    if url.startswith("sqlite"):
        return None
    loop = asyncio.get_running_loop()
    found = _async_readers.get((url, id(loop)))
    if found is not None and found[0] is loop:
        return found[1]
    for key, (owner, _engine) in list(_async_readers.items()):
        if owner.is_closed():
            _async_readers.pop(key, None)
    engine = create_async_engine(
        url,
        isolation_level="AUTOCOMMIT",
        pool_size=ASYNC_POOL_SIZE,
        max_overflow=ASYNC_POOL_SIZE,
        connect_args={"application_name": ASYNC_READER_NAME},
    )
    _async_readers[(url, id(loop))] = (loop, engine)
    return engine


async def dispose_async_readers() -> None:
    """Close the running loop's asyncio engines (and forget those of loops that are closed)."""
    loop = asyncio.get_running_loop()
    for key, (owner, engine) in list(_async_readers.items()):
        if owner is loop:
            await engine.dispose()
        if owner is loop or owner.is_closed():
            _async_readers.pop(key, None)


@contextmanager
def transaction(url: str) -> Iterator[Session]:
    """A session whose work commits on success and rolls back on any error."""
    session = session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def check_database(url: str) -> None:
    """Raise EnvironmentProblem if the database cannot be reached."""
    try:
        with get_engine(url).connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        raise EnvironmentProblem(
            f"cannot reach the database at {redact_url(url)} ({type(exc).__name__})",
            hint="start the database or set SRIFT_DATABASE_URL to a reachable one",
        ) from exc


def redact_url(url: str) -> str:
    """Hide the password in a database URL for logs and errors."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
