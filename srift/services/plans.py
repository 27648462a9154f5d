"""Plans as an application service: resolve profiles, offers and bandwidth model; optimize, store, read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from srift.api.schemas.plans import PlanRequest
from srift.db.tables import PlanRow
from srift.domain import (
    BaselineResult,
    Breakdown,
    Config,
    Constraints,
    ModelProfile,
    Plan,
    Prediction,
)
from srift.domain.catalog import MarketChoice
from srift.domain.geo import Location
from srift.domain.profile import InputPipeline
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.solver import PlanInfeasible, SolveOptions, optimize, optimize_with_evaluations
from srift.optimize.space import Candidate, Groups, Problem, build_candidates
from srift.optimize.spot import SpotPolicy
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
from srift.settings import Settings
from srift.sim.geo import GeoContext


@dataclass(frozen=True, slots=True)
class PreparedProblem:
    """A request turned into the optimizer's inputs, with what placing the fleet rests on."""

    problem: Problem
    evaluator: Evaluator
    options: SolveOptions
    profile_sources: tuple[str, ...]
    geo: GeoContext | None = None
    rates: tuple[RateInfo, ...] = ()
    feeds: tuple[dict[str, Any], ...] = ()
    default_location: Location | None = None


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

    top = settings.max_solve_budget_s
    if request.solve_budget_s > top:
        raise InvalidInput(
            f"{request.solve_budget_s:g} s is above this service's maximum of {top:g} s",
            hint=f"ask for at most {top:g} s (SRIFT_MAX_SOLVE_BUDGET_S sets the maximum)",
            field="solve_budget_s",
        )
    profiles, sources = resolve_profiles(session=session, request=request)
    if request.input_pipeline is not None:
        pipe = request.input_pipeline
        profiles = with_pipeline(
            profiles,
            InputPipeline(pipe.samples_per_s_per_core, pipe.bytes_per_sample, source="the request"),
        )
    region = request.region or settings.default_region
    locations = allowed_locations(
        session=session,
        provider=request.provider,
        region=region,
        providers=request.providers,
        regions=request.regions,
        snapshot=request.snapshot,
    )
    located = len(locations) > 1
    offers = gather_offers(
        session=session, locations=locations, market=request.market, snapshot=request.snapshot
    )
    candidates, notes = build_candidates(
        offers=offers,
        profiles=profiles,
        market=request.market,
        availability=request.availability,
        default_cap=request.max_count_per_type,
        excluded=(),
        located=located,
    )
    candidates = _apply_exclusions(candidates, excluded=excluded, held=held or {})
    if not candidates:
        covered = sorted({p.accelerator for p in profiles})
        where = ", ".join(loc.key for loc in locations)
        raise InvalidInput(
            f"no {request.market.value} offer in {where} matches the profiles' "
            f"accelerators ({', '.join(covered)})",
            hint="profile the model on an offered accelerator, or change provider, region or market",
            field="availability" if request.availability else "profile_ids",
        )
    rates: list[RateInfo] = []
    if request.price_interruptions:
        from srift.catalog.geo import shipped_spot

        candidates, rates = price_interruptions(
            candidates,
            facts=shipped_spot(),
            default_location=locations[0],
            overrides=request.interruption_rates,
        )
    spot = (
        SpotPolicy(
            checkpoint_interval_s=request.checkpoint_interval_s,
            restart_s=request.restart_s,
            samples=request.spot_samples,
            seed=request.seed,
        )
        if request.price_interruptions
        else None
    )
    feeds, feed_notes = feed_view(candidates, read_gbps=request.read_gbps)
    constraints = Constraints(
        global_batch=request.global_batch,
        iterations=request.iterations,
        objective=request.objective,
        time_limit_s=request.time_limit_s,
        budget_usd=request.budget_usd,
    )
    kept = held or {}
    skipped = [f"{name} left out (interrupted; none still running)" for name in excluded if name not in kept]
    if not request.price_interruptions and request.market is not MarketChoice.ON_DEMAND:
        notes = (*notes, "spot interruptions are not priced in (price_interruptions: false)")
    problem = Problem(
        candidates, constraints, request.batch_policy, notes=(*notes, *skipped, *feed_notes), spot=spot
    )
    geo = geo_context(
        pattern=request.allreduce,
        links=[LinkSpec(x.from_, x.to, x.bandwidth_gbps, x.rtt_ms) for x in request.links or []],
    )
    evaluator = SimEvaluator(
        bandwidth=active_model(session=session, settings=settings),
        seed=request.seed,
        geo=geo,
        read_gbps=request.read_gbps,
    )
    options = SolveOptions(mode=request.mode, solve_budget_s=request.solve_budget_s, k=request.eager_k)
    return PreparedProblem(
        problem,
        evaluator,
        options,
        tuple(sources),
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
    request: PlanRequest,
    excluded: tuple[str, ...] = (),
    held: Mapping[str, int] | None = None,
    request_doc: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Optimize `request`, store the plan, and return it as PlanOut's dict (PlanInfeasible when none fits).

    A spot plan also gets an on-demand fallback (when `fallback` is on) and a Monte Carlo outlook over
    interruptions that re-plans as Srift §4.5 does, among the configurations the search evaluated.
    """
    prepared = prepare(session=session, settings=settings, request=request, excluded=excluded, held=held)
    weigh = request.price_interruptions and request.market is MarketChoice.ANY
    try:
        plan, evals = optimize_with_evaluations(prepared.problem, prepared.evaluator, prepared.options)
    except PlanInfeasible:
        od = _on_demand(session, settings, request, excluded, held) if weigh else None
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
    if spot_used and evals is not None and (request.fallback or weigh):
        od = _on_demand(session, settings, request, excluded, held)
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
        elif od is not None and request.fallback:
            fb_prepared, fb_plan = od
            fallback = Evaluated(
                fb_prepared.problem, _best_groups(fb_plan, fb_prepared.problem), fb_plan.predicted
            )
            fallback_doc = {
                "label": fb_plan.config.label(),
                "choices": _choices(fb_plan.config, fb_prepared.problem),
                "predicted": _predicted(fb_plan.predicted),
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
    row = PlanRow(request=request_doc or request.model_dump(mode="json"), result=result)
    session.add(row)
    session.flush()
    return plan_view(row)


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
    request: PlanRequest,
    excluded: tuple[str, ...],
    held: Mapping[str, int] | None,
) -> tuple[PreparedProblem, Plan] | None:
    """The best on-demand plan for the same request, or None when there is none within the limits."""
    od = request.model_copy(
        update={"market": MarketChoice.ON_DEMAND, "solve_budget_s": max(0.2, request.solve_budget_s / 4)}
    )
    try:
        alt = prepare(session=session, settings=settings, request=od, excluded=excluded, held=held)
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


def _predicted(p: Prediction) -> dict[str, float | None]:
    return {
        "iteration_s": p.iteration_s,
        "iteration_p10_s": p.iteration_p10_s,
        "iteration_p50_s": p.iteration_p50_s,
        "iteration_p90_s": p.iteration_p90_s,
        "total_time_s": p.total_time_s,
        "cost_usd": p.cost_usd,
        "egress_usd": p.egress_usd,
        "uninterrupted_time_s": p.uninterrupted_time_s,
        "uninterrupted_cost_usd": p.uninterrupted_cost_usd,
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
        "data_stall_s": b.data_stall_s,
        "exposed_location_s": b.exposed_location_s,
        "warnings": list(b.warnings),
    }


def _choices(config: Config, problem: Problem) -> list[dict[str, Any]]:
    by_key = {(c.name, c.market, c.location): c for c in problem.candidates}
    out = []
    for ch in config.choices:
        cand = by_key[(ch.instance_type, ch.market, ch.location)]
        out.append(
            {
                "instance_type": ch.instance_type,
                "market": ch.market.value,
                "count": ch.count,
                "batch": ch.batch,
                "gpus": cand.devices,
                "per_gpu_batch": ch.batch / cand.devices,
                "price_usd_per_hr": cand.offer.price_usd_per_hr,
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
        "predicted": _predicted(b.prediction),
        "breakdown": _breakdown(b.prediction.breakdown),
        "feasible": b.feasible,
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
        "locations": locations_view(plan.config, problem, geo) if geo else [],
        "cost": cost_line(plan.predicted),
        "egress": egress_view(plan.config, problem, geo, iterations=c.iterations) if geo else [],
        "spot": None,
        "fallback": None,
        "data_loading": list(prepared.feeds) if prepared is not None else [],
    }
