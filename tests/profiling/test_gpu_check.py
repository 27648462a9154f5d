"""benchmarks/gpu_check.py with --device cpu: every step of the GPU check runs (profiles against the
estimate, the memory model against the allocator, both probes) and its report says what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from srift.settings import REPO_ROOT

if TYPE_CHECKING:
    from srift.domain.structure import ModelStructure


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


def test_an_unknown_spec_is_refused_with_the_close_names(tmp_path: Path) -> None:
    """`--spec H200` (no spec is named that) stops the check before it measures anything: exit 2, and the
    message names the spec it may have meant, not a bare KeyError traceback."""
    out = tmp_path / "report.json"
    cmd = [
        sys.executable, "-m", "benchmarks.gpu_check", "--device", "cpu", "--models", "cnn", "--spec", "H200",
        "--no-write", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "no accelerator spec is named 'H200'" in done.stderr and "H200-SXM-141GB" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@dataclass(frozen=True)
class Rescored:
    """`--rescore` run once as a command on one stored report holding both tests' profiles (each command
    imports torch and the estimator afresh: about 4 s): cnn's steps, whose stored estimates are what the
    code gives now at batch 1 (`now_s`) and twice that at batch 4, and ResNet-50's one tiny step. Its
    estimates table and its host floor table, as printed."""

    now_s: dict[int, float]
    structure: ModelStructure
    estimates: str
    host_floor: str


@pytest.fixture(scope="module")
def rescored(tmp_path_factory: pytest.TempPathFactory) -> Rescored:
    from srift.catalog.accelerators import spec_named
    from srift.domain.structure import Precision
    from srift.estimate.estimator import estimate_profile
    from srift.profiling import testmodels
    from srift.profiling.structure import count_structure

    structure = count_structure(testmodels.cnn, testmodels.cnn_input, precision=Precision.FP32)
    made = estimate_profile(model="cnn", structure=structure, spec=spec_named("T4"), precision=Precision.FP32)
    assert made.profile is not None
    now_s = {b: made.profile.compute_s(b) for b in (1, 4)}
    steps = [{"batch": 1, "measured_s": 0.01, "estimated_s": now_s[1]}]
    steps.append(
        {"batch": 4, "measured_s": 0.01, "estimated_s": 2 * now_s[4]}
    )  # what the code no longer says
    # A tiny measured step, so the ratios print with five or more significant digits.
    tiny = [{"batch": 2, "measured_s": 1e-5}]
    report = {
        "spec": "T4",
        "profiles": [
            {"model": "cnn", "precision": "fp32", "max_batch": 4, "steps": steps},
            {"model": "resnet50", "precision": "fp32", "max_batch": 2, "steps": tiny},
        ],
    }
    stored = tmp_path_factory.mktemp("rescore") / "report.json"
    stored.write_text(json.dumps(report))
    cmd = [sys.executable, "-m", "benchmarks.gpu_check", "--rescore", str(stored), "--no-write"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    estimates, host_floor = done.stdout.split("Host floor at batch 1", 1)
    return Rescored(now_s=now_s, structure=structure, estimates=estimates, host_floor=host_floor)


def test_rescore_recomputes_a_stored_reports_estimates(rescored: Rescored) -> None:
    """`--rescore` (run as a command) reproduces the estimate a report stored when nothing changed, and tells
    it apart from a stored figure the code no longer gives."""
    from srift.profiling import testmodels

    now_s, structure = rescored.now_s, rescored.structure
    lines = rescored.estimates.splitlines()
    rows = {line.split("|")[3].strip(): line for line in lines if line.startswith("| cnn |")}
    assert set(rows) == {"1", "4 (largest)"}
    cells = {k: [c.strip() for c in line.split("|")[5:9]] for k, line in rows.items()}
    assert cells["1"][0] == cells["1"][1] == f"{1000 * now_s[1]:.2f} ms"
    assert cells["4 (largest)"][0] == f"{2000 * now_s[4]:.2f} ms"
    assert cells["4 (largest)"][1] == f"{1000 * now_s[4]:.2f} ms"
    # cnn has no factor in the public table: without the models' factors the estimate is the same.
    last = [c.strip() for c in rows["4 (largest)"].split("|")[8:10]]
    assert last[0] == last[1] == f"{now_s[4] / 0.01:.2f}"
    # the host floor of batch 1: the structure's operators at the measured dispatch time plus the cited launch
    from srift.estimate.calibration import shipped_calibration
    from srift.estimate.host import CUDA_LAUNCH_S

    (floor_row,) = [line for line in rescored.host_floor.splitlines() if line.startswith("| cnn |")]
    cells = [c.strip() for c in floor_row.split("|")[1:-1]]
    ops = structure.forward.kernels + structure.backward.kernels
    assert cells[2:4] == [str(structure.forward.kernels), str(structure.backward.kernels)]
    floor_s = ops * (shipped_calibration().efficiency.kernel_s + CUDA_LAUNCH_S)
    assert cells[4] == f"{1000 * floor_s:.2f} ms"
    assert int(cells[8]) == sum(1 for p in testmodels.cnn().parameters() if p.requires_grad)


def test_rescore_shows_the_estimate_without_the_models_factor(rescored: Rescored) -> None:
    """A model with a factor in the shipped calibration (ResNet-50) is rescored with it and without it (the
    efficiencies alone): the two ratios to the measured step differ by the factor."""
    from srift.domain.structure import Precision
    from srift.estimate.calibration import shipped_calibration

    factor = shipped_calibration().factor("resnet50", Precision.FP32)
    assert factor is not None and abs(factor - 1.0) > 0.01
    (line,) = [x for x in rescored.estimates.splitlines() if x.startswith("| resnet50 |")]
    now, pooled = (float(c) for c in line.split("|")[8:10])
    assert now / pooled == pytest.approx(factor, rel=1e-3)
