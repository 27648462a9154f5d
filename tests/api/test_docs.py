"""The API docs pages reference only the app's own assets, and those assets are served."""

from __future__ import annotations

import re

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
