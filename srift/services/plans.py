"""Plans as an application service: resolve profiles, offers and bandwidth model; optimize, store, read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from srift.api.schemas.plans import PlanRequest
from srift.db.tables import PlanRow
from srift.domain import (
    BaselineResult,
    Breakdown,
    BusBandwidthModel,
    Config,
    Constraints,
    ModelProfile,
    Plan,
    Prediction,
)
from srift.domain.network import DEFAULT_NETWORK, NetworkSpec, Transport
from srift.errors import InvalidInput, NotFound
from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.solver import SolveOptions, optimize
from srift.optimize.space import Candidate, Problem, build_candidates
from srift.services.network import network_view, resolve_network
from srift.settings import Settings


@dataclass(frozen=True, slots=True)
class PreparedProblem:
    """A request turned into the optimizer's inputs."""

    problem: Problem
    evaluator: Evaluator
    options: SolveOptions
    profile_sources: tuple[str, ...]
    network: NetworkSpec = DEFAULT_NETWORK
    bandwidth: BusBandwidthModel | None = None


def resolve_profiles(*, session: Session, request: PlanRequest) -> tuple[list[ModelProfile], list[str]]:
    """The request's compute profiles, in preference order, and a source name for each."""
    from srift.profiling.store import find_profiles, get_profile

    given = [x is not None for x in (request.profile_ids, request.profiles, request.model)]
    if sum(given) != 1:
        raise InvalidInput(
            "give exactly one of profile_ids, profiles or model",
            hint="name stored profiles by id, inline profile documents, or a model with stored profiles",
            field="profile_ids",
        )
    if request.profile_ids is not None:
        if not request.profile_ids:
            raise InvalidInput("is empty", hint="list at least one stored profile id", field="profile_ids")
        out: list[ModelProfile] = []
        for k, pid in enumerate(request.profile_ids):
            try:
                out.append(get_profile(session=session, profile_id=pid))
            except NotFound as exc:
                raise InvalidInput(exc.detail, hint=exc.hint, field=f"profile_ids[{k}]") from exc
        return out, [f"profile:{pid}" for pid in request.profile_ids]
    if request.profiles is not None:
        if not request.profiles:
            raise InvalidInput("is empty", hint="inline at least one profile document", field="profiles")
        inline: list[ModelProfile] = []
        for k, doc in enumerate(request.profiles):
            try:
                inline.append(ModelProfile.from_dict(doc))
            except InvalidInput as exc:
                raise InvalidInput(
                    exc.detail, hint=exc.hint, field=f"profiles[{k}].{exc.field or ''}".rstrip(".")
                ) from exc
        return inline, [f"profile:inline:{p.model}@{p.accelerator}" for p in inline]
    assert request.model is not None
    found = find_profiles(session=session, model=request.model)
    if not found:
        raise InvalidInput(
            f"no stored profiles of model {request.model!r}",
            hint="profile the model with `srift profile --upload`, or pass profile_ids or inline profiles",
            field="model",
        )
    found.reverse()
    return [p for _, p in found], [f"profile:{pid}" for pid, _ in found]


