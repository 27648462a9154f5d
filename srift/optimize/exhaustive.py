"""Exhaustive search: lazy best-first branch and bound over partial configurations.

The space (srift.optimize.space) is a tree: a node holds the groups chosen so far, all of candidates before
position `pos` (canonical order), and the samples `rem` still to place; its children decide candidate
`pos`: left out, or given the final group (it takes `rem` exactly), or given a non-final group (then
`pos + 1` is decided next). Every configuration is reached once. Nodes are never enumerated up front: a
node's children are generated when the node is taken from a priority queue ordered by a lower bound of the
objective (cost for min_cost, total time for min_time) over its whole subtree, and only children whose bound
can beat the best feasible plan so far are queued. Once the smallest bound in the queue is ≥ that plan's
objective, no configuration anywhere can do better: the plan is proven optimal. Stopped earlier (solve
budget), the queue is exactly what was not covered, and its smallest bound says how far from optimal the
plan can be.

Bounds of a subtree (each only ever discards configurations that cannot be feasible or cannot beat the
incumbent strictly; they rest on the Evaluator contract in srift.optimize.evaluate):

1. Capacity. `rem` must fit on the later candidates: Σ cap · max per-VM batch, within max_vms/max_gpus.
   Under a time limit a type's max per-VM batch is cut to the largest whose compute alone fits.
2. Compute floor. t_iter ≥ floor_factor · the largest forward + backward of the groups chosen, and ≥ the
   least t at which the later candidates, each VM computing for at most t, can hold `rem` samples, renting
   no more than the budget allows at that t (capacity in time, `reach_time_s`, computed when the node is
   taken from the queue).
3. The evaluator's extension bound (when offered): a lower bound of t_iter for every fleet that keeps the
   groups chosen and adds others, up to the most VMs the subtree can hold (srift.sim.bounds: straggler-aware
   compute, the exchange's least time). Applied lazily, when a node with a new group is taken from the
   queue: if it raises the bound, the node is queued again at the raised bound.
4. Cost. cost ≥ N · t_iter · (price of the groups chosen + `rem` × the least price per sample any later
   candidate charges at its max per-VM batch), and ≥ N · (Σ count·price·floor of the groups + `rem` × the
   least price·compute seconds per sample of the later candidates).
5. Limits and incumbent. A subtree whose bound exceeds time_limit_s or budget_usd is infeasible; one whose
   bound is ≥ the incumbent's objective cannot improve on it. The limits are met at the request's
   confidence quantile, so they are compared with bounds of T_v, a time whose N-fold is below the
   quantile of the total time and whose N · rent-fold below that of the cost, with T_v ≥ t_iter and
   T_v ≥ μ_q · the compute of each VM of candidate q (`Evaluations.limit_scales`: μ_q = e^(min(z, 1) · s_q),
   s_q the least spread of the band's compute term for q's profile): every time-limit and budget test
   above runs on T_v with the compute scaled by μ (`relax_v`), while the incumbent is compared with the
   prediction's own bounds (the objective is the prediction, not a quantile). Without a band's promise,
   at the median, or without limits, μ = 1 and T_v is t_iter's bound.
6. Complete configurations get the evaluator's own bound for that fleet before they are simulated.
7. Rows of children. A node's non-final children (q, n, b) at one per-VM batch b are bounded together
   before any is queued: by the coupled bound of the node's groups and one VM of q at b (rule 3 through
   the VM count; a group of n VMs draws and releases no earlier than one), and per n by point bounds of
   a fleet holding a VM of q at b and ≥ vms + n + 1 VMs (the exchange's floor over those counts after
   b's compute; q alone, shared by its twins in other locations, then joined with the node's groups).
   Both point bounds do not decrease with n, so the first count they rule out ends the row. Under a
   budget the root's rows too (no groups: the coupled bound starts from one VM of q at b, and rule 8's
   shared rent is what lets it rule out a whole row there; without a budget each root row bound cost
   about what its children's own refinements do, measured on whole-catalog requests, so they are left
   to those).
8. Shared rent. Under a budget, the VMs a subtree adds share the rent the budget leaves at T_v, not each
   VM: in rule 3's coupling through V, a range of V whose bound t would stand is bounded again with the
   least time at which at most V − vms VMs renting together no more than budget / (N · max(T_v, t)) −
   the groups' rent hold `rem` samples (`SplitRelaxation.least_time_within_rent`), or ruled out when none
   can. Why: with a small largest batch a subtree spreads its samples over many VMs, and the cheapest
   fleets that do so are far slower than the fastest, dearest ones rule 3 alone allows each VM to be.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from srift.domain import Constraints, InstanceType, ModelProfile, Objective
from srift.optimize.evaluate import Evaluations
from srift.optimize.relax import SplitRelaxation
from srift.optimize.search import (
    Enumerator,
    Incumbent,
    SearchResult,
    SearchStats,
    SearchStopped,
    cost_per_sample_floor,
    evaluate_best_first,
)
from srift.optimize.space import BatchPolicy, Candidate, Group, Groups, Problem
from srift.sim.bounds import Extension

PARTIAL, PARTIAL_REFINED, COMPLETE, COMPLETE_REFINED = 0, 1, 2, 3
MAX_DIVES = 64
"""Depth-first dives for a feasible plan: while there is none, and then one every DIVE_EVERY nodes (a
complete fleet near the best bound, to prune with)."""
DIVE_EVERY = 128
SEED_SHARE = 0.3
"""The homogeneous seed may spend this share of the time left listing configurations."""
COUPLED_EXACT = 8
"""The coupled bound takes each count of added VMs up to this one by itself, then ranges growing by half."""
MAX_OPEN_NODES = 2_000_000
"""The queue's size limit (memory): beyond it the search stops and reports what it did not cover."""

Node = tuple[int, int, int, float, float, int, int, Groups, float, object, float]
"""(kind, pos, rem, usd_per_s of the groups, Σ count·price·floor, VMs, GPUs, groups, t_iter bound, state,
T_v bound): `state` is the evaluator's incremental bound state of the groups, or, while the last group is
new (its candidate is pos − 1) and not yet refined, of the groups before it; T_v is the time the limits are
compared with (rule 5), never below the t_iter bound."""


@dataclass
class Coverage:
    """What an exhaustive search covered: whether it closed, and otherwise what is left and how good it is."""

    closed: bool
    open_nodes: int = 0
    lower_bound: float | None = None
    examples: list[str] = field(default_factory=list)
    reason: str = ""


