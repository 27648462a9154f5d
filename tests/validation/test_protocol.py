"""The protocol's pooled figures: every run's cases pooled, each run's own figures, the spread, targets."""

from __future__ import annotations

from typing import Any

import pytest

from srift.validation.protocol import Run, figures, markdown, pool, subset


def _case(model: str, predicted: float, measured: float, p90: float) -> dict[str, Any]:
    return {
        "model": model,
        "error": (predicted - measured) / measured,
        "measured_iteration_s": measured,
        "predicted": {"iteration_s": predicted, "iteration_p90_s": p90},
    }


def _report(*cases: dict[str, Any], load: float = 0.5) -> dict[str, Any]:
    return {
        "cases": list(cases),
        "duration_s": 600.0,
        "machine": {"load_avg_before": load, "load_avg_after": load + 0.1},
    }


RUN1 = Run("r1", (_report(_case("cnn", 1.0, 1.1, 1.2), _case("ctr", 1.0, 0.9, 1.1)),))
RUN2 = Run("r2", (_report(_case("cnn", 1.0, 1.0, 1.1)), _report(_case("ctr", 2.0, 2.5, 2.2))))
RUN3 = Run("r3", (_report(_case("cnn", 1.0, 1.25, 1.2), _case("ctr", 1.0, 1.0, 1.1), load=1.5),))


def test_figures_by_hand() -> None:
    f = figures(RUN1.cases)
    # errors: 1/1.1 − 1 = −0.0909…, 1/0.9 − 1 = +0.111…
    assert f.cases == 2
    assert f.mape == pytest.approx((0.1 / 1.1 + 0.1 / 0.9) / 2)
    assert f.underestimate_share == 0.5
    assert f.underestimate_p90 == pytest.approx(0.1 / 1.1)
    assert f.below_p90_share == 1.0


def test_pool_takes_every_case_of_every_run_and_shows_each_run() -> None:
    result = pool([RUN1, RUN2, RUN3])
    assert result.pooled.cases == 6
    assert [name for name, _ in result.per_run] == ["r1", "r2", "r3"]
    # r2: the ctr case measured 2.5 against a p90 of 2.2; r3: cnn 1.25 against 1.2 → 4 of 6 below p90
    assert result.pooled.below_p90_share == pytest.approx(4 / 6)
    assert result.met["below_p90_share"] is False
    lo, hi, sd = result.spread["mape"]
    assert lo == pytest.approx(min(f.mape for _, f in result.per_run))
    assert hi == pytest.approx(max(f.mape for _, f in result.per_run))
    assert sd > 0
    assert RUN3.load_average == (1.5, 1.6)


def test_fewer_than_three_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 3 runs"):
        pool([RUN1, RUN2])


def test_subsets_and_the_section_name_the_model_sets() -> None:
    only_ctr = subset([RUN1, RUN2, RUN3], lambda c: c["model"] == "ctr")
    assert all(c["model"] == "ctr" for run in only_ctr for c in run.cases)
    text = markdown(
        [RUN1, RUN2, RUN3],
        sets={"shipped": lambda c: c["model"] == "cnn", "held-out": lambda c: c["model"] == "ctr"},
    )
    assert "| **pooled** | 6 |" in text
    assert "| held-out | 3 |" in text
    assert "below_p90_share MISSED" in text
