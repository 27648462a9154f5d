"""Plan quality: does the optimizer's choice train fastest (or cheapest) when every option is run for real?

A small planning problem on the testbed — one model, a global batch, every type with a cap of two VMs —
is solved by the real optimizer (`srift.services.plans.prepare` + `srift.optimize.optimize`, exhaustive).
Then EVERY configuration of the problem's space, plus the CAP and TAP baselines (Srift §5.2), is trained
for real with DDP, and each choice is ranked among the measured outcomes:

- `min_time` (the primary problem): rank by measured iteration time; the choice's ratio to the best.
- `min_cost` with a deadline, solved at `CONFIDENCE` (the plan's p90 time must meet it): the deadline is
  2 × the fastest *predicted* time (fixed before measuring); a configuration meets it only if every one of
  its measured repeats does; rank by measured cost among those; the choice's ratio to the cheapest.

Cost is measured time × the configuration's price (spot prices of the testbed catalog).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from srift.domain import MarketChoice, Objective, Plan, SearchMode
from srift.domain.requests import PlanQuery
from srift.validation.context import Context, types_in_scope
from srift.validation.matrix import Fleet, Group
from srift.validation.steps import CaseInputs, finish_case, predict_case

if TYPE_CHECKING:
    from srift.optimize.space import Groups, Problem
    from srift.validation.ddp import AgentPool

GLOBAL_BATCH = 64
CAP_PER_TYPE = 2
ITERATIONS = 1000
DEADLINE_FACTOR = 2.0
CONFIDENCE = 0.9
"""The min_cost problem's limits are checked at this quantile (plan requests' default)."""

Runner = Callable[["Context", "AgentPool", str, Fleet, float], dict[str, Any]]


def enumerate_space(problem: Problem) -> list[Groups]:
    """Every configuration of the problem's space (small problems only: brute force over group choices)."""
    options: list[list[tuple[int, int, int] | None]] = []
    for i, cand in enumerate(problem.candidates):
        batches = range(cand.min_vm_batch, cand.max_vm_batch + 1)
        options.append([None] + [(i, n, b) for n in range(1, cand.cap + 1) for b in batches])
    out = []
    for combo in itertools.product(*options):
        groups = tuple(g for g in combo if g is not None)
        if groups and problem.in_space(groups):
            out.append(groups)
    return out


def fleet_of(problem: Problem, groups: Groups) -> Fleet:
    return Fleet(tuple(Group(problem.candidates[i].name, n, b) for i, n, b in groups))


def _request(ctx: Context, model: str, objective: Objective, time_limit_s: float | None) -> PlanQuery:
    types = _plan_types(ctx)
    return PlanQuery(
        profile_ids=tuple(ctx.profile_ids[(model, t)] for t in types),
        global_batch=GLOBAL_BATCH,
        iterations=ITERATIONS,
        objective=objective,
        time_limit_s=time_limit_s,
        provider="testbed",
        region="local",
        market=MarketChoice.ANY,
        availability={t: CAP_PER_TYPE for t in types},
        mode=SearchMode.EXHAUSTIVE,
        solve_budget_s=10.0,
        batch_policy=ctx.effort.plan_batch_policy,
        confidence=CONFIDENCE,
        seed=ctx.options.seed,
    )


def _plan_types(ctx: Context) -> list[str]:
    return types_in_scope(ctx)


def _solve(
    ctx: Context, model: str, objective: Objective, time_limit_s: float | None
) -> tuple[Plan, Problem]:
    """The service's problem (prepare) solved by the optimizer, exactly as `POST /v1/plans` solves it."""
    from srift.db.session import transaction
    from srift.optimize.solver import optimize
    from srift.services.plans import prepare

    with transaction(ctx.url) as session:
        prepared = prepare(
            session=session, settings=ctx.settings, query=_request(ctx, model, objective, time_limit_s)
        )
    return optimize(prepared.problem, prepared.evaluator, prepared.options), prepared.problem


