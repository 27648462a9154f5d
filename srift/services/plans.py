"""Plans as an application service: resolve profiles, offers and bandwidth model; optimize, store, read."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from srift.db.tables import PlanRow
from srift.documents import to_document
from srift.domain import BaselineResult, BusBandwidthModel, Config, Constraints, Plan
from srift.domain.network import DEFAULT_NETWORK, NetworkSpec, Transport
from srift.domain.records import PlanRecord
from srift.domain.requests import PlanQuery
from srift.domain.revisions import DataArea
from srift.errors import InvalidInput, NotFound
from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.solver import SolveOptions, optimize
from srift.optimize.space import Candidate, Problem, build_candidates
from srift.services.caching import RevisionCache
from srift.services.network import network_spec, network_view
from srift.services.profiles import resolve_profiles, source_label, with_estimates
from srift.services.views import (
    breakdown_document,
    choice_document,
    estimated_document,
    predicted_document,
    probability_document,
)
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


PREPARED_AREAS = (DataArea.CATALOG, DataArea.PROFILES, DataArea.BANDWIDTH_MODELS)
"""What a prepared problem is built from besides the request: profiles, catalog offers, the active model."""

PREPARED: RevisionCache[PreparedProblem] = RevisionCache("prepared plan problems", max_entries=64)
"""Prepared problems per (database, revisions of PREPARED_AREAS, the whole request and settings).

