"""The profiler's optimizer-step time (update_s): measured, positive, and kept in the profile document."""

from __future__ import annotations

from srift.domain import ModelProfile
from srift.profiling import testmodels
from srift.profiling.profiler import profile_model


def test_profile_measures_an_optimizer_step() -> None:
    result = profile_model(
        testmodels.sequential,
        testmodels.sequential_input,
        threads=1,
        max_batch=8,
        repeats=2,
        warmup=1,
        iterations=3,
    )
    assert 0 < result.update_s < 1.0
    assert "SGD" in result.extra["update"]
    again = ModelProfile.from_dict(result.to_dict())
    assert again.update_s == result.update_s
