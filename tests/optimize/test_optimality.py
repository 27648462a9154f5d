"""Acceptance: exhaustive search equals brute force over every configuration (same evaluator), and eager
search is nearly as good within its budget, on a family of random small problems."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import Objective, Plan, SearchMode
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.optimize.evaluate import Evaluations, Evaluator, SimEvaluator, objective_value
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize
from srift.optimize.space import Groups, Problem

from .helpers import FastEvaluator, all_configs, best_meeting, brute_force, predictions
from .problems import (
    make_located_problem,
    make_mixed_problem,
    make_problem,
    make_spread_problem,
    make_user_problem,
)


def _solve(problem: Problem, evaluator: Evaluator, mode: SearchMode, budget_s: float) -> float | None:
    """The plan's objective, or None when the solver reports no feasible plan."""
    try:
        plan = optimize(problem, evaluator, SolveOptions(mode=mode, solve_budget_s=budget_s))
    except PlanInfeasible:
        return None
    except InvalidInput as exc:
        assert exc.field == "global_batch"
        assert not all_configs(problem)
        return None
    assert plan.config.global_batch == problem.constraints.global_batch
    return objective_value(plan.predicted, problem.constraints.objective)


def _listable(
    make: Callable[[int], Problem], *, most: int, seeds: int
) -> Iterator[tuple[int, Problem, list[Groups]]]:
    """(seed, problem, every configuration of its space) for the problems `make` draws from seeds 0 to
    `seeds` - 1 whose space holds 1 to `most` configurations (small enough for brute force)."""
    for seed in range(seeds):
        problem = make(seed)
        configs = all_configs(problem, most=most)
        if 0 < len(configs) <= most:
            yield seed, problem, configs


def _exhaustive_finds(
    problem: Problem, evaluator: Evaluator, expected: float | None, *, seed: int
) -> Plan | None:
    """Exhaustive search's plan (None: none meets the limits), checked against brute force's optimum
    `expected`: the same optimum, proven optimal, or a proof that no configuration meets the limits."""
    try:
        plan = optimize(problem, evaluator, SolveOptions(mode=SearchMode.EXHAUSTIVE, solve_budget_s=30))
    except PlanInfeasible as exc:
        assert expected is None and exc.proven, seed
        return None
    got = objective_value(plan.predicted, problem.constraints.objective)
    assert plan.proven_optimal, seed
    assert expected is not None and got == pytest.approx(expected, rel=1e-12), seed
    return plan


@settings(max_examples=220, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_exhaustive_equals_brute_force(seed: int) -> None:
    problem = make_problem(seed)
    expected = brute_force(problem, FastEvaluator())
    got = _solve(problem, FastEvaluator(), SearchMode.EXHAUSTIVE, 30.0)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert got == pytest.approx(expected, rel=1e-12)


def test_exhaustive_equals_brute_force_with_the_simulator() -> None:
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior(), config=PER_LAYER)
    checked = 0
    for seed, problem, configs in _listable(make_problem, most=150, seeds=40):
        expected = brute_force(problem, evaluator, configs=configs)  # type: ignore[arg-type]
        got = _solve(problem, evaluator, SearchMode.EXHAUSTIVE, 30.0)
        assert (got is None) == (expected is None), seed
        if got is not None and expected is not None:
            assert got == pytest.approx(expected, rel=1e-12), seed
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("family", ["small", "mixed", "located", "user"])
def test_exhaustive_equals_brute_force_with_the_simulator_on_many_problems(family: str) -> None:
    """At least 200 random spaces small enough to list per family (small; mixed: optima of 3-5 types;
    located: types in two regions, fleets across them; user: a user's own profile shapes, largest batches
    of 1-4 per GPU that need many VMs of a type, curves of 3 or 11 segments that bend both ways), solved
    with the simulator's bounds (set-aside types, bounds coupled through the VM count, rent relaxations,
    the band's compute term, the fastest link between regions) and simulated one by one with the same
    evaluator: the same optimum; a plan that says it is proven optimal is, and so is an answer that none
    meets the limits."""
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    make = {
        "small": make_problem,
        "mixed": make_mixed_problem,
        "located": make_located_problem,
        "user": make_user_problem,
    }[family]
    checked = mixed = 0
    for seed, problem, configs in itertools.islice(_listable(make, most=80, seeds=2000), 200):
        expected = brute_force(problem, evaluator, configs=configs)  # type: ignore[arg-type]
        plan = _exhaustive_finds(problem, evaluator, expected, seed=seed)
        mixed += plan is not None and len(plan.config.choices) > 1
        checked += 1
    assert checked == 200
    assert family != "mixed" or mixed >= 20


