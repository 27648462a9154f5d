"""Plans as an application service: the plan pipeline (prepare → search → spot fallback → document), stored.

`create_plan` runs the pipeline's phases in order, each a function that takes and returns domain values:
`prepare` (resolve profiles, offers and exclusions, estimates, candidates, memory, spot pricing, data feeds,
the problem and its evaluator; cached, `_prepare` lists its own phases), `_search` (the optimizer),
`_spot_fallback` (a spot plan weighed against the best on-demand plan) and `plan_result` (the document,
built once). docs/architecture.md has the phases in one table.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from srift.db.tables import PlanRow
from srift.documents import copy_fields, to_document
from srift.domain import (
    BaselineResult,
    BusBandwidthModel,
    Config,
    Constraints,
    DiminishingReturns,
    InstanceType,
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
from srift.domain.sharding import Setup, StrategyChoice
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.limits import check_solve_budget
from srift.optimize.evaluate import Evaluations, Evaluator, SimEvaluator
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize, optimize_with_evaluations
from srift.optimize.space import Candidate, Groups, Problem, build_candidates
from srift.optimize.spot import SpotPolicy
from srift.services.caching import RevisionCache
from srift.services.calibration import calibrated_evaluator, plan_block
from srift.services.memory import fit_candidates
from srift.services.network import network_spec, network_view
from srift.services.placement import (
    MeasuredLink,
    PredictedConfig,
    RateInfo,
    allowed_locations,
    config_groups,
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
from srift.services.replays import FITTED_LAW, nowcast_spot, request_location
from srift.services.sharding import (
    NO_OFFERED,
    OfferedTypes,
    allowed_setups,
    choice_setup,
    memory_infeasible,
    strategy_phase,
    strategy_view,
)
from srift.services.traces import stored_traces
from srift.services.views import (
    breakdown_document,
    choice_document,
    estimated_document,
    predicted_document,
    probability_document,
    unused_type_keys,
)
from srift.settings import Settings
from srift.sim.geo import GeoContext


@dataclass(frozen=True, slots=True)
class ResolvedProfiles:
    """The request's profiles as resolved from the store (or inline), with its input pipeline, and their
    source labels: what `_resolve` read, before estimates for the offers are added."""

    profiles: tuple[ModelProfile, ...]
    sources: tuple[str, ...]


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
    resolved: ResolvedProfiles | None = None
    """The profiles it was prepared from (`_resolve`): the on-demand fallback of the same request reuses
    them instead of reading every stored profile again."""
    offered: OfferedTypes = NO_OFFERED
    """The GPU types the request's locations offer that it may launch (`_offered`): those the 409 when no
    fleet holds the model names as having more GPU memory (srift.services.sharding.memory_hint)."""


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
    resolved: ResolvedProfiles | None = None,
) -> PreparedProblem:
    """Validate the request against the settings and catalog and build the optimizer's problem.

    `excluded` types are never launched; `held` gives, for excluded types, how many VMs are still running and
    may stay in the plan (re-planning after an interruption). The answer is cached (PREPARED) under the
    whole request — every field of the query, so a new field is part of the key without anyone adding it —
    the settings, and the revisions of the profiles, catalog and bandwidth models it reads: any write to
    those, from any process, makes the next request prepare afresh. `resolved`: the profiles another
    preparation in this session resolved for the same profile selection and input pipeline (the spot
    plan's, for its on-demand fallback), used instead of reading them again.
    """
    key = prepare_key(settings=settings, query=query, excluded=excluded, held=held)
    return PREPARED.get_or_build(
        session=session,
        areas=PREPARED_AREAS,
        key=key,
        build=lambda: _prepare(
            session=session, settings=settings, query=query, excluded=excluded, held=held, resolved=resolved
        ),
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
    resolved: ResolvedProfiles | None = None,
) -> PreparedProblem:
    """The plan pipeline up to the search, one named phase after another (each takes and returns domain
    values): resolve profiles → locations and offers → exclusions the stack needs → complete with estimates
    → candidates → exclusions (interrupted types, EFA) → memory → spot pricing → data feeds → the problem
    → its evaluator (strategy, calibration). `create_plan` then searches, weighs spot and renders."""
    check_solve_budget(query.solve_budget_s, max_solve_budget_s=settings.max_solve_budget_s)
    held = held or {}
    resolved = resolved or _resolve(session=session, query=query)
    profiles, sources = list(resolved.profiles), list(resolved.sources)
    locations, offers = _locate(session=session, settings=settings, query=query)
    unmatched = _unmatched_type_keys(query, offers)
    offers, stack_notes = _runnable(offers, query)
    profiles, sources = _complete(profiles, sources, offers=offers)
    shortlist = _candidates(offers, profiles, query=query, located=len(locations) > 1, notes=stack_notes)
    network = network_spec(session=session, query=query.network)
    shortlist = _exclude(shortlist, network=network, excluded=excluded, held=held)
    setups = allowed_setups(shortlist.candidates, strategy=query.strategy, checkpointing=query.checkpointing)
    shortlist = _fit_memory(shortlist, query=query, setups=setups)
    _check_any(
        shortlist.candidates, profiles=profiles, locations=locations, query=query, left_out=stack_notes
    )
    spot = _price_spot(shortlist.candidates, query=query, default_location=locations[0])
    feeds, feed_notes = feed_view(spot.candidates, read_gbps=query.read_gbps)
    notes = (*unmatched, *shortlist.notes, *_plan_notes(query, excluded=excluded, held=held), *feed_notes)
    problem = Problem(spot.candidates, _constraints(query), query.batch_policy, notes=notes, spot=spot.policy)
    geo = _geo(query)
    bandwidth = _bandwidth(session=session, settings=settings, network=network)
    problem, evaluator = _evaluator(
        problem,
        session=session,
        query=query,
        setups=setups,
        bandwidth=bandwidth,
        geo=geo,
        network=network,
        model=profiles[0].model,
    )
    return PreparedProblem(
        problem,
        evaluator,
        SolveOptions(mode=query.mode, solve_budget_s=query.solve_budget_s, k=query.eager_k),
        tuple(sources),
        network=network,
        bandwidth=bandwidth,
        geo=geo,
        rates=spot.rates,
        feeds=tuple(feeds),
        default_location=locations[0],
        resolved=resolved,
        offered=_offered(offers, locations=locations, network=network, excluded=excluded),
    )


# -- preparing: the phases --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shortlist:
    """The candidates still in the running, and the notes saying what was left out or capped, and why."""

    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SpotPricing:
    """The candidates with their spot interruption rates, what each rate rests on, and the policy the
    optimizer prices interruptions with (None when the request turns pricing off)."""

    candidates: tuple[Candidate, ...]
    rates: tuple[RateInfo, ...]
    policy: SpotPolicy | None


def _resolve(*, session: Session, query: PlanQuery) -> ResolvedProfiles:
    """Resolve profiles: the request's profiles (stored, inline or by model) with its input pipeline, and
    their source labels."""
    resolved = resolve_profiles(session=session, selection=query.selection)
    return ResolvedProfiles(
        tuple(with_pipeline([p for p, _ in resolved], query.input_pipeline)),
        tuple(source for _, source in resolved),
    )


def _locate(*, session: Session, settings: Settings, query: PlanQuery) -> tuple[list[Location], list[Offer]]:
    """Locations and offers: the (provider, region) locations the request allows and every priced offer
    there in the request's market (srift.services.placement)."""
    locations = allowed_locations(
        session=session,
        provider=query.provider,
        region=query.region or settings.default_region,
        providers=query.providers,
        regions=query.regions,
        snapshot=query.snapshot,
    )
    offers = gather_offers(session=session, locations=locations, market=query.market, snapshot=query.snapshot)
    return locations, offers


def _unmatched_type_keys(query: PlanQuery, offers: Sequence[Offer]) -> tuple[str, ...]:
    """Notes for the keys of `interruption_rates` and `network.measured_gbps` whose instance type no offer of
    the request has (srift.services.views.unused_type_keys). A note, not an error: one request file may carry
    rates for types that other regions or markets offer."""
    offered = sorted({offer.instance.name for offer in offers})
    notes = partial(
        unused_type_keys, names=offered, missing="no offer of this request is a", closest="closest offered"
    )
    rates = notes("interruption_rates", query.interruption_rates or {}, located=True)
    return (*rates, *notes("network.measured_gbps", query.network.measured_gbps or {}))


def _runnable(offers: list[Offer], query: PlanQuery) -> tuple[list[Offer], tuple[str, ...]]:
    """Exclusions the framework stack needs (srift.catalog.support), before estimates: offers whose GPUs
    the stack cannot run, or of retired families unless asked for, are left out with a note; Infeasible on
    `stack` when nothing is left."""
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


def _complete(
    profiles: list[ModelProfile], sources: list[str], *, offers: Sequence[Offer]
) -> tuple[list[ModelProfile], list[str]]:
    """Complete with estimates: estimated profiles for every offered accelerator nobody profiled
    (srift.estimate), fed by the model's input pipeline as the measured profiles are."""
    completed, estimated = with_estimates(profiles, [o.instance for o in offers])
    pipe = next((p.input_pipeline for p in completed if p.input_pipeline is not None), None)
    if estimated and pipe is not None:
        completed = [*completed[: len(completed) - len(estimated)], *with_pipeline(estimated, pipe)]
    return completed, [*sources, *(source_label("estimate", p) for p in estimated)]


def _candidates(
    offers: Sequence[Offer],
    profiles: Sequence[ModelProfile],
    *,
    query: PlanQuery,
    located: bool,
    notes: tuple[str, ...],
) -> Shortlist:
    """Candidates: one per offered type (and location) with its profile, market and availability cap
    (srift.optimize.space.build_candidates); their notes follow `notes`."""
    candidates, built = build_candidates(
        offers=offers,
        profiles=profiles,
        market=query.market,
        availability=query.availability,
        default_cap=query.max_count_per_type,
        excluded=(),
        located=located,
    )
    return Shortlist(candidates, (*notes, *built))


def _exclude(
    shortlist: Shortlist, *, network: NetworkSpec, excluded: tuple[str, ...], held: Mapping[str, int]
) -> Shortlist:
    """Exclusions (availability): what may not be launched: interrupted types (except the VMs still
    running, when re-planning), and types without EFA under transport efa."""
    candidates = _apply_exclusions(shortlist.candidates, excluded=excluded, held=held)
    if network.transport is not Transport.EFA or not candidates:
        return Shortlist(candidates, shortlist.notes)
    efa = tuple(c for c in candidates if c.offer.instance.efa)
    if not efa:
        raise Infeasible(
            "transport efa, but none of the offered types has EFA",
            hint="use transport tcp (plain PyTorch DDP), or allow EFA-capable types",
            field="network.transport",
        )
    dropped = sorted({c.name for c in candidates} - {c.name for c in efa})
    if not dropped:
        return Shortlist(efa, shortlist.notes)
    return Shortlist(efa, (*shortlist.notes, f"left out without EFA (transport efa): {', '.join(dropped)}"))


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


def _offered(
    offers: Sequence[Offer], *, locations: Sequence[Location], network: NetworkSpec, excluded: tuple[str, ...]
) -> OfferedTypes:
    """The GPU types of the offers the stack can run, less those never to be launched (interrupted, or
    without EFA under transport efa), each once: what a 409 may name when no fleet holds the model."""
    efa = network.transport is Transport.EFA
    types: dict[str, InstanceType] = {}
    for offer in offers:
        inst = offer.instance
        if inst.gpu_count >= 1 and inst.name not in excluded and (inst.efa or not efa):
            types.setdefault(inst.name, inst)
    return OfferedTypes(tuple(types.values()), ", ".join(loc.key for loc in locations))


def _fit_memory(shortlist: Shortlist, *, query: PlanQuery, setups: tuple[Setup, ...]) -> Shortlist:
    """Feasibility, memory and devices (srift.services.memory): CPU profiles for GPU types, batches within
    what each GPU holds. A request that may shard has each fleet's memory checked per setup instead
    (srift.services.sharding, in `_evaluator`)."""
    candidates, notes = fit_candidates(
        shortlist.candidates,
        allow_cpu_profiles=query.allow_cpu_profiles,
        field=_selection_field(query),
        memory=setups == (Setup(),),
    )
    return Shortlist(candidates, (*shortlist.notes, *notes))


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
        field="availability" if query.availability else _selection_field(query),
    )


