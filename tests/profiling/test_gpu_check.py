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


def test_rescore_recomputes_a_stored_reports_estimates() -> None:
    """`--rescore` reproduces the estimate a report stored when nothing changed, and tells it apart from a
    stored figure the code no longer gives."""
    from benchmarks.gpu_check import MODELS, _load, rescore, rescore_rows
    from srift.catalog.accelerators import spec_named
    from srift.estimate.estimator import estimate_profile
    from srift.profiling.structure import count_structure

    factory, inputs = MODELS["cnn"]
    structure = count_structure(_load(factory), _load(inputs))
    made = estimate_profile(model="cnn", structure=structure, spec=spec_named("T4"))
    assert made.profile is not None
    steps = [{"batch": b, "measured_s": 0.01, "estimated_s": made.profile.compute_s(b)} for b in (1, 4)]
    steps[1]["estimated_s"] *= 2
    report = {
        "spec": "T4",
        "profiles": [{"model": "cnn", "precision": "fp32", "max_batch": 4, "steps": steps}],
    }
    rows = rescore_rows(report)
    assert [r["batch"] for r in rows] == [1, 4] and [r["largest"] for r in rows] == [False, True]
    assert rows[0]["estimated_s"] == rows[0]["stored_estimated_s"]
    assert rows[1]["estimated_s"] == pytest.approx(rows[1]["stored_estimated_s"] / 2, rel=1e-12)
    assert "| cnn | fp32 | 4 (largest) |" in rescore(report)
