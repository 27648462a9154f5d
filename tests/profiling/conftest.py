"""Fixtures of the profiler tests: a valid profile document built by hand (no torch needed), and one real
profile of a small model shared by the tests that read what the profiler measured."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from srift.domain import ModelProfile

DOCUMENT: dict[str, Any] = {
    "schema_version": 1,
    "model": "resnet-ish",
    "accelerator": "Tesla V100-SXM2-16GB",
    "max_batch": 96,
    "forward": {"batches": [1, 32, 64, 96], "times_s": [0.004, 0.030, 0.058, 0.087]},
    "backward": {"batches": [1, 32, 64, 96], "times_s": [0.007, 0.061, 0.117, 0.175]},
    "layers": [
        {"name": "fc", "grad_bytes": 2052, "ready_frac": 0.05, "exec_prob": 1.0},
        {"name": "conv2", "grad_bytes": 73856, "ready_frac": 0.5, "exec_prob": 1.0},
        {"name": "conv1", "grad_bytes": 1792, "ready_frac": 0.97, "exec_prob": 1.0},
    ],
    "straggler_cv": 0.036,
    "update_s": 0.002,
    "torch_version": "2.13.0",
    "device": "cuda:0",
    "threads": None,
    "created_at": "2025-01-01T00:00:00+00:00",
    "extra": {},
}


@pytest.fixture
def profile_doc() -> dict[str, Any]:
    """A fresh copy of a valid profile document."""
    return copy.deepcopy(DOCUMENT)


@pytest.fixture(scope="session")
def sequential_profile() -> ModelProfile:
    """`srift profile`'s result for the small sequential test model (max batch 8: breakpoints 1, 3, 5, 8),
    made once: the update time and loop overhead tests each read their part of it."""
    from srift.profiling import testmodels
    from srift.profiling.profiler import profile_model

    return profile_model(
        testmodels.sequential,
        testmodels.sequential_input,
        threads=1,
        max_batch=8,
        repeats=2,
        warmup=1,
        iterations=3,
    )
