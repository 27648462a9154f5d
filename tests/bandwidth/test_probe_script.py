"""probes/allreduce.py for real: two gloo processes on loopback (plain env init and torchrun), bad flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srift.bandwidth.local_probe import LocalProbe, free_port, probe_script_path, run_local_probe
from srift.bandwidth.records import busbw_gbps, parse_jsonl
from srift.errors import InvalidInput

SCRIPT = probe_script_path()


def test_two_local_gloo_ranks_measure_the_grid_with_async_transfers() -> None:
    progress: list[tuple[int, int, int]] = []
    records = run_local_probe(
        LocalProbe(nodes=2, sizes=(4, 4096, 262144), repeats=2, warmup=1, async_count=2, time_budget_s=60),
        on_progress=lambda done, total, size: progress.append((done, total, size)),
    )
    assert progress == [(1, 3, 4), (2, 3, 4096), (3, 3, 262144)]
    assert sorted((r.buffer_bytes, r.repeat) for r in records) == [
        (4, 0), (4, 1), (4096, 0), (4096, 1), (262144, 0), (262144, 1)
    ]  # fmt: skip
    assert len({r.run_id for r in records}) == 1
    for r in records:
        # both ranks run on this host: one node of two ranks (the intra-node level)
        assert (r.world_size, r.nodes, r.ranks_per_node, r.async_count, r.backend) == (2, 1, 2, 2, "gloo")
        assert (r.provider, r.instance_type) == ("local", "local")
        assert r.time_s > 0 and r.cpu_cores >= 1 and r.memory_gib > 0 and r.cpu_name
        assert r.busbw_gbps == pytest.approx(
            busbw_gbps(buffer_bytes=r.buffer_bytes, world_size=2, time_s=r.time_s)
        )
        assert r.busbw_gbps == pytest.approx(2 * r.buffer_bytes * 8 * (2 - 1) / (2 * r.time_s) / 1e9)


def test_torchrun_launch_reads_its_environment(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(SCRIPT), "--sizes", "4,1K", "--repeats", "1", "--warmup", "0", "--ifname", "lo",
        "--out", str(out),
        "--provider", "testbed", "--instance-type", "bw.test", "--rated-gbps", "0.5",
    ]  # fmt: skip
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    records = parse_jsonl(out.read_text())
    assert [r.buffer_bytes for r in records] == [4, 1024]
    for r in records:
        # torchrun sets LOCAL_WORLD_SIZE: both ranks are on this one node
        assert (r.world_size, r.nodes, r.ranks_per_node) == (2, 1, 2)
        assert (r.provider, r.instance_type, r.rated_gbps) == ("testbed", "bw.test", 0.5)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(line["schema"] == "srift-probe/1" and line["dtype"] == "float32" for line in lines)


def test_time_budget_stops_cleanly_before_the_next_size(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
        "GLOO_SOCKET_IFNAME": "lo",
    }
    argv = [sys.executable, str(SCRIPT), "--sizes", "4,8", "--time-budget-s", "0.001", "--out", str(out)]
    procs = [
        subprocess.Popen(argv, env={**env, "RANK": str(rank)}, stderr=subprocess.PIPE, text=True)
        for rank in (0, 1)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert "budget: stopped before size 4" in errors[0]
    assert out.read_text() == ""


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--sizes", "6"], "multiples of 4"),
        (["--sizes", "4,abc"], "is not a size"),
        (["--min-bytes", "64", "--max-bytes", "8"], "grid is empty"),
        (["--repeats", "0"], "--repeats must be ≥ 1"),
    ],
)
def test_bad_flags_exit_2_before_starting(flags: list[str], words: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *flags], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert words in done.stderr


def test_local_probe_rejects_a_single_process() -> None:
    with pytest.raises(InvalidInput) as caught:
        run_local_probe(LocalProbe(nodes=1))
    assert caught.value.field == "--nodes" and "at least 2" in caught.value.detail
