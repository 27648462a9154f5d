"""optimize(): the optimizer's phases (check the space, search, baselines, Pareto front) and infeasibility.

Phases, in order: (1) the space must hold some configuration summing to the global batch (within max_gpus
and max_vms), else InvalidInput on the field at fault; (2) search in the requested mode (`auto` runs the
exhaustive branch and bound with part of the solve budget, and eager search with the rest only when the bound
did not close in time); (3) when nothing meets the limits, the nearest relaxations are searched with what is
left of the budget and PlanInfeasible (409) says which limit cannot be met and by how much; (4) CAP/TAP
baselines, the Pareto front and the diminishing-returns note complete the Plan.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from srift.domain import Constraints, DiminishingReturns, Objective, Plan, Prediction, SearchMode
from srift.errors import Infeasible, InvalidInput
from srift.optimize.baselines import baselines
from srift.optimize.eager import EagerWalker, solve_eager
from srift.optimize.evaluate import Evaluated, Evaluations, Evaluator
from srift.optimize.exhaustive import solve_exhaustive
from srift.optimize.pareto import pareto_points
from srift.optimize.returns import diminishing_returns
from srift.optimize.returns import words as returns_words
from srift.optimize.search import Incumbent, SearchResult
from srift.optimize.space import BatchPolicy, Problem, reachable

ANY_POLICY_MAX_OPTIONS = 4096
REACHABILITY_BUDGET_S = 0.5


@dataclass(frozen=True, slots=True)
class SolveOptions:
    """How to search: mode, solving budget in seconds, eager's K and type limit, Pareto size limit."""

    mode: SearchMode = SearchMode.AUTO
    solve_budget_s: float = 2.0
    k: int = 8
    eager_max_types: int = 3
    pareto_limit: int = 5000


class PlanInfeasible(Infeasible):
    """No configuration meets the limits; `relaxations` holds the nearest ones that can be met.

    `proven` says whether that is proven (an exhaustive search covered the whole space, with no bound
    violated) or only what a search stopped by its budget found: a label such as "proven infeasible"
    must read it rather than assume it."""

    def __init__(
        self,
        detail: str,
        *,
        hint: str,
        field: str | None,
        relaxations: dict[str, float | None],
        proven: bool = False,
    ) -> None:
        super().__init__(detail, hint=hint, field=field)
        self.relaxations = relaxations
        self.proven = proven

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "relaxations": self.relaxations, "proven": self.proven}


def optimize(problem: Problem, evaluator: Evaluator, options: SolveOptions | None = None) -> Plan:
    """Find the best configuration of `problem` under its constraints (PlanInfeasible, InvalidInput)."""
    return optimize_with_evaluations(problem, evaluator, options)[0]


