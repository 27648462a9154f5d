"""Reliability tests drive real `srift serve` and `srift worker` processes: the server harness of
srift/testing/server.py, and a moto EC2 server that worker subprocesses reach through AWS_ENDPOINT_URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from moto.server import ThreadedMotoServer

from srift.catalog.shipped import load_shipped_catalog
from srift.settings import Settings

REGION = "us-east-1"


@pytest.fixture(scope="session")
def _moto_endpoint() -> Iterator[str]:
    """One moto server per test process: stopping one waits out werkzeug's 0.5 s shutdown poll, so each test
    empties this one (moto_server) instead of starting its own."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def moto_server(_moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A moto EC2 endpoint on loopback, reset to empty for this test (no instances from an earlier one: job
    ids, which tag the instances, start at 1 in every test's database); AWS_* variables point boto3 here
    (in this process and children)."""
    httpx.post(f"{_moto_endpoint}/moto-api/reset", timeout=30).raise_for_status()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": _moto_endpoint,
    }.items():
        monkeypatch.setenv(key, value)
    return _moto_endpoint


@pytest.fixture
def cloud_settings(sqlite_url: str, tmp_path: Path) -> Settings:
    settings = Settings(database_url=sqlite_url, data_dir=tmp_path / "data", models_dir=tmp_path / "models")
    load_shipped_catalog(settings)
    return settings
