"""Plans as an application service: resolve profiles, offers and bandwidth model; optimize, store, read."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from srift.db.tables import PlanRow
from srift.documents import to_document
from srift.domain import (
    BaselineResult,
    BusBandwidthModel,
    Config,
    Constraints,
    DiminishingReturns,
    MarketChoice,
    Plan,
    Prediction,
)
from srift.domain.geo import Location
from srift.domain.network import DEFAULT_NETWORK, NetworkSpec, Transport
from srift.domain.records import PlanRecord
from srift.domain.requests import PlanQuery
from srift.domain.revisions import DataArea
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.limits import check_solve_budget
from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize, optimize_with_evaluations
from srift.optimize.space import Candidate, Groups, Problem, build_candidates
from srift.optimize.spot import SpotPolicy
from srift.services.caching import RevisionCache
from srift.services.network import network_spec, network_view
from srift.services.placement import (
    Evaluated,
    LinkSpec,
    RateInfo,
    allowed_locations,
    cost_line,
    egress_view,
    feed_view,
    gather_offers,
    geo_context,
    locations_view,
    price_interruptions,
    spot_outlook,
    with_pipeline,
)
from srift.services.profiles import resolve_profiles, source_label, with_estimates
from srift.services.views import (
    breakdown_document,
    choice_document,
    estimated_document,
    predicted_document,
    probability_document,
)
from srift.settings import Settings
from srift.sim.geo import GeoContext


@dataclass(frozen=True, slots=True)
class PreparedProblem:
    """A request turned into the optimizer's inputs, with what placing the fleet rests on."""

    problem: Problem
    evaluator: Evaluator
    options: SolveOptions
    profile_sources: tuple[str, ...]
    network: NetworkSpec = DEFAULT_NETWORK
    bandwidth: BusBandwidthModel | None = None
    geo: GeoContext | None = None
    rates: tuple[RateInfo, ...] = ()
    feeds: tuple[dict[str, Any], ...] = ()
    default_location: Location | None = None


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

    check_solve_budget(query.solve_budget_s, max_solve_budget_s=settings.max_solve_budget_s)
    resolved = resolve_profiles(session=session, selection=query.selection)
    profiles = with_pipeline([p for p, _ in resolved], query.input_pipeline)
    sources = [source for _, source in resolved]
    region = query.region or settings.default_region
    locations = allowed_locations(
        session=session,
        provider=query.provider,
        region=region,
        providers=query.providers,
        regions=query.regions,
        snapshot=query.snapshot,
    )
    located = len(locations) > 1
    offers = gather_offers(session=session, locations=locations, market=query.market, snapshot=query.snapshot)
    profiles, estimated = with_estimates(profiles, [o.instance for o in offers])
    sources += [source_label("estimate", p) for p in estimated]
    pipe = next((p.input_pipeline for p in profiles if p.input_pipeline is not None), None)
    if estimated and pipe is not None:
        # The input pipeline is the model's, not the GPU's: estimates feed as the measured profiles do.
        profiles = [*profiles[: len(profiles) - len(estimated)], *with_pipeline(estimated, pipe)]
    candidates, notes = build_candidates(
        offers=offers,
        profiles=profiles,
        market=query.market,
        availability=query.availability,
        default_cap=query.max_count_per_type,
        excluded=(),
        located=located,
    )
    candidates = _apply_exclusions(candidates, excluded=excluded, held=held or {})
    network = network_spec(session=session, query=query.network)
    if network.transport is Transport.EFA and candidates:
        efa = tuple(c for c in candidates if c.offer.instance.efa)
        dropped = sorted({c.name for c in candidates} - {c.name for c in efa})
        if not efa:
            raise Infeasible(
                "transport efa, but none of the offered types has EFA",
                hint="use transport tcp (plain PyTorch DDP), or allow EFA-capable types",
                field="network.transport",
            )
        if dropped:
            notes = (*notes, f"left out without EFA (transport efa): {', '.join(dropped)}")
        candidates = efa
    if not candidates:
        covered = sorted({p.accelerator for p in profiles})
        where = ", ".join(loc.key for loc in locations)
        raise Infeasible(
            f"no {_offers(query.market)} in {where} matches the profiles' "
            f"accelerators ({', '.join(covered)})",
            hint="profile the model on an offered accelerator, or change provider, region or market",
            field="availability"
            if query.availability
            else ("profiles" if query.profiles is not None else "model" if query.model else "profile_ids"),
        )
    rates: list[RateInfo] = []
    if query.price_interruptions:
        from srift.catalog.geo import shipped_spot

        candidates, rates = price_interruptions(
            candidates,
            facts=shipped_spot(),
            default_location=locations[0],
            overrides=query.interruption_rates,
        )
    spot = (
        SpotPolicy(
            checkpoint_interval_s=query.checkpoint_interval_s,
            restart_s=query.restart_s,
            samples=query.spot_samples,
            seed=query.seed,
        )
        if query.price_interruptions
        else None
    )
    feeds, feed_notes = feed_view(candidates, read_gbps=query.read_gbps)
    constraints = Constraints(
        global_batch=query.global_batch,
        iterations=query.iterations,
        objective=query.objective,
        time_limit_s=query.time_limit_s,
        budget_usd=query.budget_usd,
        max_gpus=query.max_gpus,
        max_vms=query.max_vms,
        confidence=query.confidence,
    )
    kept = held or {}
    skipped = [f"{name} left out (interrupted; none still running)" for name in excluded if name not in kept]
    if not query.price_interruptions and query.market is not MarketChoice.ON_DEMAND:
        notes = (*notes, "spot interruptions are not priced in (price_interruptions: false)")
    problem = Problem(
        candidates, constraints, query.batch_policy, notes=(*notes, *skipped, *feed_notes), spot=spot
    )
    geo = geo_context(
        pattern=query.allreduce,
        links=[LinkSpec(x.from_, x.to, x.bandwidth_gbps, x.rtt_ms) for x in query.links or []],
    )
    bandwidth = active_model(session=session, settings=settings, network=network)
    evaluator = SimEvaluator(
        bandwidth=bandwidth,
        seed=query.seed,
        geo=geo,
        read_gbps=query.read_gbps,
    )
    options = SolveOptions(mode=query.mode, solve_budget_s=query.solve_budget_s, k=query.eager_k)
    return PreparedProblem(
        problem,
        evaluator,
        options,
        tuple(sources),
        network=network,
        bandwidth=bandwidth,
        geo=geo,
        rates=tuple(rates),
        feeds=tuple(feeds),
        default_location=locations[0],
    )


