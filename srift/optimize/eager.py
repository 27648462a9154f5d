"""Eager search (Srift §4.4): increase heterogeneity one type at a time, within a solving budget.

The enumeration and its bounds are srift.optimize.search's; types that cannot help are set aside with the
exhaustive search's proof (srift.optimize.exhaustive.set_aside), so subsets holding them are skipped.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Sequence

from srift.domain import Constraints, Objective
from srift.optimize.evaluate import Evaluations
from srift.optimize.exhaustive import BranchAndBound
from srift.optimize.search import (
    Enumerator,
    Incumbent,
    SearchResult,
    SearchStopped,
    cost_per_sample_floor,
    evaluate_best_first,
)
from srift.optimize.space import Groups, Problem

PROOF_FIRST_SHARE = 0.5
PROOF_SHARE = 0.1
EAGER_SHARE = 0.1
"""Eager search alternates with the exhaustive search's proof, on its incumbent: the proof first gets half of
the budget, then each gets a tenth in turn; when the proof closes, eager search stops with a proven plan.
So on a request the exhaustive search proves within half the budget, eager search is no slower (product
choices: the split, not a measurement)."""


def rank_candidates(problem: Problem, objective: Objective) -> list[int]:
    """Srift's preference order: cheapest per sample (min_cost) or fastest per VM (min_time), at full load."""
    scores: list[tuple[float, str, int]] = []
    for i, cand in enumerate(problem.candidates):
        if objective is Objective.MIN_COST:
            score = cost_per_sample_floor(cand)
        else:
            score = cand.floor_s(cand.max_vm_batch) / cand.max_vm_batch
        scores.append((score, cand.name, i))
    scores.sort()
    return [i for _, _, i in scores]


def type_subsets(ranked: Sequence[int], max_types: int) -> Iterator[tuple[int, ...]]:
    """Heterogeneity-increasing order: pairs, then triples, …; within each size the ranked types are enabled
    one at a time and each is tried with every combination of types enabled before it."""
    for size in range(1, max_types):
        for j in range(size, len(ranked)):
            for combo in itertools.combinations(ranked[:j], size):
                yield (*combo, ranked[j])


def _subsets(
    ranked: list[int], ceilings: list[int | None], max_types: int, proof: BranchAndBound | None
) -> Iterator[tuple[tuple[int, ...], int | None]]:
    """The subsets eager search tries, in order, with their count ceilings; a subset holding a type that
    the proof sets aside (judged again whenever the incumbent improves) is skipped."""
    for ceiling in ceilings:
        for subset in type_subsets(ranked, max_types):
            if proof is not None:
                proof.refresh()
                if proof.dead.intersection(subset):
                    continue
            yield subset, ceiling


def solve_eager(
    problem: Problem,
    evals: Evaluations,
    *,
    budget_s: float,
    constraints: Constraints | None = None,
    k: int = 8,
    max_types: int = 3,
    incumbent: Incumbent | None = None,
    start: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> SearchResult:
    """Srift's eager heuristic: increase heterogeneity one type at a time, within `budget_s` seconds.

    Types are ranked by preference (`rank_candidates`). First every type alone (any count up to its cap),
    then mixes: the ranked types are enabled one at a time and each is tried together with the types enabled
    before it (up to `max_types` types per configuration), with at most K (default 8) VMs per type, and then
    again up to the caps. Within each subset the enumeration and bounds of the exhaustive search apply, with
    the incumbent found so far. With an evaluator that offers bounds, the exhaustive search runs in turns
    with it on the same incumbent (PROOF_FIRST_SHARE): types it sets aside with proof are skipped, and when
    it closes, the result is complete and its `coverage` closed (the plan is proven optimal). Returns the
    best feasible configuration found; `complete` when every subset ran to its end or the proof closed.
    """
    constraints = constraints or problem.constraints
    start = start if start is not None else clock()
    deadline = start + budget_s * 0.9
    incumbent = incumbent or Incumbent(constraints.objective)
    enum = Enumerator(problem, constraints=constraints, floor_factor=evals.floor_factor)
    enum.incumbent = incumbent.value
    ranked = rank_candidates(problem, constraints.objective)
    buffer: list[tuple[float, Groups]] = []

    def flush() -> None:
        batch = list(buffer)
        buffer.clear()
        if not evaluate_best_first(
            batch,
            evals=evals,
            constraints=constraints,
            incumbent=incumbent,
            enumerator=enum,
            deadline=deadline,
            clock=clock,
        ):
            raise SearchStopped

    def emit(bound: float, groups: Groups) -> None:
        buffer.append((bound, groups))
        if len(buffer) >= 512:
            flush()

    ceilings: list[int | None] = [max(1, k)]
    if any(c.cap > k for c in problem.candidates):
        ceilings.append(None)
    proof: BranchAndBound | None = None
    try:
        for i in ranked:
            enum.run(emit, active=[i], require_all=True, deadline=deadline, clock=clock)
            flush()
        if evals.type_partial(0, least_compute_s=0.0, forward_share=0.0) is not None:
            proof = BranchAndBound(
                problem, evals, constraints=constraints, incumbent=incumbent, deadline=deadline, clock=clock
            )
            proof.start()
        work = _subsets(ranked, ceilings, max_types, proof)
        share = PROOF_FIRST_SHARE
        while True:
            if proof is not None:
                now = clock()
                closed = proof.run(deadline=min(deadline, now + share * (deadline - start)), clock=clock)
                if closed.closed:
                    return SearchResult(incumbent, True, enum.stats, coverage=closed)
                share = PROOF_SHARE
            until = clock() + EAGER_SHARE * (deadline - start) if proof is not None else math.inf
            for subset, ceiling in work:
                if clock() > deadline:
                    raise SearchStopped
                enum.run(
                    emit, active=subset, count_limit=ceiling, require_all=True, deadline=deadline, clock=clock
                )
                flush()
                if clock() > until:
                    break
            else:
                break
    except SearchStopped:
        buffer.clear()
        return SearchResult(incumbent, False, enum.stats, ("eager search stopped at its solve budget",))
    return SearchResult(incumbent, True, enum.stats)