def run_plan_quality(ctx: Context, pool: AgentPool, *, runner: Runner) -> dict[str, Any]:
    """Solve, run every configuration for real, and rank the optimizer's and the baselines' choices."""
    from srift.optimize.baselines import Policy, baseline_groups

    model = ctx.options.resolved_plan_model()
    types = _plan_types(ctx)
    cores = sum(CAP_PER_TYPE * ctx.spec.type_named(t).cpu_cores for t in types)
    if cores > ctx.options.resolved_max_cores() + 1e-9:
        ctx.log(f"plan quality: {CAP_PER_TYPE} VMs of each type need {cores:g} cores; skipped")
        return {"skipped": f"{CAP_PER_TYPE} VMs of each of {types} need {cores:g} cores of quota"}
    ctx.log(f"plan quality: {model}, global batch {GLOBAL_BATCH}, ≤ {CAP_PER_TYPE} VMs of each of {types}")
    plan_time, problem = _solve(ctx, model, Objective.MIN_TIME, None)
    space = enumerate_space(problem)
    fleets = {fleet_of(problem, g).label(): (fleet_of(problem, g), g) for g in space}
    for policy in (Policy.CAP, Policy.TAP):
        groups = baseline_groups(problem, policy)
        if groups is not None:
            f = fleet_of(problem, groups)
            fleets.setdefault(f.label(), (f, groups))
    rows: dict[str, dict[str, Any]] = {}
    for label, (fleet, groups) in fleets.items():
        predicted = predict_case(CaseInputs.of(ctx), model, fleet)
        rows[label] = {
            "fleet": label,
            "hosts": fleet.hosts,
            "batches": list(fleet.batches),
            "usd_per_s": problem.usd_per_s(groups),
            "predicted": predicted,
            "runs": [],
        }
    fastest_pred = min(r["predicted"]["iteration_s"] for r in rows.values())
    deadline_s = DEADLINE_FACTOR * fastest_pred * ITERATIONS
    from srift.optimize.solver import PlanInfeasible

    try:
        plan_cost: Plan | None = _solve(ctx, model, Objective.MIN_COST, deadline_s)[0]
    except PlanInfeasible as exc:
        ctx.log(f"plan quality: no plan meets the deadline at p{100 * CONFIDENCE:g}: {exc.detail}")
        plan_cost = None
    total = len(rows) * ctx.effort.repeats
    done = 0
    for _ in range(ctx.effort.repeats):
        for label, (fleet, _groups) in fleets.items():
            ctx.progress("plan runs", done, total)
            rows[label]["runs"].append(
                runner(ctx, pool, model, fleet, rows[label]["predicted"]["iteration_s"])
            )
            done += 1
    ctx.progress("plan runs", total, total)
    for row in rows.values():
        finish_case(row)
        if row["measured_iteration_s"] is not None:
            row["measured_cost_usd"] = row["measured_iteration_s"] * ITERATIONS * row["usd_per_s"]
            row["predicted_cost_usd"] = row["predicted"]["iteration_s"] * ITERATIONS * row["usd_per_s"]
    cap_groups = baseline_groups(problem, Policy.CAP)
    tap_groups = baseline_groups(problem, Policy.TAP)
    choices = {
        "cap": fleet_of(problem, cap_groups).label() if cap_groups else None,
        "tap": fleet_of(problem, tap_groups).label() if tap_groups else None,
    }
    primary = _rank(
        rows,
        {"srift": _label(problem, plan_time), **choices},
        value=lambda r: r["measured_iteration_s"],
        feasible=lambda r: True,
    )
    secondary = _rank(
        rows,
        {"srift": _label(problem, plan_cost) if plan_cost is not None else None, **choices},
        value=lambda r: r["measured_cost_usd"],
        feasible=lambda r: meets_in_every_repeat(r, deadline_s),
    )
    if plan_cost is not None:
        c = plan_cost.predicted
        secondary["srift"] |= {
            "confidence": CONFIDENCE,
            "predicted_total_time_s": c.total_time_s,
            "predicted_total_time_at_confidence_s": c.total_time_quantile_s(CONFIDENCE),
            "p_meets_deadline": c.p_time_within(deadline_s),
        }
    return {
        "model": model,
        "global_batch": GLOBAL_BATCH,
        "iterations": ITERATIONS,
        "cap_per_type": CAP_PER_TYPE,
        "types": types,
        "batch_policy": ctx.effort.plan_batch_policy,
        "configurations": len(rows),
        "primary": {"objective": "min_time", **primary},
        "secondary": {"objective": "min_cost", "time_limit_s": deadline_s, **secondary},
        "rows": sorted(rows.values(), key=lambda r: r["measured_iteration_s"] or float("inf")),
        "solve_time_s": plan_time.solve_time_s,
        "predicted_rank_correlation": _spearman(
            [r["predicted"]["iteration_s"] for r in rows.values() if r["measured_iteration_s"] is not None],
            [r["measured_iteration_s"] for r in rows.values() if r["measured_iteration_s"] is not None],
        ),
    }


def meets_in_every_repeat(row: dict[str, Any], deadline_s: float) -> bool:
    """Every repeat ran, and each one's mean iteration time × ITERATIONS is within the deadline."""
    runs = row["runs"]
    return bool(runs) and all(r.get("ok") and r["mean_iter_s"] * ITERATIONS <= deadline_s for r in runs)


def _label(problem: Problem, plan: Any) -> str:
    groups = []
    names = [c.name for c in problem.candidates]
    for choice in plan.config.choices:
        groups.append((names.index(choice.instance_type), choice.count, choice.batch))
    return fleet_of(problem, tuple(groups)).label()


def _rank(
    rows: dict[str, dict[str, Any]],
    choices: dict[str, str | None],
    *,
    value: Callable[[dict[str, Any]], float],
    feasible: Callable[[dict[str, Any]], bool],
) -> dict[str, Any]:
    measured = [r for r in rows.values() if r["measured_iteration_s"] is not None]
    ok = sorted((r for r in measured if feasible(r)), key=value)
    best = ok[0] if ok else None
    out: dict[str, Any] = {
        "best": best["fleet"] if best else None,
        "best_value": value(best) if best else None,
        "feasible_configurations": len(ok),
    }
    for name, label in choices.items():
        row = rows.get(label) if label else None
        if row is None or row["measured_iteration_s"] is None or best is None:
            out[name] = {"fleet": label, "rank": None, "ratio_to_best": None, "feasible": None}
            continue
        is_ok = feasible(row)
        rank = 1 + sum(1 for r in ok if value(r) < value(row)) if is_ok else None
        out[name] = {
            "fleet": label,
            "rank": rank,
            "of": len(ok),
            "ratio_to_best": value(row) / value(best),
            "feasible": is_ok,
            "measured_iteration_s": row["measured_iteration_s"],
            "predicted_iteration_s": row["predicted"]["iteration_s"],
        }
    return out


def _spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation of predicted and measured times (ties get average ranks)."""
    if len(a) < 3:
        return None

    def ranks(xs: Sequence[float]) -> list[float]:
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        out = [0.0] * len(xs)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return out

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else None
