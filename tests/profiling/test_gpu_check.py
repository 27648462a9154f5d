"""benchmarks/gpu_check.py with --device cpu: every step of the GPU check runs (profiles against the
estimate, the memory model against the allocator, both probes) and its report says what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from srift.settings import REPO_ROOT


@pytest.mark.slow
def test_the_gpu_check_runs_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cmd = [
        sys.executable, "-m", "benchmarks.gpu_check", "--device", "cpu", "--models", "cnn",
        "--precisions", "fp32,bf16", "--spec", "T4", "--max-batch", "4", "--memory-cap", "16",
        "--no-write", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["backend"] == "gloo" and report["spec"] == "T4" and report["skipped"] == []
    assert [(r["model"], r["precision"]) for r in report["profiles"]] == [("cnn", "fp32"), ("cnn", "bf16")]
    for row in report["profiles"]:
        assert row["steps"] and all(s["estimated_s"] > 0 and s["measured_s"] > 0 for s in row["steps"])
    (memory,) = report["memory"]
    assert memory["checks"] and all(abs(c["error"]) < 0.10 for c in memory["checks"])
    assert report["probes"]["ddp_train"]["ok"] and report["probes"]["allreduce"]["ok"]
    assert report["probes"]["ddp_train"]["result"]["median_iter_s"] > 0
    assert "| cnn | fp32 |" in done.stdout and "Training memory" in done.stdout
