"""GLOO_STAGING_TENSORS against the installed torch: gloo's all-gather and reduce-scatter still hold one whole
tensor of temporary memory on a CPU rank (`python -m benchmarks.gloo_staging`, run as a command), and no call
leaves more of it alive after returning than GLOO_LATE_RELEASED_REDUCES (a reduce-scatter's clone, which
gloo's worker thread frees after waking the caller; the all-gather's is freed inside the call).

At the benchmark's 200 MB: a 40 MB tensor read 0.80 once in a full run, likely because glibc serves blocks
under its 32 MB mmap ceiling from the heap, whose pages freed by an earlier collective stay resident and hide
part of a new buffer from the resident-set mark; at 200 MB every buffer is a fresh mapping."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from srift.domain.sharding import GLOO_LATE_RELEASED_REDUCES, GLOO_STAGING_TENSORS
from srift.settings import REPO_ROOT


def test_gloo_staging_is_what_the_memory_model_takes(tmp_path: Path) -> None:
    out = tmp_path / "staging.json"
    cmd = [sys.executable, "-m", "benchmarks.gloo_staging", "--tensor-mb", "200", "--repeats", "2",
           "--world-sizes", "2", "--late-calls", "60", "--json", str(out), "--no-write"]  # fmt: skip
    subprocess.run(cmd, cwd=REPO_ROOT, check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert {r["collective"] for r in report["ratios"]} == {"all_gather_into_tensor", "reduce_scatter_tensor"}
    # One whole buffer, not none and not two. Inside a full CI run the ratio read less than the buffer
    # (0.77 once; 1.00-1.01 alone), likely pages the kernel reclaimed meanwhile, unseen by the RSS mark.
    for row in report["ratios"]:
        assert 0.5 < row["ratio"] < 1.5, row
    assert report["figure"] == GLOO_STAGING_TENSORS
    # How often the clone outlives the call is the scheduler's (8-10 % of 200 calls at two ranks, 0.5-1 % at
    # one); how many it can be is gloo's: one reduce-scatter's at most, never an all-gather's.
    late = {row["collective"]: row["most"] for row in report["late"]}
    assert late["all_gather_into_tensor"] == 0
    assert late["reduce_scatter_tensor"] <= GLOO_LATE_RELEASED_REDUCES
    assert report["late_figure"] == late["reduce_scatter_tensor"]
