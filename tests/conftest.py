"""Shared fixtures: a migrated database per test (SQLite, and PostgreSQL when make test provides one),
settings pointing at it, an API client, a live server on them and write tokens; and which tests share a
parallel worker."""

from __future__ import annotations

import gc
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from srift.api.app import create_app
from srift.db import migrate
from srift.db.session import dispose_engines, forget_engine, get_engine, session_factory
from srift.db.tables import Base
from srift.db.tokens import Scope, create_token
from srift.settings import Settings

POSTGRES_ENV = "SRIFT_TEST_POSTGRES_URL"

# The xdist group of each marker's tests: under `make test`'s parallel workers (pytest-xdist, --dist
# loadgroup) a group's tests run on one worker, one after another. Root tests bring up testbeds whose jobs
# are named after job ids (srift-j1-...), which two workers' databases would both hand out, and they time real
# links and CPU quotas; they share the group "serial" with the tests that run or recover job processes (those
# mark their modules): a recovering worker kills every process tagged with its job's id and attempt
# (srift.jobs.run.kill_marked), whichever database that job came from. Browser tests share one live server
# and one Chromium per worker.
GROUP_OF_MARKER = {"root": "serial", "browser": "browser"}


def pytest_configure(config: pytest.Config) -> None:
    """Let this run and every process it starts cache compiled bytecode (`__pycache__`), even where the
    environment sets PYTHONDONTWRITEBYTECODE (the Dockerfile does, and so may a CI image built like it).
    The suite starts many Python processes (CLI calls, servers, torchrun launchers and their ranks); without
    the cache each one compiles torch's modules from source again: `import torch, torch._dynamo` took
    7.3 s that way against 2.7 s from the cache on a 2-core host. `make install` skips compiling at
    install (--no-compile) on the understanding that the first import writes the cache."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put tests that must share a worker into one xdist group: by marker (GROUP_OF_MARKER), and the tests
    of a module that share a module-scoped fixture (so it is built once, not once per worker). On a
    parallel worker, the slow and grouped tests come first (in their order), so that no long test or group
    starts last and leaves one worker running while the others idle."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        group = next((g for m, g in GROUP_OF_MARKER.items() if item.get_closest_marker(m)), None)
        if group is None:
            info = getattr(item, "_fixtureinfo", None)
            defs = info.name2fixturedefs.values() if info is not None else []
            if any(d[-1].scope == "module" for d in defs if d):
                group = item.nodeid.split("::", 1)[0]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if hasattr(config, "workerinput"):  # a parallel worker: start the long work first, not last
        first = [i for i in items if i.get_closest_marker("slow") or i.get_closest_marker("xdist_group")]
        chosen = {id(i) for i in first}
        items[:] = first + [i for i in items if id(i) not in chosen]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under --dist loadgroup, stop if pytest-xdist did not take the groups into the test ids (it marks a
    test's group there; pytest 9.2 undoes that, pytest-dev/pytest-xdist#1386): the groups would be spread
    over the workers and root tests would run at once.

    Then move what collection built (every test module and what it imports: torch, FastAPI, XGBoost, about
    half a million objects) out of the cyclic collector's reach (gc.freeze, after one collection): each
    full collection, the profiler's before every timed region included (srift.profiling.bench.no_gc),
    otherwise walks all of it, 0.27 s a time on a 2-core host. tests/profiling took 45.8 s instead of
    51.4 s under -n 2. Objects the tests create are collected as before."""
    gc.collect()
    gc.freeze()
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {len(lost)} tests (first: {lost[0]}). To fix: install the "
            "pytest that pyproject's dev extra allows (`make install`), or run without -n"
        )


def _postgres_url() -> str | None:
    url = os.environ.get(POSTGRES_ENV)
    if not url and os.environ.get("CI"):
        pytest.fail(f"{POSTGRES_ENV} is not set in CI: `make test` must start PostgreSQL and export it")
    return url


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dbtemplate") / "template.db"
    url = f"sqlite:///{path}"
    migrate.upgrade(url)
    forget_engine(url)
    return path


@pytest.fixture(scope="session")
def _postgres_db() -> Iterator[str | None]:
    base = _postgres_url()
    if base is None:
        yield None
        return
    name = f"srift_test_{uuid.uuid4().hex[:8]}"
    admin = get_engine(base)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.rsplit("/", 1)[0] + "/" + name
    migrate.upgrade(url)
    yield url
    dispose_engines()
    with get_engine(base).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    dispose_engines()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, _sqlite_template: Path) -> Iterator[str]:
    """A migrated, empty database: a fresh SQLite file, or the session PostgreSQL database (truncated)."""
    if request.param == "sqlite":
        path = tmp_path / "srift.db"
        shutil.copy(_sqlite_template, path)
        url = f"sqlite:///{path}"
        yield url
        forget_engine(url)
        return
    url = request.getfixturevalue("_postgres_db")
    if url is None:
        pytest.skip(f"PostgreSQL not configured ({POSTGRES_ENV} unset; `make test` sets it)")
    yield url
    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with get_engine(url).begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture
def sqlite_url(tmp_path: Path, _sqlite_template: Path) -> Iterator[str]:
    """A migrated SQLite database only, for tests that do not need to run on both databases."""
    path = tmp_path / "srift.db"
    shutil.copy(_sqlite_template, path)
    url = f"sqlite:///{path}"
    yield url
    forget_engine(url)


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    models = tmp_path / "models"
    models.mkdir()
    return Settings(database_url=db_url, data_dir=tmp_path / "data", models_dir=models)


@pytest.fixture
def session(db_url: str) -> Iterator[Session]:
    s = session_factory(db_url)()
    try:
        yield s
        s.commit()
    finally:
        s.close()


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def live_server_url(settings: Settings) -> Iterator[str]:
    """The base URL of the app on the test's settings, served over HTTP in a thread (for CLI commands that
    take --url or --upload); the browser tests' seeded server is tests/dashboard/conftest.py's."""
    from srift.testing.server import serving_in_thread

    with serving_in_thread(create_app(settings)) as url:
        yield url


def _token_headers(db_url: str, scope: Scope) -> dict[str, str]:
    s = session_factory(db_url)()
    try:
        _, plain = create_token(session=s, name=f"test-{scope}", scope=scope)
        s.commit()
    finally:
        s.close()
    return {"Authorization": f"Bearer {plain}"}


@pytest.fixture
def write_headers(db_url: str) -> dict[str, str]:
    """Authorization headers of a fresh write token."""
    return _token_headers(db_url, Scope.WRITE)


@pytest.fixture
def admin_headers(db_url: str) -> dict[str, str]:
    return _token_headers(db_url, Scope.ADMIN)