def _selection_field(query: PlanQuery) -> str:
    """The request field that selects its profiles (for errors about them)."""
    return "profiles" if query.profiles is not None else "model" if query.model else "profile_ids"


def _offers(market: MarketChoice) -> str:
    """ "spot offer", "on_demand offer", or "offer" in either market (never "any offer")."""
    return "offer" if market is MarketChoice.ANY else f"{market.value} offer"


def _price_spot(
    candidates: tuple[Candidate, ...], *, query: PlanQuery, default_location: Location
) -> SpotPricing:
    """Pricing (spot): each spot candidate's interruption rate (the request's, the model fitted to the public
    traces where they cover the offer, else the shipped bands, named and widened), and
    the policy the optimizer prices interruptions with (Srift §4.5); nothing when the request turns it
    off. (Egress is priced by the evaluator, from the geo context.)"""
    if not query.price_interruptions:
        return SpotPricing(candidates, (), None)
    from srift.catalog.geo import shipped_spot
    from srift.spot.shipped import shipped_model

    priced, rates = price_interruptions(
        candidates,
        facts=shipped_spot(),
        default_location=default_location,
        overrides=query.interruption_rates,
        model=shipped_model(),
    )
    policy = SpotPolicy(
        checkpoint_interval_s=query.checkpoint_interval_s,
        restart_s=query.restart_s,
        samples=query.spot_samples,
        seed=query.seed,
    )
    return SpotPricing(priced, tuple(rates), policy)


