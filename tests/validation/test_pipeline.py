"""Pure parts of the validation pipeline (the end-to-end run is in test_validate_root.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from srift.validation.context import Effort
from srift.validation.matrix import Fleet, Group
from srift.validation.profiles import pass_positions, passes_within, spread_slots
from srift.validation.steps import DDP_REBUILD_ITERATION, long_run_warmup


@pytest.mark.parametrize(
    ("total", "passes", "expected"),
    [(54, 4, [0, 18, 36, 54]), (10, 2, [0, 10]), (10, 1, [5]), (10, 0, []), (3, 5, [0, 1, 2, 2, 3])],
)
def test_timing_passes_spread_from_before_the_first_run_to_after_the_last(
    total: int, passes: int, expected: list[int]
) -> None:
    assert pass_positions(total, passes) == expected


@pytest.mark.parametrize(
    ("budget_s", "took_s", "expected"),
    [(30.0, 3.6, 8), (30.0, 9.0, 3), (30.0, 6.7, 4), (30.0, 18.0, 2), (None, 18.0, 8), (30.0, 0.0, 8)],
)
def test_a_model_keeps_the_passes_that_fit_its_budget(
    budget_s: float | None, took_s: float, expected: int
) -> None:
    assert passes_within(budget_s, took_s, 8) == expected
    assert passes_within(30.0, 1.0, 1) == 1  # never more than there are


@pytest.mark.parametrize(
    ("slots", "count", "expected"),
    [
        (8, 8, set(range(8))),
        (8, 3, {0, 4, 7}),
        (8, 2, {0, 7}),
        (8, 4, {0, 2, 5, 7}),
        (8, 1, {0}),
        (2, 5, {0, 1}),
    ],
)
def test_kept_passes_spread_from_the_first_slot_to_the_last(
    slots: int, count: int, expected: set[int]
) -> None:
    assert spread_slots(slots, count) == expected


def test_both_presets_spread_further_timing_passes() -> None:
    assert Effort.quick().timing_passes >= 2 and Effort.full().timing_passes >= Effort.quick().timing_passes


def test_a_long_ddp_run_warms_up_through_the_bucket_rebuild() -> None:
    one, four = Fleet((Group("tbv.small", 1, 32),)), Fleet((Group("tbv.small", 4, 32),))
    assert long_run_warmup(Effort.quick(), one) == 1
    assert long_run_warmup(Effort.quick(), four) == DDP_REBUILD_ITERATION == 2
    assert long_run_warmup(Effort.full(), four) == 2  # fewer than the full effort's 3
    assert long_run_warmup(replace(Effort.quick(), warmup=1), four) == 1  # never more than asked for


def test_an_unknown_shipped_model_is_refused_before_the_testbed_comes_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`srift validate --models cnn,foo` dropped foo without a word (the matrix is built from the known
    names) and ran cnn alone, after minutes of bringing up the testbed; it is refused first, naming it."""
    from srift.errors import InvalidInput
    from srift.validation import pipeline
    from srift.validation.context import ValidationOptions

    def no_testbed(*args: object) -> object:
        raise AssertionError("the testbed was brought up")

    monkeypatch.setattr(pipeline, "bring_up", no_testbed)
    options = ValidationOptions(models=("cnn", "foo"), workdir=tmp_path / "work")
    with pytest.raises(InvalidInput) as info:
        pipeline.run_validation(options)
    assert info.value.field == "models"
    assert "'foo'" in info.value.detail and "cnn, wide_mlp, transformer" in str(info.value)
    assert not (tmp_path / "work").exists()
