"""A mixed plan emitted as torchrun commands, launched on testbed hosts with the helper, reporting to a
Srift server inside the testbed: the run completes, every step arrives once, and it files its observation
(needs root; CI is root). The three-run calibration is benchmarks/launch_calibration.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import func, select

from srift.db.migrate import upgrade
from srift.db.session import transaction
from srift.db.tables import CalibrationObservation, PlanRow, RunIteration, TrainingJob
from srift.launch.layout import layout_of
from srift.launch.torchrun import node_commands
from srift.services.plans import plan_record
from srift.services.training_jobs import start_job
from srift.testbed import Testbed, load_spec

pytestmark = [pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SRIFT = str(Path(sys.executable).parent / "srift")
ITERATIONS = 30
SPEC = {
    "description": "tests/launch: one small and one large host, and one for the server",
    "prefix": "tl46",
    "subnet": "10.215.0.0/24",
    "types": [
        {"name": "tb.small", "cpu_cores": 0.5, "rate_mbit": 100, "delay_ms": 2, "price_usd_per_hr": 0.1},
        {"name": "tb.large", "cpu_cores": 1.0, "rate_mbit": 400, "delay_ms": 1, "price_usd_per_hr": 0.25},
        # the server's host: a whole core, so `srift serve` imports and answers in half the time of 0.5
        {"name": "tb.ctl", "cpu_cores": 1.0, "rate_mbit": 1000, "delay_ms": 0, "price_usd_per_hr": 0.01},
    ],
    "hosts": [
        {"type": "tb.large", "count": 1},
        {"type": "tb.small", "count": 1},
        {"name": "ctl", "type": "tb.ctl"},
    ],
}


@pytest.fixture(autouse=True)
def _must_be_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("testbed tests need root (CI runs as root); run them with sudo")


def _plan_row(url: str) -> tuple[int, dict[str, Any]]:
    """A stored mixed plan over the two types (its prediction is a stand-in: this test checks the launch
    and the measurements, not the simulator)."""
    choices = [
        {
            "instance_type": "tb.large",
            "market": "on_demand",
            "count": 1,
            "batch": 24,
            "gpus": 1,
            "instance_gpus": 0,
        },
        {
            "instance_type": "tb.small",
            "market": "on_demand",
            "count": 1,
            "batch": 8,
            "gpus": 1,
            "instance_gpus": 0,
        },
    ]
    result = {
        "label": "1×tb.large@24 (od) + 1×tb.small@8 (od)",
        "choices": choices,
        "global_batch": 32,
        "iterations": ITERATIONS,
        "predicted": {
            "iteration_s": 0.05,
            "iteration_p10_s": 0.045,
            "iteration_p90_s": 0.055,
            "total_time_s": 0.05 * ITERATIONS,
            "cost_usd": 0.0001,
            "band": {"sigma": 0.1, "terms": []},
        },
        "breakdown": {"compute_s": 0.04, "exposed_network_s": 0.01},
        "network": {"transport": "tcp", "library": "gloo", "label": "tcp/gloo, no placement group"},
    }
    request = {
        "model": "cnn",
        "provider": "testbed",
        "region": "local",
        "iterations": ITERATIONS,
        "network": {"library": "gloo"},
    }
    with transaction(url) as session:
        row = PlanRow(request=request, result=result)
        session.add(row)
        session.flush()
        return row.id, plan_record(row).document()


def test_an_emitted_mixed_plan_runs_on_testbed_hosts_and_files_its_measurements(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/srift.db"
    upgrade(url)
    plan_id, plan = _plan_row(url)
    with transaction(url) as session:
        run = start_job(session=session, plan_id=plan_id)
    assert run.token is not None
    spec_file = tmp_path / "tb.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    root = tmp_path / "testbed"
    tb = Testbed.up(load_spec(spec_file), root=root)
    env = {"SRIFT_DATABASE_URL": url, "SRIFT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    server = None
    try:
        ctl = tb.host("ctl")
        server_url = f"http://{ctl.address}:8046"
        log = (tmp_path / "server.log").open("w")
        server = tb.popen_in(
            "ctl",
            [SRIFT, "serve", "--host", ctl.address, "--port", "8046", "--workers", "1", "--no-bootstrap"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        probe = f"import httpx; httpx.get('{server_url}/v1/health', timeout=2).raise_for_status()"
        for _ in range(120):
            if tb.exec_in("large0", [sys.executable, "-c", probe], timeout_s=10).returncode == 0:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the server never answered: {(tmp_path / 'server.log').read_text()[-2000:]}")
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(plan, default=str))
        layout = layout_of(plan)
        hosts = ["large0", "small0"]
        commands = node_commands(
            layout,
            script=str(REPO / "srift" / "launch" / "example.py"),
            script_args=(
                "--model",
                "srift.profiling.testmodels:cnn",
                "--input",
                "srift.profiling.testmodels:cnn_input",
            ),
            plan_ref=str(plan_file),
            master_addr=tb.host("large0").address,
            master_port=29_646,
        )
        procs = []
        for cmd in commands:
            node_env = {s.name: s.value for s in cmd.env} | {"PYTHONPATH": str(REPO)}
            if cmd.node_rank == 0:
                node_env |= {
                    "SRIFT_URL": server_url,
                    "SRIFT_RUN_ID": str(run.id),
                    "SRIFT_RUN_TOKEN": run.token,
                }
            out = (tmp_path / f"node{cmd.node_rank}.log").open("w")
            argv = [sys.executable, "-m", "torch.distributed.run", *cmd.argv[1:]]
            procs.append(
                tb.popen_in(hosts[cmd.node_rank], argv, env=node_env, stdout=out, stderr=subprocess.STDOUT)
            )
        codes = [p.wait(timeout=600) for p in procs]
        logs = {k: (tmp_path / f"node{k}.log").read_text() for k in range(2)}
        assert codes == [0, 0], logs
        assert f"rank 0: {ITERATIONS} steps, reports delivered: True" in logs[0], logs[0]
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        tb.down()
    with transaction(url) as session:
        job = session.get(TrainingJob, run.id)
        assert job is not None and job.state == "completed" and job.iterations_done == ITERATIONS
        steps = session.scalar(
            select(func.count()).select_from(RunIteration).where(RunIteration.job_id == run.id)
        )
        assert steps == ITERATIONS - 1  # the first tick only starts the clock
        obs = session.scalars(
            select(CalibrationObservation).where(CalibrationObservation.job_id == run.id)
        ).one()
        assert obs.model == "cnn" and obs.types == {"tb.large": 0.5, "tb.small": 0.5} and obs.measured_s > 0
