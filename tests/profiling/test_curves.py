"""The pure parts of the compute model: largest-batch search, breakpoints, curve fit, MAPE, spread."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from srift.errors import InvalidInput
from srift.profiling.curves import breakpoints, coefficient_of_variation, fit_curve, largest_fitting, mape


@given(threshold=st.integers(0, 5000), cap=st.integers(1, 5000))
def test_largest_fitting_finds_the_threshold_or_the_cap(threshold: int, cap: int) -> None:
    calls: list[int] = []

    def fits(batch: int) -> bool:
        calls.append(batch)
        return batch <= threshold

    assert largest_fitting(fits, cap=cap) == min(threshold, cap)
    assert all(1 <= b <= cap for b in calls)
    assert len(calls) <= 2 * cap.bit_length() + 2


def test_largest_fitting_probes_the_neighbour_that_fails() -> None:
    calls: list[int] = []

    def fits(batch: int) -> bool:
        calls.append(batch)
        return batch <= 300

    assert largest_fitting(fits, cap=4096) == 300
    assert 301 in calls and 300 in calls
    assert calls[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_largest_fitting_rejects_a_cap_below_one() -> None:
    with pytest.raises(InvalidInput) as caught:
        largest_fitting(lambda b: True, cap=0)
    assert caught.value.field == "max_batch"


@pytest.mark.parametrize(
    ("max_batch", "expected"),
    [
        (1, (1,)),
        (2, (1, 2)),
        (3, (1, 2, 3)),
        (4, (1, 3, 4)),
        (512, (1, 171, 341, 512)),
        (300, (1, 100, 200, 300)),
    ],
)
def test_breakpoints_are_one_third_two_thirds_and_max(max_batch: int, expected: tuple[int, ...]) -> None:
    assert breakpoints(max_batch) == expected


def test_fit_curve_passes_through_the_points_and_interpolates_linearly() -> None:
    curve = fit_curve([1, 100, 200, 300], [0.01, 0.2, 0.5, 0.6])
    assert curve.time_s(100) == pytest.approx(0.2)
    assert curve.time_s(150) == pytest.approx(0.35)
    assert curve.time_s(250) == pytest.approx(0.55)
    assert curve.time_s(400) == pytest.approx(0.7)


def test_mape_and_coefficient_of_variation() -> None:
    assert mape([1.1, 0.9], [1.0, 1.0]) == pytest.approx(10.0)
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([0.9, 1.1]) == pytest.approx(0.1414, abs=1e-3)
    assert coefficient_of_variation([1.0]) == 0.0
