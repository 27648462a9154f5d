"""Exhaustive (branch and bound) and eager (heterogeneity-increasing) search over the configuration space.

Pruning rules of the exhaustive search. Each discards only configurations that cannot be feasible or cannot
beat (strictly) the best feasible configuration already evaluated, so the optimum's objective is never lost:

1. Capacity. A partial configuration whose remaining samples exceed what the remaining candidates can take
   (Σ cap · max per-VM batch) has no completion. Candidates come in a fixed order and the group counts and
   batches only add samples, so the subtree is empty.
2. Compute floor vs the time limit. Every completion of a partial configuration keeps its groups, so its
   iteration time is at least floor_factor · max(forward + backward) of those groups (the Evaluator
   contract); if N · that floor exceeds time_limit_s, no completion is feasible.
3. Cost floor vs the budget. Completions only add VMs (Σ count·price grows) and the floor only grows, so
   N · floor · Σ count·price is a lower bound of every completion's cost; above budget_usd, prune.
4. Bound vs incumbent. The same floors bound the objective (cost or total time) of every completion; a
   subtree or configuration whose bound is ≥ the best feasible objective found cannot improve on it.
5. Best first. Surviving configurations are evaluated in increasing order of their bound; once the next bound
   is ≥ the incumbent's objective, none of the rest can improve it (rule 4), and the search stops.

The market rule (a type's cheaper market) and one-batch-per-type are applied when the space is built
(srift.optimize.space). Eager search reuses the same enumeration with an incumbent, but only over a growing
set of enabled types and count ceilings, so it is a heuristic and stops at its solving budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from srift.domain import Constraints, Objective
from srift.optimize.evaluate import Evaluated, Evaluations, objective_value, secondary_value
from srift.optimize.space import BatchPolicy, Group, Groups, Problem

Emit = Callable[[float, Groups], None]


class SearchStopped(Exception):
    """Raised inside the enumeration when the deadline or node limit is reached."""


@dataclass
class Incumbent:
    """The best feasible configuration so far, compared by (objective, secondary, types, VMs, groups)."""

    objective: Objective
    best: Evaluated | None = None
    value: float = math.inf

    def offer(self, item: Evaluated) -> bool:
        if not item.feasible:
            return False
        if self.best is None or _key(item, self.objective) < _key(self.best, self.objective):
            self.best = item
            self.value = objective_value(item.prediction, self.objective)
            return True
        return False


def _key(item: Evaluated, objective: Objective) -> tuple[float, float, int, int, Groups]:
    return (
        objective_value(item.prediction, objective),
        secondary_value(item.prediction, objective),
        len(item.groups),
        sum(n for _, n, _ in item.groups),
        item.groups,
    )


@dataclass
class SearchStats:
    nodes: int = 0
    emitted: int = 0
    complete: bool = True
    notes: list[str] = field(default_factory=list)


class Enumerator:
    """Depth-first enumeration of the configurations of a problem with pruning rules 1–4.

    Candidates are visited in canonical order; at each candidate a group is either the final one (it takes
    the exact remainder: rule of the batch policy) or a non-final group with a batch from the candidate's
    options, followed by later candidates. `emit(bound, groups)` receives each surviving configuration.
    """

    def __init__(self, problem: Problem, *, constraints: Constraints, floor_factor: float) -> None:
        self.problem = problem
        self.constraints = constraints
        self.factor = floor_factor
        self.incumbent = math.inf
        self.stats = SearchStats()
        policy = problem.batch_policy
        self._options = [
            tuple((b, c.floor_s(b)) for b in c.batch_options(policy)) for c in problem.candidates
        ]
        self._final_cache: list[dict[int, float]] = [{} for _ in problem.candidates]

    def _final_floor(self, i: int, batch: int) -> float:
        cache = self._final_cache[i]
        value = cache.get(batch)
        if value is None:
            value = self.problem.candidates[i].floor_s(batch)
            cache[batch] = value
        return value

    def run(
        self,
        emit: Emit,
        *,
        active: Sequence[int] | None = None,
        count_limit: int | None = None,
        require: int | None = None,
        max_types: int | None = None,
        deadline: float | None = None,
        node_limit: int | None = None,
    ) -> None:
        """Enumerate; raises SearchStopped at `deadline` (perf_counter seconds) or past `node_limit` nodes."""
        problem = self.problem
        cands = problem.candidates
        act = sorted(active) if active is not None else list(range(len(cands)))
        if not act:
            return
        caps = [min(cands[i].cap, count_limit) if count_limit else cands[i].cap for i in act]
        his = [cands[i].max_vm_batch for i in act]
        los = [cands[i].min_vm_batch for i in act]
        prices = [cands[i].price_usd_per_s for i in act]
        opts = [self._options[i] for i in act]
        suffix = [0] * (len(act) + 1)
        for p in range(len(act) - 1, -1, -1):
            suffix[p] = suffix[p + 1] + caps[p] * his[p]
        req_pos = act.index(require) if require is not None else -1
        pow2_final = problem.batch_policy is BatchPolicy.POW2
        n_iter = self.constraints.iterations
        scale = n_iter * self.factor
        t_lim = self.constraints.time_limit_s if self.constraints.time_limit_s is not None else math.inf
        b_lim = self.constraints.budget_usd if self.constraints.budget_usd is not None else math.inf
        cost_obj = self.constraints.objective is Objective.MIN_COST
        type_limit = max_types if max_types is not None else len(act)
        stats = self.stats
        final_floor = self._final_floor
        last = len(act)

        def dfs(pos: int, rem: int, floor: float, price: float, groups: Groups, has_req: bool) -> None:
            stats.nodes += 1
            if stats.nodes & 511 == 0:
                if deadline is not None and time.perf_counter() > deadline:
                    raise SearchStopped
                if node_limit is not None and stats.nodes > node_limit:
                    raise SearchStopped
            ntypes = len(groups)
            for p in range(pos, last):
                if rem > suffix[p]:
                    break
                if not has_req and 0 <= req_pos < p:
                    break
                i = act[p]
                cap, lo, hi, price_i = caps[p], los[p], his[p], prices[p]
                now_req = has_req or p == req_pos or req_pos < 0
                if now_req:
                    n_lo = max(1, -(-rem // hi))
                    n_hi = min(cap, rem // lo)
                    for n in range(n_lo, n_hi + 1):
                        if rem % n:
                            continue
                        b = rem // n
                        if pow2_final and b & (b - 1):
                            continue
                        f = final_floor(i, b)
                        f = f if f > floor else floor
                        lb_t = scale * f
                        if lb_t > t_lim:
                            continue
                        lb_c = lb_t * (price + n * price_i)
                        if lb_c > b_lim:
                            continue
                        lb = lb_c if cost_obj else lb_t
                        if lb >= self.incumbent:
                            continue
                        stats.emitted += 1
                        emit(lb, (*groups, (i, n, b)))
                if p + 1 < last and ntypes + 2 <= type_limit:
                    rest = suffix[p + 1]
                    for b, fb in opts[p]:
                        if b >= rem:
                            break
                        f = fb if fb > floor else floor
                        lb_t = scale * f
                        if lb_t > t_lim or (not cost_obj and lb_t >= self.incumbent):
                            continue
                        for n in range(1, cap + 1):
                            s = n * b
                            if s >= rem:
                                break
                            pp = price + n * price_i
                            lb_c = lb_t * pp
                            if lb_c > b_lim or (cost_obj and lb_c >= self.incumbent):
                                break
                            if rem - s > rest:
                                continue
                            group: Group = (i, n, b)
                            dfs(p + 1, rem - s, f, pp, (*groups, group), now_req)

        dfs(0, self.constraints.global_batch, 0.0, 0.0, (), req_pos < 0)


@dataclass
class SearchResult:
    """What a search found: the incumbent, how complete the search was, and its statistics."""

    incumbent: Incumbent
    complete: bool
    stats: SearchStats
    notes: tuple[str, ...] = ()
    enumeration_stopped: bool = False


def _evaluate_sorted(
    pending: list[tuple[float, Groups]],
    *,
    evals: Evaluations,
    constraints: Constraints,
    incumbent: Incumbent,
    enumerator: Enumerator | None,
    deadline: float | None,
) -> bool:
    """Evaluate `pending` best bound first until a bound reaches the incumbent (rule 5); False at deadline."""
    pending.sort(key=lambda x: x[0])
    for bound, groups in pending:
        if bound >= incumbent.value:
            return True
        if deadline is not None and time.perf_counter() > deadline:
            return False
        item = evals.evaluate(groups, constraints=constraints)
        if incumbent.offer(item) and enumerator is not None:
            enumerator.incumbent = incumbent.value
    return True


def solve_exhaustive(
    problem: Problem,
    evals: Evaluations,
    *,
    constraints: Constraints | None = None,
    deadline: float | None = None,
    enumeration_deadline: float | None = None,
    node_limit: int | None = None,
    incumbent: Incumbent | None = None,
) -> SearchResult:
    """Branch and bound over the whole space (rules 1–5); `complete` is False if stopped early.

    A first pass over homogeneous configurations seeds the incumbent so that rule 4 prunes the full pass.
    Enumeration stops at `enumeration_deadline` (or `deadline`) or after `node_limit` nodes
    (`enumeration_stopped`); evaluation stops at `deadline`.
    """
    constraints = constraints or problem.constraints
    incumbent = incumbent or Incumbent(constraints.objective)
    enum = Enumerator(problem, constraints=constraints, floor_factor=evals.floor_factor)
    enum.incumbent = incumbent.value
    seeds: list[tuple[float, Groups]] = []
    pending: list[tuple[float, Groups]] = []
    enum_deadline = enumeration_deadline if enumeration_deadline is not None else deadline
    try:
        enum.run(
            lambda lb, g: seeds.append((lb, g)), max_types=1, deadline=enum_deadline, node_limit=node_limit
        )
        seeds.sort(key=lambda x: x[0])
        for bound, groups in seeds[:4]:
            if bound >= incumbent.value:
                break
            if incumbent.offer(evals.evaluate(groups, constraints=constraints)):
                enum.incumbent = incumbent.value
        enum.run(lambda lb, g: pending.append((lb, g)), deadline=enum_deadline, node_limit=node_limit)
    except SearchStopped:
        enum.stats.complete = False
        return SearchResult(
            incumbent,
            False,
            enum.stats,
            ("enumeration stopped before covering the space",),
            enumeration_stopped=True,
        )
    done = _evaluate_sorted(
        pending, evals=evals, constraints=constraints, incumbent=incumbent, enumerator=None, deadline=deadline
    )
    enum.stats.complete = done
    notes = () if done else ("evaluation stopped at the solve budget before the bound closed",)
    return SearchResult(incumbent, done, enum.stats, notes)


def rank_candidates(problem: Problem, objective: Objective) -> list[int]:
    """Srift's preference order: cheapest per sample (min_cost) or fastest per VM (min_time), at full load."""
    scores: list[tuple[float, str, int]] = []
    for i, cand in enumerate(problem.candidates):
        options = cand.batch_options(problem.batch_policy) or (cand.max_vm_batch,)
        if objective is Objective.MIN_COST:
            score = min(cand.price_usd_per_s * cand.floor_s(b) / b for b in options)
        else:
            score = min(cand.floor_s(b) / b for b in options)
        scores.append((score, cand.name, i))
    scores.sort()
    return [i for _, _, i in scores]


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
) -> SearchResult:
    """Srift's eager heuristic: increase heterogeneity one type at a time, within `budget_s` seconds.

    Types are ranked by preference (`rank_candidates`). With count ceiling K (default 8), stage s enables the
    s best types and explores configurations that use the s-th type (up to `max_types` types each), best
    bound first, pruned by the incumbent; after every type is enabled the ceiling doubles, up to the caps.
    Returns the best feasible configuration found; `complete` when every stage ran to its end.
    """
    constraints = constraints or problem.constraints
    start = start if start is not None else time.perf_counter()
    deadline = start + budget_s * 0.9
    incumbent = incumbent or Incumbent(constraints.objective)
    enum = Enumerator(problem, constraints=constraints, floor_factor=evals.floor_factor)
    enum.incumbent = incumbent.value
    ranked = rank_candidates(problem, constraints.objective)
    top_cap = max((c.cap for c in problem.candidates), default=0)
    ceiling = max(1, k)
    buffer: list[tuple[float, Groups]] = []

    def flush() -> None:
        batch = list(buffer)
        buffer.clear()
        if not _evaluate_sorted(
            batch,
            evals=evals,
            constraints=constraints,
            incumbent=incumbent,
            enumerator=enum,
            deadline=deadline,
        ):
            raise SearchStopped

    def emit(bound: float, groups: Groups) -> None:
        buffer.append((bound, groups))
        if len(buffer) >= 256:
            flush()

    try:
        while True:
            for s in range(len(ranked)):
                enum.run(
                    emit,
                    active=ranked[: s + 1],
                    count_limit=ceiling,
                    require=ranked[s],
                    max_types=max_types,
                    deadline=deadline,
                )
                flush()
            if ceiling >= top_cap:
                break
            ceiling *= 2
    except SearchStopped:
        buffer.clear()
        return SearchResult(incumbent, False, enum.stats, ("eager search stopped at its solve budget",))
    return SearchResult(incumbent, True, enum.stats)