class BranchAndBound:
    """The lazy best-first search of the module docstring, for one problem and one set of constraints."""

    def __init__(
        self,
        problem: Problem,
        evals: Evaluations,
        *,
        constraints: Constraints,
        incumbent: Incumbent,
        deadline: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.problem = problem
        self.evals = evals
        self.c = constraints
        self.deadline = deadline
        self.clock = clock
        self.incumbent = incumbent
        self.stats = SearchStats()
        self.factor = evals.floor_factor
        cands = problem.candidates
        self.last = len(cands)
        c = constraints
        self.max_vms = c.max_vms if c.max_vms is not None else 1 << 60
        self.max_gpus = c.max_gpus if c.max_gpus is not None else 1 << 60
        self.t_lim = c.time_limit_s if c.time_limit_s is not None else math.inf
        self.b_lim = c.budget_usd if c.budget_usd is not None else math.inf
        self.cost_obj = c.objective is Objective.MIN_COST
        self.n_iter = c.iterations
        policy = problem.batch_policy
        self.pow2_final = policy is BatchPolicy.POW2
        self.cap = [x.cap for x in cands]
        self.d = [x.devices for x in cands]
        self.price = [x.price_usd_per_s for x in cands]
        self.finals: list[dict[int, float]] = [{} for _ in cands]
        self.dead: set[int] = set()
        self._located = [x.location for x in cands]
        self._only: dict[Groups, object] = {}
        self._twinned = dominated_locations(problem)
        self._aside: dict[int, tuple[int, float, float, object]] = {}
        self._profiles = tuple(x.profile for x in cands)
        self._eff = [cost_per_sample_floor(x) for x in cands]
        self.relax = SplitRelaxation(problem, factor=self.factor)
        self.mu = evals.limit_scales(c)
        self.scaled = any(m > 1.0 for m in self.mu)
        self.relax_v = (
            SplitRelaxation(problem, factor=self.factor, scales=self.mu) if self.scaled else self.relax
        )
        self._tight_for = math.nan
        self._tighten()
        self.heap: list[tuple[float, int, Node]] = []
        self.seq = 0
        self._recent: list[tuple[float, int, Node]] | None = None
        self._taken: set[int] = set()
        self._cuts: dict[tuple[Groups, int, int], int] = {}
        d_least = min((x.devices for x in cands), default=1)
        self._most_vms = min(self.max_vms, sum(self.cap), max(c.global_batch // d_least, 1))
        self._points: dict[tuple[int, int, int], float] = {}
        self._point_states: dict[tuple[int, int], object] = {}
        self._twin_of = _twins(problem)

    # -- bounds -------------------------------------------------------------------------------------------

    def _tighten(self) -> None:
        """Per-candidate limits for the current per-iteration time cap: time_limit_s / N and, under
        min_time, the incumbent's time / N (no VM of a better plan computes longer). Each type's max per-VM
        batch is cut to the largest whose compute fits (rule 1), and the suffix sums follow."""
        c, cands, n = self.c, self.problem.candidates, self.last
        self._tight_for = inc = self.incumbent.value
        hi = [min(x.max_vm_batch, c.global_batch) // x.devices * x.devices for x in cands]
        if self.factor > 0:
            if not self.cost_obj and inc < math.inf:
                per_iteration = inc / c.iterations
                hi = [min(h, self.relax.largest_batch_within(q, per_iteration)) for q, h in enumerate(hi)]
            if self.t_lim < math.inf:
                per_iteration = self.t_lim / c.iterations
                hi = [min(h, self.relax_v.largest_batch_within(q, per_iteration)) for q, h in enumerate(hi)]
        self._cut(hi)
        dead = self._set_aside(hi)
        if dead:
            self.dead.update(dead)
            self.stats.notes.append(f"set aside with proof: {', '.join(cands[q].name for q in dead)}")
        for q in self.dead:
            hi[q] = 0
        self.hi = hi
        policy = self.problem.batch_policy
        self.opts = [
            tuple((b, self.relax.compute_s(q, b)) for b in x.batch_options(policy, upto=h))
            for q, (x, h) in enumerate(zip(cands, hi, strict=True))
        ]
        self.cap_rest = [0] * (n + 1)
        self.vms_rest = [0] * (n + 1)
        self.eff_rest = [math.inf] * (n + 1)
        self.eff_rest_v = [math.inf] * (n + 1)
        self.ppm_rest = [math.inf] * (n + 1)
        self.dmin_rest = [1 << 60] * (n + 1)
        self.kmax_rest = [0] * (n + 1)
        self.himax_rest = [0] * (n + 1)
        self.price_min_rest = [math.inf] * (n + 1)
        self.later: list[tuple[InstanceType, ...]] = [()] * (n + 1)
        self.later_profiles: list[tuple[ModelProfile, ...]] = [()] * (n + 1)
        for p in range(n - 1, -1, -1):
            usable = hi[p] >= self.d[p]
            self.cap_rest[p] = self.cap_rest[p + 1] + (self.cap[p] * hi[p] if usable else 0)
            self.vms_rest[p] = self.vms_rest[p + 1] + (self.cap[p] if usable else 0)
            self.eff_rest[p] = min(self.eff_rest[p + 1], self.factor * self._eff[p] if usable else math.inf)
            self.eff_rest_v[p] = min(
                self.eff_rest_v[p + 1], self.mu[p] * self.factor * self._eff[p] if usable else math.inf
            )
            self.ppm_rest[p] = min(self.ppm_rest[p + 1], self.price[p] / hi[p] if usable else math.inf)
            self.dmin_rest[p] = min(self.dmin_rest[p + 1], self.d[p] if usable else 1 << 60)
            self.kmax_rest[p] = max(self.kmax_rest[p + 1], hi[p] // self.d[p] if usable else 0)
            self.himax_rest[p] = max(self.himax_rest[p + 1], hi[p] if usable else 0)
            self.price_min_rest[p] = min(self.price_min_rest[p + 1], self.price[p] if usable else math.inf)
            self.later[p] = ((cands[p].instance,) if usable else ()) + self.later[p + 1]
            self.later_profiles[p] = ((cands[p].profile,) if usable else ()) + self.later_profiles[p + 1]
        self._cut(hi)

    def _cut(self, hi: list[int]) -> None:
        """Both relaxations limited to per-VM batches ≤ hi."""
        self.relax.cut(hi)
        if self.relax_v is not self.relax:
            self.relax_v.cut(hi)

    def _set_aside(self, hi: list[int]) -> list[int]:
        """Candidates that no fleet holding one of their VMs can use to beat the incumbent or meet the
        limits (dominance with proof): per candidate, a lower bound of t_iter over all such fleets, coupled
        through the VM count V as in `_coupled_s` (V = 1: the candidate alone; V ≥ 2: the exchange with its
        network in it, and a VM holding G / V samples), then the time and rent bounds of the whole
        problem at that t_iter, and the rent of the candidate's own VM at that t_iter, the limits taken on
        T_v (rule 5: also ≥ the slowed compute of a VM holding G / V samples, and of the candidate's own
        VM). Each candidate's ranges of V are bounded once, in order, while one of these tests still
        fails the candidate (`_cannot_hold`): it is set aside only once every V is covered. A bound found
        under a looser incumbent stays a bound under a tighter one. Past the search's deadline no more
        candidates are judged."""
        inc = self.incumbent.value
        if self.factor <= 0 or not (math.isfinite(inc) or self.t_lim < math.inf or self.b_lim < math.inf):
            return []
        g, cands = self.c.global_batch, self.problem.candidates
        usable = [q for q in range(self.last) if hi[q] >= self.d[q] and q not in self.dead]
        if not usable:
            return []
        vmax = min(sum(self.cap[q] for q in usable), self.max_vms, g // min(self.d[q] for q in usable))
        profiles = tuple(self._profiles[q] for q in usable)
        dead = []
        for q in usable:
            if self._out_of_time():
                break
            progress = self._aside.get(q)
            if progress is None:
                state = self.evals.type_partial(
                    q,
                    least_compute_s=self.relax.least_compute_holding_s(q, 1, only=True) / self.factor,
                    forward_share=_forward_share(cands[q]),
                )
                if state is None:
                    return []
                best = best_v = math.inf
                if hi[q] >= g and cands[q].final_allowed(g, self.problem.batch_policy):
                    one = self.evals.iteration_bound_s(((q, 1, g),))
                    best = one if one is not None else 0.0
                    best_v = max(best, self.relax_v.compute_s(q, g))
                progress = self._aside[q] = (2, best, best_v, state)
            a, best, best_v, state = progress
            own_v = self.relax_v.least_compute_holding_s(q, 1, only=True)
            while a <= vmax and self._cannot_hold(q, best, max(best_v, own_v)):
                b = min(vmax, a if a <= COUPLED_EXACT else a + a // 2)
                compute = self.relax.least_compute_holding_s(0, -(-g // b))
                compute_v = self.relax_v.least_compute_holding_s(0, -(-g // b))
                if b <= COUPLED_EXACT:
                    compute = max(compute, self.relax.least_time_with_vms(0, g, b))
                    compute_v = max(compute_v, self.relax_v.least_time_with_vms(0, g, b))
                compute /= self.factor
                if math.isfinite(compute):
                    ext = Extension(min_nodes=a, max_nodes=b, min_compute_s=compute, later_profiles=profiles)
                    bound = self.evals.partial_bound_s(state, extension=ext)
                    best = min(best, bound)
                    best_v = min(best_v, max(bound, compute_v))
                a = b + 1
            self._aside[q] = (a, best, best_v, state)
            if self._cannot_hold(q, best, max(best_v, own_v)):
                dead.append(q)
        return dead

    def _cannot_hold(self, q: int, t: float, tv: float) -> bool:
        """Whether no fleet holding a VM of candidate q, whose iteration takes t or more and T_v (rule 5) tv
        or more, can meet the limits and beat the incumbent (`_may_beat`, and the rent of q's own VM)."""
        n = self.n_iter
        return (
            not self._may_beat(t, self.c.global_batch, tv=tv)
            or n * tv * self.price[q] > self.b_lim
            or (self.cost_obj and n * t * self.price[q] > self.incumbent.value)
        )

    def _may_beat(self, t: float, g: int, *, tv: float) -> bool:
        """Whether a fleet whose iteration takes t or more, and T_v (rule 5) tv or more, may meet the limits
        and beat the incumbent."""
        n, inc = self.n_iter, self.incumbent.value
        if n * tv > self.t_lim or (not self.cost_obj and n * t >= inc):
            return False
        if self.cost_obj and inc < math.inf:
            cost = n * self.relax.rent_bound(0, g, t=t, price=0.0)
            if cost >= inc:
                return False
            if self.b_lim < math.inf and not self.scaled:
                return cost <= self.b_lim
        if self.b_lim == math.inf:
            return True
        return n * self.relax_v.rent_bound(0, g, t=tv, price=0.0) <= self.b_lim

    def _bound(self, *, t: float, price: float, rem: int, pos: int, sumf: float) -> tuple[float, float]:
        """(total time bound, cost bound) of a subtree whose t_iter ≥ t."""
        total = self.n_iter * t
        cost = total * price
        if rem:
            cost = max(cost, self.n_iter * (sumf + rem * self.eff_rest[pos]))
            cost = max(cost, self.n_iter * self.relax.rent_bound(pos, rem, t=t, price=price))
        return total, cost

    def _judge(self, *, t: float, tv: float, price: float, rem: int, pos: int, sumf: float) -> float:
        """The objective bound of a subtree whose t_iter ≥ t and T_v ≥ tv (rule 5), or inf when it cannot
        meet the limits or beat the incumbent."""
        n, inc = self.n_iter, self.incumbent.value
        if n * tv > self.t_lim:
            return math.inf
        if not self.cost_obj:
            total = n * t
            if total >= inc:
                return math.inf
            if self.b_lim < math.inf and self._over_budget(tv, price=price, rem=rem, pos=pos, sumf=sumf):
                return math.inf
            return total
        if not self.scaled:
            _, cost = self._bound(t=t, price=price, rem=rem, pos=pos, sumf=sumf)
            return cost if cost < inc and cost <= self.b_lim else math.inf
        if self.b_lim < math.inf and self._over_budget(tv, price=price, rem=rem, pos=pos, sumf=sumf):
            return math.inf
        _, cost = self._bound(t=t, price=price, rem=rem, pos=pos, sumf=sumf)
        return cost if cost < inc else math.inf

    def _over_budget(self, tv: float, *, price: float, rem: int, pos: int, sumf: float) -> bool:
        """Whether every fleet of a subtree whose T_v ≥ tv costs more than the budget at the quantile:
        `_bound`'s cost on T_v and the compute scaled by the limit scales (each VM's ≤ T_v / μ)."""
        n, b_lim = self.n_iter, self.b_lim
        cost = n * tv * price
        if not rem or cost > b_lim:
            return cost > b_lim
        cost = max(cost, n * (sumf + rem * self.eff_rest_v[pos]))
        if cost > b_lim:
            return True
        return n * self.relax_v.rent_bound(pos, rem, t=tv, price=price) > b_lim

    # -- queue --------------------------------------------------------------------------------------------

    def _push(self, bound: float, node: Node) -> None:
        self.seq += 1
        item = (bound, self.seq, node)
        heapq.heappush(self.heap, item)
        if self._recent is not None:
            self._recent.append(item)

    def start(self) -> None:
        """Queue the root: nothing chosen, every sample to place."""
        g = self.c.global_batch
        if g > self.cap_rest[0]:
            return
        bound = self._judge(t=0.0, tv=0.0, price=0.0, rem=g, pos=0, sumf=0.0)
        if bound < math.inf:
            self._push(bound, (PARTIAL, 0, g, 0.0, 0.0, 0, 0, (), 0.0, None, 0.0))

    def refresh(self) -> None:
        """Tighten the per-candidate limits (and set candidates aside) when the incumbent has improved."""
        if self.incumbent.value != self._tight_for:
            self._tighten()

    def run(self, *, deadline: float | None, clock: Callable[[], float] = time.perf_counter) -> Coverage:
        """Take nodes best bound first until the bound closes, the queue empties, or `deadline` passes.

        While there is no feasible plan yet, and then every DIVE_EVERY nodes, up to MAX_DIVES dives go depth
        first from the best node, each step to the best child just generated, until a fleet is simulated:
        plans to prune with."""
        heap = self.heap
        inc = self.incumbent
        stats = self.stats
        dives = 0
        while heap:
            if heap[0][0] >= inc.value:
                return Coverage(closed=True)
            if inc.value != self._tight_for:
                self._tighten()
            stats.nodes += 1
            # The clock is read at every node: one node can take tens of milliseconds (its children's row
            # bounds), so reading it every 64th let a 0.1 s budget run for seconds.
            if deadline is not None and clock() > deadline:
                return self._coverage("the solve budget ran out")
            if len(heap) > MAX_OPEN_NODES:
                return self._coverage(f"the queue reached {MAX_OPEN_NODES} open subtrees")
            bound, seq, node = heapq.heappop(heap)
            if seq in self._taken:
                self._taken.discard(seq)
                continue
            if dives < MAX_DIVES and (inc.best is None or stats.nodes % DIVE_EVERY == 0):
                dives += 1
                self._dive(bound, node, deadline=deadline, clock=clock)
            else:
                self._process(bound, node)
        return Coverage(closed=True)

    def _process(self, bound: float, node: Node) -> None:
        kind = node[0]
        if kind == PARTIAL:
            self._refine_partial(bound, node)
        elif kind == PARTIAL_REFINED:
            self._expand(node)
        elif kind == COMPLETE:
            self._refine_complete(bound, node)
        else:
            self.stats.emitted += 1
            self.incumbent.offer(self.evals.evaluate(node[7], constraints=self.c))

    def _dive(self, bound: float, node: Node, *, deadline: float | None, clock: Callable[[], float]) -> None:
        """Depth first from `node`, each step to the best of the children it just queued (they stay queued
        for the best-first search, marked taken), until a fleet is simulated or nothing is left below."""
        evaluated, emitted = len(self.evals), self.stats.emitted
        while True:
            self._recent = []
            self._process(bound, node)
            children, self._recent = self._recent, None
            if not children or len(self.evals) > evaluated or self.stats.emitted > emitted:
                return
            if deadline is not None and clock() > deadline:
                return
            bound, seq, node = min(children)
            self._taken.add(seq)

    def _coverage(self, reason: str) -> Coverage:
        ahead = [x for x in self.heap if x[0] < self.incumbent.value and x[1] not in self._taken]
        ahead.sort()
        examples = [self._describe(node) for _, _, node in ahead[:3]]
        low = ahead[0][0] if ahead else None
        return Coverage(
            closed=False, open_nodes=len(ahead), lower_bound=low, examples=examples, reason=reason
        )

    def _describe(self, node: Node) -> str:
        pos, rem, groups = node[1], node[2], node[7]
        label = self.problem.config(groups).label() if groups else "nothing yet"
        if node[0] >= COMPLETE:
            return label
        names = self.problem.candidates
        later = f"{names[pos].name}…" if pos < self.last else "none"
        return f"{label} + {rem} samples on types from {later}"

    # -- node handling ------------------------------------------------------------------------------------

    def _refine_partial(self, bound: float, node: Node) -> None:
        _, pos, rem, price, sumf, vms, gpus, groups, t, state, tv = node
        fresh = bool(groups) and groups[-1][0] == pos - 1
        if fresh and self._cuts:
            q, n, b = groups[-1]
            cut = self._cuts.get((groups[:-1], q, b))
            if cut is not None and n >= cut:
                return
        stop = self.t_lim / self.n_iter
        if not self.cost_obj:
            stop = min(stop, self.incumbent.value / self.n_iter)
        tt = self.relax.reach_time_s(
            pos, rem, price=price, t0=t, stop=stop, budget_usd=self.b_lim, iterations=self.n_iter
        )
        if tt == math.inf:
            return
        tv = max(tv, tt)
        if self.scaled:
            tv = self.relax_v.reach_time_s(
                pos,
                rem,
                price=price,
                t0=tv,
                stop=self.t_lim / self.n_iter,
                budget_usd=self.b_lim,
                iterations=self.n_iter,
            )
            if tv == math.inf:
                return
        if fresh:
            state = self.evals.grow(state, groups[-1])
        if state is not None:
            self.stats.refined += 1
            extension = self._extension(pos, rem, vms=vms, price=price, tv=tv, later=self.later[pos])
            tt = max(tt, self.evals.partial_bound_s(state, extension=extension))
            tv = max(tv, tt)
            tight = self._judge(t=tt, tv=tv, price=price, rem=rem, pos=pos, sumf=sumf)
            if fresh and tight == math.inf:
                self._cut_siblings(state, groups, pos=pos, vms=vms, price=price)
            elif tight < math.inf:
                tt = self._coupled_s(
                    state, pos, rem, vms=vms, price=price, t=tt, tv=tv, stop_s=self._stop_s(price)
                )
                tv = max(tv, tt)
                self._stay_if_crossing_cannot_win(
                    state, groups, extension, pos=pos, rem=rem, price=price, tv=tv
                )
                if self._twinned and self._in_twinned(groups):
                    # its fleets that stay put have a twin at least as good elsewhere: only crossings count
                    tt = max(tt, self.evals.partial_bound_s(state, extension=replace(extension, spans=True)))
                    tv = max(tv, tt)
        tight = self._judge(t=tt, tv=tv, price=price, rem=rem, pos=pos, sumf=sumf)
        if tight == math.inf:
            return
        refined: Node = (PARTIAL_REFINED, pos, rem, price, sumf, vms, gpus, groups, tt, state, tv)
        if tight > bound:
            self._push(tight, refined)
        else:
            self._expand(refined)

    def _stop_s(self, price: float) -> float:
        """The t_iter from which a subtree whose groups rent `price` per second is pruned whatever else it
        holds: the time limit, the budget at that rent, and under min_time the incumbent."""
        stop = self.t_lim
        if price > 0:
            stop = min(stop, self.b_lim / price)
        if not self.cost_obj:
            stop = min(stop, self.incumbent.value)
        return stop / self.n_iter

    def _cut_siblings(self, state: object, groups: Groups, *, pos: int, vms: int, price: float) -> None:
        """Prune, with one bound, the siblings of a pruned subtree that give its last group more VMs.

        The subtree keeps `groups`, whose last (q, n, b) is new, and places `rem` > 0 more samples on
        candidates from `pos` on, so its fleets hold the groups' `vms` VMs plus at least one of a later
        type, at most `_most_vms` in all. The evaluator's extension bound M(n) over those fleets, without
        the compute of the VMs added, does not decrease with n at the same b (srift.sim.bounds: the
        group's slowest draw and its layers' release grow with its count, since the largest of n normals
        from the same uniforms grows with n; fewer VM counts remain, so the fastest network rate over them
        is no faster), nor does the rent per second of the groups. So when N · M(n) exceeds the time
        limit, or with that rent the budget, or cannot beat the incumbent, no sibling with n' ≥ n VMs at
        batch b can either (the incumbent only improves): they are cut without their bounds
        (`_refine_partial` checks `_cuts` first)."""
        q, n, b = groups[-1]
        if pos >= self.last or vms >= self._most_vms:
            return
        ext = Extension(min_nodes=vms + 1, max_nodes=self._most_vms, later=self.later[pos])
        total = self.n_iter * self.evals.partial_bound_s(state, extension=ext)
        cost = total * price
        tight = cost if self.cost_obj else total
        if total > self.t_lim or cost > self.b_lim or tight >= self.incumbent.value:
            key = (groups[:-1], q, b)
            self._cuts[key] = min(n, self._cuts.get(key, n))

    def _stay_if_crossing_cannot_win(
        self,
        state: object,
        groups: Groups,
        extension: Extension,
        *,
        pos: int,
        rem: int,
        price: float,
        tv: float,
    ) -> None:
        """Symmetry of locations: when every group so far lies in one location and no fleet that extends
        them into another location (bounded over the fastest link between locations) can beat the plan or
        meet the limits, the subtree keeps to that location (`_stay`)."""
        where = {self._located[i] for i, _, _ in groups}
        if len(where) != 1 or None in where or self._stay(groups) is not None:
            return
        (home,) = where
        if all(self._located[q] in (home, None) for q in range(pos, self.last)):
            return
        t = self.evals.partial_bound_s(state, extension=replace(extension, spans=True))
        if self._judge(t=t, tv=max(t, tv), price=price, rem=rem, pos=pos, sumf=0.0) == math.inf:
            self._only[groups] = home

    def _in_twinned(self, groups: Groups) -> bool:
        """Whether every group lies in one location another dominates (`dominated_locations`)."""
        where = {self._located[i] for i, _, _ in groups}
        return len(where) == 1 and next(iter(where)) in self._twinned

    def _stay(self, groups: Groups) -> object | None:
        """The location a subtree must keep to (its own or an ancestor's decision), or None."""
        for k in range(len(groups), 0, -1):
            home = self._only.get(groups[:k])
            if home is not None:
                return home
        return None

    def _extension(
        self, pos: int, rem: int, *, vms: int, price: float, tv: float, later: tuple[InstanceType, ...]
    ) -> Extension:
        """The fleets a subtree can reach: `rem` samples on candidates from `pos` on, adding a VM of one of
        `later`, within the caps and, at T_v ≥ tv (rule 5), the budget."""
        extra = min(self.vms_rest[pos], rem // self.dmin_rest[pos], self.max_vms - vms)
        money = self._money(price, tv)
        if money < math.inf:
            extra = min(extra, int(money / self.price_min_rest[pos]))
        compute = 0.0
        if later and self.factor > 0 and extra > 0:
            compute = self.relax.least_compute_holding_s(pos, -(-rem // extra), max_price=money) / self.factor
        return Extension(
            min_nodes=vms + -(-rem // self.himax_rest[pos]),
            max_nodes=vms + max(extra, 0),
            later=later,
            min_compute_s=compute if math.isfinite(compute) else 0.0,
            later_profiles=self.later_profiles[pos] if later else (),
        )

    def _money(self, price: float, tv: float) -> float:
        """The most rent per second the VMs added to groups renting `price` may cost when T_v ≥ tv and the
        fleet keeps to the budget at the quantile (N · T_v · rent ≤ budget); inf without a budget."""
        if self.b_lim < math.inf and tv > 0:
            return self.b_lim / (self.n_iter * tv) - price
        return math.inf

    def _coupled_s(
        self,
        state: object,
        pos: int,
        rem: int,
        *,
        vms: int,
        price: float,
        t: float,
        tv: float,
        stop_s: float = math.inf,
    ) -> float:
        """A lower bound of t_iter over the subtree that couples its two halves through the VM count V:
        the VMs added to hold `rem` samples are V − vms, so one of them holds ≥ rem / (V − vms) samples and
        computes at least that long (`least_compute_holding_s`; for up to COUPLED_EXACT added VMs, at least
        the least time that many VMs hold `rem` in, `least_time_with_vms`), while the exchange of V VMs
        takes at least the evaluator's extension bound for V. V is split into ranges growing by half; each
        range takes the compute of its largest V and the exchange of any V in it. Ranges stop once the bound
        can no longer beat `t` (already known), or once the exchange alone over the V left, from a on
        (`Extension(min_nodes=a, max_nodes=hi)`, which does not decrease with a: fewer counts, no faster
        rate), reaches `stop_s`, the t_iter from which the subtree is pruned anyway: that exchange bound
        then stands for every range left, so the bound returned is the same below `stop_s`. Only fleets
        within the budget at the quantile count (`_money` at T_v ≥ tv); a range whose bound would stand is
        bounded again with the rent its added VMs share (rule 8)."""
        base = self._extension(pos, rem, vms=vms, price=price, tv=tv, later=self.later[pos])
        money = self._money(price, tv)
        lo, hi = base.min_nodes, base.max_nodes
        if hi < lo or lo < vms + 1 or self.factor <= 0:
            return t
        best = math.inf
        a = lo
        while a <= hi:
            if a > lo and stop_s < math.inf:
                alone = self.evals.partial_bound_s(
                    state, extension=Extension(min_nodes=a, max_nodes=hi, later=base.later)
                )
                if alone >= stop_s:
                    best = min(best, alone)
                    break
            b = min(hi, a if a - vms <= COUPLED_EXACT else a + a // 2)
            compute = self.relax.least_compute_holding_s(pos, -(-rem // (b - vms)), max_price=money)
            if b - vms <= COUPLED_EXACT:
                compute = max(compute, self.relax.least_time_with_vms(pos, rem, b - vms, max_price=money))
            compute /= self.factor
            if math.isfinite(compute):
                ext = Extension(
                    min_nodes=a,
                    max_nodes=b,
                    later=base.later,
                    min_compute_s=max(compute, base.min_compute_s),
                    later_profiles=base.later_profiles,
                )
                bound = self.evals.partial_bound_s(state, extension=ext)
                if self.b_lim < math.inf and bound < min(best, stop_s):
                    # the range could set the bound: the rent its VMs share, within the budget at T_v ≥
                    # this bound, may hold them back more
                    rent_s = self.relax.least_time_within_rent(
                        pos, rem, b - vms, usd_per_s=self._money(price, max(tv, bound))
                    )
                    rent_s /= self.factor
                    if rent_s == math.inf:
                        bound = math.inf
                    elif rent_s > ext.min_compute_s:
                        ext = replace(ext, min_compute_s=rent_s)
                        bound = self.evals.partial_bound_s(state, extension=ext)
                best = min(best, bound)
                if best <= t:
                    return t
            a = b + 1
        return max(t, best)

    def _refine_complete(self, bound: float, node: Node) -> None:
        groups, t, price, state, tv = node[7], node[8], node[3], node[9], node[10]
        state = self.evals.grow(state, groups[-1])
        if state is not None:
            self.stats.refined += 1
            t = max(t, self.evals.partial_bound_s(state))
        tight = self._judge(t=t, tv=max(tv, t), price=price, rem=0, pos=self.last, sumf=0.0)
        if tight == math.inf:
            return
        refined: Node = (COMPLETE_REFINED, *node[1:8], t, None, max(tv, t))
        if tight > bound:
            self._push(tight, refined)
        else:
            self.stats.emitted += 1
            self.incumbent.offer(self.evals.evaluate(groups, constraints=self.c))

    def _expand(self, node: Node) -> None:
        """Queue the children of a partial node whose bounds can still beat the incumbent and meet the
        limits (T_v, rule 5): candidate `pos` left out, or given the final group, or given a non-final
        group."""
        _, q, rem, price, sumf, vms, gpus, groups, t, state, tv = node
        if q + 1 < self.last and rem <= self.cap_rest[q + 1]:
            bound = self._judge(t=t, tv=tv, price=price, rem=rem, pos=q + 1, sumf=sumf)
            if bound < math.inf:
                self._push(bound, (PARTIAL, q + 1, rem, price, sumf, vms, gpus, groups, t, state, tv))
        if self.hi[q] < self.d[q]:
            return
        if groups and self._only:
            home = self._stay(groups)
            if home is not None and self._located[q] != home:
                return
        extension = None
        if state is not None:
            extension = self._extension(
                q, rem, vms=vms, price=price, tv=tv, later=(self.problem.candidates[q].instance,)
            )
            t = max(t, self.evals.partial_bound_s(state, extension=extension))
            tv = max(tv, t)
            if self._judge(t=t, tv=tv, price=price + self.price[q], rem=0, pos=q, sumf=sumf) == math.inf:
                return
        node = (PARTIAL_REFINED, q, rem, price, sumf, vms, gpus, groups, t, state, tv)
        self._queue_finals(node)
        if q + 1 < self.last:
            self._queue_groups(node, extension)

    def _queue_finals(self, node: Node) -> None:
        """Queue the children of `node` that give candidate `pos` the final group (it takes `rem`)."""
        _, q, rem, price, sumf, vms, gpus, groups, t, state, tv = node
        n_iter, t_lim, b_lim, inc = self.n_iter, self.t_lim, self.b_lim, self.incumbent.value
        cap, d, hi, pq, mu = self.cap[q], self.d[q], self.hi[q], self.price[q], self.mu[q]
        cache = self.finals[q]
        floor_s = self.problem.candidates[q].floor_s
        top = min(cap, rem // d, self.max_vms - vms, (self.max_gpus - gpus) // d)
        for n in range(max(1, -(-rem // hi)), top + 1):
            if rem % (n * d):
                continue
            b = rem // n
            k = b // d
            if self.pow2_final and k & (k - 1):
                continue
            f = cache.get(b)
            if f is None:
                f = cache[b] = self.factor * floor_s(b)
            tt = t if t > f else f
            ttv = max(tv, tt, mu * f)
            total_v = n_iter * ttv
            if total_v > t_lim:
                continue
            pp = price + n * pq
            if total_v * pp > b_lim:
                continue
            bound = n_iter * tt * pp if self.cost_obj else n_iter * tt
            if bound >= inc:
                continue
            group: Group = (q, n, b)
            if self._twinned and self._in_twinned((*groups, group)):
                continue
            self._push(
                bound,
                (COMPLETE, q + 1, 0, pp, sumf, vms + n, gpus + n * d, (*groups, group), tt, state, ttv),
            )

    def _queue_groups(self, node: Node, extension: Extension | None) -> None:
        """Queue the children of `node` that give candidate `pos` a non-final group (q, n, b): each bounded
        by its compute, by the point bounds of a fleet holding a VM of q at b and ≥ vms + n + 1 VMs
        (`_point_bound_s` of q alone, then `_joined_bound_s` with the node's groups, within `extension`,
        the node's fleets that add a VM of q; both do not decrease with n, so the first n they rule out
        ends the counts at that b), and by the rent."""
        _, q, rem, price, sumf, vms, gpus, groups, t, state, tv = node
        n_iter, t_lim, b_lim, cost_obj = self.n_iter, self.t_lim, self.b_lim, self.cost_obj
        inc = self.incumbent.value
        cap, d, pq, mu = self.cap[q], self.d[q], self.price[q], self.mu[q]
        vms_room, gpus_room = self.max_vms - vms, self.max_gpus - gpus
        rest, ppm = self.cap_rest[q + 1], self.ppm_rest[q + 1]
        eff, eff_v = self.eff_rest[q + 1], self.eff_rest_v[q + 1]
        scaled, budget = self.scaled, b_lim < math.inf
        for b, fb in self.opts[q]:
            if b >= rem:
                break
            tb = t if t > fb else fb
            tbv = max(tv, tb, mu * fb)
            if n_iter * tbv > t_lim or (not cost_obj and n_iter * tb >= inc):
                continue
            if 0 < b < rem and (state is not None or (not groups and budget)) and not self._out_of_time():
                # rows are only a tighter bound: past the deadline the children are queued without it
                row = self._row_bound_s(node, b=b, t=tb, tv=tbv)
                tb, tbv = max(tb, row), max(tbv, row)
                if self._rules_out(tb, tbv, price=price + pq):
                    continue
            for n in range(1, cap + 1):
                s = n * b
                if s >= rem or n > vms_room or n * d > gpus_room:
                    break
                pp = price + n * pq
                point = self._point_bound_s(q, b, vms + n + 1)
                tt, ttv = max(tb, point), max(tbv, point)
                if self._rules_out(tt, ttv, price=pp):
                    break
                if state is not None and extension is not None:
                    point = self._joined_bound_s(state, extension, q=q, b=b, nodes=vms + n + 1)
                    tt, ttv = max(tt, point), max(ttv, point)
                    if self._rules_out(tt, ttv, price=pp):
                        break
                total, total_v = n_iter * tt, n_iter * ttv
                r = rem - s
                if r > rest:
                    continue
                sf = sumf + n * pq * fb
                cost = cost_v = 0.0
                if cost_obj or (budget and not scaled):
                    cost = max(total * (pp + r * ppm), n_iter * (sf + r * eff))
                    if (cost_obj and cost >= inc) or (not scaled and cost > b_lim):
                        continue
                if budget and scaled:
                    cost_v = max(total_v * (pp + r * ppm), n_iter * (sf + r * eff_v))
                    if cost_v > b_lim:
                        continue
                if cost_obj or (budget and not scaled):
                    cost = max(cost, n_iter * (tt * pp + self.relax.cheap_rent(q + 1, r, tt)))
                    if (cost_obj and cost >= inc) or (not scaled and cost > b_lim):
                        continue
                if budget and scaled:
                    cost_v = max(cost_v, n_iter * (ttv * pp + self.relax_v.cheap_rent(q + 1, r, ttv)))
                    if cost_v > b_lim:
                        continue
                group = (q, n, b)
                self._push(
                    cost if cost_obj else total,
                    (PARTIAL, q + 1, r, pp, sf, vms + n, gpus + n * d, (*groups, group), tt, state, ttv),
                )

    def _out_of_time(self) -> bool:
        """Whether the search's deadline has passed (optional bounding work then stops; the search's own
        loop stops at the deadline it is run to)."""
        return self.deadline is not None and self.clock() > self.deadline

    def _row_bound_s(self, node: Node, *, b: int, t: float, tv: float) -> float:
        """A lower bound of t_iter over all the non-final children (q, n, b), n ≥ 1, of `node` at one
        per-VM batch b: `_coupled_s` of the node's groups and one VM of q at b (its state grown by (q, 1,
        b)), placing the other samples on candidates from q on. Why it holds for every n: a group of n VMs
        of q at b releases its layers and draws its slowest no earlier than one VM does (the largest of n
        draws from the same uniforms grows with n, srift.sim.bounds), and its other n − 1 VMs are among
        those the coupling places; the result is never below `t`. At the root (no groups, asked only
        under a budget: rule 7) the state starts from that one VM."""
        _, q, rem, price, _, vms, _, _, _, state, _ = node
        one = self.evals.grow(state, (q, 1, b))
        if one is None:
            return t
        price_s = price + self.price[q]
        return self._coupled_s(
            one, q, rem - b, vms=vms + 1, price=price_s, t=t, tv=tv, stop_s=self._stop_s(price_s)
        )

    def _rules_out(self, t: float, tv: float, *, price: float) -> bool:
        """Whether every fleet whose t_iter ≥ t, T_v ≥ tv (rule 5) and rent ≥ `price` per second misses a
        limit or cannot beat the incumbent."""
        n_iter, inc = self.n_iter, self.incumbent.value
        if n_iter * tv > self.t_lim or n_iter * tv * price > self.b_lim:
            return True
        return n_iter * t * price >= inc if self.cost_obj else n_iter * t >= inc

    def _joined_bound_s(self, state: object, extension: Extension, *, q: int, b: int, nodes: int) -> float:
        """A lower bound of t_iter over the fleets of `extension` (a node's groups, whose bound state is
        `state`, with a VM of candidate q added) that hold `nodes` VMs or more and whose VM of q takes
        per-VM batch b, so computes at least b's compute floor (relax's table over the floor factor,
        rounded down). 0 when that leaves no count to bound. It does not decrease with `nodes`."""
        lo, hi = max(extension.min_nodes, nodes), extension.max_nodes
        if hi < lo or self.factor <= 0:
            return 0.0
        ext = Extension(
            min_nodes=lo,
            max_nodes=hi,
            later=extension.later,
            min_compute_s=self.relax.compute_s(q, b) / self.factor,
            later_profiles=(self._profiles[q],),
        )
        return self.evals.partial_bound_s(state, extension=ext)

    def _point_bound_s(self, q: int, b: int, nodes: int) -> float:
        """A lower bound of t_iter over every fleet that holds a VM of candidate q at per-VM batch b and
        `nodes` or more VMs in all (0 when the evaluator offers no bounds).

        Why: the search's many-small-VM subtrees (n VMs of a one-GPU type at batch b, more to place) were
        each refined with their own partial fleet; this bound is one number per (type, b, V), shared by
        the type's twins (same instance type and profile: the same type in other locations), so whole rows
        of (n, b) children are pruned in `_queue_groups` before any is refined. It is the evaluator's bound
        of a member standing for any VM of q (`type_partial`, position-free: no straggler draws) computing
        at least b's compute floor (relax's table over the floor factor, rounded down), extended to between
        `nodes` and the most VMs any fleet of the problem holds: the exchange's floor of ≥ `nodes` VMs on
        q's network (a stage runs at the slowest type present) after its compute. It does not decrease with
        `nodes` (fewer VM counts, no faster rate; srift.sim.bounds)."""
        twin = self._twin_of[q]
        key = (twin, b, nodes)
        found = self._points.get(key)
        if found is not None:
            return found
        state = self._point_states.get((twin, b), _MISSING)
        if state is _MISSING:
            state = None
            if self.factor > 0:
                state = self.evals.type_partial(
                    twin,
                    least_compute_s=self.relax.compute_s(twin, b) / self.factor,
                    forward_share=_forward_share(self.problem.candidates[twin]),
                )
            self._point_states[(twin, b)] = state
        found = 0.0
        if state is not None:
            ext = Extension(min_nodes=nodes, max_nodes=max(nodes, self._most_vms))
            found = self.evals.partial_bound_s(state, extension=ext)
        self._points[key] = found
        return found


def dominated_locations(problem: Problem) -> frozenset[object]:
    """Locations whose fleets all have a twin at least as good in another location (symmetry of locations).

    Location B is dominated by A when A offers every (type, market) B does with the same profile, at a
    price no higher, a cap no lower and, with interruptions priced in, interruptions no worse
    (`_interrupts_no_more`). A fleet within B then has a twin within A (the same VMs and batches) that the
    simulator predicts the same time for (its draws do not depend on the location, and one location pays no
    egress), for no more rent and no more expected time or cost: never worse, so fleets within B need not
    be listed. Of two equal locations the one later in order is the dominated one.
    """
    by_location: dict[object, dict[tuple[str, str], Candidate]] = {}
    for cand in problem.candidates:
        if cand.location is None:
            return frozenset()
        by_location.setdefault(cand.location, {})[(cand.name, cand.market.value)] = cand
    order = sorted(by_location, key=lambda loc: getattr(loc, "key", str(loc)))
    priced = problem.spot is not None
    out: set[object] = set()
    for b in order:
        for a in order:
            if a == b or a in out:
                continue
            mine, theirs = by_location[b], by_location[a]
            if all(_no_better(c, theirs.get(key), priced=priced) for key, c in mine.items()):
                strictly = any(_better(theirs[key], c) for key, c in mine.items())
                if strictly or order.index(a) < order.index(b):
                    out.add(b)
                    break
    return frozenset(out)


def _no_better(cand: Candidate, twin: Candidate | None, *, priced: bool) -> bool:
    """Whether `twin` (the same type elsewhere) is at least as good as `cand` in every respect."""
    return (
        twin is not None
        and twin.profile is cand.profile
        and twin.offer.instance == cand.offer.instance
        and twin.price_usd_per_s <= cand.price_usd_per_s
        and twin.cap >= cand.cap
        and (
            _interrupts_no_more(twin, cand)
            if priced
            else twin.interruptions_per_s <= cand.interruptions_per_s
        )
    )


def _interrupts_no_more(twin: Candidate, cand: Candidate) -> bool:
    """Whether every fleet of `twin`'s location is interrupted no worse than its counterpart of `cand`'s, as
    the closed form prices them (srift.optimize.spot.expected_run).

    Band rates alone (no trace laws on either side): a fleet of them is exponential at Λ = Σ count·λ, whose
    expected time and cost rise with Λ, so a lower λ is never worse. Trace laws are comparable only when
    they are the same offer's: the closed form prices a law's shape and capacity gaps, not only 1 / E[up]
    (the candidate's band rate is that mean rate), and even a law whose times to interruption are longer
    everywhere is not always better under checkpointing (an up time of 0.99 checkpoint intervals wastes
    more than one of 0.9); so neither a lower mean rate nor a traced law against a band is a dominance."""
    mine = cand.spot_offer if cand.interruptions_per_s > 0 else None
    theirs = twin.spot_offer if twin.interruptions_per_s > 0 else None
    if mine is None and theirs is None:
        return twin.interruptions_per_s <= cand.interruptions_per_s
    return (
        mine is not None
        and theirs is not None
        and theirs.model is mine.model
        and (theirs.provider, theirs.region, theirs.instance_type)
        == (mine.provider, mine.region, mine.instance_type)
        and twin.interruptions_per_s == cand.interruptions_per_s
    )


def _better(twin: Candidate, cand: Candidate) -> bool:
    return (
        twin.price_usd_per_s < cand.price_usd_per_s
        or twin.interruptions_per_s < cand.interruptions_per_s
        or twin.cap > cand.cap
    )


def set_aside(
    problem: Problem, evals: Evaluations, *, constraints: Constraints, incumbent: Incumbent
) -> frozenset[int]:
    """Candidates that no fleet holding one of their VMs can use to beat `incumbent` or meet the limits
    (`BranchAndBound._set_aside`, with the capacity cuts of rule 1)."""
    search = BranchAndBound(problem, evals, constraints=constraints, incumbent=incumbent)
    return frozenset(search.dead)


_MISSING: object = object()


def _twins(problem: Problem) -> list[int]:
    """Per candidate, the first candidate with the same instance type and profile (itself when none is
    earlier): they share the point bounds, which depend on nothing else."""
    first: dict[tuple[int, int], int] = {}
    out = []
    for q, cand in enumerate(problem.candidates):
        out.append(first.setdefault((id(cand.instance), id(cand.profile)), q))
    return out


def _forward_share(cand: Candidate) -> float:
    """The least share of forward in forward + backward over the candidate's per-GPU batches (the ratio of
    two linear pieces is monotone on each, so its least value is at a piece end)."""
    profile = cand.profile
    points = sorted({1, profile.max_batch, *profile.forward.batches, *profile.backward.batches})
    least = 1.0
    for k in points:
        if 1 <= k <= profile.max_batch:
            fw, bw = profile.forward.time_s(k), profile.backward.time_s(k)
            if fw + bw > 0:
                least = min(least, fw / (fw + bw))
    return max(least, 0.0)


class Helper(Protocol):
    """What improves the incumbent between turns of the branch and bound (eager search)."""

    def __call__(self, search: BranchAndBound, *, until: float) -> bool:
        """Work until `until` (clock seconds); False once there is nothing left to try."""
        ...


FIRST_SHARE = 0.3
PROOF_SHARE = 0.2
HELPER_SHARE = 0.05
"""With a helper, the branch and bound first runs for FIRST_SHARE of the time to its deadline; then the
helper and the branch and bound take turns of HELPER_SHARE and PROOF_SHARE of that span (product choices:
a search that closes early never pays for the helper)."""


def alternate(
    search: BranchAndBound,
    helper: Helper | None,
    *,
    deadline: float | None,
    first_share: float = FIRST_SHARE,
    proof_share: float = PROOF_SHARE,
    helper_share: float = HELPER_SHARE,
    clock: Callable[[], float] = time.perf_counter,
    stop_with_helper: bool = False,
) -> Coverage:
    """Run `search` to `deadline`, in turns with `helper` (when given and there is a deadline) on the same
    incumbent; returns as soon as the search closes, or (`stop_with_helper`) once the helper is done."""
    if helper is None or deadline is None:
        return search.run(deadline=deadline, clock=clock)
    start = clock()
    span = max(deadline - start, 0.0)
    coverage = search.run(deadline=min(deadline, start + first_share * span), clock=clock)
    while not coverage.closed and clock() < deadline:
        if helper is not None and not helper(search, until=min(deadline, clock() + helper_share * span)):
            helper = None
            if stop_with_helper:
                return coverage
        turn = deadline if helper is None else min(deadline, clock() + proof_share * span)
        coverage = search.run(deadline=turn, clock=clock)
    return coverage


def solve_exhaustive(
    problem: Problem,
    evals: Evaluations,
    *,
    constraints: Constraints | None = None,
    deadline: float | None = None,
    incumbent: Incumbent | None = None,
    helper: Helper | None = None,
) -> SearchResult:
    """Branch and bound over the whole space (module docstring); `complete` when the bound closed. With a
    `helper` (eager search) it takes turns with the branch and bound to find better plans to prune with.

    When stopped at `deadline`, the result's `coverage` says how many subtrees were left, the least
    objective any of them could reach, and examples; the notes say the same in words.
    """
    constraints = constraints or problem.constraints
    incumbent = incumbent or Incumbent(constraints.objective)
    seed_homogeneous(problem, evals, constraints=constraints, incumbent=incumbent, deadline=deadline)
    search = BranchAndBound(problem, evals, constraints=constraints, incumbent=incumbent, deadline=deadline)
    search.start()
    coverage = alternate(search, helper, deadline=deadline)
    notes: tuple[str, ...] = ()
    if not coverage.closed:
        notes = (not_covered(coverage, incumbent=incumbent, objective=constraints.objective),)
    return SearchResult(incumbent, coverage.closed, search.stats, notes, coverage=coverage)


def seed_homogeneous(
    problem: Problem,
    evals: Evaluations,
    *,
    constraints: Constraints,
    incumbent: Incumbent,
    deadline: float | None,
) -> None:
    """Give the incumbent a first plan cheaply: the best configuration of one type alone (best first, with
    the eager search's bounds), so that the branch and bound prunes from its first node. The listing gets
    at most SEED_SHARE of the time to `deadline`; at least one configuration is simulated."""
    enum = Enumerator(problem, constraints=constraints, floor_factor=evals.floor_factor)
    enum.incumbent = incumbent.value
    found: list[tuple[float, Groups]] = []
    listing = (
        None if deadline is None else time.perf_counter() + SEED_SHARE * (deadline - time.perf_counter())
    )
    with contextlib.suppress(SearchStopped):
        enum.run(lambda bound, groups: found.append((bound, groups)), max_types=1, deadline=listing)
    if found and incumbent.best is None:
        found.sort()
        for _, groups in found:
            item = evals.evaluate(groups, constraints=constraints)
            if incumbent.offer(item) or (deadline is not None and time.perf_counter() > deadline):
                break
    evaluate_best_first(
        found, evals=evals, constraints=constraints, incumbent=incumbent, enumerator=enum, deadline=deadline
    )


def not_covered(coverage: Coverage, *, incumbent: Incumbent, objective: Objective) -> str:
    """The words for what an exhaustive search stopped short of covering."""
    what = "cost" if objective is Objective.MIN_COST else "total time"

    def fmt(value: float) -> str:
        return f"${value:.4g}" if objective is Objective.MIN_COST else f"{value:.4g} s"

    low = coverage.lower_bound
    text = (
        f"exhaustive search stopped ({coverage.reason}) before covering the space: "
        f"{coverage.open_nodes} subtree(s) not explored"
    )
    if coverage.examples:
        text += f" (e.g. {'; '.join(coverage.examples)})"
    if low is not None:
        text += f", none of which can reach a {what} below {fmt(low)}"
        if incumbent.best is not None and math.isfinite(incumbent.value) and incumbent.value > 0:
            gap = max(incumbent.value - low, 0.0) / incumbent.value
            text += f": the plan is at most {100 * gap:.1f} % from the optimum"
    return text
