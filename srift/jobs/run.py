"""One attempt at a job: its log, working folder, process marker, and supervision of the processes it runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from srift.errors import EnvironmentProblem, SriftError
from srift.jobs.spec import ProbeJobSpec, ProfileJobSpec
from srift.settings import Settings

MARKER_ENV = "SRIFT_JOB_MARKER"


class JobLost(SriftError, error="job_lost", exit_code=5):
    """The job was taken from this worker (its heartbeat lapsed and recovery requeued or failed it)."""


@dataclass
class JobRun:
    """Everything a provider needs for one attempt; `marker` is in every command line it starts."""

    job_id: int
    attempt: int
    worker_id: str
    kind: str
    spec: ProbeJobSpec | ProfileJobSpec
    settings: Settings
    lost: threading.Event = field(default_factory=threading.Event)
    _lines: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def marker(self) -> str:
        return job_marker(self.job_id, self.attempt)

    @property
    def workdir(self) -> Path:
        path = self.settings.data_dir / "jobs" / str(self.job_id) / f"a{self.attempt}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log(self, message: str) -> None:
        stamp = datetime.now().isoformat(timespec="seconds")
        with self._lock:
            self._lines.append(f"[{stamp}] {message}")
            if len(self._lines) > 2000:
                del self._lines[:500]

    def log_text(self, previous: str = "") -> str:
        with self._lock:
            return previous + "\n".join(self._lines) + ("\n" if self._lines else "")

    def check(self) -> None:
        if self.lost.is_set():
            raise JobLost(
                f"job {self.job_id} was taken from this worker",
                hint="its heartbeat lapsed; another worker or recovery now owns it",
            )


def job_marker(job_id: int, attempt: int) -> str:
    return f"srift-job-{job_id}-a{attempt}"


def kill_marked(marker: str, *, grace_s: float = 2.0) -> int:
    """Kill every process whose command line or SRIFT_JOB_MARKER holds `marker` (a dead worker's)."""
    me = os.getpid()
    found: list[int] = []
    needle = marker.encode()
    tagged = f"{MARKER_ENV}={marker}\0".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes() + b"\0"
        except OSError:
            continue
        if needle + b"-" in cmdline or needle + b"\0" in cmdline or tagged in environ:
            found.append(int(entry.name))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in found):
            time.sleep(0.05)
    return len(found)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


def supervise(procs: Sequence[subprocess.Popen[Any]], *, run: JobRun, timeout_s: float, what: str) -> None:
    """Wait for all processes; the first failure, the timeout or a lost job stops them all."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, code = failed[0]
                raise EnvironmentProblem(
                    f"{what}: process {i} exited with code {code}",
                    hint="see the job log for its output",
                )
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"{what} did not finish within {timeout_s:g} s",
                    hint="raise time_budget_s or use fewer sizes",
                )
            run.check()
            time.sleep(0.1)
    finally:
        for p in procs:
            kill_group(p)


def tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:].strip()
    except OSError:
        return ""
