"""The bounds the search prunes with: exact per-type helpers, and the simulator's exchange bound."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import ComputeCurve, Constraints, FleetMember, Objective
from srift.domain.simulation import PER_LAYER
from srift.optimize.evaluate import Evaluations, SimEvaluator
from srift.optimize.exhaustive import BranchAndBound, solve_exhaustive
from srift.optimize.relax import SplitRelaxation
from srift.optimize.search import Incumbent, cost_per_sample_floor, max_batch_within
from srift.optimize.space import Candidate, Groups, Problem
from srift.optimize.synthetic import synthetic_profile

from .helpers import all_configs, brute_force, candidate, instance, offer, profile, split_configs
from .problems import make_located_problem, make_problem, make_user_problem


def _odd_candidate(seed: int) -> Candidate:
    """A type whose curves bend, start above batch 1 and extrapolate (what the helpers must get right)."""
    rng = random.Random(seed)
    gpus = rng.choice([1, 2, 4])
    max_batch = rng.randint(6, 40)
    xs = tuple(sorted(rng.sample(range(2, max_batch + 1), 3)))
    fw = ComputeCurve(xs, tuple(sorted(rng.uniform(0.001, 0.2) for _ in xs)))
    bw = ComputeCurve(xs, tuple(sorted(rng.uniform(0.001, 0.4) for _ in xs)))
    base = profile("X", max_batch=max_batch, per_sample_s=0.01)
    prof = type(base)(
        **{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "forward": fw, "backward": bw}
    )
    inst = instance(f"odd{seed}", gpus=gpus, gpu_model="X")
    return Candidate(offer=offer(inst, rng.uniform(0.1, 5.0)), profile=prof, cap=4)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_cost_per_sample_floor_is_the_minimum_over_every_batch(seed: int) -> None:
    cand = _odd_candidate(seed)
    scan = min(cand.floor_s(b) / b for b in range(cand.min_vm_batch, cand.max_vm_batch + 1))
    assert cost_per_sample_floor(cand) == pytest.approx(max(scan, 0.0) * cand.price_usd_per_s, rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_max_batch_within_is_the_largest_batch_that_fits(seed: int, frac: float) -> None:
    cand = _odd_candidate(seed)
    times = {b: cand.floor_s(b) for b in range(cand.min_vm_batch, cand.max_vm_batch + 1)}
    limit = min(times.values()) * 0.9 + frac * (max(times.values()) - min(times.values())) * 1.1
    expected = max((b for b, t in times.items() if t <= limit), default=0)
    assert max_batch_within(cand, limit) == expected


def _quota_candidate(seed: int) -> Candidate:
    """`_odd_candidate` under a CPU quota whose period lies inside its compute range, so that its floor
    (compute less the fresh-quota saving) bends between two curve points."""
    cand = _odd_candidate(seed)
    rng = random.Random(~seed)
    d = cand.devices
    lo, hi = cand.profile.compute_s(cand.min_vm_batch / d), cand.profile.compute_s(cand.max_vm_batch / d)
    period_s = lo + rng.uniform(0.05, 0.95) * (hi - lo) if hi > lo else max(lo, 1e-3)
    extra = {"cpu_quota": {"cores": rng.uniform(0.1, 0.9), "period_s": period_s}}
    return replace(cand, profile=replace(cand.profile, extra=extra))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_search_helpers_are_exact_on_a_quota_floor(seed: int, frac: float) -> None:
    cand = _quota_candidate(seed)
    times = {b: cand.floor_s(b) for b in range(cand.min_vm_batch, cand.max_vm_batch + 1)}
    assert all(t <= cand.profile.compute_s(b / cand.devices) for b, t in times.items())
    scan = min(t / b for b, t in times.items())
    assert cost_per_sample_floor(cand) == pytest.approx(max(scan, 0.0) * cand.price_usd_per_s, rel=1e-12)
    limit = min(times.values()) * 0.9 + frac * (max(times.values()) - min(times.values())) * 1.1
    expected = max((b for b, t in times.items() if t <= limit), default=0)
    assert max_batch_within(cand, limit) == expected


def _sim_fleets() -> list[tuple[Problem, tuple[FleetMember, ...]]]:
    out = []
    for seed in range(25):
        problem = make_problem(seed)
        for groups in all_configs(problem)[:6]:
            out.append((problem, problem.fleet(groups)))
    return out


def test_simulator_respects_the_bounds_the_search_prunes_with() -> None:
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior(), config=PER_LAYER)
    fleets = _sim_fleets()
    assert len(fleets) >= 50
    tighter = 0
    for _, fleet in fleets:
        pred = evaluator(fleet, iterations=10, usd_per_s=1.0)
        floor = max(m.profile.compute_s(m.per_device_batch) for m in fleet)
        bound = evaluator.iteration_bound_s(fleet)
        assert pred.iteration_s >= floor * (1 - 1e-12)
        assert pred.iteration_s >= bound * (1 - 1e-12)
        tighter += bound > floor * 1.001
    assert tighter >= 10


def test_exchange_bound_prunes_a_communication_bound_problem() -> None:
    """VGG19-like (574 MB of gradients) on 10 Gbit/s VMs: the compute floor alone would simulate most of the
    space; the exchange bound leaves a handful of simulations, and the answer is the brute-force optimum."""
    types = []
    for name, gpu, gpus, price in (("g3.8xlarge", "M60", 2, 0.69), ("g4dn.8xlarge", "T4", 1, 0.72)):
        inst = instance(name, gpus=gpus, gpu_model=gpu, network_gbps=10.0)
        types.append(Candidate(offer=offer(inst, price), profile=synthetic_profile("vgg19", gpu), cap=16))
    problem = Problem(tuple(types), Constraints(1024, 1000, Objective.MIN_COST))
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior(), config=PER_LAYER)
    evals = Evaluations(problem, evaluator)
    result = solve_exhaustive(problem, evals)
    assert result.complete and result.incumbent.best is not None
    assert evals.violations == 0
    assert result.incumbent.value == pytest.approx(brute_force(problem, evaluator, large=True), rel=1e-12)
    n = problem.constraints.iterations
    below = [
        g
        for g in split_configs(problem)
        if n * problem.floor_s(g) * problem.usd_per_s(g) < result.incumbent.value
    ]
    assert len(evals) <= 10 < len(below)


def test_candidate_helper_and_policy_smoke() -> None:
    cand = candidate("a", gpus=2, max_batch=8, per_sample_s=0.01, price=1.0, cap=2)
    assert max_batch_within(cand, 0.0) == 0
    assert max_batch_within(cand, 1e9) == cand.max_vm_batch


def test_a_region_no_better_than_another_is_left_to_its_twin_and_the_optimum_stays() -> None:
    """Symmetry of locations: when one region offers every type of another at a price no lower, fleets
    within it are never better than their twins; the search skips them and still finds brute force's
    optimum (with the same simulator). Of two equal regions exactly one is skipped."""
    from srift.domain import SearchMode
    from srift.domain.geo import Location
    from srift.optimize.exhaustive import dominated_locations
    from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize

    from .problems import make_located_problem

    east, west = Location("aws", "us-east-1"), Location("aws", "us-west-2")
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    checked = 0
    for seed in range(60):
        base = make_located_problem(seed)
        for factor in (1.25, 1.0):
            cands = []
            for cand in base.candidates:
                twin = next(c for c in base.candidates if c.name == cand.name and c.location == east)
                price = twin.offer.price_usd_per_hr * (factor if cand.location == west else 1.0)
                cands.append(replace(cand, offer=replace(cand.offer, price_usd_per_hr=price), cap=twin.cap))
            problem = replace(base, candidates=tuple(cands))
            assert dominated_locations(problem) == frozenset({west})
            configs = all_configs(problem, most=60)
            if not 0 < len(configs) <= 60:
                continue
            expected = brute_force(problem, evaluator, configs=configs)  # type: ignore[arg-type]
            try:
                plan = optimize(
                    problem, evaluator, SolveOptions(mode=SearchMode.EXHAUSTIVE, solve_budget_s=30)
                )
            except PlanInfeasible:
                assert expected is None
                continue
            assert plan.proven_optimal
            got = (
                plan.predicted.cost_usd
                if problem.constraints.objective is Objective.MIN_COST
                else (plan.predicted.total_time_s)
            )
            assert expected is not None and got == pytest.approx(expected, rel=1e-12), seed
            checked += 1
    assert checked >= 20


def _point_cases(problem: Problem, most: int) -> list[tuple[Groups, int]]:
    """Configurations of `problem` (up to `most`) with the position k of a group that has more VMs after
    it: the search's non-final children (groups before k, then group k, then others)."""
    out = []
    for groups in all_configs(problem, most=most)[:most]:
        for k in range(len(groups) - 1):
            out.append((groups, k))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["user", "located"]))