def optimize_with_evaluations(
    problem: Problem, evaluator: Evaluator, options: SolveOptions | None = None
) -> tuple[Plan, Evaluations]:
    """`optimize`, also returning every configuration it evaluated (for re-planning after interruptions)."""
    options = options or SolveOptions()
    start = time.perf_counter()
    _check_space(problem)
    evals = Evaluations(problem, evaluator)
    main_budget = options.solve_budget_s * 0.7
    result, mode = _search(problem, evals, problem.constraints, options, start=start, budget_s=main_budget)
    best = result.incumbent.best
    returns = None
    if best is None:
        error = _infeasible(problem, evals, options, result, start=start)
        rescued = _best_recorded(problem, evals)
        if rescued is None:
            error.proven = _proven(result, mode, evals)
            raise error
        best = rescued
    else:
        returns = _returns(problem, evals, best, options, start=start)
        while (better := _best_recorded(problem, evals)) is not None and better.groups != best.groups:
            best = better
            returns = _returns(problem, evals, best, options, start=start)
    best = evals.banded(best.groups)
    plan_baselines = baselines(problem, evals)
    pareto, total = pareto_points(
        problem, evals.records.values(), chosen=best.groups, limit=options.pareto_limit
    )
    c = problem.constraints
    pred = best.prediction
    warnings = list(problem.notes) + list(result.notes)
    if returns is not None:
        warnings.append(returns_words(returns))
    if evals.violations:
        warnings.append(
            "the simulator went below the bounds the search prunes with (its compute floor or bound, or "
            f"the rent of its time) on {evals.violations} configuration(s); "
            "pruning may have skipped a better plan"
        )
    proven = _proven(result, mode, evals)
    sources = list(pred.sources)
    priced: dict[tuple[str, str], list[str]] = {}
    for i, _, _ in best.groups:
        offer = problem.candidates[i].offer
        priced.setdefault((offer.source, offer.as_of.isoformat()), []).append(
            f"{offer.instance.name}/{offer.market.value}"
        )
    for (text, as_of), names in priced.items():
        sources.append(f"price {', '.join(names)}: {text} (as of {as_of})")
    plan = Plan(
        config=problem.config(best.groups),
        predicted=pred,
        constraints=c,
        time_headroom_s=None if c.time_limit_s is None else c.time_limit_s - pred.total_time_s,
        budget_headroom_usd=None if c.budget_usd is None else c.budget_usd - pred.cost_usd,
        baselines=plan_baselines,
        pareto=pareto,
        solve_time_s=time.perf_counter() - start,
        configs_evaluated=len(evals),
        mode=mode,
        sources=tuple(dict.fromkeys(sources)),
        warnings=tuple(warnings),
        proven_optimal=proven,
        pareto_total=total,
        optimality_gap=0.0 if proven else _gap(result, best.prediction, c.objective),
        diminishing_returns=returns,
    )
    return plan, evals


def _best_recorded(problem: Problem, evals: Evaluations) -> Evaluated | None:
    """The best feasible configuration evaluated so far, in the search's order (objective, then the other
    figure, types, VMs), or None when none meets the limits.

    Why: a search stopped by its budget leaves a plan that later phases may beat with fleets they evaluate
    on the way (the diminishing-returns search looks for fleets up to 10 % slower and may find faster ones
    within the limits); the plan must be no worse than any feasible fleet the answer reports on its front."""
    found = Incumbent(problem.constraints.objective)
    for item in list(evals.records.values()):
        found.offer(item)
    return found.best


def _proven(result: SearchResult, mode: SearchMode, evals: Evaluations) -> bool:
    """Whether the search's answer (its plan, or that none meets the limits) is proven: it covered the
    whole space (exhaustive mode, or a closed bound) and the simulator never went below a bound it pruned
    with."""
    closed = result.coverage is not None and result.coverage.closed
    return result.complete and (mode is SearchMode.EXHAUSTIVE or closed) and evals.violations == 0


def _returns(
    problem: Problem, evals: Evaluations, best: Evaluated, options: SolveOptions, *, start: float
) -> DiminishingReturns | None:
    """The diminishing-returns phase (srift.optimize.returns), with what is left of the solve budget."""

    spent = time.perf_counter() - start

    def search(constraints: Constraints, incumbent: Incumbent) -> Incumbent:
        left = options.solve_budget_s - (time.perf_counter() - start)
        budget = min(left, max(RETURNS_MIN_S, RETURNS_SHARE * spent))
        if budget <= 0:
            return incumbent
        res = _eager(problem, evals, constraints, options, budget_s=budget, incumbent=incumbent, prove=False)
        return res.incumbent

    return diminishing_returns(problem, evals, best, search=search)


def _gap(result: SearchResult, prediction: Prediction, objective: Objective) -> float | None:
    cov = result.coverage
    if cov is None or cov.lower_bound is None:
        return None
    value = prediction.cost_usd if objective is Objective.MIN_COST else prediction.total_time_s
    return max(value - cov.lower_bound, 0.0) / value if value > 0 else None


