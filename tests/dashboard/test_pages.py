"""The dashboard's server side: page shells, offline assets (vendored Plotly), nothing fetched off-host."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from srift.api.app import create_app
from srift.api.dashboard import PAGES, PLOTLY_URL, STATIC_DIR, TEMPLATES_DIR, Page, plotly_js_path
from srift.settings import Settings

ASSET = re.compile(r"""(?:src|href)="([^"]+)\"""")


@pytest.fixture
def client(sqlite_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """The pages need no database rows, so one (SQLite) database is enough."""
    settings = Settings(database_url=sqlite_url, data_dir=tmp_path / "data", models_dir=tmp_path)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("page", PAGES, ids=[p.id for p in PAGES])
def test_each_page_renders_its_shell_with_local_assets_only(client: TestClient, page: Page) -> None:
    response = client.get(page.path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert f'data-page="{page.id}"' in html
    assert f'src="/static/js/{page.id}.js"' in html
    assert f'data-plotly-url="{PLOTLY_URL}"' in html
    assets = [a for a in ASSET.findall(html) if not a.startswith("/") or a.startswith("//")]
    assert assets == [], f"assets not served by Srift itself: {assets}"
    for asset in ASSET.findall(html):
        if asset.startswith("/static/"):
            assert client.get(asset).status_code == 200, asset


def test_plotly_is_served_from_the_installed_package(client: TestClient) -> None:
    path = plotly_js_path()
    assert path is not None, "the plotly package (a Srift dependency) ships plotly.min.js"
    response = client.get(PLOTLY_URL)
    assert response.status_code == 200
    assert "javascript" in response.headers["content-type"]
    assert response.content[:200].decode().lstrip("/* \n").startswith("plotly.js")
    assert len(response.content) == path.stat().st_size > 1_000_000


def test_pages_are_not_part_of_the_api_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if not p.startswith("/v1/")]
    assert "/v1/bandwidth-models/{version}/curves" in paths


def test_shipped_scripts_and_styles_reference_no_remote_url() -> None:
    remote = re.compile(r"""(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}""", re.IGNORECASE)
    offenders = []
    for path in [*STATIC_DIR.rglob("*"), *TEMPLATES_DIR.rglob("*")]:
        if path.is_file() and path.suffix in {".js", ".css", ".html", ".svg"}:
            text = path.read_text()
            text = text.replace("http://www.w3.org/2000/svg", "")
            offenders += [f"{path.name}: {m}" for m in remote.findall(text)]
    assert offenders == []


def test_static_files_ship_with_the_package() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"api/static/**/*"' in pyproject and '"api/templates/*"' in pyproject
    assert not [p for p in TEMPLATES_DIR.rglob("*") if p.is_file() and p.parent != TEMPLATES_DIR]
