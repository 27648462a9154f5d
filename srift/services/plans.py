"""Plans as an application service: resolve profiles, offers and bandwidth model; optimize, store, read."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
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
    ModelProfile,
    Offer,
    Plan,
    Prediction,
)
from srift.domain.geo import Location
from srift.domain.network import DEFAULT_NETWORK, NetworkSpec, Transport
from srift.domain.records import PlanRecord
from srift.domain.requests import PlanQuery
from srift.domain.revisions import DataArea
from srift.domain.sharding import Setup
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.limits import check_solve_budget
from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize, optimize_with_evaluations
from srift.optimize.space import Candidate, Groups, Problem, build_candidates
from srift.optimize.spot import SpotPolicy
from srift.services.caching import RevisionCache
from srift.services.calibration import calibrated_evaluator, plan_block
from srift.services.memory import fit_candidates
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
from srift.services.sharding import (
    allowed_setups,
    annotate_choices,
    memory_infeasible,
    strategy_phase,
    strategy_view,
)
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


PREPARED_AREAS = (DataArea.CATALOG, DataArea.PROFILES, DataArea.BANDWIDTH_MODELS, DataArea.CORRECTIONS)
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
    """The plan pipeline up to the search, one named phase after another (each takes and returns domain
    values): resolve profiles → locations and offers → complete with estimates → candidates → exclusions
    → spot pricing → feeds → the problem and its evaluator. `create_plan` then solves and renders."""
    check_solve_budget(query.solve_budget_s, max_solve_budget_s=settings.max_solve_budget_s)
    profiles, sources = _resolve(session=session, query=query)
    locations = allowed_locations(
        session=session,
        provider=query.provider,
        region=query.region or settings.default_region,
        providers=query.providers,
        regions=query.regions,
        snapshot=query.snapshot,
    )
    offers = gather_offers(session=session, locations=locations, market=query.market, snapshot=query.snapshot)
    # Exclusions the framework stack needs (srift.catalog.support), before estimates: GPUs the stack has no
    # kernels for and retired families are left out with a note.
    offers, stack_notes = _runnable(offers, query)
    profiles, sources = _complete(profiles, sources, offers=offers)
    candidates, notes = build_candidates(
        offers=offers,
        profiles=profiles,
        market=query.market,
        availability=query.availability,
        default_cap=query.max_count_per_type,
        excluded=(),
        located=len(locations) > 1,
    )
    notes = (*stack_notes, *notes)
    network = network_spec(session=session, query=query.network)
    candidates, notes = _exclude(candidates, notes, network=network, excluded=excluded, held=held or {})
    # Feasibility, memory and devices (srift.services.memory): CPU profiles for GPU types, batches within
    # what each GPU holds.
    setups = allowed_setups(candidates, strategy=query.strategy, checkpointing=query.checkpointing)
    candidates, memory_notes = fit_candidates(
        candidates,
        allow_cpu_profiles=query.allow_cpu_profiles,
        field="profiles" if query.profiles is not None else "model" if query.model else "profile_ids",
        memory=setups == (Setup(),),
    )
    notes = (*notes, *memory_notes)
    _check_any(candidates, profiles=profiles, locations=locations, query=query, left_out=stack_notes)
    candidates, rates, spot = _price_spot(candidates, query=query, default_location=locations[0])
    feeds, feed_notes = feed_view(candidates, read_gbps=query.read_gbps)
    problem = Problem(
        candidates,
        _constraints(query),
        query.batch_policy,
        notes=(*notes, *_plan_notes(query, excluded=excluded, held=held or {}), *feed_notes),
        spot=spot,
    )
    geo = geo_context(
        pattern=query.allreduce,
        links=[LinkSpec(x.from_, x.to, x.bandwidth_gbps, x.rtt_ms) for x in query.links or []],
    )
    bandwidth = _bandwidth(session=session, settings=settings, network=network)
    evaluator = SimEvaluator(
        bandwidth=bandwidth, seed=query.seed, config=query.sim_config, geo=geo, read_gbps=query.read_gbps
    )
    problem, chosen = strategy_phase(problem, evaluator, setups=setups)
    # Calibration (srift.services.calibration): corrections learned from measured runs.
    chosen = calibrated_evaluator(chosen, session=session, model=profiles[0].model, network=network)
    return PreparedProblem(
        problem,
        chosen,
        SolveOptions(mode=query.mode, solve_budget_s=query.solve_budget_s, k=query.eager_k),
        tuple(sources),
        network=network,
        bandwidth=bandwidth,
        geo=geo,
        rates=tuple(rates),
        feeds=tuple(feeds),
        default_location=locations[0],
    )


# -- the phases -------------------------------------------------------------------------------------------


def _resolve(*, session: Session, query: PlanQuery) -> tuple[list[ModelProfile], list[str]]:
    """Phase 1: the request's profiles (stored, inline or by model) with its input pipeline, and their
    source labels."""
    resolved = resolve_profiles(session=session, selection=query.selection)
    return with_pipeline([p for p, _ in resolved], query.input_pipeline), [source for _, source in resolved]


def _complete(
    profiles: list[ModelProfile], sources: list[str], *, offers: Sequence[Offer]
) -> tuple[list[ModelProfile], list[str]]:
    """Phase 3: estimated profiles for every offered accelerator nobody profiled (srift.estimate), fed by
    the model's input pipeline as the measured profiles are."""
    completed, estimated = with_estimates(profiles, [o.instance for o in offers])
    pipe = next((p.input_pipeline for p in completed if p.input_pipeline is not None), None)
    if estimated and pipe is not None:
        completed = [*completed[: len(completed) - len(estimated)], *with_pipeline(estimated, pipe)]
    return completed, [*sources, *(source_label("estimate", p) for p in estimated)]


