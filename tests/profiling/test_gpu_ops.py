"""benchmarks/gpu_ops.py with --device cpu: every group of the operator grid runs at its small sizes, each
row carries its counted work and the roofline's figure for it, and the budget stops new cases."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from srift.settings import REPO_ROOT

KINDS = {"host", "matmul", "conv", "sdpa", "memory", "cross_entropy", "adamw"}
HOST_OPS = {"add", "mul", "linear", "conv2d", "layer_norm", "relu", "gelu"}
HOST_PASSES = {"forward (no_grad)", "forward (autograd)", "forward + backward"}
LAYOUTS = {"forward X·Wᵀ", "dX = dY·W", "dW = dYᵀ·X"}


def _run(*args: str) -> str:
    """`python -m benchmarks.gpu_ops --no-write ARGS` as a command: what it printed."""
    cmd = [sys.executable, "-m", "benchmarks.gpu_ops", "--no-write", *args]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _grid(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The grid run on the CPU: its JSON report (stored as `tmp_path`/ops.json) and what it printed."""
    out = tmp_path / "ops.json"
    printed = _run("--device", "cpu", "--out", str(out), *args)
    return json.loads(out.read_text()), printed


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _grid(tmp_path_factory.mktemp("gpu-ops"), "--spec", "H200-SXM-141GB")


def test_a_stored_report_renders_as_the_run_printed_it(
    grid: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    """`--render` (how a lent device's report reaches docs/BENCHMARKS.md) prints what the run printed."""
    report, printed = grid
    stored = tmp_path / "stored.json"
    stored.write_text(json.dumps(report))
    assert _run("--render", str(stored)) == printed


def test_every_group_runs_and_says_what_it_ran(grid: tuple[dict[str, Any], str]) -> None:
    report, printed = grid
    assert report["device"] == "cpu" and report["spec"] == "H200-SXM-141GB"
    assert report["skipped"] == [] and report["failed"] == []
    assert report["torch"] and report["date"] and "cudnn" in report and report["planned_s"] > 0
    rows = report["rows"]
    assert {r["kind"] for r in rows} == KINDS
    for r in rows:
        assert 0 < r["min_s"] <= r["median_s"] and math.isfinite(r["median_s"]), r
        assert r["repeats"] >= 3
    for r in rows:
        if r["kind"] not in ("host", "adamw"):
            assert r["bytes"] > 0 and r["kernels"] >= 1 and math.isfinite(r["bytes_per_s"]), r
            assert r["estimated_s"] > 0 and r["measured_over_estimate"] > 0, r
    assert "Host cost of one eager operator" in printed and "| add | forward (no_grad) |" in printed


def test_the_host_rows_give_each_operators_host_time(grid: tuple[dict[str, Any], str]) -> None:
    report, _ = grid
    host = [r for r in report["rows"] if r["kind"] == "host"]
    assert {(r["name"], r["pass"]) for r in host} == {(op, p) for op in HOST_OPS for p in HOST_PASSES}
    for r in host:
        assert r["ops_per_call"] >= report["sizes"]["chain"] and r["per_op_us"] > 0
        assert r["median_s"] == pytest.approx(r["per_op_us"] * 1e-6 * r["ops_per_call"], rel=1e-3)
        # on a CPU the floor is the measured dispatch alone: no CUDA launch
        assert r["estimated_per_op_us"] == pytest.approx(7.21, abs=0.01)
    assert all(r["backward_per_op_us"] > 0 for r in host if r["pass"] == "forward + backward")
    by = {(r["name"], r["pass"]): r["ops_per_call"] for r in host}
    # a backward does at least one operator for each forward one
    assert all(by[(op, "forward + backward")] >= 2 * by[(op, "forward (autograd)")] for op in HOST_OPS)


def test_products_count_their_flops_and_pair_the_head(grid: tuple[dict[str, Any], str]) -> None:
    report, _ = grid
    products = [r for r in report["rows"] if r["kind"] == "matmul"]
    assert {r["dtype"] for r in products} == {"fp32", "tf32", "fp16", "bf16"}
    assert {r["layout"] for r in products} == LAYOUTS
    for r in products:
        s = r["shape"]
        assert r["flops"] == 2 * s["m"] * s["n"] * s["k"]
        assert r["flops_per_s"] > 0 and math.isfinite(r["flops_per_s"])
    heads = {r["name"] for r in products if r["name"].startswith("head")}
    assert heads == {"head 50257", "head 50304"}
    pairs = report["pairs"]
    assert {(p["dtype"], p["layout"]) for p in pairs} == {
        (d, x) for d in ("fp32", "tf32", "fp16", "bf16") for x in LAYOUTS
    }
    for p in pairs:
        ratio = p["padded_flops_per_s"] / p["unaligned_flops_per_s"]
        assert p["padded_over_unaligned"] == pytest.approx(ratio, rel=1e-3) and ratio > 0


def test_the_other_groups_count_as_the_structure_does(grid: tuple[dict[str, Any], str]) -> None:
    report, _ = grid
    rows = report["rows"]
    conv = [r for r in rows if r["kind"] == "conv"]
    assert {r["layout"] for r in conv} == {"NCHW", "channels_last"}
    assert {r["dtype"] for r in conv} == {"fp32 (cuDNN TF32)", "fp32 (IEEE)", "bf16"}
    for r in conv:
        s = r["shape"]
        side, (c_in, c_out), k = s["side"], s["channels"], s["kernel"]  # stride 1, "same" padding
        forward = 2 * s["batch"] * c_out * side * side * c_in * k * k
        assert r["flops"] == (forward if r["pass"] == "forward" else 2 * forward), r  # dX and dW
    sdpa = [r for r in rows if r["kind"] == "sdpa"]
    assert {r["shape"]["causal"] for r in sdpa} == {True, False}
    assert all("attention" in (r["backend"] or "") for r in sdpa)
    for r in sdpa:
        s = r["shape"]
        forward = 4 * s["batch"] * s["heads"] * s["positions"] ** 2 * s["head_dim"]
        assert r["flops"] == (forward if r["pass"] == "forward" else forward * 5 // 2), r
    xent = [r for r in rows if r["kind"] == "cross_entropy"]
    assert {r["pass"] for r in xent} == {"forward", "backward"}
    # the forward reads every fp32 logit at least once
    assert all(r["bytes"] >= 4 * r["shape"]["tokens"] * r["shape"]["vocab"] for r in xent)
    memory = {r["name"] for r in rows if r["kind"] == "memory"}
    assert memory == {"layer_norm", "batch_norm (training)", "gelu", "relu", "add"}
    adamw = {r["layout"]: r for r in rows if r["kind"] == "adamw"}
    assert set(adamw) == {"foreach", "fused"}
    assert adamw["foreach"]["modelled_launches"] > 0 and adamw["foreach"]["host_floor_s"] > 0
    assert adamw["foreach"]["launched_kernels"] is None  # counted by the profiler on CUDA only
    assert all(r["bytes_per_s"] > 0 and r["estimated_s"] > 0 for r in adamw.values())


def test_no_case_starts_after_the_budget(tmp_path: Path) -> None:
    report, _ = _grid(tmp_path, "--groups", "host,matmul", "--budget-s", "0")
    assert report["rows"] == [] and report["pairs"] == []
    host = [f"host {op}" for op in ("add", "mul", "linear", "conv2d", "layer_norm", "relu", "gelu")]
    assert report["skipped"][:7] == host and len(report["skipped"]) == 7 + 3 * 4 * 3  # 3 products, 4 dtypes
