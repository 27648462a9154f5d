"""Deadline-safe plans: limits checked at the request's confidence, probabilities for plan and baselines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from srift.domain import Band, Constraints, FleetMember, Objective, Prediction, SearchMode, SpreadTerm
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize
from srift.optimize.space import Problem
from srift.sim.band import Z90

from .helpers import FastEvaluator, brute_force, candidate

EXHAUSTIVE = SolveOptions(mode=SearchMode.EXHAUSTIVE, solve_budget_s=10)


class BandedEvaluator(FastEvaluator):
    """FastEvaluator with a band: the cheap type `slow` is uncertain (sigma 0.3), `fast` is sure (0.02)."""

    def __init__(self) -> None:
        super().__init__()
        self.band_calls = 0

    def band(self, fleet: Sequence[FleetMember], *, iterations: int) -> Band:
        self.band_calls += 1
        sigma = max(0.3 if m.instance.name == "slow" else 0.02 for m in fleet)
        return Band.of((SpreadTerm("compute", sigma, sigma, "test"),))


def _problem(*, time_limit_s: float | None, budget_usd: float | None = None, confidence: float) -> Problem:
    cands = (
        candidate("fast", gpus=1, max_batch=64, per_sample_s=0.001, price=3.0, cap=4),
        candidate("slow", gpus=1, max_batch=64, per_sample_s=0.002, price=1.0, cap=4),
    )
    c = Constraints(
        128,
        1000,
        Objective.MIN_COST,
        time_limit_s=time_limit_s,
        budget_usd=budget_usd,
        confidence=confidence,
    )
    return Problem(cands, c)


def _median_plan_time(problem: Problem) -> float:
    plan = optimize(
        replace(problem, constraints=replace(problem.constraints, confidence=0.5)), FastEvaluator()
    )
    return plan.predicted.total_time_s


def test_median_confidence_is_todays_behaviour() -> None:
    loose = _problem(time_limit_s=None, confidence=0.5)
    deadline = _median_plan_time(loose) * 1.05  # the cheapest plan meets it at its median
    problem = _problem(time_limit_s=deadline, confidence=0.5)
    evaluator = BandedEvaluator()
    plan = optimize(problem, evaluator, EXHAUSTIVE)
    assert plan.predicted.cost_usd == pytest.approx(brute_force(problem, FastEvaluator()), rel=1e-12)
    assert plan.predicted.total_time_s <= deadline
    # The band is computed only for what the plan reports (the plan and two baselines), not for the search.
    assert evaluator.band_calls <= 3


def test_confidence_point_nine_trades_cost_for_a_deadline_kept_nine_times_in_ten() -> None:
    deadline = _median_plan_time(_problem(time_limit_s=None, confidence=0.5)) * 1.05
    median = optimize(_problem(time_limit_s=deadline, confidence=0.5), BandedEvaluator(), EXHAUSTIVE)
    safe_problem = _problem(time_limit_s=deadline, confidence=0.9)
    safe = optimize(safe_problem, BandedEvaluator(), EXHAUSTIVE)
    # The median plan runs on the uncertain cheap type: its p90 (×e^(1.28·0.3) = ×1.47) misses the deadline.
    assert median.predicted.p_time_within(deadline) < 0.9
    assert median.predicted.total_time_quantile_s(0.9) > deadline
    # At 0.9 the plan's p90 meets the deadline, it costs more, and brute force with bands agrees.
    assert safe.predicted.total_time_quantile_s(0.9) <= deadline
    assert safe.predicted.p_time_within(deadline) >= 0.9
    assert safe.predicted.cost_usd > median.predicted.cost_usd
    assert safe.predicted.cost_usd == pytest.approx(brute_force(safe_problem, BandedEvaluator()), rel=1e-12)
    assert safe.predicted.band is not None
    for base in safe.baselines.values():
        assert base is not None and base.prediction.band is not None
        p = base.prediction.p_time_within(deadline)
        assert 0.0 <= p <= 1.0
        assert base.feasible == (base.prediction.total_time_quantile_s(0.9) <= deadline)


def test_budget_probability_and_quantile() -> None:
    problem = _problem(time_limit_s=None, budget_usd=1e9, confidence=0.9)
    plan = optimize(problem, BandedEvaluator(), EXHAUSTIVE)
    pred: Prediction = plan.predicted
    assert pred.band is not None
    sigma = pred.band.sigma
    assert pred.cost_quantile_usd(0.9) == pytest.approx(pred.cost_usd * math.exp(Z90 * sigma))
    assert pred.p_cost_within(pred.cost_usd) == pytest.approx(0.5)
    assert pred.p_cost_within(pred.cost_quantile_usd(0.9)) == pytest.approx(0.9)


def test_infeasible_at_confidence_says_so_and_names_the_quantile() -> None:
    fastest = optimize(
        replace(
            _problem(time_limit_s=None, confidence=0.9),
            constraints=Constraints(128, 1000, Objective.MIN_TIME, confidence=0.9),
        ),
        BandedEvaluator(),
        EXHAUSTIVE,
    )
    # A deadline the fastest plan meets at its median but not at its p90.
    deadline = fastest.predicted.total_time_s * 1.01
    with pytest.raises(PlanInfeasible) as err:
        optimize(_problem(time_limit_s=deadline, confidence=0.9), BandedEvaluator(), EXHAUSTIVE)
    assert err.value.field == "time_limit_s"
    assert "at 90 % confidence" in str(err.value)
    assert err.value.relaxations["fastest_time_s"] == pytest.approx(
        fastest.predicted.total_time_quantile_s(0.9)
    )