def _exclude(
    candidates: tuple[Candidate, ...],
    notes: tuple[str, ...],
    *,
    network: NetworkSpec,
    excluded: tuple[str, ...],
    held: Mapping[str, int],
) -> tuple[tuple[Candidate, ...], tuple[str, ...]]:
    """Phase 5: what may not be launched: interrupted types (except the VMs still running, when
    re-planning), and types without EFA under transport efa."""
    candidates = _apply_exclusions(candidates, excluded=excluded, held=held)
    if network.transport is not Transport.EFA or not candidates:
        return candidates, notes
    efa = tuple(c for c in candidates if c.offer.instance.efa)
    if not efa:
        raise Infeasible(
            "transport efa, but none of the offered types has EFA",
            hint="use transport tcp (plain PyTorch DDP), or allow EFA-capable types",
            field="network.transport",
        )
    dropped = sorted({c.name for c in candidates} - {c.name for c in efa})
    if dropped:
        notes = (*notes, f"left out without EFA (transport efa): {', '.join(dropped)}")
    return efa, notes


def _check_any(
    candidates: tuple[Candidate, ...],
    *,
    profiles: Sequence[ModelProfile],
    locations: Sequence[Location],
    query: PlanQuery,
    left_out: Sequence[str] = (),
) -> None:
    """Infeasible, naming what to change, when no candidate is left (and what the stack left out)."""
    if candidates:
        return
    covered = sorted({p.accelerator for p in profiles})
    where = ", ".join(loc.key for loc in locations)
    raise Infeasible(
        f"no {_offers(query.market)} in {where} matches the profiles' accelerators ({', '.join(covered)})"
        + "".join(f"; {note}" for note in left_out),
        hint="profile the model on an offered accelerator, or change provider, region or market",
        field="availability"
        if query.availability
        else ("profiles" if query.profiles is not None else "model" if query.model else "profile_ids"),
    )


def _price_spot(
    candidates: tuple[Candidate, ...], *, query: PlanQuery, default_location: Location
) -> tuple[tuple[Candidate, ...], list[RateInfo], SpotPolicy | None]:
    """Phase 6: each spot candidate's interruption rate (the shipped facts or the request's), and the
    policy the optimizer prices interruptions with (Srift §4.5); nothing when the request turns it off."""
    if not query.price_interruptions:
        return candidates, [], None
    from srift.catalog.geo import shipped_spot

    priced, rates = price_interruptions(
        candidates,
        facts=shipped_spot(),
        default_location=default_location,
        overrides=query.interruption_rates,
    )
    policy = SpotPolicy(
        checkpoint_interval_s=query.checkpoint_interval_s,
        restart_s=query.restart_s,
        samples=query.spot_samples,
        seed=query.seed,
    )
    return priced, rates, policy


def _constraints(query: PlanQuery) -> Constraints:
    return Constraints(
        global_batch=query.global_batch,
        iterations=query.iterations,
        objective=query.objective,
        time_limit_s=query.time_limit_s,
        budget_usd=query.budget_usd,
        max_gpus=query.max_gpus,
        max_vms=query.max_vms,
        confidence=query.confidence,
    )


