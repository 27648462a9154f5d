"""`srift tokens create|list|revoke`: the token is printed once, works against the API, is never listed,
and stops working when revoked."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from srift.cli import build_app
from srift.db.session import session_factory
from srift.db.tokens import find_token
from srift.settings import get_settings


@pytest.fixture
def cli_env(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("SRIFT_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    yield sqlite_url
    get_settings.cache_clear()


def _run(*args: str) -> str:
    result = CliRunner().invoke(build_app(), list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_create_list_revoke(cli_env: str) -> None:
    created = json.loads(_run("tokens", "create", "--name", "ci", "--scope", "write", "--json"))
    plain = created["token"]
    assert plain.startswith("srift_") and created["scope"] == "write"

    human = _run("tokens", "create", "--name", "reader", "--scope", "read")
    read_plain = human.strip().splitlines()[-1]
    assert read_plain.startswith("srift_") and "shown only now" in human

    listed = _run("tokens", "list", "--json")
    table = _run("tokens", "list")
    for out in (listed, table):
        assert plain not in out and plain[10:] not in out and read_plain[10:] not in out
    rows = json.loads(listed)
    assert [(r["name"], r["scope"]) for r in rows] == [("ci", "write"), ("reader", "read")]
    assert all("hash" not in key for row in rows for key in row)

    with session_factory(cli_env)() as s:
        assert find_token(session=s, plain=plain) is not None
    _run("tokens", "revoke", str(created["id"]))
    with session_factory(cli_env)() as s:
        assert find_token(session=s, plain=plain) is None
        assert find_token(session=s, plain=read_plain) is not None
    assert json.loads(_run("tokens", "list", "--json")) == [rows[1]]
    revoked = json.loads(_run("tokens", "list", "--revoked", "--json"))
    assert revoked[0]["revoked_at"] is not None


def test_bad_scope_and_unknown_id_exit_nonzero(cli_env: str) -> None:
    app = build_app()
    bad = CliRunner().invoke(app, ["tokens", "create", "--name", "x", "--scope", "root"])
    assert bad.exit_code != 0
    missing = CliRunner().invoke(app, ["tokens", "revoke", "999"])
    assert missing.exit_code != 0
