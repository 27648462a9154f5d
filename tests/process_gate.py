"""A gate that holds processes at a known point until they are killed, so a test can act on a process
that is provably still at that point (no race between a subprocess moving on and the test's next step).

Every Python process started with `gate.env()` in its environment (and inheriting it, as a worker's job
processes do) imports the gate's `sitecustomize.py`. A process that carries a job marker
(`SRIFT_JOB_MARKER`, set by the job runners on every process of an attempt) announces its pid on the
`ready` FIFO and then blocks opening the `open` FIFO, which nobody opens: it waits until it is killed.
Processes without a marker (the worker itself) pass straight through. With `env(at="module:function")`
every Python process is held instead at the n-th call (or return) of that function, in any thread: e.g. a
`srift testbed up` after its sixth resource, or a server inside its write transaction.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from pathlib import Path

from srift.jobs.run import MARKER_ENV

SITECUSTOMIZE = f'''"""Test gate (tests/process_gate.py): processes wait here until they are killed."""
import os
import sys
import threading

_root = os.environ.get("SRIFT_TEST_GATE")


def _hold():
    with open(os.path.join(_root, "ready"), "w") as ready:
        ready.write(f"{{os.getpid()}}\\n")
    with open(os.path.join(_root, "open")) as gate:
        gate.read()


if _root and os.environ.get("SRIFT_TEST_GATE_AT"):
    _module, _function, _event, _nth = os.environ["SRIFT_TEST_GATE_AT"].split(":")
    _seen = [0]
    _lock = threading.Lock()

    def _watch(frame, event, arg):
        if (
            event == _event
            and frame.f_code.co_name == _function
            and frame.f_globals.get("__name__") == _module
        ):
            with _lock:
                _seen[0] += 1
                due = _seen[0] == int(_nth)
            if due:
                _hold()

    sys.setprofile(_watch)
    threading.setprofile(_watch)
elif _root and os.environ.get({MARKER_ENV!r}):
    _hold()
'''


class ProcessGate:
    """Holds job processes before they run a line of their own; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "site").mkdir(parents=True, exist_ok=True)
        (root / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        os.mkfifo(root / "ready")
        os.mkfifo(root / "open")
        # A reader and a spare writer of our own: processes can announce themselves at once, and reads
        # block (instead of seeing end-of-file) until one does.
        self._ready_fd = os.open(root / "ready", os.O_RDONLY | os.O_NONBLOCK)
        self._spare_fd = os.open(root / "ready", os.O_WRONLY)
        self._buffer = b""
        self.pids: list[int] = []

    def env(self, *, at: str | None = None, event: str = "call", nth: int = 1) -> dict[str, str]:
        """Environment entries that put the gate in front of every job process started under them; with
        `at` ("package.module:function"), every process is held instead at the `nth` `event` ("call" or
        "return") of that function, in any thread (a profile hook: the process runs slower until then)."""
        path = os.environ.get("PYTHONPATH")
        site = str(self.root / "site")
        env = {"SRIFT_TEST_GATE": str(self.root), "PYTHONPATH": f"{site}:{path}" if path else site}
        if at is not None:
            env["SRIFT_TEST_GATE_AT"] = f"{at}:{event}:{nth}"
        return env

    def wait_held(self, count: int, *, timeout_s: float = 120.0) -> list[int]:
        """Block until `count` job processes wait at the gate (their pids); a safety timeout fails."""
        deadline = time.monotonic() + timeout_s
        while len(self.pids) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"only {len(self.pids)} of {count} job processes reached the gate")
            readable, _, _ = select.select([self._ready_fd], [], [], left)
            if readable:
                self._buffer += os.read(self._ready_fd, 4096)
                *lines, self._buffer = self._buffer.split(b"\n")
                self.pids += [int(line) for line in lines if line.strip()]
        return list(self.pids)

    def close(self) -> None:
        for fd in (self._ready_fd, self._spare_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
