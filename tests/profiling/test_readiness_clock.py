"""Gradient readiness read on the process's CPU clock: a CPU quota's throttling stops the wall clock, not
the share of the backward's work done when a layer's gradient is ready."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable

import pytest
import torch

from srift.domain import ModelProfile
from srift.domain.profile_document import read_profile
from srift.profiling import testmodels
from srift.profiling.bench import Bench, Progress, build_bench
from srift.profiling.cpuquota import CpuQuota
from srift.profiling.readiness import measure_readiness, readiness_cpu_clock

ORDER = [str(i) for i in range(10, -1, -2)]


def _clock(increments: Iterable[float]) -> Callable[[], float]:
    """A clock whose n-th reading is the sum of the first n increments, repeating the pattern forever."""
    readings = itertools.accumulate(itertools.cycle(increments))
    return lambda: float(next(readings))


def _bench() -> Bench:
    return build_bench(testmodels.sequential, testmodels.sequential_input, None, torch.device("cpu"))


def test_fractions_follow_the_cpu_clock_when_the_wall_clock_stops() -> None:
    """`sequential` is six Linear layers; a step reads the CPU clock once after forward, once at each of
    its 12 gradients (weight and bias of the last layer first) and once after backward, one CPU second
    apart: layer j from the end is ready at 2j of 13 CPU seconds. The wall clock (read at the step's start
    and end only) says 8 s per step."""
    bench = _bench()
    bench.now = _clock([0.0, 8.0])
    ready = measure_readiness(
        bench,
        batch=2,
        iterations=3,
        report=Progress(None),
        cpu_clock=_clock([1.0]),
    )
    assert [layer.name for layer in ready.layers] == ORDER
    assert [layer.ready_frac for layer in ready.layers] == pytest.approx(
        [2 * j / 13 for j in range(1, 7)], abs=1e-6
    )
    assert ready.clock == "cpu"
    assert ready.mean_iteration_s == pytest.approx(8.0)


def test_without_a_cpu_clock_the_wall_clock_places_the_layers() -> None:
    """The same step on the wall clock alone, throttled for 7.5 s before the second layer's first gradient.
    The step reads the clock at its start, after forward, at each gradient and twice after backward, each
    reading 1 s after the one before except that one: from the end of forward, the last layer is ready at
    2 of 19.5 s, the second at 10.5 (4 of 13 by CPU time) and the first at 18.5."""
    bench = _bench()
    increments = [0.0, 1.0, 1.0, 1.0, 7.5, *([1.0] * 9), 1.0, 0.0]
    bench.now = _clock(increments)
    ready = measure_readiness(bench, batch=2, iterations=3, report=Progress(None))
    by_name = {layer.name: layer.ready_frac for layer in ready.layers}
    assert by_name["10"] == pytest.approx(2 / 19.5, abs=1e-6)
    assert by_name["8"] == pytest.approx(10.5 / 19.5, abs=1e-6)
    assert by_name["0"] == pytest.approx(18.5 / 19.5, abs=1e-6)
    assert ready.clock == "wall"


@pytest.mark.parametrize(
    ("device", "threads", "quota", "expected"),
    [
        ("cpu", 1, None, time.process_time),
        ("cpu", 4, CpuQuota(cores=0.5, period_s=0.01, path="/sys/fs/cgroup/host"), time.process_time),
        ("cpu", 4, None, None),
        ("cpu", None, None, None),
        ("cuda", 1, None, None),
    ],
)
def test_which_clock_reads_readiness(
    device: str, threads: int | None, quota: CpuQuota | None, expected: Callable[[], float] | None
) -> None:
    assert readiness_cpu_clock(torch.device(device), threads=threads, quota=quota) is expected


def test_a_one_thread_profile_says_its_readiness_clock(sequential_profile: ModelProfile) -> None:
    assert sequential_profile.extra["readiness_clock"] == "cpu"
    assert read_profile(sequential_profile.to_dict()).extra["readiness_clock"] == "cpu"