def _constraints(query: PlanQuery) -> Constraints:
    return copy_fields(Constraints, query)


def _plan_notes(query: PlanQuery, *, excluded: tuple[str, ...], held: Mapping[str, int]) -> tuple[str, ...]:
    notes = [f"{name} left out (interrupted; none still running)" for name in excluded if name not in held]
    if not query.price_interruptions and query.market is not MarketChoice.ON_DEMAND:
        notes.append("spot interruptions are not priced in (price_interruptions: false)")
    return tuple(notes)


def _geo(query: PlanQuery) -> GeoContext:
    """The shipped network facts between locations, with the request's measured links and pattern."""
    return geo_context(
        pattern=query.allreduce,
        links=[MeasuredLink(x.from_, x.to, x.bandwidth_gbps, x.rtt_ms) for x in query.links or []],
    )


def _bandwidth(*, session: Session, settings: Settings, network: NetworkSpec) -> BusBandwidthModel:
    """The active learned model, with the α-β prior under the request's network for types it lacks."""
    from srift.bandwidth.registry import active_model

    return active_model(session=session, settings=settings, network=network)


def _evaluator(
    problem: Problem,
    *,
    session: Session,
    query: PlanQuery,
    setups: tuple[Setup, ...],
    bandwidth: BusBandwidthModel,
    geo: GeoContext,
    network: NetworkSpec,
    model: str,
) -> tuple[Problem, Evaluator]:
    """The evaluator: the simulator, behind the strategy chooser when the request may shard (the problem
    then checks each fleet's memory, srift.services.sharding), with the corrections learned from measured
    runs of `model` (srift.services.calibration)."""
    simulator = SimEvaluator(
        bandwidth=bandwidth, seed=query.seed, config=query.sim_config, geo=geo, read_gbps=query.read_gbps
    )
    problem, chosen = strategy_phase(problem, simulator, setups=setups)
    return problem, calibrated_evaluator(chosen, session=session, model=model, network=network)