def _apply_exclusions(
    candidates: tuple[Candidate, ...], *, excluded: tuple[str, ...], held: Mapping[str, int]
) -> tuple[Candidate, ...]:
    out = []
    for cand in candidates:
        if cand.name in excluded:
            keep = min(cand.cap, held.get(cand.name, 0))
            if keep <= 0:
                continue
            cand = replace(cand, cap=keep)
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
    PlanInfeasible when no configuration meets the limits.

    A spot plan also gets an on-demand fallback (when `fallback` is on) and a Monte Carlo outlook over
    interruptions that re-plans as Srift §4.5 does, among the configurations the search evaluated.
    """
    prepared = prepare(session=session, settings=settings, query=query, excluded=excluded, held=held)
    weigh = query.price_interruptions and query.market is MarketChoice.ANY
    try:
        plan, evals = optimize_with_evaluations(prepared.problem, prepared.evaluator, prepared.options)
    except PlanInfeasible:
        od = _on_demand(session, settings, query, excluded, held) if weigh else None
        if od is None:
            raise
        prepared, plan = od
        evals = None
        plan = replace(
            plan,
            warnings=(
                *plan.warnings,
                "on-demand only: no spot fleet meets the limits once interruptions are priced in",
            ),
        )
    problem = prepared.problem
    fallback: Evaluated | None = None
    fallback_doc: dict[str, Any] | None = None
    spot_doc: dict[str, Any] | None = None
    spot_used = problem.spot is not None and problem.interruptions_per_s(_best_groups(plan, problem)) > 0
    if spot_used and evals is not None and (query.fallback or weigh):
        od = _on_demand(session, settings, query, excluded, held)
        if od is not None and weigh and _beats(od[1].predicted, plan.predicted, problem.constraints):
            note = (
                f"on-demand beats spot once interruptions are priced in: {od[1].config.label()} "
                f"(${od[1].predicted.cost_usd:.2f}, {od[1].predicted.total_time_s:.0f} s) against the spot "
                f"fleet's expected ${plan.predicted.cost_usd:.2f}, {plan.predicted.total_time_s:.0f} s"
            )
            prepared, plan = od
            problem = prepared.problem
            plan = replace(plan, warnings=(*plan.warnings, note))
            spot_used = False
        elif od is not None and query.fallback:
            fb_prepared, fb_plan = od
            fallback = Evaluated(
                fb_prepared.problem, _best_groups(fb_plan, fb_prepared.problem), fb_plan.predicted
            )
            fallback_doc = {
                "label": fb_plan.config.label(),
                "choices": _choices(fb_plan.config, fb_prepared.problem),
                "predicted": predicted_document(fb_plan.predicted),
            }
    if spot_used and evals is not None and problem.spot is not None:
        spot_doc = spot_outlook(
            plan=plan,
            problem=problem,
            evaluated=[Evaluated(problem, g, r.prediction) for g, r in evals.records.items()],
            fallback=fallback,
            policy=problem.spot,
            rates=prepared.rates,
        )
    result = plan_result(plan, problem, profile_sources=prepared.profile_sources, prepared=prepared)
    result["spot"] = spot_doc
    result["fallback"] = fallback_doc
    if prepared.bandwidth is not None:
        instances = {c.name: c.offer.instance for c in problem.candidates}
        result["network"] = network_view(
            prepared.network,
            instances=[instances[ch.instance_type] for ch in plan.config.choices],
            model=prepared.bandwidth,
            multi_node=plan.config.vm_count >= 2,
        )
    row = PlanRow(
        request=dict(request_doc) if request_doc is not None else to_document(query),
        result=result,
        owner=query.owner,
    )
    session.add(row)
    session.flush()
    return plan_record(row)


def _best_groups(plan: Plan, problem: Problem) -> Groups:
    index = {(c.name, c.market, c.location): i for i, c in enumerate(problem.candidates)}
    return tuple(
        sorted(
            (index[(ch.instance_type, ch.market, ch.location)], ch.count, ch.batch)
            for ch in plan.config.choices
        )
    )


def _on_demand(
    session: Session,
    settings: Settings,
    query: PlanQuery,
    excluded: tuple[str, ...],
    held: Mapping[str, int] | None,
) -> tuple[PreparedProblem, Plan] | None:
    """The best on-demand plan for the same request, or None when there is none within the limits."""
    od = replace(query, market=MarketChoice.ON_DEMAND, solve_budget_s=max(0.2, query.solve_budget_s / 4))
    try:
        alt = prepare(session=session, settings=settings, query=od, excluded=excluded, held=held)
        return alt, optimize(alt.problem, alt.evaluator, alt.options)
    except (InvalidInput, Infeasible):
        return None


def _beats(a: Prediction, b: Prediction, constraints: Constraints) -> bool:
    """Whether prediction `a` is the better plan: meeting the limits first, then the objective, where a
    difference inside the predictions' own iteration spread ((p90 − p10) / 2p50, the larger of the two)
    is a tie that the other objective breaks."""
    from srift.optimize.evaluate import meets, objective_value, secondary_value

    ma, mb = meets(a, constraints), meets(b, constraints)
    if ma != mb:
        return ma
    va, vb = objective_value(a, constraints.objective), objective_value(b, constraints.objective)
    spread = max(
        (p.iteration_p90_s - p.iteration_p10_s) / (2 * p.iteration_p50_s) if p.iteration_p50_s > 0 else 0.0
        for p in (a, b)
    )
    if abs(va - vb) <= spread * max(va, vb):
        return secondary_value(a, constraints.objective) < secondary_value(b, constraints.objective)
    return va < vb


def get_plan(*, session: Session, plan_id: int) -> PlanRecord:
    """A stored plan; NotFound when there is none."""
    return plan_record(get_plan_row(session=session, plan_id=plan_id))


def get_plan_for(*, session: Session, plan_id: int, viewer: str | None) -> PlanRecord:
    """A stored plan `viewer` may read (its own or everyone's); NotFound otherwise (ownership, issue 48)."""
    row = get_plan_row(session=session, plan_id=plan_id)
    if row.owner is not None and row.owner != viewer:
        raise NotFound(
            f"no plan with id {plan_id} that this token may read",
            hint="read plans with the token that made them; create one with POST /v1/plans",
            field="plan_id",
        )
    return plan_record(row)


def get_plan_row(*, session: Session, plan_id: int) -> PlanRow:
    row = session.get(PlanRow, plan_id)
    if row is None:
        raise NotFound(f"no plan with id {plan_id}", hint="create one with POST /v1/plans", field="plan_id")
    return row


def plan_record(row: PlanRow) -> PlanRecord:
    return PlanRecord(id=row.id, created_at=row.created_at, request=row.request, result=row.result)


def _choices(config: Config, problem: Problem) -> list[dict[str, Any]]:
    by_key = {(c.name, c.market, c.location): c for c in problem.candidates}
    out = []
    for ch in config.choices:
        cand = by_key[(ch.instance_type, ch.market, ch.location)]
        out.append(
            {
                **choice_document(
                    instance_type=ch.instance_type,
                    market=ch.market.value,
                    count=ch.count,
                    batch=ch.batch,
                    gpus=cand.devices,
                    price_usd_per_hr=cand.offer.price_usd_per_hr,
                    instance_gpus=cand.offer.instance.gpu_count,
                    profile=cand.profile,
                ),
                "location": ch.location.key if ch.location else None,
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
        "predicted": predicted_document(b.prediction),
        "breakdown": breakdown_document(b.prediction.breakdown),
        "feasible": b.feasible,
        "probability": probability_document(b.prediction, problem.constraints),
    }


def plan_result(
    plan: Plan,
    problem: Problem,
    *,
    profile_sources: tuple[str, ...] = (),
    prepared: PreparedProblem | None = None,
) -> dict[str, Any]:
    """The JSON document stored for a plan (PlanResult's fields)."""
    c = plan.constraints
    geo = prepared.geo if prepared is not None and prepared.geo is not None else None
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
        "locations": locations_view(plan.config, problem, geo) if geo else [],
        "cost": cost_line(plan.predicted),
        "egress": egress_view(plan.config, problem, geo, iterations=c.iterations) if geo else [],
        "spot": None,
        "fallback": None,
        "data_loading": list(prepared.feeds) if prepared is not None else [],
        "optimality_gap": plan.optimality_gap,
        "diminishing_returns": _returns(plan.diminishing_returns),
        "precision": _precision(problem),
        "estimated": estimated_document(problem.candidates, plan.config.choices),
    }


def _returns(note: DiminishingReturns | None) -> dict[str, Any] | None:
    if note is None:
        return None
    return {
        "alternative": note.alternative.label(),
        "total_time_s": note.total_time_s,
        "cost_usd": note.cost_usd,
        "gpus": note.gpus,
        "plan_gpus": note.plan_gpus,
        "seconds_saved": note.seconds_saved,
        "extra_usd": note.extra_usd,
        "extra_gpus": note.extra_gpus,
        "seconds_per_usd": note.seconds_per_usd,
        "seconds_per_gpu": note.seconds_per_gpu,
    }


def _offers(market: MarketChoice) -> str:
    """ "spot offer", "on_demand offer", or "offer" in either market (never "any offer")."""
    return "offer" if market is MarketChoice.ANY else f"{market.value} offer"


def _precision(problem: Problem) -> str | None:
    return problem.candidates[0].profile.precision.value if problem.candidates else None