def _check_space(problem: Problem) -> None:
    if not problem.candidates:
        raise InvalidInput(
            "no instance type is available to the search",
            hint="name types in availability with counts ≥ 1, or give profiles of offered accelerators",
            field="availability",
        )
    if problem.batch_policy is BatchPolicy.ANY:
        g = problem.constraints.global_batch
        widest = max(min(c.max_vm_batch, g) - c.min_vm_batch + 1 for c in problem.candidates)
        if widest > ANY_POLICY_MAX_OPTIONS:
            raise InvalidInput(
                f"batch_policy any would try {widest} batch sizes per type (limit {ANY_POLICY_MAX_OPTIONS})",
                hint="use pow2_split (powers of two plus the exact split), or pow2",
                field="batch_policy",
            )
    _check_caps(problem)
    _check_size(problem)
    if not reachable(problem, deadline=time.perf_counter() + REACHABILITY_BUDGET_S):
        g = problem.constraints.global_batch
        capacity = sum(c.cap * c.max_vm_batch for c in problem.candidates)
        if g > capacity:
            detail = f"{g} samples do not fit: the available VMs hold at most {capacity} per iteration"
            hint = "lower global_batch or allow more VMs in availability"
        else:
            policy = problem.batch_policy.value
            detail = f"{g} cannot be split into per-VM batches allowed by batch_policy {policy}"
            near = _nearest_splittable(problem, deadline=time.perf_counter() + REACHABILITY_BUDGET_S)
            hint = (
                f"use a global batch that splits, e.g. {' or '.join(map(str, near))}, or batch_policy any"
                if near
                else "allow more VMs or instance types in availability, or batch_policy any"
            )
        raise InvalidInput(detail, hint=hint, field="global_batch")


MAX_TABLE_ENTRIES = 2_000_000
"""The searches tabulate each candidate's compute at every per-GPU batch up to the global batch
(srift.optimize.relax); above this many entries in all (memory: tens of MB, and the time to build them
counts against the solve budget) a request is refused before searching. The whole us-east-1 catalog at a
global batch of 8192 needs about 160,000 for issue #47's CNN (estimated GPUs hold up to 65,536 samples
each), 9,400 for ResNet50."""


def space_log10(problem: Problem) -> float:
    """log10 of an upper bound of the number of configurations: each candidate absent, or one of its
    counts with one of its per-VM batches (up to the global batch)."""
    g = problem.constraints.global_batch
    return sum(
        math.log10(1 + c.cap * (len(c.batch_options(problem.batch_policy, upto=g)) + 1))
        for c in problem.candidates
    )