def prepare(
    *,
    session: Session,
    settings: Settings,
    request: PlanRequest,
    excluded: tuple[str, ...] = (),
    held: Mapping[str, int] | None = None,
) -> PreparedProblem:
    """Validate the request against the settings and catalog and build the optimizer's problem.

    `excluded` types are never launched; `held` gives, for excluded types, how many VMs are still running and
    may stay in the plan (re-planning after an interruption).
    """
    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_offers

    top = settings.max_solve_budget_s
    if request.solve_budget_s > top:
        raise InvalidInput(
            f"{request.solve_budget_s:g} s is above this service's maximum of {top:g} s",
            hint=f"ask for at most {top:g} s (SRIFT_MAX_SOLVE_BUDGET_S sets the maximum)",
            field="solve_budget_s",
        )
    profiles, sources = resolve_profiles(session=session, request=request)
    region = request.region or settings.default_region
    offers = get_offers(
        session=session,
        provider=request.provider,
        region=region,
        market=request.market,
        snapshot=request.snapshot,
    )
    candidates, notes = build_candidates(
        offers=offers,
        profiles=profiles,
        market=request.market,
        availability=request.availability,
        default_cap=request.max_count_per_type,
        excluded=(),
    )
    candidates = _apply_exclusions(candidates, excluded=excluded, held=held or {})
    net = request.network
    network = resolve_network(
        session=session,
        transport=net.transport,
        library=net.library,
        placement_group=net.placement_group,
        flows_per_peer=net.flows_per_peer,
        measured_gbps=net.measured_gbps,
        probe_job_ids=net.probe_job_ids,
    )
    if network.transport is Transport.EFA and candidates:
        efa = tuple(c for c in candidates if c.offer.instance.efa)
        dropped = sorted({c.name for c in candidates} - {c.name for c in efa})
        if not efa:
            raise InvalidInput(
                "transport efa, but none of the offered types has EFA",
                hint="use transport tcp (plain PyTorch DDP), or allow EFA-capable types",
                field="network.transport",
            )
        if dropped:
            notes = (*notes, f"left out without EFA (transport efa): {', '.join(dropped)}")
        candidates = efa
    if not candidates:
        covered = sorted({p.accelerator for p in profiles})
        raise InvalidInput(
            f"no {request.market.value} offer in {request.provider}/{region} matches the profiles' "
            f"accelerators ({', '.join(covered)})",
            hint="profile the model on an offered accelerator, or change provider, region or market",
            field="availability" if request.availability else "profile_ids",
        )
    constraints = Constraints(
        global_batch=request.global_batch,
        iterations=request.iterations,
        objective=request.objective,
        time_limit_s=request.time_limit_s,
        budget_usd=request.budget_usd,
    )
    kept = held or {}
    skipped = [f"{name} left out (interrupted; none still running)" for name in excluded if name not in kept]
    problem = Problem(candidates, constraints, request.batch_policy, notes=(*notes, *skipped))
    bandwidth = active_model(session=session, settings=settings, network=network)
    evaluator = SimEvaluator(bandwidth=bandwidth, seed=request.seed)
    options = SolveOptions(mode=request.mode, solve_budget_s=request.solve_budget_s, k=request.eager_k)
    return PreparedProblem(problem, evaluator, options, tuple(sources), network, bandwidth)


def _apply_exclusions(
    candidates: tuple[Candidate, ...], *, excluded: tuple[str, ...], held: Mapping[str, int]
) -> tuple[Candidate, ...]:
    out = []
    for cand in candidates:
        if cand.name in excluded:
            keep = min(cand.cap, held.get(cand.name, 0))
            if keep <= 0:
                continue
            cand = Candidate(offer=cand.offer, profile=cand.profile, cap=keep)
        out.append(cand)
    return tuple(out)