The evaluator inside an entry keeps the bandwidth model's answers (srift.sim.network.MemoBandwidth), so a
cached problem also answers its bandwidth questions from memory. Optimizing never changes a prepared problem,
so threads share entries. A request whose preparation reads other tables (a plan naming probe jobs reads
their samples) is prepared afresh every time (see RevisionCache)."""


def prepare(
    *,
    session: Session,
    settings: Settings,
    query: PlanQuery,
    excluded: tuple[str, ...] = (),
    held: Mapping[str, int] | None = None,
) -> PreparedProblem:
    """Validate the request against the settings and catalog and build the optimizer's problem.

    `excluded` types are never launched; `held` gives, for excluded types, how many VMs are still running and
    may stay in the plan (re-planning after an interruption). The answer is cached (PREPARED) under the
    whole request — every field of the query, so a new field is part of the key without anyone adding it —
    the settings, and the revisions of the profiles, catalog and bandwidth models it reads: any write to
    those, from any process, makes the next request prepare afresh.
    """
    key = prepare_key(settings=settings, query=query, excluded=excluded, held=held)
    return PREPARED.get_or_build(
        session=session,
        areas=PREPARED_AREAS,
        key=key,
        build=lambda: _prepare(session=session, settings=settings, query=query, excluded=excluded, held=held),
    )


def prepare_key(
    *, settings: Settings, query: PlanQuery, excluded: tuple[str, ...], held: Mapping[str, int] | None
) -> str:
    """SHA-256 of the canonical JSON of everything `prepare` reads that is not in the database."""
    document = {
        "query": to_document(query),
        "excluded": list(excluded),
        "held": dict(held or {}),
        "settings": settings.model_dump(mode="json"),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _prepare(
    *,
    session: Session,
    settings: Settings,
    query: PlanQuery,
    excluded: tuple[str, ...],
    held: Mapping[str, int] | None,
) -> PreparedProblem:
    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_offers

    top = settings.max_solve_budget_s
    if query.solve_budget_s > top:
        raise InvalidInput(
            f"{query.solve_budget_s:g} s is above this service's maximum of {top:g} s",
            hint=f"ask for at most {top:g} s (SRIFT_MAX_SOLVE_BUDGET_S sets the maximum)",
            field="solve_budget_s",
        )
    resolved = resolve_profiles(session=session, selection=query.selection)
    profiles = [p for p, _ in resolved]
    sources = [source for _, source in resolved]
    region = query.region or settings.default_region
    offers = get_offers(
        session=session,
        provider=query.provider,
        region=region,
        market=query.market,
        snapshot=query.snapshot,
    )
    profiles, estimated = with_estimates(profiles, [o.instance for o in offers])
    sources += [source_label("estimate", p) for p in estimated]
    candidates, notes = build_candidates(
        offers=offers,
        profiles=profiles,
        market=query.market,
        availability=query.availability,
        default_cap=query.max_count_per_type,
        excluded=(),
    )
    candidates = _apply_exclusions(candidates, excluded=excluded, held=held or {})
    network = network_spec(session=session, query=query.network)
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
            f"no {query.market.value} offer in {query.provider}/{region} matches the profiles' "
            f"accelerators ({', '.join(covered)})",
            hint="profile the model on an offered accelerator, or change provider, region or market",
            field="availability" if query.availability else "profile_ids",
        )
    constraints = Constraints(
        global_batch=query.global_batch,
        iterations=query.iterations,
        objective=query.objective,
        time_limit_s=query.time_limit_s,
        budget_usd=query.budget_usd,
        confidence=query.confidence,
    )
    kept = held or {}
    skipped = [f"{name} left out (interrupted; none still running)" for name in excluded if name not in kept]
    problem = Problem(candidates, constraints, query.batch_policy, notes=(*notes, *skipped))
    bandwidth = active_model(session=session, settings=settings, network=network)
    evaluator = SimEvaluator(bandwidth=bandwidth, seed=query.seed)
    options = SolveOptions(mode=query.mode, solve_budget_s=query.solve_budget_s, k=query.eager_k)
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
    query: PlanQuery,
    excluded: tuple[str, ...] = (),
    held: Mapping[str, int] | None = None,
    request_doc: Mapping[str, Any] | None = None,
) -> PlanRecord:
    """Optimize `query`, store the plan with `request_doc` (default: the query's document) and return it;
    PlanInfeasible when no configuration meets the limits."""
    prepared = prepare(session=session, settings=settings, query=query, excluded=excluded, held=held)
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
    row = PlanRow(request=dict(request_doc) if request_doc is not None else to_document(query), result=result)
    session.add(row)
    session.flush()
    return plan_record(row)


def get_plan(*, session: Session, plan_id: int) -> PlanRecord:
    """A stored plan; NotFound when there is none."""
    return plan_record(get_plan_row(session=session, plan_id=plan_id))


def get_plan_row(*, session: Session, plan_id: int) -> PlanRow:
    row = session.get(PlanRow, plan_id)
    if row is None:
        raise NotFound(f"no plan with id {plan_id}", hint="create one with POST /v1/plans", field="plan_id")
    return row


def plan_record(row: PlanRow) -> PlanRecord:
    return PlanRecord(id=row.id, created_at=row.created_at, request=row.request, result=row.result)


def _choices(config: Config, problem: Problem) -> list[dict[str, Any]]:
    by_key = {(c.name, c.market): c for c in problem.candidates}
    out = []
    for ch in config.choices:
        cand = by_key[(ch.instance_type, ch.market)]
        out.append(
            choice_document(
                instance_type=ch.instance_type,
                market=ch.market.value,
                count=ch.count,
                batch=ch.batch,
                gpus=cand.devices,
                price_usd_per_hr=cand.offer.price_usd_per_hr,
                instance_gpus=cand.offer.instance.gpu_count,
                profile=cand.profile,
            )
        )
    return out


def _baseline(b: BaselineResult | None, problem: Problem) -> dict[str, Any] | None:
    if b is None:
        return None
    return {
        "policy": b.policy,
        "label": b.config.label(),
        "choices": _choices(b.config, problem),
        "predicted": predicted_document(b.prediction),
        "breakdown": breakdown_document(b.prediction.breakdown),
        "feasible": b.feasible,
        "probability": probability_document(b.prediction, problem.constraints),
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
        "predicted": predicted_document(plan.predicted),
        "confidence": c.confidence,
        "probability": probability_document(plan.predicted, c),
        "limits": {"time_limit_s": c.time_limit_s, "budget_usd": c.budget_usd},
        "headroom": {"time_s": plan.time_headroom_s, "budget_usd": plan.budget_headroom_usd},
        "breakdown": breakdown_document(plan.predicted.breakdown),
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
        "precision": _precision(problem),
        "estimated": estimated_document(problem.candidates, plan.config.choices),
    }


def _precision(problem: Problem) -> str | None:
    return problem.candidates[0].profile.precision.value if problem.candidates else None
