"""Pure parts of the validation pipeline (the end-to-end run is in test_validate_root.py)."""

from __future__ import annotations

import pytest

from srift.validation.context import Effort
from srift.validation.steps import pass_positions


@pytest.mark.parametrize(
    ("total", "passes", "expected"),
    [(54, 4, [0, 18, 36, 54]), (10, 2, [0, 10]), (10, 1, [5]), (10, 0, []), (3, 5, [0, 1, 2, 2, 3])],
)
def test_timing_passes_spread_from_before_the_first_run_to_after_the_last(
    total: int, passes: int, expected: list[int]
) -> None:
    assert pass_positions(total, passes) == expected


def test_both_presets_spread_further_timing_passes() -> None:
    assert Effort.quick().timing_passes >= 2 and Effort.full().timing_passes >= Effort.quick().timing_passes
