"""`srift validate` stopped by SIGTERM: the processes it started in the hosts stop with it and the testbed
it brought up is taken down (needs root; CI is root). Fails, never skips, when the machine cannot run the
testbed."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.root, pytest.mark.slow]

WAIT_S = 300.0


def _started_by(marker: str, *, besides: int) -> list[int]:
    """Processes other than this one and `besides` whose command line names `marker` (the folder that holds
    the run's data and work folders: every job's output file is in it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), besides):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str], str]]:
    """A two-host testbed spec of its own, and the environment that puts the data folder in `tmp_path`."""
    if os.geteuid() != 0:
        pytest.fail("validation tests need root (CI runs as root); run them with sudo")
    prefix = "s" + secrets.token_hex(3)
    spec = {
        "prefix": prefix,
        "subnet": "10.213.91.0/24",
        "types": [
            {"name": "vs.small", "cpu_cores": 0.25, "rate_mbit": 200, "price_usd_per_hr": 0.1},
            {"name": "vs.large", "cpu_cores": 0.5, "rate_mbit": 800, "price_usd_per_hr": 0.2},
        ],
        "hosts": [{"type": "vs.small", "count": 1}, {"type": "vs.large", "count": 1}],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "SRIFT_DATA_DIR": str(tmp_path / "data")}
    yield path, tmp_path, env, prefix
    srift = Path(sys.executable).parent / "srift"
    subprocess.run(
        [str(srift), "testbed", "down", "--prefix", prefix], env=env, capture_output=True, timeout=120
    )


def test_sigterm_stops_the_hosts_processes_and_takes_the_testbed_down(
    setup: tuple[Path, Path, dict[str, str], str],
) -> None:
    spec, base, env, prefix = setup
    srift = Path(sys.executable).parent / "srift"
    command = [str(srift), "validate", "--quick", "--spec", str(spec), "--models", "cnn"]
    command += ["--no-plan-quality", "--workdir", str(base / "work")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while not _started_by(str(base), besides=proc.pid):
            assert proc.poll() is None, f"validate ended before starting a job: {proc.communicate()}"
            assert time.monotonic() < deadline, "validate started no process in a host"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "stopped: the hosts' processes were stopped" in err
    assert _started_by(str(base), besides=proc.pid) == []
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert prefix not in namespaces
