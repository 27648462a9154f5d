"""Reliability tests drive real `srift serve` and `srift worker` processes: the server harness of
srift/testing/server.py, and a moto EC2 server that worker subprocesses reach through AWS_ENDPOINT_URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from srift.catalog.shipped import load_shipped_catalog
from srift.settings import Settings

REGION = "us-east-1"


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A moto EC2 endpoint on loopback; AWS_* variables point boto3 here (in this process and children)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": url,
    }.items():
        monkeypatch.setenv(key, value)
    yield url
    server.stop()


@pytest.fixture
def cloud_settings(sqlite_url: str, tmp_path: Path) -> Settings:
    settings = Settings(database_url=sqlite_url, data_dir=tmp_path / "data", models_dir=tmp_path / "models")
    load_shipped_catalog(settings)
    return settings
