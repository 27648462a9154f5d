"""The co-location factor: its arithmetic on hand-made rounds, and real compute-only rounds from a
three-rank probes/ddp_train.py run on loopback."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from srift.bandwidth.local_probe import free_port
from srift.settings import REPO_ROOT
from srift.validation.adapter import colocated_profile
from srift.validation.colocation import (
    ColocationFactors,
    colocation_factors,
    solo_ranks,
)
from srift.validation.ddp import Colocation
from srift.validation.matrix import Fleet, Group
from tests.sim.kit import profile

MIXED = Fleet((Group("tbv.small", 2, 16), Group("tbv.large", 1, 48)))


def test_the_solo_ranks_are_the_first_of_each_group() -> None:
    assert solo_ranks(MIXED) == (0, 2)
    assert solo_ranks(Fleet((Group("tbv.small", 4, 32),))) == (0,)


def test_a_groups_factor_is_the_median_of_its_per_round_ratios() -> None:
    # Round 0: smalls 1.2, 1.4 together (median 1.3) vs 1.0 alone → 1.3; large 0.55 vs 0.5 → 1.1.
    # Round 1: smalls 1.0, 1.2 (1.1) vs 1.0 → 1.1; large 0.5 vs 0.5 → 1.0. Second run, round 0: smalls
    # 2.4, 2.4 vs 2.0 → 1.2 (a slow spell moves both); large 1.05 vs 1.0 → 1.05.
    first = Colocation(
        together_s=((1.2, 1.0), (1.4, 1.2), (0.55, 0.5)), alone_s=((1.0, 1.0), None, (0.5, 0.5))
    )
    second = Colocation(together_s=((2.4,), (2.4,), (1.05,)), alone_s=((2.0,), None, (1.0,)))
    found = colocation_factors(MIXED, [first, second])
    assert found is not None
    assert found.ratios[0] == pytest.approx((1.3, 1.1, 1.2))
    assert found.ratios[1] == pytest.approx((1.1, 1.0, 1.05))
    assert found.factors == pytest.approx((1.2, 1.05))
    # Straggler cv of the smalls' together-steps around each run's mean: run 1 [1.2, 1.0, 1.4, 1.2] (mean
    # 1.2: deviations 0, −1/6, +1/6, 0; 3 dof), run 2 [2.4, 2.4] (0; 1 dof): √((2/36) / 4) = 0.1179. The
    # large group has 1 dof (run 1's two rounds; run 2 has one step): none.
    assert found.straggler_cv[0] == pytest.approx(math.sqrt(2 / 36 / 4))
    assert found.straggler_cv[1] is None


def test_the_colocated_profile_is_scaled_and_straggles_as_measured_together() -> None:
    found = ColocationFactors(factors=(1.2, 0.9), ratios=((1.2,), (0.9,)), straggler_cv=(0.15, None))
    base = replace(profile(), straggler_cv=0.05)
    small = colocated_profile(base, found, 0)
    assert small.compute_s(32) == pytest.approx(1.2 * base.compute_s(32))
    assert small.straggler_cv == 0.15
    large = colocated_profile(base, found, 1)
    assert large.compute_s(32) == pytest.approx(0.9 * base.compute_s(32))
    assert large.straggler_cv == 0.05
    calmer = ColocationFactors(factors=(1.0,), ratios=((1.0,),), straggler_cv=(0.01,))
    assert colocated_profile(base, calmer, 0).straggler_cv == 0.05  # never below the profile's own


def test_no_factor_for_one_host_or_without_rounds() -> None:
    one = Fleet((Group("tbv.small", 1, 32),))
    assert colocation_factors(one, [Colocation(together_s=((1.0,),), alone_s=((1.0,),))]) is None
    assert colocation_factors(MIXED, []) is None
    broken = Colocation(together_s=((math.nan,), (1.0,), (0.5,)), alone_s=((1.0,), None, (0.5,)))
    found = colocation_factors(MIXED, [broken])
    assert found is not None and found.factors == (1.0, 1.0) and found.ratios[0] == ()


def test_ddp_train_times_every_rank_together_and_the_solo_ranks_alone(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "3",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
    }
    argv = [
        sys.executable, str(REPO_ROOT / "probes" / "ddp_train.py"),
        "--model", "srift.profiling.testmodels:cnn", "--input", "srift.profiling.testmodels:cnn_input",
        "--batches", "4,4,8", "--iters", "2", "--warmup", "1",
        "--colocation-rounds", "3", "--colocation-budget-s", "1e-9", "--solo-ranks", "0,2",
        "--colocation-idle-s", "0.01",
        "--out", str(out),
    ]  # fmt: skip
    procs = [
        subprocess.Popen(
            argv, env={**env, "RANK": str(r)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for r in range(3)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    data = json.loads(out.read_text())
    assert len(data["iter_times_s"]) == 2
    sample = Colocation.from_dict(data["colocation"])
    assert sample.clock == "cpu" and sample.idle_s == 0.01
    assert Colocation.from_dict(sample.to_dict()) == sample
    # a budget shorter than any step: one round (the first), not --colocation-rounds; CPU seconds on a CPU,
    # the wall seconds beside
    assert data["colocation"]["rounds"] == 1
    on_wall = sample.on_clock("wall")
    assert on_wall is not None and on_wall.clock == "wall" and sample.on_clock("cpu") is sample
    assert [len(ts) for ts in on_wall.together_s] == [1, 1, 1] and on_wall.alone_s[1] is None
    assert all(t > 0 for ts in on_wall.together_s for t in ts)
    assert len(sample.together_s) == 3 and all(len(ts) == 1 for ts in sample.together_s)
    assert sample.alone_s[1] is None
    assert all(s is not None and len(s) == 1 and min(s) > 0 for s in (sample.alone_s[0], sample.alone_s[2]))
    assert all(t > 0 for ts in sample.together_s for t in ts)
    fleet = Fleet((Group("t.a", 2, 4), Group("t.b", 1, 8)))
    found = colocation_factors(fleet, [sample])
    assert found is not None
    assert [len(r) for r in found.ratios] == [1, 1]
    assert all(0 < f < 20 for f in found.factors)
    assert Colocation.from_dict(sample.to_dict()) == sample
