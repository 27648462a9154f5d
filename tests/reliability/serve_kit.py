"""Helpers for tests that run `srift serve --workers N`: find its workers, wait for exits and conditions."""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Callable
from pathlib import Path

from srift.testing.server import descendants

WAIT_S = 90.0


def wait_exit(pid: int, *, timeout_s: float) -> bool:
    """Block until process `pid` (not necessarily our child) exits, via a pidfd; False on timeout."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return bool(ready)
    finally:
        os.close(fd)


def wait_for(condition: Callable[[], bool], *, timeout_s: float) -> bool:
    """Re-check `condition` until it holds or `timeout_s` passes (the supervisor signals no event)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def workers_of(pid: int) -> set[int]:
    """The supervisor's workers: spawned Python children (multiprocessing's resource tracker aside)."""
    out = set()
    for child in descendants(pid):
        with contextlib.suppress(FileNotFoundError):
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"multiprocessing.spawn" in cmdline and b"resource_tracker" not in cmdline:
                out.add(child)
    return out
