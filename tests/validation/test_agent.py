"""The validation agent outside a testbed: one real agent process answers a timing pass and a bad entry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from srift.profiling.curves import CurveSamples
from srift.settings import REPO_ROOT
from srift.validation.agent import READY
from srift.validation.ddp import ddp_probe_path

pytestmark = pytest.mark.slow
MODELS = "srift.profiling.testmodels"


@pytest.fixture(scope="module")
def agent() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "srift.validation.agent", str(ddp_probe_path()), "srift.profiling.testmodels"],
        cwd=str(REPO_ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == READY
    yield proc
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"stop": True}) + "\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def _ask(proc: subprocess.Popen[str], request: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def test_a_timing_request_writes_the_samples_of_every_batch(
    agent: subprocess.Popen[str], tmp_path: Path
) -> None:
    out = tmp_path / "samples.json"
    argv = [
        "--model", f"{MODELS}:sequential", "--input", f"{MODELS}:sequential_input",
        "--batches", "1,3,5", "--repeats", "2", "--warmup", "1", "--out", str(out),
    ]  # fmt: skip
    answer = _ask(agent, {"id": 7, "entry": "timing", "argv": argv})
    assert (answer["id"], answer["rc"], answer["error"]) == (7, 0, "")
    samples = CurveSamples.from_dict(json.loads(out.read_text()))
    assert samples.batches == (1, 3, 5)
    assert [len(ts) for ts in samples.backward_s] == [2, 2, 2]


def test_a_failing_or_unknown_entry_is_an_exit_code_not_a_dead_agent(agent: subprocess.Popen[str]) -> None:
    answer = _ask(agent, {"id": 8, "entry": "nope", "argv": []})
    assert answer["rc"] == 2 and "nope exited with 2" in answer["error"]
    bad = [
        "--model",
        "srift.profiling.testmodels:missing",
        "--input",
        "x:y",
        "--batches",
        "1",
        "--out",
        "/dev/null",
    ]
    answer = _ask(agent, {"id": 9, "entry": "timing", "argv": bad})
    assert answer["rc"] == 1
    assert agent.poll() is None
