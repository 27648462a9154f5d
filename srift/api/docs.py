"""The API docs at /docs (Swagger UI) and /redoc (ReDoc), served offline from the app itself.

FastAPI's defaults load Swagger UI and ReDoc from a CDN, so /docs is a blank page without internet. Srift
serves both from the assets bundled in the `fastapi-offline` PyPI package (swagger-ui-dist 5 and redoc 2
builds; a Srift dependency), found without importing it, as the dashboard serves Plotly's bundle.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response

VENDOR = "/static/vendor"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
}
FAVICON_URL = "/static/favicon.svg"
OFFHOST = {"redoc.standalone.js": ("https://cdn.redoc.ly/redoc/logo-mini.svg", FAVICON_URL)}
"""URLs inside a bundle that would leave the machine, and what the app serves them as instead (ReDoc's
"powered by" badge loads its logo from a CDN)."""
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"


def asset_path(name: str) -> Path | None:
    """One of ASSETS as bundled in the installed `fastapi_offline` package, or None when it is missing."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "static" / name
        if candidate.is_file():
            return candidate
    return None


def mount(app: FastAPI) -> None:
    """Attach /docs, /redoc and their assets (call with the app's own docs_url and redoc_url set to None)."""
    openapi_url = app.openapi_url or "/openapi.json"
    title = app.title

    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} API",
            swagger_js_url=f"{VENDOR}/swagger-ui-bundle.js",
            swagger_css_url=f"{VENDOR}/swagger-ui.css",
            swagger_favicon_url=FAVICON_URL,
            oauth2_redirect_url=OAUTH2_REDIRECT_URL,
        )

    async def redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} API",
            redoc_js_url=f"{VENDOR}/redoc.standalone.js",
            redoc_favicon_url=FAVICON_URL,
            with_google_fonts=False,
        )

    app.add_api_route("/docs", swagger, methods=["GET"], include_in_schema=False)
    app.add_api_route(OAUTH2_REDIRECT_URL, redirect, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)
    for name, media_type in ASSETS.items():
        app.add_api_route(
            f"{VENDOR}/{name}", _asset_handler(name, media_type), methods=["GET"], include_in_schema=False
        )


def _asset_handler(name: str, media_type: str):  # type: ignore[no-untyped-def]
    async def serve() -> Response:
        path = asset_path(name)
        if path is None:
            return PlainTextResponse(
                f"/* {name} is missing: the API docs cannot render. "
                "To fix: pip install fastapi-offline (a Srift dependency) */",
                status_code=503,
                media_type=media_type,
            )
        headers = {"Cache-Control": "public, max-age=86400"}
        if name in OFFHOST:
            remote, local = OFFHOST[name]
            body = path.read_bytes().replace(remote.encode(), local.encode())
            return Response(body, media_type=media_type, headers=headers)
        return FileResponse(path, media_type=media_type, headers=headers)

    serve.__name__ = f"docs_asset_{name.replace('.', '_').replace('-', '_')}"
    return serve
