"""benchmarks/gpu_sharded_check.py with --device cpu: every one-rank setup (DDP, ZeRO-1, ZeRO-2, full
sharding, each with and without checkpointing) trains, and each peak memory is near the sharding memory
model's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srift.settings import REPO_ROOT


@pytest.mark.slow
def test_the_sharded_gpu_check_runs_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "benchmarks.gpu_sharded_check", "--device", "cpu", "--batch", "4",
           "--no-write", "--out", str(out)]  # fmt: skip
    env = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(16 << 30), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        cmd,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [r["setup"] for r in report["rows"]] == [
        "ddp", "ddp+ckpt", "zero1", "zero1+ckpt", "zero2", "zero2+ckpt", "full_shard", "full_shard+ckpt",
    ]  # fmt: skip
    assert all(abs(r["memory_error"]) < 0.10 and r["step_s"] > 0 for r in report["rows"])
