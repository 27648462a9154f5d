"""Eager (heterogeneity-increasing) search, and the enumeration, bounds and incumbent it shares.

Eager search (Srift §4.4) enumerates configurations of a growing sequence of type subsets depth first, with
these pruning rules, which only discard configurations that cannot be feasible or cannot beat the incumbent
(they rest on the Evaluator contract of srift.optimize.evaluate):

1. Capacity. A partial configuration whose remaining samples exceed what the remaining candidates can take
   (Σ cap · max per-VM batch, within max_vms and max_gpus) has no completion. Under a time limit a type's max
   per-VM batch is also cut to the largest whose compute alone fits time_limit_s / N.
2. Compute floor vs the time limit: N · (largest forward + backward of the groups) > time_limit_s.
3. Cost floor vs the budget: N · floor · Σ count·price, and N · (Σ count·price·floor of each group +
   remaining samples × the lowest price·seconds per sample of the remaining candidates), above budget_usd.
4. Bound vs incumbent: a configuration whose bound is ≥ the best feasible objective cannot improve on it.
5. Best first with lazy refinement: surviving configurations are simulated in increasing order of their
   bound, each first checked against the evaluator's tighter bound.

It is a heuristic: it stops at its solving budget. The exhaustive search (srift.optimize.exhaustive) is a
lazy best-first branch and bound over the same space with stronger bounds.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from srift.domain import Constraints, Objective
from srift.optimize.evaluate import Evaluated, Evaluations, objective_value, secondary_value
from srift.optimize.space import BatchPolicy, Candidate, Group, Groups, Problem

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
    refined: int = 0
    notes: list[str] = field(default_factory=list)


def linear_points(cand: Candidate) -> list[int]:
    """Per-VM batches in [min, max] between which compute(b) and `floor_s` are linear: the range ends, each
    curve breakpoint (scaled to the VM's devices) and its neighbours, where an extrapolated segment reaches
    zero (times are clamped at zero there)."""
    lo, hi, d = cand.min_vm_batch, cand.max_vm_batch, cand.devices
    points = {lo, hi}
    for curve in (cand.profile.forward, cand.profile.backward):
        xs, ys = curve.batches, curve.times_s
        for x in xs:
            points.update((x * d - 1, x * d, x * d + 1))
        if len(xs) >= 2:
            for (x0, x1), (y0, y1) in (
                ((xs[0], xs[1]), (ys[0], ys[1])),
                ((xs[-2], xs[-1]), (ys[-2], ys[-1])),
            ):
                slope = (y1 - y0) / (x1 - x0)
                if slope:
                    zero = (x0 - y0 / slope) * d
                    if math.isfinite(zero) and lo <= zero <= hi:
                        points.update((math.floor(zero), math.ceil(zero)))
    return sorted(b for b in points if lo <= b <= hi)


def cost_per_sample_floor(cand: Candidate) -> float:
    """The least price · compute seconds per sample over every per-VM batch the candidate may take.

    Between the `linear_points`, compute(b) = a + s·b, so compute(b)/b = s + a/b is monotone: its minimum
    over the integers of the range lies at one of the points. Remembered per candidate object (searches
    of one problem ask again and again).
    """
    found = _PER_SAMPLE.get(id(cand))
    if found is not None and found[0] is cand:
        return found[1]
    best = min(cand.floor_s(b) / b for b in linear_points(cand))
    value = max(best, 0.0) * cand.price_usd_per_s
    if len(_PER_SAMPLE) > 4096:
        _PER_SAMPLE.clear()
    _PER_SAMPLE[id(cand)] = (cand, value)
    return value


_PER_SAMPLE: dict[int, tuple[Candidate, float]] = {}


def max_batch_within(cand: Candidate, iteration_s: float) -> int:
    """The largest per-VM batch whose compute time is ≤ iteration_s (0 when none is): beyond it, any group
    of this type breaks an iteration-time limit on its own. Linear between the `linear_points`, so exact."""
    points = linear_points(cand)
    for u, v in zip(reversed(points[:-1]), reversed(points[1:]), strict=True):
        fv = cand.floor_s(v)
        if fv <= iteration_s:
            return v
        fu = cand.floor_s(u)
        if fu <= iteration_s:
            b = u + int((iteration_s - fu) * (v - u) / (fv - fu))
            while b + 1 < v and cand.floor_s(b + 1) <= iteration_s:
                b += 1
            while b > u and cand.floor_s(b) > iteration_s:
                b -= 1
            return b
    return points[0] if points and cand.floor_s(points[0]) <= iteration_s else 0


class Enumerator:
    """Depth-first enumeration of the configurations of a problem with pruning rules 1–4.

    Candidates are visited in canonical order; at each candidate a group is either the final one (it takes
    the exact remainder, as the batch policy allows) or a non-final group with a batch from the candidate's
    options, followed by later candidates. `emit(bound, groups)` receives each surviving configuration.
    """

    def __init__(self, problem: Problem, *, constraints: Constraints, floor_factor: float) -> None:
        self.problem = problem
        self.constraints = constraints
        self.factor = floor_factor
        self.incumbent = math.inf
        self.stats = SearchStats()
        policy = problem.batch_policy
        cands = problem.candidates
        g = constraints.global_batch
        self._options = [tuple((b, c.floor_s(b)) for b in c.batch_options(policy, upto=g)) for c in cands]
        self._finals: list[dict[int, float]] = [{} for _ in cands]
        self._eff = [cost_per_sample_floor(c) for c in cands]
        self._cap = [c.cap for c in cands]
        self._lo = [c.min_vm_batch for c in cands]
        self._price = [c.price_usd_per_s for c in cands]
        self._hi = [c.max_vm_batch for c in cands]
        if constraints.time_limit_s is not None and floor_factor > 0:
            per_iteration = constraints.time_limit_s / (constraints.iterations * floor_factor)
            self._hi = [
                min(c.max_vm_batch, max_batch_within(c, per_iteration)) // c.devices * c.devices
                for c in cands
            ]

    def run(
        self,
        emit: Emit,
        *,
        active: Sequence[int] | None = None,
        count_limit: int | None = None,
        require_all: bool = False,
        max_types: int | None = None,
        deadline: float | None = None,
        node_limit: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """Enumerate configurations of `active` candidates (all of them when `require_all`).

        Raises SearchStopped at `deadline` (`clock` seconds, perf_counter by default) or past `node_limit`
        nodes.
        """
        cands = self.problem.candidates
        act = sorted(active) if active is not None else list(range(len(cands)))
        if not act:
            return
        last = len(act)
        caps = [min(self._cap[i], count_limit) if count_limit else self._cap[i] for i in act]
        his = [self._hi[i] for i in act]
        los = [self._lo[i] for i in act]
        devs = [cands[i].devices for i in act]
        prices = [self._price[i] for i in act]
        opts = [self._options[i] for i in act]
        finals = [self._finals[i] for i in act]
        suffix = [0] * (last + 1)
        eff_rest = [math.inf] * (last + 1)
        for p in range(last - 1, -1, -1):
            suffix[p] = suffix[p + 1] + caps[p] * his[p]
            eff_rest[p] = min(eff_rest[p + 1], self._eff[act[p]])
        global_batch = self.constraints.global_batch
        if global_batch > suffix[0] or (require_all and any(h < lo for h, lo in zip(his, los, strict=True))):
            return
        pow2_final = self.problem.batch_policy is BatchPolicy.POW2
        scale = self.constraints.iterations * self.factor
        t_lim = self.constraints.time_limit_s if self.constraints.time_limit_s is not None else math.inf
        b_lim = self.constraints.budget_usd if self.constraints.budget_usd is not None else math.inf
        cost_obj = self.constraints.objective is Objective.MIN_COST
        least = scale * global_batch * eff_rest[0]
        if least > b_lim or (cost_obj and least >= self.incumbent):
            return
        type_limit = max_types if max_types is not None else last
        stats = self.stats
        max_vms = self.constraints.max_vms if self.constraints.max_vms is not None else 1 << 60
        max_gpus = self.constraints.max_gpus if self.constraints.max_gpus is not None else 1 << 60

        def dfs(
            pos: int, rem: int, floor: float, price: float, sumf: float, groups: Groups, vms: int, gpus: int
        ) -> None:
            stats.nodes += 1
            if stats.nodes & 511 == 0:
                if deadline is not None and clock() > deadline:
                    raise SearchStopped
                if node_limit is not None and stats.nodes > node_limit:
                    raise SearchStopped
            ntypes = len(groups)
            inc = self.incumbent
            for p in range(pos, last):
                if rem > suffix[p] or (require_all and p > pos):
                    break
                i = act[p]
                cap, lo, hi, price_i, cache, d = caps[p], los[p], his[p], prices[p], finals[p], devs[p]
                if hi < lo:
                    continue
                if not require_all or p == last - 1:
                    top = min(cap, rem // lo, max_vms - vms, (max_gpus - gpus) // d)
                    for n in range(max(1, -(-rem // hi)), top + 1):
                        pp = price + n * price_i
                        lb_c = scale * floor * pp
                        if lb_c > b_lim or (cost_obj and lb_c >= inc):
                            break
                        if rem % (n * d):
                            continue
                        b = rem // n
                        k = b // d
                        if pow2_final and k & (k - 1):
                            continue
                        f = cache.get(b)
                        if f is None:
                            f = cands[i].floor_s(b)
                            cache[b] = f
                        if f < floor:
                            f = floor
                        lb_t = scale * f
                        if lb_t > t_lim:
                            continue
                        lb_c = lb_t * pp
                        if lb_c > b_lim:
                            continue
                        lb = lb_c if cost_obj else lb_t
                        if lb >= inc:
                            continue
                        stats.emitted += 1
                        emit(lb, (*groups, (i, n, b)))
                if p + 1 < last and ntypes + 2 <= type_limit:
                    rest = suffix[p + 1]
                    e_next = eff_rest[p + 1]
                    for b, fb in opts[p]:
                        if b >= rem:
                            break
                        f = fb if fb > floor else floor
                        lb_t = scale * f
                        if lb_t > t_lim or (not cost_obj and lb_t >= inc):
                            continue
                        for n in range(1, cap + 1):
                            s = n * b
                            if s >= rem or vms + n > max_vms or gpus + n * d > max_gpus:
                                break
                            pp = price + n * price_i
                            lb_c = lb_t * pp
                            if lb_c > b_lim or (cost_obj and lb_c >= inc):
                                break
                            if rem - s > rest:
                                continue
                            sf = sumf + n * price_i * fb
                            lb_e = scale * (sf + (rem - s) * e_next)
                            if lb_e > b_lim or (cost_obj and lb_e >= inc):
                                continue
                            group: Group = (i, n, b)
                            dfs(p + 1, rem - s, f, pp, sf, (*groups, group), vms + n, gpus + n * d)
                            inc = self.incumbent

        dfs(0, global_batch, 0.0, 0.0, 0.0, (), 0, 0)


@dataclass
class SearchResult:
    """What a search found: the incumbent, how complete the search was, and its statistics.

    `coverage` (an exhaustive search's srift.optimize.exhaustive.Coverage) says what was left unexplored.
    """

    incumbent: Incumbent
    complete: bool
    stats: SearchStats
    notes: tuple[str, ...] = ()
    coverage: Any = None


def evaluate_best_first(
    pending: list[tuple[float, Groups]],
    *,
    evals: Evaluations,
    constraints: Constraints,
    incumbent: Incumbent,
    enumerator: Enumerator | None,
    deadline: float | None,
    clock: Callable[[], float] = time.perf_counter,
) -> bool:
    """Rule 5: evaluate `pending` best bound first, refining each bound once with the evaluator's tighter
    bound, until the next bound reaches the incumbent; returns False if stopped by the deadline."""
    heap = [(bound, 0, groups) for bound, groups in pending]
    heapq.heapify(heap)
    problem = evals.problem
    n_iter = constraints.iterations
    t_lim = constraints.time_limit_s if constraints.time_limit_s is not None else math.inf
    b_lim = constraints.budget_usd if constraints.budget_usd is not None else math.inf
    cost_obj = constraints.objective is Objective.MIN_COST
    while heap:
        bound, refined, groups = heapq.heappop(heap)
        if bound >= incumbent.value:
            return True
        if deadline is not None and clock() > deadline:
            return False
        if not refined and groups not in evals.records:
            iteration = evals.iteration_bound_s(groups)
            if iteration is not None:
                if enumerator is not None:
                    enumerator.stats.refined += 1
                lb_t = n_iter * iteration
                lb_c = lb_t * problem.usd_per_s(groups)
                if lb_t > t_lim or lb_c > b_lim:
                    continue
                tight = lb_c if cost_obj else lb_t
                if tight > bound:
                    heapq.heappush(heap, (tight, 1, groups))
                    continue
        item = evals.evaluate(groups, constraints=constraints)
        if incumbent.offer(item) and enumerator is not None:
            enumerator.incumbent = incumbent.value
    return True
