"""Tiny profiles, offers and a fast analytic evaluator for optimizer tests (the search code is real)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import date

from srift.domain import (
    Breakdown,
    ComputeCurve,
    Constraints,
    FleetMember,
    InstanceType,
    Interconnect,
    LayerGrad,
    Market,
    ModelProfile,
    Objective,
    Offer,
    Prediction,
)
from srift.optimize.evaluate import Evaluator, meets
from srift.optimize.space import BatchPolicy, Candidate, Groups, Problem, is_pow2
from srift.sim.result import with_band


def instance(
    name: str, *, gpus: int = 1, gpu_model: str | None = None, network_gbps: float = 10.0
) -> InstanceType:
    return InstanceType(
        provider="aws",
        name=name,
        gpu_model=gpu_model or f"G-{name}",
        gpu_count=gpus,
        gpu_memory_gib=16.0,
        vcpus=8 * gpus,
        memory_gib=32.0 * gpus,
        network_gbps=network_gbps,
        network_burst=False,
        interconnect=Interconnect.PCIE if gpus > 1 else Interconnect.NONE,
        interconnect_gbps=100.0,
        efa=False,
    )


def profile(
    accelerator: str,
    *,
    max_batch: int,
    per_sample_s: float,
    fixed_s: float = 0.01,
    grad_bytes: int = 40_000_000,
    cv: float = 0.04,
) -> ModelProfile:
    third = max(max_batch // 3, 2)
    points = sorted({1, third, max(third + 1, 2 * max_batch // 3), max(max_batch, third + 2)})
    fw = tuple(fixed_s / 3 + per_sample_s / 3 * b for b in points)
    bw = tuple(2 * fixed_s / 3 + 2 * per_sample_s / 3 * b for b in points)
    layers = tuple(
        LayerGrad(name=f"l{k}", grad_bytes=grad_bytes // 4, ready_frac=r)
        for k, r in enumerate((0.2, 0.5, 0.8, 1.0))
    )
    return ModelProfile(
        model="tiny",
        accelerator=accelerator,
        max_batch=max_batch,
        forward=ComputeCurve(tuple(points), fw),
        backward=ComputeCurve(tuple(points), bw),
        layers=layers,
        straggler_cv=cv,
    )


def offer(inst: InstanceType, price_usd_per_hr: float, market: Market = Market.SPOT) -> Offer:
    return Offer(
        instance=inst,
        region="us-east-1",
        market=market,
        price_usd_per_hr=price_usd_per_hr,
        source="test",
        as_of=date(2026, 1, 1),
    )


class FastEvaluator:
    """Analytic stand-in for the simulator: slowest compute, a straggler term, exposed ring allreduce, a
    heterogeneity penalty. It honours the Evaluator contract with floor_factor 1."""

    floor_factor = 1.0

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        self.calls += 1
        nodes = sum(m.count for m in fleet)
        world = sum(m.count * m.instance.devices for m in fleet)
        fw = max(m.profile.forward.time_s(m.per_device_batch) for m in fleet)
        bw = max(m.profile.backward.time_s(m.per_device_batch) for m in fleet)
        compute = max(m.profile.compute_s(m.per_device_batch) for m in fleet)
        cv = max(m.profile.straggler_cv for m in fleet)
        wait = compute * cv * math.sqrt(2 * math.log(nodes)) if nodes > 1 else 0.0
        grad = max(m.profile.total_grad_bytes for m in fleet)
        net = min(m.instance.network_gbps for m in fleet)
        comm = 0.0
        if world > 1:
            comm = 2 * (world - 1) / world * grad * 8 / (net * 1e9) * (1 + 0.1 * (len(fleet) - 1))
        exposed = max(0.0, 0.2 * bw + comm - bw) if nodes > 1 else 0.0
        it = compute + wait + exposed
        total = it * iterations
        bd = Breakdown(
            forward_s=fw,
            backward_s=bw,
            compute_s=compute,
            straggler_wait_s=wait,
            exposed_intra_s=0.0,
            exposed_network_s=exposed,
            communication_s=comm,
            granularity=compute / comm if comm else 1e9,
        )
        return Prediction(it, it * 0.97, it, it * 1.05, total, total * usd_per_s, bd, ("fast",))


def brute_force(
    problem: Problem,
    evaluator: Evaluator,
    constraints: Constraints | None = None,
    *,
    large: bool = False,
    configs: Sequence[Groups] | None = None,
) -> float | None:
    """The best objective over EVERY configuration of the space: naive recursion over each type's (count,
    batch) or absence, keeping combinations whose samples sum to the global batch; no pruning but
    `all_configs`' (a branch that cannot reach the global batch).
    `large` lists the space by `split_configs` (the final group's batch by division) for bigger problems;
    `configs` is the whole listing of `all_configs(problem)` where the caller already made it."""
    c = constraints or problem.constraints
    if configs is None:
        configs = split_configs(problem) if large else all_configs(problem)
    return best_meeting(predictions(problem, evaluator, configs, c), c)


def best_meeting(preds: Iterable[Prediction], constraints: Constraints) -> float | None:
    """The best objective among `preds` that meet `constraints`' limits (None: none does): brute force's
    last step, for callers that already hold every configuration's prediction."""
    c = constraints
    best: float | None = None
    for pred in preds:
        if not meets(pred, c):
            continue
        value = pred.cost_usd if c.objective is Objective.MIN_COST else pred.total_time_s
        best = value if best is None else min(best, value)
    return best


def predictions(
    problem: Problem, evaluator: Evaluator, configs: Sequence[Groups], constraints: Constraints | None = None
) -> Iterator[Prediction]:
    """Each configuration's prediction, one simulation each, as the search scores it: with its band where the
    evaluator gives one and the constraints' confidence asks for a quantile."""
    c = constraints or problem.constraints
    band = getattr(evaluator, "band", None)
    for groups in configs:
        fleet = problem.fleet(groups)
        pred = evaluator(fleet, iterations=c.iterations, usd_per_s=problem.usd_per_s(groups))
        if band is not None and c.confidence > 0.5:
            pred = with_band(pred, band(fleet, iterations=c.iterations))
        yield pred


class _Enough(Exception):
    """Raised inside `all_configs` once it has listed more configurations than asked for."""


def all_configs(problem: Problem, *, most: int | None = None) -> list[Groups]:
    """Every configuration of the space (brute force, checked against the policy rule independently).

    With `most`, the listing stops after `most + 1` configurations: callers that only want spaces of at most
    `most` configurations learn that a space is larger without listing all of it (a two-region space can
    hold millions). A branch is left once the types after it cannot bring its samples up to the global
    batch even at their caps and largest batches (it lists nothing: every configuration sums to it)."""
    g = problem.constraints.global_batch
    cands = problem.candidates
    out: list[Groups] = []
    # most_after[i]: the samples types i.. can add at most (each at its cap, each VM at its largest batch).
    most_after = [0] * (len(cands) + 1)
    for i in reversed(range(len(cands))):
        most_after[i] = most_after[i + 1] + cands[i].cap * cands[i].max_vm_batch

    # Each type's cap and VM batches, read once (the listing visits millions of branches).
    ranges = [(c.cap, c.min_vm_batch, c.max_vm_batch) for c in cands]
    last = len(cands) - 1

    def found(groups: Groups) -> None:
        if groups and _allowed(problem, groups):
            out.append(groups)
            if most is not None and len(out) > most:
                raise _Enough

    def rec(i: int, total: int, groups: Groups) -> None:
        if total + most_after[i] < g:
            return
        cap, low, high = ranges[i]
        if i == last:
            # The last type leaves the samples as they are or brings them to g exactly: n VMs of
            # (g - total) / n samples each, for each n whose share is a whole batch within its range.
            if total == g:
                found(groups)
            rest = g - total
            for n in range(1, cap + 1):
                if rest % n == 0 and low <= rest // n <= high:
                    found((*groups, (i, n, rest // n)))
            return
        rec(i + 1, total, groups)
        for n in range(1, cap + 1):
            for b in range(low, min(high, (g - total) // n) + 1):
                rec(i + 1, total + n * b, (*groups, (i, n, b)))

    with contextlib.suppress(_Enough):
        rec(0, 0, ())
    return out


def split_configs(problem: Problem) -> list[Groups]:
    """Every configuration of the space, listed by giving the last group present the remainder (no bounds)."""
    cands = problem.candidates
    out: list[Groups] = []

    def rec(i: int, rem: int, groups: Groups) -> None:
        if i == len(cands):
            return
        rec(i + 1, rem, groups)
        cand = cands[i]
        for n in range(1, cand.cap + 1):
            if rem % n == 0 and cand.final_allowed(rem // n, problem.batch_policy):
                out.append((*groups, (i, n, rem // n)))
            for b in cand.batch_options(problem.batch_policy):
                if n * b < rem:
                    rec(i + 1, rem - n * b, (*groups, (i, n, b)))

    rec(0, problem.constraints.global_batch, ())
    return out


def _allowed(problem: Problem, groups: Groups) -> bool:
    """The batch policy, checked per GPU: every GPU of a VM gets the same whole number of samples."""
    policy = problem.batch_policy
    c = problem.constraints
    for pos, (i, _, b) in enumerate(groups):
        gpus = problem.candidates[i].devices
        if b % gpus:
            return False
        last = pos == len(groups) - 1
        if policy is BatchPolicy.POW2 and not is_pow2(b // gpus):
            return False
        if policy is BatchPolicy.POW2_SPLIT and not last and not is_pow2(b // gpus):
            return False
    if c.max_vms is not None and sum(n for _, n, _ in groups) > c.max_vms:
        return False
    return c.max_gpus is None or sum(n * problem.candidates[i].devices for i, n, _ in groups) <= c.max_gpus


def candidate(
    name: str,
    *,
    gpus: int,
    max_batch: int,
    per_sample_s: float,
    price: float,
    cap: int,
    network_gbps: float = 10.0,
    market: Market = Market.SPOT,
) -> Candidate:
    inst = instance(name, gpus=gpus, network_gbps=network_gbps)
    return Candidate(
        offer=offer(inst, price, market),
        profile=profile(inst.accelerator, max_batch=max_batch, per_sample_s=per_sample_s),
        cap=cap,
    )
