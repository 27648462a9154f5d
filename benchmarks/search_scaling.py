"""Exhaustive search, eager search and brute force side by side on growing catalogs: time and plan quality.

Catalogs grow from 1 to 3, 10 and all us-east-1 GPU types with a profile, in one region or two (us-east-1
and us-west-2: each region's offers are separate candidates, named `<type>/<region>`). Problems are
prepared as POST /v1/plans prepares them (shipped catalog in a throwaway SQLite database, the active
bandwidth model, the simulator); compute profiles are SYNTHETIC ResNet50 profiles (srift.optimize.synthetic)
on every GPU model. Two requests per catalog: min_cost within a deadline, and min_time within a budget,
limits checked at the median (confidence 0.5), as brute force checks them.
Brute force simulates every configuration of the space (counted exactly first) when there are at most
--brute-limit of them. Plus issue #23's request (srift/testing/plans.py), the case this was built for.

    python -m benchmarks.search_scaling [--brute-limit 20000] [--exhaustive-budget 10] [--eager-budget 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks._report import write_section
from srift.testing.plans import issue23_request, shipped_settings, solve

if TYPE_CHECKING:
    from srift.optimize.solver import SolveOptions
    from srift.optimize.space import Problem

ACCELERATORS = ["T4", "M60", "K80", "V100", "A10G", "L4", "L40S", "A100", "H100", "H200"]
REQUESTS: dict[str, dict[str, Any]] = {
    "min_cost, 1 h": {"objective": "min_cost", "time_limit_s": 3600},
    "min_time, $20": {"objective": "min_time", "budget_usd": 20},
}
BASE: dict[str, Any] = {
    "global_batch": 1024,
    "iterations": 5000,
    "provider": "aws",
    "market": "spot",
    "max_count_per_type": 8,
    "confidence": 0.5,
}
"""Limits checked against the prediction itself (the median): brute force judges feasibility the same way."""


def _problem(
    settings: Any, ids: list[int], *, regions: list[str], types: list[str] | None, req: dict[str, Any]
) -> tuple[Problem, Any, SolveOptions | None]:
    """The optimizer's problem for one catalog and request; two regions become distinct candidates."""
    from srift.api.schemas.plans import PlanRequest
    from srift.db.session import transaction
    from srift.optimize.space import Candidate, Problem
    from srift.services.plans import prepare

    cands: list[Candidate] = []
    evaluator = options = None
    for region in regions:
        body = {**BASE, **req, "profile_ids": ids, "region": region}
        if types is not None:
            body["availability"] = dict.fromkeys(types, BASE["max_count_per_type"])
        query = PlanRequest.model_validate(body).to_domain()
        with transaction(settings.resolved_database_url) as session:
            prepared = prepare(session=session, settings=settings, query=query)
        evaluator, options = prepared.evaluator, prepared.options
        for c in prepared.problem.candidates:
            if len(regions) > 1:
                inst = replace(c.offer.instance, name=f"{c.name}/{region}")
                c = Candidate(offer=replace(c.offer, instance=inst), profile=c.profile, cap=c.cap)
            cands.append(c)
    cands.sort(key=lambda c: (c.name, c.market.value))
    constraints = prepared.problem.constraints
    return Problem(tuple(cands), constraints, prepared.problem.batch_policy), evaluator, options


