"""The CUDA side of the largest-batch search, its decisions checked on a CPU: a batch fits when its step
ran beside the optimizer-state ballast and the memory it needed (allocated before the step, the step's
peak growth, the CUDA context) stays within the usable memory; any allocation failure is out of memory.
The allocator's readings are stand-ins here (no GPU): the decision logic is what is checked."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from srift.errors import Infeasible
from srift.profiling import search as search_module
from srift.profiling import testmodels
from srift.profiling.bench import Progress, build_bench
from srift.profiling.curves import largest_fitting
from srift.profiling.peak import StepPeak
from srift.profiling.search import DeviceBudget, MaxBatchSearch, search_max_batch

ALLOCATED_BEFORE = 10_000
CONTEXT = 2_000
USABLE = 50_000


def _search(monkeypatch: pytest.MonkeyPatch, *, fails_above: int | None = None) -> tuple[Any, MaxBatchSearch]:
    """A bench whose steps peak 1,000 bytes per sample + 500, on a device with 50,000 usable bytes."""
    bench = build_bench(testmodels.sequential, testmodels.sequential_input, None, torch.device("cpu"))
    ballasts: list[int] = []

    def peak(_bench: Any, _inputs: Any, batch: int) -> StepPeak:
        if fails_above is not None and batch > fails_above:
            raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
        return StepPeak(batch, 1_000 * batch + 500, 1_100 * batch)

    real_empty = torch.empty

    def empty(size: int, **kwargs: Any) -> torch.Tensor:
        ballasts.append(size)
        return real_empty(size, **kwargs)

    monkeypatch.setattr(search_module, "step_peak", peak)
    monkeypatch.setattr(search_module, "nbytes_of", lambda _inputs: 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda _device=None: ALLOCATED_BEFORE)
    monkeypatch.setattr(search_module.torch, "empty", empty)
    search = MaxBatchSearch(
        method="cuda-memory-model",
        budget_bytes=None,
        device=DeviceBudget(
            capacity_bytes=60_000,
            usable_bytes=USABLE,
            ballast_bytes=4_000,
            context_bytes=CONTEXT,
            optimizer="adam",
        ),
    )
    search.ballasts = ballasts  # type: ignore[attr-defined]
    return bench, search


def _largest(bench: Any, search: MaxBatchSearch, cap: int) -> int:
    def fits(batch: int) -> bool:
        probe = search_module._probe(bench, search, batch)
        search.probes.append(probe)
        return bool(probe["fits"])

    return largest_fitting(fits, cap=cap)


def test_the_largest_batch_is_the_models_under_the_usable_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """needed(b) = 10,000 + 1,000·b + 500 + 2,000 ≤ 50,000 → b ≤ 37.5: 37, each probe beside a 4,000-byte
    ballast."""
    bench, search = _search(monkeypatch)
    assert _largest(bench, search, 256) == 37
    fitting = [p for p in search.probes if p["fits"]]
    assert max(p["needed_bytes"] for p in fitting) == 10_000 + 37_000 + 500 + 2_000
    assert set(search.ballasts) == {4_000}  # type: ignore[attr-defined]
    assert [(p.batch, p.peak_bytes) for p in search.step_peaks()][:2] == [(1, 1_500), (2, 2_500)]


def test_a_cublas_allocation_failure_ends_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    bench, search = _search(monkeypatch, fails_above=20)
    assert _largest(bench, search, 256) == 20
    assert any(p.get("out_of_memory") for p in search.probes)


def test_batch_one_that_does_not_fit_says_what_it_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    bench, search = _search(monkeypatch)
    assert search.device is not None
    monkeypatch.setattr(search_module, "device_budget", lambda *_a, **_k: search.device)
    monkeypatch.setattr(bench.__class__, "cuda", property(lambda self: True))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(search_module, "step_peak", lambda _b, _i, batch: StepPeak(batch, 10**9, 10**9))
    with pytest.raises(Infeasible) as err:
        search_max_batch(bench, cap=8, budget_bytes=None, report=Progress(None))
    assert err.value.field == "device" and "with adam does not fit" in err.value.detail