def test_point_bounds_are_below_the_simulated_iteration(seed: int, family: str) -> None:
    """`_point_bound_s` (a VM of q at b among ≥ V VMs, shared by q's twins) and `_joined_bound_s` (the
    same joined with the groups before it) never exceed the simulated iteration of a fleet they cover:
    every configuration with a group (q, n, b) followed by more VMs, V = the VMs up to that group + 1, as
    the search asks them; on users' shapes (largest batches of 1-4, curves of 3 or 11 segments) and on
    types offered in two regions (twins, fleets across regions)."""
    make = make_user_problem if family == "user" else make_located_problem
    problem = make(seed % 2000)
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    evals = Evaluations(problem, evaluator)
    search = BranchAndBound(
        problem,
        evals,
        constraints=problem.constraints,
        incumbent=Incumbent(problem.constraints.objective),
    )
    g = problem.constraints.global_batch
    for groups, k in _point_cases(problem, 60):
        simulated = evaluator(problem.fleet(groups), iterations=10, usd_per_s=1.0).iteration_s
        before = groups[:k]
        q, n, b = groups[k]
        vms = sum(m for _, m, _ in before)
        nodes = vms + n + 1
        assert search._point_bound_s(q, b, nodes) <= simulated * (1 + 1e-12), (groups, k)
        state = None
        for group in before:
            state = evals.grow(state, group)
        if state is None or search.hi[q] < problem.candidates[q].devices:
            continue  # the search asks no joined bound of a type its limits leave unusable
        rem = g - sum(m * x for _, m, x in before)
        price = sum(m * problem.candidates[i].price_usd_per_s for i, m, _ in before)
        extension = search._extension(
            q, rem, vms=vms, price=price, tv=0.0, later=(problem.candidates[q].instance,)
        )
        joined = search._joined_bound_s(state, extension, q=q, b=b, nodes=nodes)
        assert joined <= simulated * (1 + 1e-12), (groups, k)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["user", "located", "plain"]), st.floats(1.0, 1.5))
