"""Eager search (Srift §4.4): increase heterogeneity one type at a time, within a solving budget.

The enumeration and its bounds are srift.optimize.search's; types that cannot help are set aside with the
exhaustive search's proof (srift.optimize.exhaustive.set_aside), so subsets holding them are skipped.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence

from srift.domain import Constraints, Objective
from srift.optimize.evaluate import Evaluations
from srift.optimize.exhaustive import BranchAndBound, alternate
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
"""Eager search takes turns with the exhaustive search's proof, on one incumbent: the proof first gets half
of the budget, then each gets a tenth in turn; when the proof closes, eager search stops with a proven plan.
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


class EagerWalker:
    """Srift's eager enumeration as a helper of the branch and bound: each call tries further subsets of
    types (`_subsets`, skipping types the search sets aside) until a time; False once none is left or its
    deadline has passed (then `stopped`)."""

    def __init__(
        self,
        problem: Problem,
        evals: Evaluations,
        *,
        constraints: Constraints,
        incumbent: Incumbent,
        deadline: float,
        k: int = 8,
        max_types: int = 3,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.problem, self.evals, self.constraints = problem, evals, constraints
        self.incumbent, self.deadline, self.clock = incumbent, deadline, clock
        self.max_types = max_types
        self.k = k
        self._enum: Enumerator | None = None
        self._ranked: list[int] | None = None
        self.ceilings: list[int | None] = [max(1, k)]
        if any(c.cap > k for c in problem.candidates):
            self.ceilings.append(None)
        self.buffer: list[tuple[float, Groups]] = []
        self.stopped = False
        self._work: Iterator[tuple[tuple[int, ...], int | None]] | None = None

    @property
    def enum(self) -> Enumerator:
        """The enumeration (built on first use: a search that closes early never needs it)."""
        if self._enum is None:
            self._enum = Enumerator(
                self.problem, constraints=self.constraints, floor_factor=self.evals.floor_factor
            )
            self._enum.incumbent = self.incumbent.value
        return self._enum

    @property
    def ranked(self) -> list[int]:
        if self._ranked is None:
            self._ranked = rank_candidates(self.problem, self.constraints.objective)
        return self._ranked

    def singles(self) -> bool:
        """Every type alone (Srift's first step); False when the deadline stopped it."""
        try:
            for i in self.ranked:
                self.enum.run(
                    self._emit, active=[i], require_all=True, deadline=self.deadline, clock=self.clock
                )
                self._flush()
        except SearchStopped:
            self.buffer.clear()
            self.stopped = True
            return False
        return True

    def __call__(self, search: BranchAndBound | None, *, until: float) -> bool:
        self.enum.incumbent = min(self.enum.incumbent, self.incumbent.value)
        if self._work is None:
            self._work = _subsets(self.ranked, self.ceilings, self.max_types, search)
        try:
            for subset, ceiling in self._work:
                if self.clock() > self.deadline:
                    raise SearchStopped
                self.enum.run(
                    self._emit,
                    active=subset,
                    count_limit=ceiling,
                    require_all=True,
                    deadline=self.deadline,
                    clock=self.clock,
                )
                self._flush()
                if self.clock() > until:
                    return True
        except SearchStopped:
            self.buffer.clear()
            self.stopped = True
        return False

    def _flush(self) -> None:
        batch = list(self.buffer)
        self.buffer.clear()
        if not evaluate_best_first(
            batch,
            evals=self.evals,
            constraints=self.constraints,
            incumbent=self.incumbent,
            enumerator=self.enum,
            deadline=self.deadline,
            clock=self.clock,
        ):
            raise SearchStopped

    def _emit(self, bound: float, groups: Groups) -> None:
        self.buffer.append((bound, groups))
        if len(self.buffer) >= 512:
            self._flush()


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
    prove: bool = True,
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
    Without `prove` (a search for a note, not a plan) no proof runs.
    """
    constraints = constraints or problem.constraints
    start = start if start is not None else clock()
    deadline = start + budget_s * 0.9
    incumbent = incumbent or Incumbent(constraints.objective)
    walker = EagerWalker(
        problem,
        evals,
        constraints=constraints,
        incumbent=incumbent,
        deadline=deadline,
        k=k,
        max_types=max_types,
        clock=clock,
    )
    stopped = SearchResult(incumbent, False, walker.enum.stats, ("eager search stopped at its solve budget",))
    if not walker.singles():
        return stopped
    if not prove or evals.type_partial(0, least_compute_s=0.0, forward_share=0.0) is None:
        walker(None, until=deadline)
    else:
        proof = BranchAndBound(
            problem, evals, constraints=constraints, incumbent=incumbent, deadline=deadline, clock=clock
        )
        proof.start()
        coverage = alternate(
            proof,
            walker,
            deadline=deadline,
            first_share=PROOF_FIRST_SHARE,
            proof_share=PROOF_SHARE,
            helper_share=EAGER_SHARE,
            clock=clock,
            stop_with_helper=True,
        )
        if coverage.closed:
            return SearchResult(incumbent, True, walker.enum.stats, coverage=coverage)
    return stopped if walker.stopped else SearchResult(incumbent, True, walker.enum.stats)
