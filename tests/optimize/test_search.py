"""Each pruning rule of the exhaustive search, checked against the full space enumerated by brute force."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srift.domain import Constraints, Objective
from srift.optimize.eager import solve_eager
from srift.optimize.evaluate import Evaluations, objective_value
from srift.optimize.exhaustive import solve_exhaustive
from srift.optimize.search import Enumerator, SearchStopped
from srift.optimize.space import Groups, Problem

from .helpers import FastEvaluator, all_configs, brute_force, candidate
from .problems import make_problem


def _emitted(
    problem: Problem, constraints: Constraints, *, incumbent: float = math.inf
) -> dict[Groups, float]:
    enum = Enumerator(problem, constraints=constraints, floor_factor=1.0)
    enum.incumbent = incumbent
    out: dict[Groups, float] = {}

    def emit(bound: float, groups: Groups) -> None:
        assert groups not in out, "a configuration was emitted twice"
        out[groups] = bound

    enum.run(emit)
    return out


def _floor_time(problem: Problem, groups: Groups, n: int) -> float:
    return n * problem.floor_s(groups)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_rule_1_without_limits_every_configuration_is_enumerated_once(seed: int) -> None:
    problem = make_problem(seed)
    c = problem.constraints
    free = Constraints(c.global_batch, c.iterations, c.objective)
    assert set(_emitted(problem, free)) == set(all_configs(problem))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_rule_2_time_floor_prunes_exactly_the_configurations_that_cannot_meet_the_deadline(seed: int) -> None:
    problem = make_problem(seed)
    c = problem.constraints
    limit = 5.0
    timed = Constraints(c.global_batch, c.iterations, c.objective, time_limit_s=limit)
    kept = set(_emitted(problem, timed))
    evaluator = FastEvaluator()
    for groups in all_configs(problem):
        floor = _floor_time(problem, groups, c.iterations)
        assert (groups in kept) == (floor <= limit)
        if groups not in kept:
            pred = evaluator(
                problem.fleet(groups), iterations=c.iterations, usd_per_s=problem.usd_per_s(groups)
            )
            assert pred.total_time_s > limit


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_rule_3_cost_floor_prunes_exactly_the_configurations_over_budget_by_their_floor(seed: int) -> None:
    problem = make_problem(seed)
    c = problem.constraints
    budget = 0.01
    capped = Constraints(c.global_batch, c.iterations, c.objective, budget_usd=budget)
    kept = set(_emitted(problem, capped))
    for groups in all_configs(problem):
        floor_cost = _floor_time(problem, groups, c.iterations) * problem.usd_per_s(groups)
        assert (groups in kept) == (floor_cost <= budget)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(list(Objective)))
def test_rule_4_incumbent_bound_prunes_only_configurations_that_cannot_beat_it(
    seed: int, objective: Objective
) -> None:
    problem = make_problem(seed)
    c = problem.constraints
    free = Constraints(c.global_batch, c.iterations, objective)
    bounds = _emitted(problem, free)
    if not bounds:
        return
    incumbent = sorted(bounds.values())[len(bounds) // 2]
    kept = set(_emitted(problem, free, incumbent=incumbent))
    evaluator = FastEvaluator()
    for groups, bound in bounds.items():
        assert (groups in kept) == (bound < incumbent)
        pred = evaluator(problem.fleet(groups), iterations=c.iterations, usd_per_s=problem.usd_per_s(groups))
        assert objective_value(pred, objective) >= bound * (1 - 1e-12)


def test_rule_5_best_first_stops_once_the_bound_reaches_the_incumbent() -> None:
    cands = tuple(
        candidate(f"t{j}", gpus=1, max_batch=16, per_sample_s=0.002 * (j + 1), price=0.5 + j, cap=6)
        for j in range(3)
    )
    problem = Problem(cands, Constraints(64, 100, Objective.MIN_COST, time_limit_s=200))
    evaluator = FastEvaluator()
    evals = Evaluations(problem, evaluator)
    result = solve_exhaustive(problem, evals)
    assert result.complete and result.incumbent.best is not None
    optimum = brute_force(problem, FastEvaluator())
    assert result.incumbent.value == pytest.approx(optimum, rel=1e-12)
    space = all_configs(problem)
    bounds = _emitted(problem, problem.constraints)
    below = [g for g, b in bounds.items() if b < result.incumbent.value]
    assert evaluator.calls <= len(below) + 4
    assert evaluator.calls < len(space) / 10


def test_enumeration_stops_at_its_deadline_and_node_limit() -> None:
    cands = tuple(
        candidate(f"t{j:02d}", gpus=1, max_batch=256, per_sample_s=0.001, price=1.0, cap=64)
        for j in range(12)
    )
    problem = Problem(cands, Constraints(4096, 10, Objective.MIN_COST))
    enum = Enumerator(problem, constraints=problem.constraints, floor_factor=1.0)
    with pytest.raises(SearchStopped):
        enum.run(lambda b, g: None, node_limit=5000)
    assert 5000 < enum.stats.nodes < 5000 + 1024


def test_eager_finds_the_homogeneous_optimum_first_and_respects_its_budget() -> None:
    cands = tuple(
        candidate(
            f"t{j:02d}", gpus=1, max_batch=256, per_sample_s=0.001 * (1 + j % 5), price=0.3 + 0.1 * j, cap=64
        )
        for j in range(30)
    )
    problem = Problem(cands, Constraints(4096, 100, Objective.MIN_COST, time_limit_s=100))
    evals = Evaluations(problem, FastEvaluator())
    readings: list[float] = []

    def clock() -> float:
        """One millisecond per look: the search's budget becomes a count of looks, the same on any machine."""
        readings.append(len(readings) * 0.001)
        return readings[-1]

    result = solve_eager(problem, evals, budget_s=0.5, clock=clock)
    deadline = 0.5 * 0.9
    assert not result.complete and result.notes == ("eager search stopped at its solve budget",)
    past = [t for t in readings if t > deadline]
    assert past == [readings[-1]], "it stops at its first look past the budget"
    best = result.incumbent.best
    assert best is not None and best.feasible
    assert len(best.groups) == 1, "eager tries each type alone before mixing types"
