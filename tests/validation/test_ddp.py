"""AgentPool's process groups and read-back, with stand-in agents (no testbed, no torch): each rank gets its
torch.distributed environment, rank 0 alone writes the result file, and the files are gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from srift.errors import EnvironmentProblem
from srift.testbed import Testbed
from srift.validation.agent import READY
from srift.validation.ddp import AgentPool

# A stand-in for srift.validation.agent: READY, then one JSON answer per request; the request's `--out`, when
# given, receives the env and argv it was sent plus a DDP result. `--fail` in argv answers rc 1.
FAKE_AGENT = f"""
import json, sys
print({READY!r}, flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request.get("stop"):
        break
    argv = request["argv"]
    if "--out" in argv:
        result = {{"env": request["env"], "argv": argv, "iter_times_s": [0.1, 0.3], "mean_iter_s": 0.2,
                  "median_iter_s": 0.2, "stdev_iter_s": 0.1}}
        with open(argv[argv.index("--out") + 1], "w") as f:
            json.dump(result, f)
    rc = 1 if "--fail" in argv else 0
    wall_s = 1.0 + float(request["env"].get("RANK", 0))
    print(json.dumps({{"rc": rc, "wall_s": wall_s, "error": "boom"}}), flush=True)
"""


@dataclass(frozen=True)
class _Host:
    address: str


class _FakeTestbed:
    """What AgentPool uses of a Testbed: host addresses and a process started "in" a host."""

    def host(self, name: str) -> _Host:
        return _Host(address=f"10.0.0.{name[-1]}")

    def popen_in(self, name: str, argv: Any, *, env: dict[str, str], **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", FAKE_AGENT], env={**os.environ, **env}, start_new_session=True, **kwargs
        )


@pytest.fixture
def pool(tmp_path: Path) -> Any:
    with AgentPool(cast(Testbed, _FakeTestbed()), workdir=tmp_path) as agents:
        yield agents


def _results_left(workdir: Path) -> list[Path]:
    return sorted(workdir.glob("*.json"))


def test_overlap_gives_each_group_its_own_process_group_and_reads_rank_0s_file(pool: AgentPool) -> None:
    results = pool.overlap([["h1", "h2"], ["h3", "h4"]], argv=["--bytes", "1M"], timeout_s=30)

    envs = [r["env"] for r in results]
    assert [e["MASTER_ADDR"] for e in envs] == ["10.0.0.1", "10.0.0.3"]
    assert all(e["RANK"] == "0" and e["WORLD_SIZE"] == "2" for e in envs)
    assert envs[0]["MASTER_PORT"] != envs[1]["MASTER_PORT"]
    assert all(r["argv"][:2] == ["--bytes", "1M"] for r in results)
    assert _results_left(pool.workdir) == []


def test_run_case_reads_rank_0s_result_and_the_slowest_ranks_wall_time(pool: AgentPool) -> None:
    result = pool.run_case(
        ["h1", "h2", "h3"], [8, 8, 16], model="m:f", input_factory="m:i", iters=2, warmup=1, timeout_s=30
    )

    assert result.iter_times_s == (0.1, 0.3) and result.mean_iter_s == 0.2
    assert result.wall_s == 3.0  # rank 2's answer
    assert _results_left(pool.workdir) == []


def test_a_failed_rank_raises_and_leaves_no_result_file(pool: AgentPool) -> None:
    with pytest.raises(EnvironmentProblem, match="overlap probe failed"):
        pool.overlap([["h1", "h2"]], argv=["--fail"], timeout_s=30)

    assert _results_left(pool.workdir) == []
