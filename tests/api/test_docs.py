"""The API docs pages reference only the app's own assets, and those assets are served."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from srift.api.app import create_app
from srift.api.docs import ASSETS, VENDOR, asset_path
from srift.settings import Settings


def test_docs_pages_load_nothing_from_other_hosts(tmp_path: object) -> None:
    client = TestClient(create_app(Settings(database_url="sqlite://")))
    for path in ("/docs", "/redoc"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert re.findall(r"(?:src|href)=[\"']https?://", page.text) == [], path
        assert "fonts.googleapis" not in page.text
    for name, media_type in ASSETS.items():
        assert asset_path(name) is not None
        served = client.get(f"{VENDOR}/{name}")
        assert served.status_code == 200 and served.headers["content-type"].startswith(media_type)
        assert len(served.content) > 50_000
        assert b"cdn.redoc.ly" not in served.content
    assert client.get("/docs/oauth2-redirect").status_code == 200


def _app_with_route(path: str) -> FastAPI:
    """An app from create_app given one more route (GET `path`) through a router of its own."""
    router = APIRouter()

    @router.get(path)
    def added() -> dict[str, str]:
        return {"path": path}

    app = create_app(Settings(database_url="sqlite://"))
    app.include_router(router)
    return app


def test_apps_built_alike_share_one_generated_document_and_each_states_its_own_bounds() -> None:
    """The OpenAPI document FastAPI generates is kept per process for apps as create_app built them
    (srift.api.app.shared_document); each app still gets its own copy, its own settings' bounds, and an app
    given another route gets a document that has it, whatever app's document came before (in FastAPI 0.165
    an included router is one entry of the app's routes, whatever it holds)."""
    elsewhere = _app_with_route("/v1/elsewhere")
    assert "/v1/elsewhere" in elsewhere.openapi()["paths"]

    strict = create_app(Settings(database_url="sqlite://", max_solve_budget_s=5))
    loose = create_app(Settings(database_url="sqlite://", max_solve_budget_s=50))
    extra = _app_with_route("/v1/only-here")

    def bound(app_schema: dict[str, Any]) -> object:
        budget = app_schema["components"]["schemas"]["PlanRequest"]["properties"]["solve_budget_s"]
        return next(b["maximum"] for b in [budget, *budget.get("anyOf", [])] if "maximum" in b)

    first = strict.openapi()
    first["info"]["title"] = "changed by its reader"
    second = loose.openapi()
    assert (bound(first), bound(second)) == (5, 50)
    assert second["info"]["title"] == "Srift"
    assert "/v1/only-here" in extra.openapi()["paths"] and "/v1/only-here" not in second["paths"]
    assert "/v1/elsewhere" not in extra.openapi()["paths"] and "/v1/elsewhere" not in second["paths"]
    assert TestClient(loose).get("/openapi.json").json() == second
