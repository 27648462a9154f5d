"""Shared fixtures: a migrated database per test (SQLite, and PostgreSQL when make test provides one),
settings pointing at it, an API client and write tokens."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from srift.api.app import create_app
from srift.db import migrate
from srift.db.session import dispose_engines, get_engine, session_factory
from srift.db.tables import Base
from srift.db.tokens import Scope, create_token
from srift.settings import Settings

POSTGRES_ENV = "SRIFT_TEST_POSTGRES_URL"


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
    get_engine(url).dispose()
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
        get_engine(url).dispose()
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
    get_engine(url).dispose()


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