def test_exhaustive_equals_brute_force_at_the_quantile_with_estimated_profiles() -> None:
    """200 random spaces with estimated (or spread-stating) profiles at confidences 0.6–0.99, each with one
    limit (a budget under min_time, a time limit under min_cost) set either between the prediction and the
    quantile of the configuration that is best without limits (its median meets the limit, its quantile
    does not) or at that quantile (it is the optimum, and meets the limit just): the search prunes
    with the quantile's bound (srift.optimize.evaluate.Evaluations.limit_scales), which must stay below
    every quantile, and still finds brute force's optimum, proven."""
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    checked = quantile_bound = 0
    for seed, problem, configs in itertools.islice(_listable(make_spread_problem, most=80, seeds=2000), 200):
        c = problem.constraints
        assert c.confidence > 0.5  # so `predictions` gives every configuration its band
        preds = list(predictions(problem, evaluator, configs))
        scored = sorted(((objective_value(pred, c.objective), pred) for pred in preds), key=lambda x: x[0])
        if seed % 2:
            # between the median and the quantile of the best: the best is out
            pick, share = scored[0][1], 0.5
        else:
            # at the quantile of the best: it is the optimum, just (a bound above its quantile loses it)
            pick, share = scored[0][1], 1.0 + 1e-9
        if c.objective is Objective.MIN_TIME:
            cost, cost_q = pick.cost_usd, pick.cost_quantile_usd(c.confidence)
            limited = replace(c, budget_usd=cost ** (1 - share) * cost_q**share)
        else:
            time_s, time_q = pick.total_time_s, pick.total_time_quantile_s(c.confidence)
            limited = replace(c, time_limit_s=time_s ** (1 - share) * time_q**share)
        problem = replace(problem, constraints=limited)
        # Brute force over the same listing: a limit changes which predictions meet it, not the predictions
        # (the same iterations, confidence and evaluator), so they are not simulated a second time.
        expected = best_meeting(preds, limited)
        _exhaustive_finds(problem, evaluator, expected, seed=seed)
        quantile_bound += any(m > 1 for m in Evaluations(problem, evaluator).limit_scales(limited))
        checked += 1
    assert checked == 200
    assert quantile_bound >= 100


def test_eager_is_feasible_and_near_optimal() -> None:
    """Eager search under a solve budget: it finds a plan where one exists, near the optimum. That it keeps
    to its budget is checked with an injected clock (tests/optimize/test_search.py,
    test_eager_finds_the_homogeneous_optimum_first_and_respects_its_budget), and how long it takes by the
    solve-time benchmark, not here: a CPU-time bound on real solves failed in two full runs (2026-12-06,
    1.27 s of the process's CPU on a 0.2 s budget; 2026-12-07, 0.6 s of the search thread's own) and never
    alone. Its cause was not found, and a bound on real CPU time cannot tell the search from what else runs
    in the test's process (its garbage collection, threads other tests left)."""
    feasible = found = 0
    ratios: list[float] = []
    for seed in range(200):
        problem = make_problem(seed)
        optimum = brute_force(problem, FastEvaluator())
        got = _solve(problem, FastEvaluator(), SearchMode.EAGER, 0.2)
        if optimum is None:
            assert got is None
            continue
        feasible += 1
        if got is not None:
            found += 1
            ratios.append(got / optimum)
    assert feasible >= 100
    assert found / feasible >= 0.95
    assert statistics.median(ratios) <= 1.10
    assert min(ratios) >= 1 - 1e-9


def test_min_time_and_min_cost_trade_off() -> None:
    for seed in range(60):
        problem = make_problem(seed)
        c = problem.constraints
        if c.time_limit_s is not None or c.budget_usd is not None or not all_configs(problem):
            continue
        from dataclasses import replace

        cheap = optimize(
            replace(problem, constraints=replace(c, objective=Objective.MIN_COST)), FastEvaluator()
        )
        fast = optimize(
            replace(problem, constraints=replace(c, objective=Objective.MIN_TIME)), FastEvaluator()
        )
        assert cheap.predicted.cost_usd <= fast.predicted.cost_usd
        assert fast.predicted.total_time_s <= cheap.predicted.total_time_s