# -- creating a plan: prepare → search → spot fallback → document ---------------------------------------


@dataclass(frozen=True, slots=True)
class Solved:
    """A prepared problem and the plan its search chose."""

    prepared: PreparedProblem
    plan: Plan

    @property
    def problem(self) -> Problem:
        return self.prepared.problem

    @property
    def groups(self) -> Groups:
        """The plan's configuration as groups of the problem's candidates."""
        return config_groups(self.plan.config, self.prepared.problem)

    def warned(self, warning: str) -> Solved:
        """The same plan with `warning` added to its warnings."""
        return Solved(self.prepared, replace(self.plan, warnings=(*self.plan.warnings, warning)))


@dataclass(frozen=True, slots=True)
class Searched:
    """The search's answer: the plan, and every configuration the search evaluated (None when no
    configuration met the limits and the best on-demand plan stands in)."""

    solved: Solved
    evaluations: Evaluations | None


@dataclass(frozen=True, slots=True)
class SpotDecision:
    """The spot fallback's answer: the plan to store; for a plan that runs spot VMs, the configurations its
    outlook re-plans among (the search's evaluations); and the on-demand plan to fall back to, if asked."""

    plan: Solved
    spot_evaluations: Evaluations | None = None
    on_demand_fallback: Solved | None = None


