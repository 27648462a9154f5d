"""Report math on hand-made numbers: relative errors, MAPE, underestimates and their p90, noise."""

from __future__ import annotations

import math

import pytest

from srift.validation import stats


def test_relative_error_is_signed_against_the_measurement() -> None:
    assert stats.relative_error(1.1, 1.0) == pytest.approx(0.1)
    assert stats.relative_error(0.8, 1.0) == pytest.approx(-0.2)
    with pytest.raises(ValueError) as info:
        stats.relative_error(1.0, 0.0)
    assert "positive" in str(info.value)


def test_mape_is_the_mean_of_absolute_errors() -> None:
    assert stats.mape([0.1, -0.3, 0.2]) == pytest.approx(0.2)
    assert math.isnan(stats.mape([]))


def test_percentile_interpolates_linearly_like_numpy() -> None:
    values = [0.05, 0.01, 0.2, 0.1]
    # sorted: 0.01, 0.05, 0.1, 0.2; p90 sits at 2.7 → 0.1 + 0.7·(0.2 − 0.1)
    assert stats.percentile(values, 90) == pytest.approx(0.17)
    assert stats.percentile(values, 0) == pytest.approx(0.01)
    assert stats.percentile(values, 100) == pytest.approx(0.2)
    assert stats.percentile([0.3], 90) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        stats.percentile(values, 101)


def test_summary_counts_underestimates_and_their_p90() -> None:
    # predicted vs measured: 10 cases, 4 underestimated by 2 %, 5 %, 10 %, 20 %
    errors = [0.03, -0.02, 0.01, -0.05, 0.04, -0.10, 0.0, 0.02, -0.20, 0.05]
    s = stats.summarize(errors)
    assert s.cases == 10
    assert s.mape == pytest.approx(0.052)
    assert s.underestimates == 4
    assert s.underestimate_share == pytest.approx(0.4)
    # sizes sorted 0.02, 0.05, 0.10, 0.20; p90 at 2.7 → 0.10 + 0.7·0.10
    assert s.underestimate_p90 == pytest.approx(0.17)
    assert s.worst_underestimate == pytest.approx(0.20)
    assert s.worst_overestimate == pytest.approx(0.05)
    assert s.mean_error == pytest.approx(-0.022)
    assert s.to_dict()["underestimates"] == 4


def test_summary_without_underestimates_has_a_zero_p90() -> None:
    s = stats.summarize([0.1, 0.2])
    assert s.underestimates == 0
    assert s.underestimate_p90 == 0.0
    empty = stats.summarize([])
    assert empty.cases == 0
    assert empty.to_dict()["mape"] is None


def test_repeat_noise_and_cv() -> None:
    assert stats.repeat_noise([1.0, 1.2]) == pytest.approx(0.1 / 1.1)
    assert stats.repeat_noise([2.0]) == 0.0
    assert stats.coefficient_of_variation([1.0, 3.0]) == pytest.approx(math.sqrt(2) / 2)
    assert stats.coefficient_of_variation([5.0]) == 0.0


def test_group_by_sorts_groups() -> None:
    groups = stats.group_by(["b1", "a2", "b3"], key=lambda s: s[0])
    assert list(groups) == ["a", "b"]
    assert groups["b"] == ["b1", "b3"]