def _check_size(problem: Problem) -> None:
    """InvalidInput, before any search, when the request is too large to search: its compute tables
    would exceed MAX_TABLE_ENTRIES. Says how large the space is and what to narrow."""
    g = problem.constraints.global_batch
    entries = sum(min(c.profile.max_batch, g // c.devices) for c in problem.candidates)
    if entries <= MAX_TABLE_ENTRIES:
        return
    locations = {c.location for c in problem.candidates}
    raise InvalidInput(
        f"the request is too large to search: {len(problem.candidates)} candidate types"
        f"{f' in {len(locations)} locations' if len(locations) > 1 else ''} at a global batch of {g} "
        f"(up to 10^{space_log10(problem):.0f} configurations; {entries:,} compute entries to tabulate, "
        f"limit {MAX_TABLE_ENTRIES:,})",
        hint="narrow availability to the types you would rent, allow fewer regions or providers, or lower "
        "global_batch",
        field="availability",
    )


def _nearest_splittable(problem: Problem, *, deadline: float, reach: int = 256) -> list[int]:
    """The global batches nearest to the problem's (below and above, within `reach`) that some configuration
    sums to, for the hint of an unsplittable one; [] when none is found before `deadline`."""
    g = problem.constraints.global_batch
    found: dict[str, int] = {}
    for k in range(1, reach + 1):
        for side, x in (("below", g - k), ("above", g + k)):
            if side in found or x < 1 or time.perf_counter() > deadline:
                continue
            trial = replace(problem, constraints=replace(problem.constraints, global_batch=x))
            if reachable(trial, deadline=deadline):
                found[side] = x
        if len(found) == 2:
            break
    return [found[side] for side in ("below", "above") if side in found]


def _check_caps(problem: Problem) -> None:
    """InvalidInput on max_gpus / max_vms when the largest fleet they allow cannot hold the global batch."""
    c = problem.constraints
    g = c.global_batch
    if c.max_gpus is not None:
        most = c.max_gpus * max(x.profile.max_batch for x in problem.candidates)
        if g > most:
            raise InvalidInput(
                f"{c.max_gpus} GPUs hold at most {most} samples per iteration, fewer than global_batch {g}",
                hint=f"raise max_gpus to at least {-(-c.max_gpus * g // most)}, or lower global_batch",
                field="max_gpus",
            )
    if c.max_vms is not None:
        per_vm = sorted((x.max_vm_batch for x in problem.candidates for _ in range(x.cap)), reverse=True)
        most = sum(per_vm[: c.max_vms])
        if g > most:
            raise InvalidInput(
                f"{c.max_vms} VMs hold at most {most} samples per iteration, fewer than global_batch {g}",
                hint="raise max_vms, or lower global_batch",
                field="max_vms",
            )


def _search(
    problem: Problem,
    evals: Evaluations,
    constraints: Constraints,
    options: SolveOptions,
    *,
    start: float,
    budget_s: float,
    incumbent: Incumbent | None = None,
) -> tuple[SearchResult, SearchMode]:
    deadline = start + budget_s
    if options.mode is SearchMode.EAGER:
        res = _eager(
            problem, evals, constraints, options, budget_s=budget_s, incumbent=incumbent, start=start
        )
        return res, SearchMode.EAGER
    incumbent = incumbent or Incumbent(constraints.objective)
    if options.mode is SearchMode.EXHAUSTIVE:
        res = _exhaustive(problem, evals, constraints, options, deadline=deadline, incumbent=incumbent)
        return res, SearchMode.EXHAUSTIVE
    share = start + budget_s * AUTO_EXHAUSTIVE_SHARE
    res = _exhaustive(problem, evals, constraints, options, deadline=share, incumbent=incumbent)
    if res.complete:
        return res, SearchMode.EXHAUSTIVE
    now = time.perf_counter()
    eager = _eager(
        problem,
        evals,
        constraints,
        options,
        budget_s=max(deadline - now, 0.0),
        incumbent=res.incumbent,
        start=now,
    )
    gap = _gap_note(res, eager.incumbent, constraints.objective)
    return (
        SearchResult(eager.incumbent, False, eager.stats, (*eager.notes, *gap), coverage=res.coverage),
        SearchMode.EAGER,
    )


def _eager(
    problem: Problem,
    evals: Evaluations,
    constraints: Constraints,
    options: SolveOptions,
    *,
    budget_s: float,
    incumbent: Incumbent | None,
    start: float | None = None,
    prove: bool = True,
) -> SearchResult:
    """Eager search within `budget_s` seconds, with the request's `k` and cap on types."""
    return solve_eager(
        problem,
        evals,
        budget_s=budget_s,
        constraints=constraints,
        k=options.k,
        max_types=options.eager_max_types,
        incumbent=incumbent,
        start=start,
        prove=prove,
    )


def _exhaustive(
    problem: Problem,
    evals: Evaluations,
    constraints: Constraints,
    options: SolveOptions,
    *,
    deadline: float,
    incumbent: Incumbent,
) -> SearchResult:
    """Exhaustive search until `deadline`, with eager search as its helper (better plans to prune with) on
    the same incumbent."""
    n = len(problem.candidates)
    helper = EagerWalker(
        problem,
        evals,
        constraints=constraints,
        incumbent=incumbent,
        deadline=deadline,
        k=options.k,
        max_types=n
        if n <= HELPER_ALL_TYPES
        else max(options.eager_max_types, HELPER_TYPES)
        if n <= HELPER_MORE_TYPES
        else options.eager_max_types,
    )
    return solve_exhaustive(
        problem, evals, constraints=constraints, deadline=deadline, incumbent=incumbent, helper=helper
    )


HELPER_ALL_TYPES = 10
HELPER_TYPES = 5
HELPER_MORE_TYPES = 24
"""The helper's eager search mixes any number of types on problems of at most HELPER_ALL_TYPES candidates
(2^10 subsets), up to HELPER_TYPES on problems of at most HELPER_MORE_TYPES (about 55,000 subsets, most
skipped once types are set aside), else eager_max_types: on small catalogs the optimum often mixes more
types than eager search's default three (product choices, not measurements)."""


RETURNS_SHARE = 0.25
RETURNS_MIN_S = 0.05
"""The diminishing-returns phase runs eager search for a quarter of the time the plan's search took (at
least 50 ms, at most what is left of the solve budget): it looks for a note, not a proof."""

AUTO_EXHAUSTIVE_SHARE = 0.6
"""`auto` gives the exhaustive search this share of the solving budget and eager search the rest when the
exhaustive one did not close its bound in time."""


def _gap_note(res: SearchResult, incumbent: Incumbent, objective: Objective) -> tuple[str, ...]:
    cov = res.coverage
    if cov is None or cov.lower_bound is None or incumbent.best is None or incumbent.value <= 0:
        return ()
    gap = max(incumbent.value - cov.lower_bound, 0.0) / incumbent.value
    return (
        f"exhaustive search did not finish within its share of the solve budget ({cov.open_nodes} subtree(s) "
        f"left); eager search found this plan, at most {100 * gap:.1f} % from the optimum",
    )


def _relaxed(
    problem: Problem,
    evals: Evaluations,
    options: SolveOptions,
    objective: Objective,
    *,
    time_limit_s: float | None,
    budget_usd: float | None,
    budget_s: float,
) -> float | None:
    """The best `objective` value (at the request's confidence) with the limits relaxed to `time_limit_s`
    and `budget_usd`, searched for `budget_s`; None when the search found no configuration."""
    c = problem.constraints
    relaxed = replace(c, objective=objective, time_limit_s=time_limit_s, budget_usd=budget_usd)
    res, _ = _search(problem, evals, relaxed, options, start=time.perf_counter(), budget_s=max(budget_s, 0.0))
    best = res.incumbent.best
    if best is None:
        return None
    pred = evals.banded(best.groups).prediction if c.confidence > 0.5 else best.prediction
    q = c.confidence
    return pred.cost_quantile_usd(q) if objective is Objective.MIN_COST else pred.total_time_quantile_s(q)


def _infeasible(
    problem: Problem, evals: Evaluations, options: SolveOptions, result: SearchResult, *, start: float
) -> PlanInfeasible:
    """Search the nearest relaxations and word the 422: which limit cannot be met, and by how much."""
    c = problem.constraints
    if c.time_limit_s is None and c.budget_usd is None:
        if result.complete:
            field = "max_vms" if c.max_vms is not None else "max_gpus"
            return PlanInfeasible(
                f"no fleet within max_gpus={c.max_gpus} and max_vms={c.max_vms} splits global_batch "
                f"{c.global_batch} into whole per-GPU batches",
                hint="raise max_gpus or max_vms, or use a global batch with more divisors",
                field=field,
                relaxations={},
            )
        error = PlanInfeasible("", hint="", field=None, relaxations={})
    else:
        error = _infeasible_limits(problem, evals, options, result, start=start)
    if not result.complete and all(v is None for v in error.relaxations.values()):
        return PlanInfeasible(
            f"no configuration found within solve_budget_s={options.solve_budget_s:g} s (the "
            f"{options.mode.value} search stopped before finding one that meets the limits or a relaxation)",
            hint="raise solve_budget_s, or narrow availability so the search covers more of the space",
            field="solve_budget_s",
            relaxations=error.relaxations,
        )
    return error


def usd_up(usd: float) -> str:
    """Dollars rounded up to the cent: a limit the hint names must be met by the figure it prints (rounded to
    the nearest cent, a cheapest plan of $4.8119 under a $4.81 budget read "raise budget_usd to $4.81"), and
    the message quotes the figure as the hint does ("costs $4.81, $0.01 over" under $4.81 read as a
    contradiction)."""
    return f"${math.ceil(round(usd * 100, 6)) / 100:.2f}"


def seconds_up(seconds: float) -> str:
    """Seconds rounded up to the whole second, as `usd_up` rounds dollars."""
    return f"{math.ceil(round(seconds, 6)):.0f} s"


def _infeasible_limits(
    problem: Problem, evals: Evaluations, options: SolveOptions, result: SearchResult, *, start: float
) -> PlanInfeasible:
    c = problem.constraints
    left = max(options.solve_budget_s - (time.perf_counter() - start), 0.0)
    searched = "" if result.complete else " found within the solve budget"
    relax: dict[str, float | None] = {}
    n = c.iterations
    at = f" (at {100 * c.confidence:g} % confidence)" if c.confidence > 0.5 else ""
    relaxed = partial(_relaxed, problem, evals, options)
    if c.time_limit_s is not None:
        least_cost = relaxed(
            Objective.MIN_COST, time_limit_s=c.time_limit_s, budget_usd=None, budget_s=left / 2
        )
        relax["least_budget_for_deadline_usd"] = least_cost
        if c.budget_usd is not None:
            fastest_in_budget = relaxed(
                Objective.MIN_TIME, time_limit_s=None, budget_usd=c.budget_usd, budget_s=left / 2
            )
            relax["fastest_time_within_budget_s"] = fastest_in_budget
        if least_cost is None:
            fastest = relaxed(Objective.MIN_TIME, time_limit_s=None, budget_usd=None, budget_s=left / 4)
            relax["fastest_time_s"] = fastest
            gap = (
                ""
                if fastest is None
                else f": the fastest{searched} takes {seconds_up(fastest)}{at}, "
                f"{seconds_up(fastest - c.time_limit_s)} over"
            )
            return PlanInfeasible(
                f"no configuration{searched} runs {n} iterations within "
                f"time_limit_s={c.time_limit_s:g} s{gap}",
                hint=(
                    f"raise time_limit_s to at least {seconds_up(fastest)}, or allow more VMs or other types"
                    if fastest is not None
                    else "raise time_limit_s, or allow more VMs or other instance types"
                ),
                field="time_limit_s",
                relaxations=relax,
            )
        if c.budget_usd is None:
            return PlanInfeasible(
                f"no configuration found within solve_budget_s={options.solve_budget_s:g} s meets "
                f"time_limit_s={c.time_limit_s:g} s, though one costing ${least_cost:.2f} does",
                hint="raise solve_budget_s",
                field="solve_budget_s",
                relaxations=relax,
            )
        fast = relax.get("fastest_time_within_budget_s")
        within = (
            f"within ${c.budget_usd:g} the fastest takes {seconds_up(fast)}"
            if fast is not None
            else (f"nothing{searched} fits ${c.budget_usd:g}")
        )
        return PlanInfeasible(
            f"no configuration{searched} meets both time_limit_s={c.time_limit_s:g} s and budget_usd="
            f"${c.budget_usd:g}: meeting the deadline{at} costs at least {usd_up(least_cost)} "
            f"({usd_up(least_cost - c.budget_usd)} over budget); {within}",
            hint=f"raise budget_usd to {usd_up(least_cost)}"
            + (f" or time_limit_s to {seconds_up(fast)}" if fast is not None else ""),
            field="budget_usd",
            relaxations=relax,
        )
    assert c.budget_usd is not None
    cheapest = relaxed(Objective.MIN_COST, time_limit_s=None, budget_usd=None, budget_s=left)
    relax["cheapest_cost_usd"] = cheapest
    gap = (
        ""
        if cheapest is None
        else f": the cheapest{searched} costs {usd_up(cheapest)}{at}, {usd_up(cheapest - c.budget_usd)} over"
    )
    return PlanInfeasible(
        f"no configuration{searched} runs {n} iterations within budget_usd=${c.budget_usd:g}{gap}",
        hint=f"raise budget_usd to at least {usd_up(cheapest)}"
        if cheapest is not None
        else "raise budget_usd",
        field="budget_usd",
        relaxations=relax,
    )
