"""Deadline-safe plans: limits checked at the request's confidence, probabilities for plan and baselines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import Band, Constraints, FleetMember, Objective, Prediction, SearchMode, SpreadTerm
from srift.optimize.evaluate import Evaluations, SimEvaluator
from srift.optimize.exhaustive import BranchAndBound
from srift.optimize.search import Incumbent
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize
from srift.optimize.space import Candidate, Problem
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


class PointBoundsOnly(SimEvaluator):
    """The simulator without the promise on its band's compute term: the search compares the limits with
    the prediction's own bounds (limit scales of 1)."""

    band_compute_spread = None


def _guess_or_sure() -> Problem:
    """Two types: `guess`, estimated (spread 0.3), fast and cheap; `sure`, measured, slower, dearer. Tiny
    gradients and no straggler spread, so fleets of `guess` are compute-bound and their 0.9 quantile is
    e^(1.28 · 0.3) ≈ 1.47 × the prediction."""
    from srift.domain.profile import EstimateInfo

    def quiet(cand: Candidate, estimate: EstimateInfo | None) -> Candidate:
        layers = tuple(replace(x, grad_bytes=1000) for x in cand.profile.layers)
        profile = replace(cand.profile, layers=layers, straggler_cv=0.0, estimate=estimate)
        return replace(cand, profile=profile)

    guess = quiet(
        candidate("guess", gpus=1, max_batch=16, per_sample_s=0.002, price=1.0, cap=4),
        EstimateInfo(method="scaled", spread=0.3, calibration="test"),
    )
    sure = quiet(candidate("sure", gpus=1, max_batch=16, per_sample_s=0.004, price=1.5, cap=4), None)
    return Problem((guess, sure), Constraints(32, 1000, Objective.MIN_TIME, confidence=0.9))


def _branch_and_bound(problem: Problem, evaluator: SimEvaluator) -> tuple[Incumbent, Evaluations]:
    """The branch and bound alone (no seed, no helper) to the end: what it simulated and found."""
    evals = Evaluations(problem, evaluator)
    incumbent = Incumbent(problem.constraints.objective)
    search = BranchAndBound(problem, evals, constraints=problem.constraints, incumbent=incumbent)
    search.start()
    assert search.run(deadline=None).closed
    return incumbent, evals


def test_the_quantiles_bound_prunes_fleets_whose_median_fits_the_budget() -> None:
    """A budget between the prediction of the fastest `guess` fleet and its quantile's bound: its median
    fits, its 0.9 quantile does not. The branch and bound with the bounds of the quantile prunes, without
    simulating them, fleets that it simulates with the point bounds alone (their median fits the budget;
    their bound N · rent · max(t_iter, μ · compute), μ = e^0.3, does not), and both find brute force's
    plan; so does the whole solver."""
    problem = _problem_with_budget()
    c = problem.constraints
    assert c.budget_usd is not None
    quantile, quantile_evals = _branch_and_bound(problem, SimEvaluator(bandwidth=AlphaBetaPrior()))
    point, point_evals = _branch_and_bound(problem, PointBoundsOnly(bandwidth=AlphaBetaPrior()))
    expected = brute_force(problem, SimEvaluator(bandwidth=AlphaBetaPrior()))  # type: ignore[arg-type]
    assert expected is not None
    assert quantile.value == pytest.approx(expected, rel=1e-12)
    assert point.value == pytest.approx(expected, rel=1e-12)
    plan = optimize(problem, SimEvaluator(bandwidth=AlphaBetaPrior()), EXHAUSTIVE)
    assert plan.proven_optimal and plan.predicted.total_time_s == pytest.approx(expected, rel=1e-12)
    mu = quantile_evals.limit_scales(c)
    assert mu[0] == pytest.approx(math.exp(0.3), rel=1e-6)
    assert mu[1] == 1.0
    pruned = []
    for groups, item in point_evals.records.items():
        prediction = item.prediction
        floor = max(mu[i] * problem.candidates[i].floor_s(b) for i, _, b in groups)
        bound = c.iterations * max(prediction.iteration_s, floor) * problem.usd_per_s(groups)
        if prediction.cost_usd <= c.budget_usd < bound:
            assert not item.feasible
            assert prediction.cost_quantile_usd(c.confidence) >= bound
            pruned.append(groups)
    assert pruned
    assert not set(pruned) & set(quantile_evals.records)
    assert len(quantile_evals) < len(point_evals)


def _problem_with_budget() -> Problem:
    """`_guess_or_sure` with the budget halfway (in log) between the median cost of its fastest fleet of
    `guess` alone and that cost's quantile bound N · rent · max(t_iter, μ · compute) (below its 0.9
    quantile): the median fits, the bound does not."""
    problem = _guess_or_sure()
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    c = problem.constraints
    mu = Evaluations(problem, evaluator).limit_scales(replace(c, budget_usd=1.0))
    fastest = None
    for n in (2, 4):
        groups = ((0, n, c.global_batch // n),)
        prediction = evaluator(
            problem.fleet(groups), iterations=c.iterations, usd_per_s=problem.usd_per_s(groups)
        )
        if fastest is None or prediction.total_time_s < fastest[1].total_time_s:
            fastest = (groups, prediction)
    assert fastest is not None
    groups, prediction = fastest
    floor = max(mu[i] * problem.candidates[i].floor_s(b) for i, _, b in groups)
    bound = c.iterations * max(prediction.iteration_s, floor) * problem.usd_per_s(groups)
    return replace(problem, constraints=replace(c, budget_usd=math.sqrt(prediction.cost_usd * bound)))


def test_the_simulators_band_and_estimate_are_simulate_withs_whichever_fleet_came_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SimEvaluator remembers the last fleet's simulation, so that a configuration's band right after its
    estimate (what the search asks) simulates it once; asked in any order over fleets that differ in type,
    count, batch or profile, each answer is still `simulate_with`'s for that fleet."""
    import srift.sim.iteration as iteration
    from srift.sim import simulate_with

    problem = _guess_or_sure()
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    fleets = [
        problem.fleet(groups)
        for groups in (((0, 2, 16),), ((0, 4, 8),), ((1, 2, 16),), ((0, 2, 8), (1, 2, 8)), ((0, 1, 16),))
    ]
    other = replace(fleets[0][0], profile=replace(fleets[0][0].profile, straggler_cv=0.04))
    fleets.append((other,))
    simulated: list[Sequence[FleetMember]] = []
    simulate = iteration.simulation_point
    monkeypatch.setattr(
        iteration,
        "simulation_point",
        lambda fleet, inputs: simulated.append(fleet) or simulate(fleet, inputs),
    )
    expected = {fleet: simulate_with(fleet, evaluator.inputs, iterations=1000) for fleet in fleets}
    previous = None
    for order in (fleets, fleets[::-1], fleets[::2] + fleets[1::2]):
        for fleet in order:
            before = len(simulated)
            assert evaluator.estimate(fleet).iteration_s == expected[fleet].iteration_s
            assert evaluator.band(fleet, iterations=1000) == expected[fleet].band
            assert evaluator.estimate(list(fleet)).iteration_p90_s == expected[fleet].iteration_s
            assert len(simulated) - before == (
                fleet != previous
            )  # one simulation, none for the same fleet again
            previous = fleet