OnDemandSearch = Callable[[PreparedProblem], Solved | None]
"""The best on-demand plan for the same request (`_solve_on_demand`), given the request's own prepared
problem (whose resolved profiles it reuses), or None when none meets the limits."""


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
    on_demand: OnDemandSearch = partial(
        _solve_on_demand,
        session=session,
        settings=settings,
        query=query,
        excluded=excluded,
        held=held,
        started=started,
    )
    prepared = prepare(session=session, settings=settings, query=query, excluded=excluded, held=held)
    searched = _search(prepared, query=query, on_demand=on_demand)
    decision = _spot_fallback(searched, query=query, on_demand=on_demand)
    row = PlanRow(
        request=dict(request_doc) if request_doc is not None else to_document(query),
        result=spot_model_phase(
            plan_result(decision, strategy=query.strategy), query=query, settings=settings
        ),
        owner=query.owner,
    )
    session.add(row)
    session.flush()
    return plan_record(row)


def _search(prepared: PreparedProblem, *, query: PlanQuery, on_demand: OnDemandSearch) -> Searched:
    """Search: the optimizer over the prepared problem, keeping every configuration it evaluated. When none
    meets the limits, the best on-demand plan may stand in (`_on_demand_stand_in`)."""
    try:
        plan, evaluations = optimize_with_evaluations(prepared.problem, prepared.evaluator, prepared.options)
    except PlanInfeasible as infeasible:
        return _on_demand_stand_in(prepared, infeasible, query=query, on_demand=on_demand)
    return Searched(Solved(prepared, plan), evaluations)


# -- the spot fallback: spot weighed against on-demand ----------------------------------------------------

ON_DEMAND_ONLY = "on-demand only: no spot fleet meets the limits once interruptions are priced in"
"""The warning of an on-demand plan that stands in for a search that found nothing within the limits."""

FALLBACK_MIN_S = 0.05
"""The on-demand fallback's search gets at least this long even when the request's own search used its
whole budget (it still lists each type alone first): a product choice, part of the stated overrun bound."""


def _on_demand_competes(query: PlanQuery) -> bool:
    """Whether the best on-demand plan competes with the spot plan: interruptions are priced in and the
    request allows either market, so the on-demand plan may be the better one once they are."""
    return query.price_interruptions and query.market is MarketChoice.ANY


def _on_demand_stand_in(
    prepared: PreparedProblem, infeasible: PlanInfeasible, *, query: PlanQuery, on_demand: OnDemandSearch
) -> Searched:
    """When no configuration meets the limits: the best on-demand plan, warned (ON_DEMAND_ONLY), where it
    competes; otherwise (or when there is none) the 409 — what each fleet's memory needs when memory is
    what failed (srift.services.sharding.memory_infeasible), else the search's own PlanInfeasible."""
    stand_in = on_demand(prepared) if _on_demand_competes(query) else None
    if stand_in is None:
        held_back = memory_infeasible(
            prepared.problem,
            prepared.evaluator,
            query.model or "the model",
            strategy=query.strategy,
            checkpointing=query.checkpointing,
            offered=prepared.offered,
        )
        if held_back is not None:
            raise held_back from None
        raise infeasible
    return Searched(stand_in.warned(ON_DEMAND_ONLY), evaluations=None)