def test_rent_limited_time_is_below_every_fleet_within_the_rent(seed: int, family: str, slack: float) -> None:
    """`least_time_within_rent` (the least t at which at most V VMs renting at most R together hold s
    samples) is never above the slowest compute of a configuration's VMs that do: for every configuration
    of small random problems and each suffix of its groups (the VMs a subtree adds from a position on),
    asked with that suffix's VMs (or one more) and its rent (or more, `slack`), for its samples or fewer.
    Fails if the relaxation treats rent per VM instead of summed, or drops a type's multiplicity."""
    make = {"user": make_user_problem, "located": make_located_problem, "plain": make_problem}[family]
    problem = make(seed % 2000)
    relax = SplitRelaxation(problem, factor=1.0)
    g = problem.constraints.global_batch
    cands = problem.candidates
    relax.cut([min(c.max_vm_batch, g) // c.devices * c.devices for c in cands])
    rng = random.Random(seed)
    configs = all_configs(problem, most=400)
    for groups in rng.sample(configs, min(len(configs), 60)):
        for k in range(len(groups)):
            tail = groups[k:]
            pos = tail[0][0]
            vms = sum(n for _, n, _ in tail)
            rent = sum(n * cands[q].price_usd_per_s for q, n, _ in tail)
            samples = sum(n * b for _, n, b in tail)
            slowest = max(relax.compute_s(q, b) for q, _, b in tail)
            for extra_vms, rem in ((0, samples), (1, samples), (0, max(samples // 2, 1))):
                bound = relax.least_time_within_rent(pos, rem, vms + extra_vms, usd_per_s=rent * slack)
                assert bound <= slowest, (groups, k, extra_vms, rem)


def _rows_bounded_and_best(problem: Problem, *, out_of_time: bool) -> tuple[int, float]:
    """Run the branch and bound alone to the end, its clock past its deadline or not (an injected clock);
    how many row bounds it computed and the best objective it found."""
    evals = Evaluations(problem, SimEvaluator(bandwidth=AlphaBetaPrior()))
    incumbent = Incumbent(problem.constraints.objective)
    search = BranchAndBound(
        problem,
        evals,
        constraints=problem.constraints,
        incumbent=incumbent,
        deadline=0.0 if out_of_time else None,
        clock=lambda: 1.0,
    )
    rows = 0
    row_bound_s = search._row_bound_s

    def counted(*args: object, **kwargs: object) -> float:
        nonlocal rows
        rows += 1
        return row_bound_s(*args, **kwargs)  # type: ignore[arg-type]

    search._row_bound_s = counted  # type: ignore[method-assign]
    search.start()
    assert search.run(deadline=None).closed
    return rows, incumbent.value


def test_past_its_deadline_the_search_bounds_no_rows_and_still_finds_the_optimum() -> None:
    """Found 2026-12-06: row bounds (rule 7) ran inside one expansion whatever the time, so a 0.1 s solve
    budget took up to 1.9 s on whole-catalog requests. Row bounds only tighten: past the deadline none is
    computed, and the search, run on to the end, still finds brute force's optimum (on users' shapes,
    where rows are bounded before the deadline)."""
    bounded = 0
    for seed in range(12):
        problem = make_user_problem(seed)
        rows, best = _rows_bounded_and_best(problem, out_of_time=False)
        late_rows, late_best = _rows_bounded_and_best(problem, out_of_time=True)
        assert late_rows == 0, seed
        assert late_best == pytest.approx(best, rel=1e-12), seed
        expected = brute_force(problem, SimEvaluator(bandwidth=AlphaBetaPrior()))  # type: ignore[arg-type]
        assert (expected is None) == (best == float("inf")), seed
        if expected is not None:
            assert best == pytest.approx(expected, rel=1e-12), seed
        bounded += rows > 0
    assert bounded >= 3, "the cases must bound rows when there is time"


def test_past_its_deadline_the_search_takes_no_further_node() -> None:
    """Found 2026-12-06 (tests/optimize/test_plan_cases.py took 49 s of a 2-core CI run): the best-first loop
    read its clock at every 64th node only, and one node can take tens of milliseconds (its children's
    bounds), so 0.1 s solve budgets ran for 2 s, and every relaxation searched after an infeasible plan (its
    budget already spent) still took 64 nodes. Past the deadline the loop stops at the next node it counts,
    and says the budget ran out."""
    stopped = 0
    for seed in range(12):
        problem = make_user_problem(seed)
        evals = Evaluations(problem, SimEvaluator(bandwidth=AlphaBetaPrior()))
        incumbent = Incumbent(problem.constraints.objective)
        search = BranchAndBound(problem, evals, constraints=problem.constraints, incumbent=incumbent)
        search.start()
        coverage = search.run(deadline=0.0, clock=lambda: 1.0)
        assert search.stats.nodes <= 1, seed
        if not coverage.closed:
            stopped += 1
            assert search.stats.nodes == 1 and coverage.reason == "the solve budget ran out", seed
    assert stopped >= 6
