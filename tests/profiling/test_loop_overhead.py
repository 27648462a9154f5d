"""The profiler's loop overhead: a training step's time beyond forward, backward and the optimizer step."""

from __future__ import annotations

import itertools

import pytest
import torch

from srift.domain import ModelProfile
from srift.profiling import testmodels
from srift.profiling.profiler import _build_bench, _loop_overhead, profile_model


def test_overheads_from_hand_made_clocks() -> None:
    """Each loop step reads both clocks three times (start, after zero_grad, after the optimizer step).
    Wall: every step takes 10 s. CPU: plain steps zero_grad 1 + the rest 4 (5 in all), DDP steps 1 + 6
    (7 in all). The loop runs at 10 / 5 = 2 wall seconds per CPU second, so loop_overhead_s = 1 · 2 = 2
    and ddp_overhead_s = 2 + (7 − 5) · 2 = 6."""
    bench = _build_bench(testmodels.sequential, testmodels.sequential_input, None, torch.device("cpu"))
    wall = itertools.accumulate(itertools.chain.from_iterable((0, 5, 5) for _ in range(8)))
    cpu = itertools.accumulate(itertools.chain.from_iterable((0, 1, 4, 0, 1, 6) for _ in range(4)))
    bench.now = lambda: float(next(wall))
    got = _loop_overhead(bench, batch=2, repeats=3, cpu_clock=lambda: float(next(cpu)))
    assert got["loop_wall_per_cpu"] == pytest.approx(2.0)
    assert got["loop_overhead_s"] == pytest.approx(2.0)
    assert got["ddp_overhead_s"] == pytest.approx(6.0)
    assert got["loop_overhead_batch"] == 2


def test_profile_carries_the_loop_overhead() -> None:
    result = profile_model(
        testmodels.sequential,
        testmodels.sequential_input,
        threads=1,
        max_batch=8,
        repeats=2,
        warmup=1,
        iterations=3,
    )
    plain = result.extra["loop_overhead_s"]
    assert 0 <= plain < 1.0
    assert result.extra["ddp_overhead_s"] >= plain
    again = ModelProfile.from_dict(result.to_dict())
    assert again.loop_overhead_s(distributed=False) == plain
    assert again.loop_overhead_s(distributed=True) == result.extra["ddp_overhead_s"]
