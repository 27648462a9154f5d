"""The profiler's loop overhead: a training step's time beyond forward, backward and the optimizer step."""

from __future__ import annotations

import itertools

import pytest
import torch

from srift.domain import ModelProfile
from srift.domain.profile_document import read_profile
from srift.profiling import testmodels
from srift.profiling.bench import build_bench
from srift.profiling.timing import loop_overhead


def test_overheads_from_hand_made_clocks() -> None:
    """Each loop step reads both clocks four times (start, after zero_grad, after backward, after the
    optimizer step). Wall: every step takes 10 s (5 + 3 + 2). CPU: plain steps zero_grad 1, forward and
    backward 3, optimizer step 1 (5 in all); DDP steps 1 + 5 + 1 (7 in all). The plain loop runs at
    40 / 20 = 2 wall seconds per CPU second, so loop_overhead_s = 1 · 2 = 2, update_s = 1 · 2 = 2 (its
    wall reading, 2 s, is not used) and ddp_overhead_s = 2 + (7 − 5) · 2 = 6."""
    bench = build_bench(testmodels.sequential, testmodels.sequential_input, None, torch.device("cpu"))
    wall = itertools.accumulate(itertools.chain.from_iterable((0, 5, 3, 2) for _ in range(8)))
    cpu = itertools.accumulate(itertools.chain.from_iterable((0, 1, 3, 1, 0, 1, 5, 1) for _ in range(4)))
    bench.now = lambda: float(next(wall))
    got = loop_overhead(bench, batch=2, repeats=3, cpu_clock=lambda: float(next(cpu)))
    assert got["loop_wall_per_cpu"] == pytest.approx(2.0)
    assert got["loop_overhead_s"] == pytest.approx(2.0)
    assert got["update_s"] == pytest.approx(2.0)
    assert got["ddp_overhead_s"] == pytest.approx(6.0)
    assert got["loop_overhead_batch"] == 2


def test_update_is_cpu_seconds_times_the_loops_ratio_not_its_quantised_wall() -> None:
    """A quarter-core quota: the plain loop's steps take 40 wall and 10 CPU seconds in all (ratio 4);
    the optimizer step costs 0.5 CPU seconds but its wall reading is 0 or a whole throttled period (7.5)
    by chance: update_s is 0.5 · 4 = 2 whatever the wall readings. Steps without DDP (no DDP rounds)."""
    bench = build_bench(testmodels.sequential, testmodels.sequential_input, None, torch.device("cpu"))
    walls = [(0, 1, 39, 0), (0, 1, 31.5, 7.5), (0, 1, 39, 0), (0, 1, 31.5, 7.5), (0, 1, 39, 0)]
    cpus = [(0, 0.25, 9.25, 0.5)] * 5
    wall = itertools.accumulate(itertools.chain.from_iterable(walls))
    cpu = itertools.accumulate(itertools.chain.from_iterable(cpus))
    bench.now = lambda: float(next(wall))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("srift.profiling.timing._ddp_world_one", lambda _bench: None)
        got = loop_overhead(bench, batch=2, repeats=4, cpu_clock=lambda: float(next(cpu)))
    assert got["loop_wall_per_cpu"] == pytest.approx(4.0)
    assert got["update_s"] == pytest.approx(2.0)
    assert got["loop_overhead_s"] == pytest.approx(1.0)
    assert "ddp_overhead_s" not in got


def test_profile_carries_theloop_overhead(sequential_profile: ModelProfile) -> None:
    result = sequential_profile
    plain = result.extra["loop_overhead_s"]
    assert result.extra["loop_overhead_batch"] == 3  # the second breakpoint of max batch 8: 1, 3, 5, 8
    assert 0 < result.update_s < 1.0
    assert result.extra["update"].startswith("torch.optim.SGD (no momentum) inside the training loop")
    assert 0 <= plain < 1.0
    assert result.extra["ddp_overhead_s"] >= plain
    again = read_profile(result.to_dict())
    assert again.loop_overhead_s(distributed=False) == plain
    assert again.loop_overhead_s(distributed=True) == result.extra["ddp_overhead_s"]
