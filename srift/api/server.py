"""Production serving for `srift serve`: uvicorn on uvloop/httptools, a worker process per CPU.

Python runs one thread of Python code at a time per process, so a 2-core machine answers plans twice as fast
with two worker processes as with one. With `workers > 1` uvicorn's supervisor binds the socket once, spawns
the workers (each builds its app with `worker_app`), pings them and replaces any that dies or hangs.
Each worker asks the kernel to stop it when the supervisor dies, so a SIGKILLed `srift serve` leaves no
orphans holding the port. Request handlers that compute (plans, predictions, catalog reads) are plain `def`
routes, which FastAPI runs in a thread pool, so the event loop keeps accepting and answering while they work.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import signal
import sys
from pathlib import Path

from fastapi import FastAPI

from srift.settings import Settings, get_settings

log = logging.getLogger("srift.api.server")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PR_SET_PDEATHSIG = 1
_CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def available_cpus(*, cgroup_cpu_max: Path = _CGROUP_CPU_MAX) -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota (a container's limit)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        quota, period = cgroup_cpu_max.read_text().split()[:2]
        if quota != "max" and int(period) > 0:
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def configure_logging(level: str) -> None:
    """Srift's own loggers at `level` on stderr (uvicorn configures its access and error loggers itself)."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)


def _die_with_parent() -> None:
    """Linux only: have the kernel send SIGTERM to this process when its parent (the supervisor) exits."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("could not ask to be stopped with the supervisor; stop workers by hand if it is killed")
        return
    if os.getppid() == 1:  # the supervisor died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def worker_app() -> FastAPI:
    """The app factory each worker process calls (uvicorn `factory=True`); settings come from SRIFT_*."""
    from srift.api.app import create_app

    _die_with_parent()
    settings = get_settings()
    configure_logging(settings.log_level)
    return create_app(settings)


def serve(*, settings: Settings, host: str, port: int, workers: int) -> None:
    """Serve the API: in this process when `workers` is 1, else under uvicorn's worker supervisor."""
    import uvicorn

    if workers == 1:
        from srift.api.app import create_app

        target: FastAPI | str = create_app(settings)
    else:
        log.info("serving on %s:%d with %d worker processes", host, port, workers)
        target = "srift.api.server:worker_app"
    uvicorn.run(
        target,
        factory=workers > 1,
        workers=workers,
        host=host,
        port=port,
        log_level=settings.log_level,
        loop="auto",  # uvloop when installed
        http="auto",  # httptools when installed
        timeout_graceful_shutdown=30,
    )