def create_plan(
    *,
    session: Session,
    settings: Settings,
    request: PlanRequest,
    excluded: tuple[str, ...] = (),
    held: Mapping[str, int] | None = None,
    request_doc: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Optimize `request`, store the plan, and return it as PlanOut's dict (PlanInfeasible when none fits)."""
    prepared = prepare(session=session, settings=settings, request=request, excluded=excluded, held=held)
    plan = optimize(prepared.problem, prepared.evaluator, prepared.options)
    result = plan_result(plan, prepared.problem, profile_sources=prepared.profile_sources)
    if prepared.bandwidth is not None:
        instances = {c.name: c.offer.instance for c in prepared.problem.candidates}
        result["network"] = network_view(
            prepared.network,
            instances=[instances[ch.instance_type] for ch in plan.config.choices],
            model=prepared.bandwidth,
            multi_node=plan.config.vm_count >= 2,
        )
    row = PlanRow(request=request_doc or request.model_dump(mode="json"), result=result)
    session.add(row)
    session.flush()
    return plan_view(row)


def get_plan(*, session: Session, plan_id: int) -> dict[str, Any]:
    """A stored plan as PlanOut's dict; NotFound when there is none."""
    return plan_view(get_plan_row(session=session, plan_id=plan_id))


def get_plan_row(*, session: Session, plan_id: int) -> PlanRow:
    row = session.get(PlanRow, plan_id)
    if row is None:
        raise NotFound(f"no plan with id {plan_id}", hint="create one with POST /v1/plans", field="plan_id")
    return row


def plan_view(row: PlanRow) -> dict[str, Any]:
    return {**row.result, "id": row.id, "created_at": row.created_at, "request": row.request}


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _predicted(p: Prediction) -> dict[str, float]:
    return {
        "iteration_s": p.iteration_s,
        "iteration_p10_s": p.iteration_p10_s,
        "iteration_p50_s": p.iteration_p50_s,
        "iteration_p90_s": p.iteration_p90_s,
        "total_time_s": p.total_time_s,
        "cost_usd": p.cost_usd,
    }


def _breakdown(b: Breakdown) -> dict[str, Any]:
    return {
        "forward_s": b.forward_s,
        "backward_s": b.backward_s,
        "compute_s": b.compute_s,
        "straggler_wait_s": b.straggler_wait_s,
        "exposed_intra_s": b.exposed_intra_s,
        "exposed_network_s": b.exposed_network_s,
        "communication_s": b.communication_s,
        "granularity": _num(b.granularity),
        "warnings": list(b.warnings),
    }


def _choices(config: Config, problem: Problem) -> list[dict[str, Any]]:
    by_key = {(c.name, c.market): c for c in problem.candidates}
    out = []
    for ch in config.choices:
        cand = by_key[(ch.instance_type, ch.market)]
        out.append(
            {
                "instance_type": ch.instance_type,
                "market": ch.market.value,
                "count": ch.count,
                "batch": ch.batch,
                "gpus": cand.devices,
                "per_gpu_batch": ch.batch / cand.devices,
                "price_usd_per_hr": cand.offer.price_usd_per_hr,
                "instance_gpus": cand.offer.instance.gpu_count,
            }
        )
    return out


def _baseline(b: BaselineResult | None, problem: Problem) -> dict[str, Any] | None:
    if b is None:
        return None
    return {
        "policy": b.policy,
        "label": b.config.label(),
        "choices": _choices(b.config, problem),
        "predicted": _predicted(b.prediction),
        "breakdown": _breakdown(b.prediction.breakdown),
        "feasible": b.feasible,
    }


def plan_result(plan: Plan, problem: Problem, *, profile_sources: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON document stored for a plan (PlanResult's fields)."""
    c = plan.constraints
    return {
        "label": plan.config.label(),
        "objective": c.objective.value,
        "mode": plan.mode.value,
        "proven_optimal": plan.proven_optimal,
        "choices": _choices(plan.config, problem),
        "counts": list(plan.config.counts),
        "batches": list(plan.config.batches),
        "global_batch": c.global_batch,
        "iterations": c.iterations,
        "predicted": _predicted(plan.predicted),
        "limits": {"time_limit_s": c.time_limit_s, "budget_usd": c.budget_usd},
        "headroom": {"time_s": plan.time_headroom_s, "budget_usd": plan.budget_headroom_usd},
        "breakdown": _breakdown(plan.predicted.breakdown),
        "baselines": {name: _baseline(plan.baselines.get(name), problem) for name in ("cap", "tap")},
        "pareto": [
            {
                "label": p.label,
                "total_time_s": p.total_time_s,
                "cost_usd": p.cost_usd,
                "feasible": p.feasible,
                "on_front": p.on_front,
                "chosen": p.chosen,
            }
            for p in plan.pareto
        ],
        "pareto_total": plan.pareto_total,
        "solve_time_s": plan.solve_time_s,
        "configs_evaluated": plan.configs_evaluated,
        "sources": [*profile_sources, *plan.sources],
        "warnings": list(plan.warnings),
    }