def _plan_notes(query: PlanQuery, *, excluded: tuple[str, ...], held: Mapping[str, int]) -> tuple[str, ...]:
    notes = [f"{name} left out (interrupted; none still running)" for name in excluded if name not in held]
    if not query.price_interruptions and query.market is not MarketChoice.ON_DEMAND:
        notes.append("spot interruptions are not priced in (price_interruptions: false)")
    return tuple(notes)


def _bandwidth(*, session: Session, settings: Settings, network: NetworkSpec) -> BusBandwidthModel:
    """The active learned model, with the α-β prior under the request's network for types it lacks."""
    from srift.bandwidth.registry import active_model

    return active_model(session=session, settings=settings, network=network)


def _runnable(offers: list[Offer], query: PlanQuery) -> tuple[list[Offer], tuple[str, ...]]:
    """The exclusion phase for the framework stack (srift.catalog.support): offers whose GPUs the stack
    cannot run, or of retired families unless asked for, are left out with a note; Infeasible on `stack`
    when nothing is left."""
    from srift.catalog.support import runnable_offers

    named = [name.rsplit("/", 1)[-1] for name in query.availability or {}]
    runnable = runnable_offers(offers, stack=query.stack, include_retired=query.include_retired, named=named)
    if offers and not runnable.kept:
        raise Infeasible(
            "no offered type can run on this stack: " + "; ".join(runnable.notes),
            hint="give a stack (torch, cuda) that supports the offered GPUs, or include_retired: true",
            field="stack",
        )
    return list(runnable.kept), runnable.notes


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
    started = time.perf_counter()
    prepared = prepare(session=session, settings=settings, query=query, excluded=excluded, held=held)
    weigh = query.price_interruptions and query.market is MarketChoice.ANY
    try:
        plan, evals = optimize_with_evaluations(prepared.problem, prepared.evaluator, prepared.options)
    except PlanInfeasible:
        od = _on_demand(session, settings, query, excluded, held, started=started) if weigh else None
        if od is None:
            held_back = memory_infeasible(prepared.problem, prepared.evaluator, query.model or "the model")
            if held_back is not None:
                raise held_back from None
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
        od = _on_demand(session, settings, query, excluded, held, started=started)
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
    result["calibration"] = _calibration_block(prepared, plan, problem)  # calibration hook
    result["strategy"] = strategy_view(plan, problem, prepared.evaluator)
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
    annotate_choices(result, result["strategy"])
    row = PlanRow(
        request=dict(request_doc) if request_doc is not None else to_document(query),
        result=result,
        owner=query.owner,
    )
    session.add(row)
    session.flush()
    return plan_record(row)


def _calibration_block(prepared: PreparedProblem, plan: Plan, problem: Problem) -> dict[str, Any]:
    """What runs of this plan will be compared with (srift.services.calibration.plan_block)."""
    groups = _best_groups(plan, problem)
    return plan_block(
        prepared.evaluator,
        fleet=problem.fleet(groups),
        iterations=problem.constraints.iterations,
        usd_per_s=problem.usd_per_s(groups),
        model=problem.candidates[0].profile.model,
        network=prepared.network,
    )


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
    *,
    started: float,
) -> tuple[PreparedProblem, Plan] | None:
    """The best on-demand plan for the same request, or None when there is none within the limits. Its
    search gets a quarter of the request's solve budget, at most what is left of it since `started`
    (perf_counter), and at least FALLBACK_MIN_S: the request's search and this one stay within the solve
    budget plus that."""
    left = query.solve_budget_s - (time.perf_counter() - started)
    budget = max(FALLBACK_MIN_S, min(query.solve_budget_s / 4, left))
    od = replace(query, market=MarketChoice.ON_DEMAND, solve_budget_s=budget)
    try:
        alt = prepare(session=session, settings=settings, query=od, excluded=excluded, held=held)
        return alt, optimize(alt.problem, alt.evaluator, alt.options)
    except (InvalidInput, Infeasible):
        return None


FALLBACK_MIN_S = 0.05
"""The on-demand fallback's search gets at least this long even when the request's own search used its
whole budget (it still lists each type alone first): a product choice, part of the stated overrun bound."""


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
                    gpu_memory_gib=cand.offer.instance.gpu_memory_gib,
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
