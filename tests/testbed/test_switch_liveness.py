"""The userspace switch's liveness: its recorded pid and start time, not what its command line says."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.testbed import status, system
from srift.testbed.state import StateFile


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A process that runs until its stdin closes, started without any mention of the switch module."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc
    if proc.returncode is None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)


def test_a_process_is_alive_under_its_pid_and_start_time(child: subprocess.Popen[bytes]) -> None:
    started = system.process_started_ticks(child.pid)
    assert started is not None
    assert b"srift.testbed.switch" not in Path(f"/proc/{child.pid}/cmdline").read_bytes()
    assert system.process_alive(child.pid, started)
    # The same pid with another start time is another process (a pid the kernel reused).
    assert not system.process_alive(child.pid, started + 1)
    assert not system.process_alive(child.pid, None)
    assert not system.process_alive(None, started)


def test_an_exited_process_is_not_alive_reaped_or_not(child: subprocess.Popen[bytes]) -> None:
    started = system.process_started_ticks(child.pid)
    assert child.stdin is not None
    child.stdin.close()
    # Wait for it to exit without reaping it: a zombie, still in /proc with its start time.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    assert system.process_started_ticks(child.pid) == started
    assert not system.process_alive(child.pid, started)
    child.wait(timeout=60)
    assert not system.process_alive(child.pid, started)


def test_status_reports_the_switch_by_its_identity(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    store = StateFile(tmp_path, "tsw")
    state = {
        "version": 1,
        "prefix": "tsw",
        "phase": "up",
        "emulator": "userspace",
        "hosts": [],
        "resources": [],
    }
    store.save(
        {**state, "switch_pid": child.pid, "switch_started_ticks": system.process_started_ticks(child.pid)}
    )
    found = status("tsw", root=tmp_path)
    assert (found.switch_pid, found.switch_alive) == (child.pid, True)
    # A journal without the start time (an older srift's) cannot tell its switch from a reused pid.
    store.save({**state, "switch_pid": child.pid})
    assert not status("tsw", root=tmp_path).switch_alive