def count_configs(problem: Any) -> int:
    """The exact number of configurations of the space (the last type present takes the remainder)."""
    g: int = problem.constraints.global_batch
    policy = problem.batch_policy
    ways = [0] * (g + 1)  # configurations of the candidates after the current one summing to r
    for cand in reversed(problem.candidates):
        new = list(ways)
        for n in range(1, cand.cap + 1):
            for r in range(n, g + 1, n):
                if r % n == 0 and cand.final_allowed(r // n, policy):
                    new[r] += 1
            for b in cand.batch_options(policy):
                s = n * b
                if s >= g:
                    break
                for r in range(s + 1, g + 1):
                    new[r] += ways[r - s]
        ways = new
    return ways[g]


def brute_force(problem: Any, evaluator: Any) -> tuple[float | None, float, int]:
    """(best objective, seconds, configurations simulated) over every configuration of the space."""
    from srift.domain import Objective
    from srift.optimize.evaluate import meets

    c = problem.constraints
    start = time.perf_counter()
    best: float | None = None
    count = 0

    def rec(i: int, rem: int, groups: tuple[Any, ...]) -> None:
        nonlocal best, count
        if i == len(problem.candidates):
            return
        rec(i + 1, rem, groups)
        cand = problem.candidates[i]
        for n in range(1, cand.cap + 1):
            if rem % n == 0 and cand.final_allowed(rem // n, problem.batch_policy):
                full = (*groups, (i, n, rem // n))
                count += 1
                pred = evaluator(
                    problem.fleet(full), iterations=c.iterations, usd_per_s=problem.usd_per_s(full)
                )
                if meets(pred, c):
                    value = pred.cost_usd if c.objective is Objective.MIN_COST else pred.total_time_s
                    best = value if best is None else min(best, value)
            for b in cand.batch_options(problem.batch_policy):
                if n * b < rem:
                    rec(i + 1, rem - n * b, (*groups, (i, n, b)))

    rec(0, c.global_batch, ())
    return best, time.perf_counter() - start, count


def _run(problem: Any, evaluator_type: Any, model: Any, mode: str, budget: float) -> tuple[Any, float]:
    from srift.domain import SearchMode
    from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize

    evaluator = evaluator_type(bandwidth=model)
    start = time.perf_counter()
    try:
        plan = optimize(problem, evaluator, SolveOptions(mode=SearchMode(mode), solve_budget_s=budget))
    except PlanInfeasible:
        plan = None
    return plan, time.perf_counter() - start


def _value(plan: Any, objective: str) -> float | None:
    if plan is None:
        return None
    value: float = plan.predicted.cost_usd if objective == "min_cost" else plan.predicted.total_time_s
    return value


def _fmt(value: float | None, objective: str) -> str:
    if value is None:
        return "none"
    return f"${value:.3f}" if objective == "min_cost" else f"{value:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brute-limit", type=int, default=20_000)
    parser.add_argument("--exhaustive-budget", type=float, default=10.0)
    parser.add_argument("--eager-budget", type=float, default=2.0)
    args = parser.parse_args(argv)
    from srift.db.session import dispose_engines, transaction
    from srift.optimize.synthetic import synthetic_profile
    from srift.profiling.store import save_profile

    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = shipped_settings(Path(tmp))
        with transaction(settings.resolved_database_url) as session:
            ids = [
                save_profile(session=session, profile=synthetic_profile("resnet50", a)) for a in ACCELERATORS
            ]
        everything, _, _ = _problem(
            settings, ids, regions=["us-east-1"], types=None, req=REQUESTS["min_cost, 1 h"]
        )
        by_price = sorted(everything.candidates, key=lambda c: (c.offer.price_usd_per_hr, c.name))
        names = [c.name for c in by_price]
        subsets: dict[str, list[str] | None] = {
            "1": [names[len(names) // 2]],
            "3": [names[i * len(names) // 3] for i in range(3)],
            "10": [names[i * len(names) // 10] for i in range(10)],
            f"all ({len(names)})": None,
        }
        for label, types in subsets.items():
            for regions in (["us-east-1"], ["us-east-1", "us-west-2"]):
                for req_name, req in REQUESTS.items():
                    problem, evaluator, _ = _problem(settings, ids, regions=regions, types=types, req=req)
                    model = evaluator.bandwidth.model
                    rows.append(_row(problem, model, label, len(regions), req_name, req["objective"], args))
                    print(rows[-1], flush=True)
        issue_plan_rows = _issue23(settings, args)
    dispose_engines()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    body = "\n".join(
        [
            "Exhaustive search (lazy best-first branch and bound), eager search and brute force on growing "
            "catalogs of us-east-1 GPU types (spot; 1, 3, 10 types spread over the price range, then all "
            "with a profile), in one region or two (us-west-2's offers as separate candidates). Synthetic "
            "ResNet50 profiles on every GPU model (not measurements); global batch 1024, 5000 iterations, "
            "limits at the median (confidence 0.5), at "
            f"most 8 VMs per type. Exhaustive search: solve budget {args.exhaustive_budget:g} s; eager: "
            f"{args.eager_budget:g} s. Quality: the plan's objective over the best known (brute force, or a "
            "proven-optimal exhaustive plan); 1.000 is optimal. Brute force simulates every configuration "
            f"when the space has at most {args.brute_limit} of them. Load average (1/5/15 min) when the run "
            f"ended: {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}.",
            "",
            "| types | regions | request | space | exhaustive | eager | brute force |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Issue #23's request (toy CNN profile labelled T4 → the g4dn family; min_time within $0.50, "
            "global batch 256, 40,000 iterations, us-east-1, solve budget 20 s):",
            "",
            *issue_plan_rows,
        ]
    )
    print(body)
    write_section("search on growing catalogs", body, command="python -m benchmarks.search_scaling")
    return 0


def _row(problem: Any, model: Any, label: str, regions: int, req_name: str, objective: str, args: Any) -> str:
    from srift.optimize.evaluate import SimEvaluator

    size = count_configs(problem)
    exhaustive, t_exh = _run(problem, SimEvaluator, model, "exhaustive", args.exhaustive_budget)
    eager, t_eager = _run(problem, SimEvaluator, model, "eager", args.eager_budget)
    brute: float | None = None
    brute_cell = f"skipped (> {args.brute_limit} configs)"
    if size <= args.brute_limit:
        brute, t_brute, n = brute_force(problem, SimEvaluator(bandwidth=model))
        brute_cell = f"{t_brute:.1f} s, {n} simulated: {_fmt(brute, objective)}"
    best = brute
    if best is None and exhaustive is not None and exhaustive.proven_optimal:
        best = _value(exhaustive, objective)

    def cell(plan: Any, seconds: float) -> str:
        value = _value(plan, objective)
        quality = f" ({value / best:.3f})" if value is not None and best else ""
        proof = ""
        if plan is not None and plan.proven_optimal:
            proof = ", proven optimal"
        elif plan is not None and plan.optimality_gap is not None:
            proof = f", gap ≤ {100 * plan.optimality_gap:.1f} %"
        evaluated = f", {plan.configs_evaluated} simulated" if plan is not None else ""
        return f"{seconds:.2f} s{evaluated}{proof}: {_fmt(value, objective)}{quality}"

    return (
        f"| {label} | {regions} | {req_name} | {size:.3g} configs | {cell(exhaustive, t_exh)} | "
        f"{cell(eager, t_eager)} | {brute_cell} |"
    )


def _issue23(settings: Any, args: Any) -> list[str]:
    out = [
        "| mode | solve time | plan | predicted | proven optimal | configurations simulated |",
        "|---|---|---|---|---|---|",
    ]
    for mode in ("exhaustive", "auto", "eager"):
        start = time.perf_counter()
        plan, _ = solve(settings, issue23_request(mode=mode))
        wall = time.perf_counter() - start
        out.append(
            f"| {mode} | {plan.solve_time_s:.2f} s ({wall:.2f} s with preparation) | {plan.config.label()} | "
            f"{plan.predicted.total_time_s:.2f} s, ${plan.predicted.cost_usd:.3f} | "
            f"{'yes' if plan.proven_optimal else 'no'} | {plan.configs_evaluated} |"
        )
        if mode == "exhaustive" and plan.diminishing_returns is not None:
            note = next(w for w in plan.warnings if w.startswith("diminishing returns"))
            out.insert(0, f"Note on the exhaustive plan: *{note}*.\n")
    return out


if __name__ == "__main__":
    sys.exit(main())