def _spot_fallback(searched: Searched, *, query: PlanQuery, on_demand: OnDemandSearch) -> SpotDecision:
    """Spot fallback: a searched plan that runs spot VMs is weighed against the best on-demand plan. Where
    on-demand competes (`_on_demand_competes`) and is the better plan (`_beats`) it replaces the spot plan,
    with a note; otherwise, with `fallback` on, it is the plan to fall back to. A spot plan that stays
    keeps the search's evaluations for its outlook (`_spot_document`)."""
    spot_plan = searched.solved
    if searched.evaluations is None or not _runs_spot(spot_plan):
        return SpotDecision(spot_plan)
    competes = _on_demand_competes(query)
    on_demand_plan = on_demand(spot_plan.prepared) if query.fallback or competes else None
    if (
        on_demand_plan is not None
        and competes
        and _beats(on_demand_plan.plan.predicted, spot_plan.plan.predicted, spot_plan.problem.constraints)
    ):
        return SpotDecision(on_demand_plan.warned(_on_demand_beats_note(on_demand_plan, spot_plan)))
    return SpotDecision(
        spot_plan,
        spot_evaluations=searched.evaluations,
        on_demand_fallback=on_demand_plan if query.fallback else None,
    )


def _runs_spot(solved: Solved) -> bool:
    """Whether the plan runs VMs whose interruptions are priced in."""
    return solved.problem.spot is not None and solved.problem.interruptions_per_s(solved.groups) > 0


def _on_demand_beats_note(on_demand_plan: Solved, spot_plan: Solved) -> str:
    od, spot = on_demand_plan.plan, spot_plan.plan
    return (
        f"on-demand beats spot once interruptions are priced in: {od.config.label()} "
        f"(${od.predicted.cost_usd:.2f}, {od.predicted.total_time_s:.0f} s) against the spot "
        f"fleet's expected ${spot.predicted.cost_usd:.2f}, {spot.predicted.total_time_s:.0f} s"
    )


def _solve_on_demand(
    first: PreparedProblem,
    *,
    session: Session,
    settings: Settings,
    query: PlanQuery,
    excluded: tuple[str, ...],
    held: Mapping[str, int] | None,
    started: float,
) -> Solved | None:
    """The best on-demand plan for the same request, or None when there is none within the limits: prepared
    from the profiles the request's own preparation (`first`) resolved (only the market differs). Its
    search gets a quarter of the request's solve budget, at most what is left of it since `started`
    (perf_counter), and at least FALLBACK_MIN_S: the request's search and this one stay within the solve
    budget plus that."""
    left = query.solve_budget_s - (time.perf_counter() - started)
    budget = max(FALLBACK_MIN_S, min(query.solve_budget_s / 4, left))
    asked = replace(query, market=MarketChoice.ON_DEMAND, solve_budget_s=budget)
    reuse = first.resolved
    try:
        prepared = prepare(
            session=session, settings=settings, query=asked, excluded=excluded, held=held, resolved=reuse
        )
        return Solved(prepared, optimize(prepared.problem, prepared.evaluator, prepared.options))
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


# -- the document ---------------------------------------------------------------------------------------


def plan_result(decision: SpotDecision, *, strategy: StrategyChoice) -> dict[str, Any]:
    """Document: the JSON stored for a plan (PlanResult's fields), built once from the spot fallback's
    decision: the plan, its setup (strategy_view, also on each choice of the plan and of its fallback), its
    spot outlook and on-demand fallback, what runs of it are compared with, and the network assumed.
    `strategy` is the request's: the setup's `why` says whether the request or the profiles left one."""
    chosen = decision.plan
    plan, problem, prepared = chosen.plan, chosen.problem, chosen.prepared
    c = plan.constraints
    geo = prepared.geo
    spot = _spot_document(decision)
    setup = strategy_view(plan, problem, prepared.evaluator, requested=strategy)
    return {
        "label": plan.config.label(),
        "objective": c.objective.value,
        "mode": plan.mode.value,
        "proven_optimal": plan.proven_optimal,
        "choices": _choices(plan.config, problem, setup=setup),
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
        "sources": [*prepared.profile_sources, *plan.sources],
        "warnings": list(plan.warnings),
        "locations": locations_view(plan.config, problem, geo) if geo else [],
        "cost": cost_line(plan.predicted),
        "egress": egress_view(plan.config, problem, geo, iterations=c.iterations) if geo else [],
        "spot": spot,
        "fallback": _fallback_document(decision.on_demand_fallback, setup=setup),
        "data_loading": list(prepared.feeds),
        "optimality_gap": plan.optimality_gap,
        "diminishing_returns": _returns(plan.diminishing_returns),
        "precision": _precision(problem),
        "estimated": estimated_document(problem.candidates, plan.config.choices),
        "calibration": _calibration_block(chosen),
        "strategy": setup,
        **_network_document(chosen),
    }


