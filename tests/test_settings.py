"""Settings come from SRIFT_* variables and fail with one clear message."""

from __future__ import annotations

import pytest

from srift.errors import ConfigurationError
from srift.settings import load_settings


def test_defaults_use_embedded_sqlite(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SRIFT_DATABASE_URL", raising=False)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'srift.db'}"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.cors_origins == []


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("SRIFT_PORT", "70000", "SRIFT_PORT"),
        ("SRIFT_DATABASE_URL", "mysql://x", "SRIFT_DATABASE_URL"),
        ("SRIFT_LOG_LEVEL", "loud", "SRIFT_LOG_LEVEL"),
    ],
)
def test_invalid_setting_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert needle in str(info.value)
    assert "To fix:" in str(info.value)
