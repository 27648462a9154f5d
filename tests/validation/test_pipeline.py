"""Pure parts of the validation pipeline (the end-to-end run is in test_validate_root.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from srift.validation.context import Effort
from srift.validation.matrix import Fleet, Group
from srift.validation.steps import DDP_REBUILD_ITERATION, long_run_warmup, pass_positions


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


def test_a_long_ddp_run_warms_up_through_the_bucket_rebuild() -> None:
    one, four = Fleet((Group("tbv.small", 1, 32),)), Fleet((Group("tbv.small", 4, 32),))
    assert long_run_warmup(Effort.quick(), one) == 1
    assert long_run_warmup(Effort.quick(), four) == DDP_REBUILD_ITERATION == 2
    assert long_run_warmup(Effort.full(), four) == 2  # fewer than the full effort's 3
    assert long_run_warmup(replace(Effort.quick(), warmup=1), four) == 1  # never more than asked for
