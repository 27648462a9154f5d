"""The profiler's optimizer-step time (update_s): measured, positive, and kept in the profile document."""

from __future__ import annotations

from srift.domain import ModelProfile
from srift.domain.profile_document import read_profile


def test_profile_measures_an_optimizer_step(sequential_profile: ModelProfile) -> None:
    result = sequential_profile
    assert 0 < result.update_s < 1.0
    assert "SGD" in result.extra["update"]
    again = read_profile(result.to_dict())
    assert again.update_s == result.update_s