def spot_model_phase(result: Mapping[str, Any], *, query: PlanQuery, settings: Settings) -> dict[str, Any]:
    """Spot model: which model the spot section's figures come from (`spot.spot_model`). Without a recent
    market, the fitted law's (the Monte Carlo above, unchanged); with one, the nowcast's: the fitted law
    conditioned on the market's recent past (srift.services.replays.nowcast_spot, the prediction the
    benchmark validates). InvalidInput names the `recent_market` field a recent market cannot be used for."""
    spot = result.get("spot")
    if not spot:
        return dict(result)
    if query.recent_market is None:
        return {**result, "spot": {**spot, "spot_model": FITTED_LAW}}
    provider, region = request_location(
        {"provider": query.provider, "region": query.region, "regions": query.regions},
        default_region=settings.default_region,
    )
    conditioned = nowcast_spot(
        result,
        query.recent_market,
        stored=stored_traces(settings),
        provider=provider,
        region=region,
        seed=query.seed,
        samples=query.spot_samples,
    )
    return {**result, "spot": conditioned or {**spot, "spot_model": FITTED_LAW}}


def _spot_document(decision: SpotDecision) -> dict[str, Any] | None:
    """A spot plan's Monte Carlo outlook (srift.services.placement.spot_outlook), re-planning among the
    configurations its search evaluated and its on-demand fallback; None for a plan without spot VMs."""
    chosen, evaluations, fallback = decision.plan, decision.spot_evaluations, decision.on_demand_fallback
    problem = chosen.problem
    if evaluations is None or problem.spot is None:
        return None
    return spot_outlook(
        plan=chosen.plan,
        problem=problem,
        evaluated=[PredictedConfig(problem, g, r.prediction) for g, r in evaluations.records.items()],
        fallback=None
        if fallback is None
        else PredictedConfig(fallback.problem, fallback.groups, fallback.plan.predicted),
        policy=problem.spot,
        rates=chosen.prepared.rates,
    )


def _fallback_document(fallback: Solved | None, *, setup: Mapping[str, Any]) -> dict[str, Any] | None:
    """The on-demand fallback: its label, choices (with the plan's setup) and prediction."""
    if fallback is None:
        return None
    return {
        "label": fallback.plan.config.label(),
        "choices": _choices(fallback.plan.config, fallback.problem, setup=setup),
        "predicted": predicted_document(fallback.plan.predicted),
    }


def _calibration_block(chosen: Solved) -> dict[str, Any]:
    """What runs of this plan will be compared with (srift.services.calibration.plan_block)."""
    problem, groups = chosen.problem, chosen.groups
    return plan_block(
        chosen.prepared.evaluator,
        fleet=problem.fleet(groups),
        iterations=problem.constraints.iterations,
        usd_per_s=problem.usd_per_s(groups),
        model=problem.candidates[0].profile.model,
        network=chosen.prepared.network,
    )


def _network_document(chosen: Solved) -> dict[str, Any]:
    """`network`: what was assumed of the network for the plan's types (srift.services.network), when the
    problem was prepared with a bandwidth model."""
    prepared, config = chosen.prepared, chosen.plan.config
    if prepared.bandwidth is None:
        return {}
    instances = {c.name: c.offer.instance for c in chosen.problem.candidates}
    view = network_view(
        prepared.network,
        instances=[instances[ch.instance_type] for ch in config.choices],
        model=prepared.bandwidth,
        multi_node=config.vm_count >= 2,
    )
    return {"network": view}


def _choices(
    config: Config, problem: Problem, *, setup: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Each choice of `config` as a document, with the setup it runs (srift.services.sharding.choice_setup)
    when `setup` (a strategy view) is given."""
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
                **(choice_setup(setup, ch.instance_type) if setup is not None else {}),
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


def _precision(problem: Problem) -> str | None:
    return problem.candidates[0].profile.precision.value if problem.candidates else None


# -- reading plans ----------------------------------------------------------------------------------------


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
