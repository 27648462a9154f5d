"""`srift serve --workers N`: N worker processes under uvicorn's supervisor, a dead worker replaced, no
orphans when the supervisor is SIGKILLed, and the worker count taken from the CPUs (and a CPU quota)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest
from serve_kit import WAIT_S, wait_exit, wait_for, workers_of

from srift.api.server import available_cpus
from srift.bandwidth.registry import load_shipped_models
from srift.catalog.shipped import load_shipped_catalog
from srift.db import migrate
from srift.settings import Settings
from srift.testing.server import create_write_token, descendants, start_server, store_profiles


def test_available_cpus_honours_a_cgroup_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert available_cpus(cgroup_cpu_max=cpu_max) == affinity
    cpu_max.write_text("50000 100000\n")
    assert available_cpus(cgroup_cpu_max=cpu_max) == 1
    cpu_max.write_text(f"{150000 * affinity} 100000\n")
    assert available_cpus(cgroup_cpu_max=cpu_max) == affinity
    assert available_cpus(cgroup_cpu_max=tmp_path / "missing") == affinity


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_a_sigkilled_supervisor_leaves_no_worker_behind(
    tmp_path: Path,
) -> None:
    """One supervisor's life: two workers serve; a SIGKILLed worker is replaced and serving goes on; then
    the supervisor itself is SIGKILLed, and its workers (the replacement too) exit with it."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    migrate.upgrade(url)
    # Supervision only: /v1/health answers on the migrated database without the shipped data loaded.
    server = start_server(database_url=url, data_dir=tmp_path, workers=2, bootstrap=False)
    try:
        assert wait_for(lambda: len(workers_of(server.pid)) == 2, timeout_s=WAIT_S), descendants(server.pid)
        first = workers_of(server.pid)
        with httpx.Client(base_url=server.base_url, timeout=30) as http:
            assert all(http.get("/v1/health").status_code == 200 for _ in range(20))
            victim = min(first)
            os.kill(victim, signal.SIGKILL)
            assert wait_exit(victim, timeout_s=WAIT_S)
            assert wait_for(
                lambda: len(workers_of(server.pid)) == 2 and victim not in workers_of(server.pid),
                timeout_s=WAIT_S,
            ), server.log_text()[-2000:]
            assert all(http.get("/v1/health").status_code == 200 for _ in range(20))
        assert server.process.poll() is None
        workers = workers_of(server.pid)
        assert len(workers) == 2 and workers != first
    finally:
        server.kill9()
    assert server.process.returncode == -signal.SIGKILL
    for pid in workers:
        assert wait_exit(pid, timeout_s=WAIT_S), f"worker {pid} outlived its supervisor"
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.base_url + "/v1/health", timeout=5)


@pytest.mark.slow
def test_a_long_plan_does_not_block_the_event_loop(tmp_path: Path) -> None:
    """One worker computing a plan for seconds still answers /v1/health meanwhile: the solve runs in the
    thread pool, not on the event loop (which would hold every other request until the plan is done)."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    migrate.upgrade(url)
    headers = {"Authorization": f"Bearer {create_write_token(url)}"}
    # The plan needs the shipped AWS catalog and bandwidth model, not the reference models' profiles (the
    # slowest part of preparing a fresh data folder): load those two here and start without bootstrap.
    settings = Settings(database_url=url, data_dir=tmp_path)
    load_shipped_catalog(settings)
    load_shipped_models(settings)
    server = start_server(database_url=url, data_dir=tmp_path, workers=1, bootstrap=False)
    try:
        ids = store_profiles(base_url=server.base_url, headers=headers)
        body = {
            "profile_ids": ids,
            "global_batch": 4096,
            "iterations": 10_000,
            "provider": "aws",
            "region": "us-east-1",
            "market": "any",
            "mode": "exhaustive",
            "solve_budget_s": 3,
            "max_count_per_type": 64,
        }
        done = threading.Event()
        status: list[int] = []

        def long_plan() -> None:
            r = httpx.post(server.base_url + "/v1/plans", json=body, headers=headers, timeout=120)
            status.append(r.status_code)
            done.set()

        cpu_before = server.cpu_seconds()
        thread = threading.Thread(target=long_plan)
        thread.start()
        assert wait_for(lambda: server.cpu_seconds() - cpu_before > 0.3 or done.is_set(), timeout_s=WAIT_S)
        assert not done.is_set(), "the plan finished before the server was seen busy: make it longer"
        health = httpx.get(server.base_url + "/v1/health", timeout=60)
        answered_while_busy = not done.is_set()
        thread.join()
        assert health.status_code == 200
        assert answered_while_busy, "/v1/health waited for the plan: the solve ran on the event loop"
        assert status == [201]
    finally:
        server.stop()
