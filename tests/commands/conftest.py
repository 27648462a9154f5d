"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.db.session import forget_engine
from srift.settings import get_settings


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The commands' local database and data directory in the test's own folder, never the user's."""
    url = f"sqlite:///{tmp_path}/cli.db"
    monkeypatch.setenv("SRIFT_DATABASE_URL", url)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
    forget_engine(url)  # its connections and cached statements are not kept for the rest of the run


@pytest.fixture
def cli_db(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The commands on the test's database (`db_url`, SQLite or PostgreSQL), with a data directory of the
    test's own; its URL."""
    monkeypatch.setenv("SRIFT_DATABASE_URL", db_url)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield db_url
    get_settings.cache_clear()
