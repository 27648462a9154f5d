"""The app shell: health, OpenAPI, the error handler's 4xx/500 shapes, and the CLI's exit codes."""

from __future__ import annotations

import subprocess
import sys

from fastapi import APIRouter
from fastapi.testclient import TestClient

from srift.api.app import create_app
from srift.errors import InvalidInput
from srift.settings import Settings


def test_health_reports_database_and_catalog(client: TestClient) -> None:
    response = client.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert isinstance(body["catalog"], list)
    assert client.get("/docs").status_code == 200
    assert "/v1/health" in client.get("/openapi.json").json()["paths"]


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
