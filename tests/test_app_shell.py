"""The app shell: health, OpenAPI, the error handler's 4xx/500 shapes, and the CLI's exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fastapi import APIRouter
from fastapi.testclient import TestClient

from srift.api.app import create_app
from srift.db.session import get_engine
from srift.errors import InvalidInput
from srift.settings import Settings


def test_health_reports_database_and_catalog(client: TestClient) -> None:
    response = client.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert isinstance(body["catalog"], list)
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    responses = spec["paths"]["/v1/health"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/HealthOut")
    assert responses["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/HealthUnavailable")
    assert set(body) == set(spec["components"]["schemas"]["HealthOut"]["properties"])


def test_health_is_503_with_a_fix_when_the_database_is_gone(sqlite_url: str, tmp_path: Path) -> None:
    db = Path(sqlite_url.removeprefix("sqlite:///"))
    settings = Settings(database_url=sqlite_url, data_dir=tmp_path / "data")
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        assert c.get("/v1/health").status_code == 200
        get_engine(sqlite_url).dispose()
        db.unlink()
        db.mkdir()  # the path is now a directory: SQLite cannot open it
        r = c.get("/v1/health")
    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "unavailable" and body["error"] == "environment"
    assert "database unreachable" in body["detail"] and "SRIFT_DATABASE_URL" in body["hint"]


def test_srift_error_becomes_4xx_json_and_crash_becomes_opaque_500(settings: Settings) -> None:
    app = create_app(settings)
    router = APIRouter()

    @router.get("/boom-input")
    def boom_input() -> None:
        raise InvalidInput("batch 0 is below 1", hint="use a batch ≥ 1", field="global_batch")

    @router.get("/boom-crash")
    def boom_crash() -> None:
        raise RuntimeError("secret internals /etc/passwd")

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom-input")
        assert r.status_code == 422
        assert r.json() == {
            "error": "invalid_input",
            "detail": "batch 0 is below 1",
            "hint": "use a batch ≥ 1",
            "field": "global_batch",
        }
        r = c.get("/boom-crash")
        assert r.status_code == 500
        assert "secret" not in r.text and "request id" in r.json()["detail"]


def test_cli_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from srift.cli import main; main(['--help'])"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0
    for word in ("serve", "db"):
        assert word in out.stdout
