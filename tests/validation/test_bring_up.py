"""`bring_up` on a real testbed (needs root; CI is root): an interrupted build leaves nothing behind, and a
testbed that was already up is never taken down by a failed reuse."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.errors import Conflict
from srift.testbed import TestbedSpec, down, parse_spec, status
from srift.testbed import network as tb_network
from srift.validation.steps import bring_up

pytestmark = pytest.mark.root


def _spec(prefix: str, rate_mbit: int = 200) -> TestbedSpec:
    return parse_spec(
        {
            "prefix": prefix,
            "subnet": "10.213.91.0/24",
            "types": [
                {"name": "bu.small", "cpu_cores": 0.25, "rate_mbit": rate_mbit, "price_usd_per_hr": 0.1}
            ],
            "hosts": [{"type": "bu.small", "count": 2}],
        }
    )


def _namespaces(prefix: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    return [n for n in names if n.startswith(f"srift-{prefix}-")]


@pytest.fixture
def prefix(tmp_path: Path) -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.fail("testbed tests need root (CI runs as root); run them with sudo")
    name = "bu" + secrets.token_hex(3)
    yield name
    down(name, root=tmp_path)


def test_an_interrupted_build_is_taken_down(
    prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[list[str]] = []

    def interrupted(*args: object, **kwargs: object) -> list[str]:
        made.append(_namespaces(prefix))
        raise KeyboardInterrupt

    monkeypatch.setattr(tb_network, "shaping_batch", interrupted)
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        bring_up(_spec(prefix), tmp_path, lines.append)
    assert len(made) == 1 and len(made[0]) == 3, "the interrupt came after the namespaces were made"
    assert _namespaces(prefix) == []
    assert any("taking down" in line for line in lines)


def test_a_failed_reuse_keeps_the_running_testbed(prefix: str, tmp_path: Path) -> None:
    _testbed, created = bring_up(_spec(prefix), tmp_path, lambda _: None)
    assert created
    with pytest.raises(Conflict):
        bring_up(_spec(prefix, rate_mbit=400), tmp_path, lambda _: None)
    assert status(prefix, root=tmp_path).healthy
    assert len(_namespaces(prefix)) == 3
