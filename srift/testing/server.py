"""A real `srift serve` subprocess on loopback, for tests and benchmarks: start it, reach it, kill it; or,
where a test needs no process of its own, an app served by uvicorn in a thread (`serving_in_thread`).

Also what both need around it: a write token straight in the database, the server's process tree from
/proc (uvicorn's workers), and small valid profiles to store before asking for plans.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from srift.bandwidth.local_probe import free_port
from srift.settings import REPO_ROOT

START_TIMEOUT_S = 120.0


@dataclass
class Server:
    """A running `srift serve` subprocess."""

    process: subprocess.Popen[bytes]
    base_url: str
    database_url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def processes(self) -> list[int]:
        """The server's process and its descendants (uvicorn's worker processes), from /proc."""
        return [self.pid, *descendants(self.pid)]

    def peak_rss_bytes(self) -> int:
        """Peak resident set size so far (VmHWM) of the server's largest process (a worker when several)."""
        return max(_status_kib(pid, "VmHWM") for pid in self.processes()) * 1024

    def rss_bytes(self) -> int:
        """Resident set size now (VmRSS), summed over the server's processes."""
        return sum(_status_kib(pid, "VmRSS") for pid in self.processes()) * 1024

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the server's live processes."""
        return sum(process_cpu_seconds(pid) for pid in self.processes())

    def kill9(self) -> None:
        """SIGKILL: no shutdown handlers, no flushing, like a power cut of the process."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _status_kib(pid: int, key: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:
        return 0
    for line in lines:
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not found in /proc/{pid}/status")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 when it has gone), from /proc/<pid>/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def server_command(
    *, port: int, workers: int = 1, bootstrap: bool = True, source: Path | None = None
) -> list[str]:
    """The `srift serve` command line; `source` runs the server from another checkout (before/after)."""
    launcher = "from srift.cli import main; main()"
    if source is not None:
        # the editable install's import hook would still find this checkout's srift: drop it, use `source`
        launcher = (
            "import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in "
            f"type(f).__module__]; sys.path.insert(0, {str(source)!r}); " + launcher
        )
    args = [sys.executable, "-c", launcher, "serve", "--port", str(port)]
    if workers != 1 or source is None:
        args += ["--workers", str(workers)]
    if not bootstrap:
        args.append("--no-bootstrap")
    return args


def start_server(
    *,
    database_url: str,
    data_dir: Path,
    bootstrap: bool = True,
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
    source: Path | None = None,
) -> Server:
    """Start `srift serve` on a free loopback port and wait until /v1/health answers.

    `workers` 1 (the default) serves in one process, which tests may SIGKILL as a whole.
    """
    port = free_port()
    log_path = data_dir / f"server-{port}.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SRIFT_DATABASE_URL": database_url,
        "SRIFT_DATA_DIR": str(data_dir),
        "SRIFT_LOG_LEVEL": "warning",
        **(extra_env or {}),
    }
    args = server_command(port=port, workers=workers, bootstrap=bootstrap, source=source)
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    server = Server(process, f"http://127.0.0.1:{port}", database_url, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log_text()[-4000:]}")
        try:
            if httpx.get(server.base_url + "/v1/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.kill9()
    raise RuntimeError(f"server did not answer within {START_TIMEOUT_S:g} s:\n{server.log_text()[-4000:]}")


@contextlib.contextmanager
def running_server(
    *,
    database_url: str,
    data_dir: Path,
    bootstrap: bool = True,
    workers: int = 1,
    source: Path | None = None,
) -> Iterator[Server]:
    """`start_server`, stopped on leaving the block."""
    server = start_server(
        database_url=database_url, data_dir=data_dir, bootstrap=bootstrap, workers=workers, source=source
    )
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def serving_in_thread(app: Any) -> Iterator[str]:
    """`app` (an ASGI app, e.g. srift.api.app.create_app's) served by uvicorn in a daemon thread of this
    process on a free loopback port: its base URL, once uvicorn says it has started; stopped on leaving the
    block. RuntimeError when the server thread ends or 30 s pass before it starts."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    exits: list[object] = []

    def run() -> None:
        try:
            server.run()
        except SystemExit as exc:  # uvicorn exits when the app's start-up fails
            exits.append(exc.code)

    thread = threading.Thread(target=run, name="srift-live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            why = f" (uvicorn exited with {exits[0]})" if exits else ""
            raise RuntimeError(f"the live Srift server did not start within 30 s{why}")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def create_write_token(database_url: str, *, name: str = "harness") -> str:
    """A write token stored straight in the database; returns its plain text."""
    from srift.db.session import transaction
    from srift.db.tokens import Scope, create_token

    with transaction(database_url) as session:
        _, plain = create_token(session=session, name=name, scope=Scope.WRITE)
    return plain


def profile_document(accelerator: str, *, seconds_scale: float) -> dict[str, Any]:
    """A small valid profile (the shape `srift profile` writes) for plan and prediction requests."""
    return {
        "schema_version": 1,
        "model": "load-test-mlp",
        "accelerator": accelerator,
        "max_batch": 256,
        "forward": {
            "batches": [1, 85, 171, 256],
            "times_s": [t * seconds_scale for t in (0.004, 0.03, 0.058, 0.086)],
        },
        "backward": {
            "batches": [1, 85, 171, 256],
            "times_s": [t * seconds_scale for t in (0.008, 0.06, 0.116, 0.172)],
        },
        "layers": [
            {"name": f"fc{i}", "grad_bytes": 4_000_000, "ready_frac": (i + 1) / 8, "exec_prob": 1.0}
            for i in range(8)
        ],
        "straggler_cv": 0.05,
    }


def store_profiles(*, base_url: str, headers: dict[str, str]) -> list[int]:
    """Store a T4 and a V100 profile of the same small model; return their ids."""
    ids = []
    for accelerator, scale in (("NVIDIA T4", 1.0), ("NVIDIA V100", 0.5)):
        response = httpx.post(
            base_url + "/v1/profiles",
            json=profile_document(accelerator, seconds_scale=scale),
            headers=headers,
            timeout=60,
        )
        response.raise_for_status()
        ids.append(int(response.json()["id"]))
    return ids
