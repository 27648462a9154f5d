"""`srift serve`: a port outside 1..65535 is refused before anything starts, as SRIFT_PORT is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from srift.cli import build_app
from srift.settings import get_settings


@pytest.mark.parametrize("port", ["99999", "0", "-5"])
def test_a_port_out_of_range_is_refused_naming_the_option(
    port: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`srift serve --port 99999` migrated the database, then died in uvicorn's bind() with an
    OverflowError traceback (exit 1); `--port 0` served on 8000 without a word."""
    import srift.api.server
    import srift.bootstrap

    started: list[dict[str, Any]] = []
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    monkeypatch.setattr(srift.bootstrap, "bootstrap", lambda *a, **k: started.append({"bootstrap": True}))
    monkeypatch.setattr(srift.api.server, "serve", lambda **kwargs: started.append(kwargs))
    try:
        result = CliRunner().invoke(build_app(), ["serve", "--port", port], terminal_width=200)
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2, result.output
    assert "--port" in result.output
    assert started == []


def test_a_port_in_range_is_the_one_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import srift.api.server
    import srift.bootstrap

    served: list[dict[str, Any]] = []
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    monkeypatch.setattr(srift.bootstrap, "bootstrap", lambda *a, **k: None)
    monkeypatch.setattr(srift.api.server, "serve", lambda **kwargs: served.append(kwargs))
    try:
        result = CliRunner().invoke(build_app(), ["serve", "--port", "9001", "--workers", "1"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert [(s["port"], s["workers"]) for s in served] == [(9001, 1)]
    help_text = CliRunner().invoke(build_app(), ["serve", "--help"], terminal_width=200).output
    assert "1 to 65535" in help_text
