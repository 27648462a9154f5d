"""srift.testing.server.serving_in_thread: the live server of the CLI tests (tests/conftest.py
`live_server_url`) and of the browser tests (tests/dashboard/conftest.py), one helper for both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette

from srift.api.app import create_app
from srift.settings import Settings
from srift.testing.server import serving_in_thread


def test_the_app_answers_over_http_until_the_block_ends(settings: Settings) -> None:
    with serving_in_thread(create_app(settings)) as url:
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/v1/health", timeout=10).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/health", timeout=10)


def test_an_app_that_cannot_start_is_an_error_at_once_not_a_wait() -> None:
    """uvicorn ends its thread when the app's start-up fails; the helper says so instead of polling on."""

    @asynccontextmanager
    async def failing(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield  # pragma: no cover - never reached

    with (
        pytest.raises(RuntimeError, match=r"did not start.*uvicorn exited with 3"),
        serving_in_thread(Starlette(lifespan=failing)),
    ):
        pass  # pragma: no cover - never entered
