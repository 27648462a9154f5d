"""Where a plan may place VMs and what placing them costs: locations, links, egress, data loading, spot.

Helpers for the plans service: which (provider, region) locations a request allows and their offers; the
network facts (shipped, plus the request's measured links); spot interruption rates per candidate; the
input pipeline each profile carries; and the plan's views of all of it (VMs per location, the cost line
with egress, egress per route, what each VM type can feed, and a spot plan's Monte Carlo outlook).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from srift.catalog.geo import (
    GeoCatalog,
    SpotFacts,
    hourly_to_monthly_fraction,
    monthly_to_hourly_rate,
    one_way_link,
    shipped_geo,
)
from srift.domain import Config, InputPipeline, ModelProfile, Offer, Plan, Prediction
from srift.domain.catalog import Market, MarketChoice
from srift.domain.geo import AllreducePattern, Link, Location
from srift.errors import InvalidInput, NotFound
from srift.optimize.space import Candidate, Groups, Problem
from srift.optimize.spot import (
    Alternative,
    Alternatives,
    ReplanPolicy,
    RunRates,
    SpotOffer,
    SpotPolicy,
    expected_run,
    monte_carlo,
)
from srift.sim.geo import GeoContext, egress_flows, gradient_bytes, spans_locations
from srift.sim.layers import layer_arrays
from srift.spot.model import TraceModel


@dataclass(frozen=True, slots=True)
class MeasuredLink:
    """A measured link from the request: (from, to) location keys, Gbit/s of one stream, round trip ms."""

    source: str
    destination: str
    bandwidth_gbps: float
    rtt_ms: float


def allowed_locations(
    *,
    session: Session,
    provider: str,
    region: str,
    providers: Sequence[str] | None,
    regions: Sequence[str] | None,
    snapshot: str | None,
) -> list[Location]:
    """The (provider, region) locations a request allows, in a stable order.

    `regions` entries are region names (for every allowed provider that has them) or provider/region;
    without `regions`, one provider means its `region`, several providers every region they offer. A
    provider or region the catalog does not hold is NotFound (404, as POST /v1/predictions and the catalog
    answer it: the request is well formed, the data it names is not stored), naming the field and listing
    the known ones; a zone, or a provider/region whose provider is not allowed, is InvalidInput.
    """
    from srift.catalog.store import known_providers, known_regions

    wanted = list(dict.fromkeys(providers or [provider]))
    known = known_providers(session, snapshot=snapshot)
    for i, p in enumerate(wanted):
        if p not in known:
            raise NotFound(
                f"unknown provider {p!r}",
                hint=f"use one of: {', '.join(known)}",
                field=f"providers[{i}]" if providers else "provider",
            )
    by_provider = {p: known_regions(session, p, snapshot=snapshot) for p in wanted}
    out: list[Location] = []
    if not regions:
        if len(wanted) == 1:
            out.append(Location(wanted[0], region))
            if region not in by_provider[wanted[0]]:
                raise NotFound(
                    f"unknown region {region!r} for provider {wanted[0]!r}",
                    hint=f"use one of: {', '.join(by_provider[wanted[0]])}",
                    field="region",
                )
        else:
            out.extend(Location(p, r) for p in wanted for r in by_provider[p])
        return out
    for i, raw in enumerate(regions):
        if "/" in raw:
            loc = Location.parse(raw, field=f"regions[{i}]")
            if loc.zone is not None:
                raise InvalidInput(
                    f"{raw!r} names a zone; plans place VMs by region",
                    hint="write provider/region",
                    field=f"regions[{i}]",
                )
            if loc.provider not in by_provider:
                raise InvalidInput(
                    f"provider {loc.provider!r} is not among the allowed providers ({', '.join(wanted)})",
                    hint="add it to `providers`, or drop the region",
                    field=f"regions[{i}]",
                )
            if loc.region not in by_provider[loc.provider]:
                raise NotFound(
                    f"unknown region {loc.region!r} for provider {loc.provider!r}",
                    hint=f"use one of: {', '.join(by_provider[loc.provider])}",
                    field=f"regions[{i}]",
                )
            out.append(loc)
            continue
        hits = [Location(p, raw) for p in wanted if raw in by_provider[p]]
        if not hits:
            every = sorted({r for rs in by_provider.values() for r in rs})
            raise NotFound(
                f"no allowed provider ({', '.join(wanted)}) has region {raw!r}",
                hint=f"use one of: {', '.join(every)}, or write provider/region",
                field=f"regions[{i}]",
            )
        out.extend(hits)
    return list(dict.fromkeys(out))


def gather_offers(
    *, session: Session, locations: Sequence[Location], market: MarketChoice, snapshot: str | None
) -> list[Offer]:
    """Every priced offer of the allowed locations (the catalog front layer, one call per location)."""
    from srift.catalog.store import get_offers

    offers: list[Offer] = []
    for loc in locations:
        offers.extend(
            get_offers(
                session=session, provider=loc.provider, region=loc.region, market=market, snapshot=snapshot
            )
        )
    return offers


def geo_context(
    *, pattern: AllreducePattern, links: Sequence[MeasuredLink] = (), base: GeoCatalog | None = None
) -> GeoContext:
    """The shipped network facts (or `base`) with the request's measured links, and the pattern."""
    catalog = base or shipped_geo()
    extra: dict[tuple[str, str], Link] = {}
    for i, spec in enumerate(links):
        a = Location.parse(spec.source, field=f"links[{i}].from")
        b = Location.parse(spec.destination, field=f"links[{i}].to")
        if a == b:
            raise InvalidInput(
                "a link joins two different locations",
                hint="give from and to that differ",
                field=f"links[{i}]",
            )
        extra[(a.key, b.key)] = one_way_link(
            bandwidth_gbps=spec.bandwidth_gbps,
            rtt_ms=spec.rtt_ms,
            source="measured link given in the request",
        )
    return GeoContext(catalog.with_links(extra) if extra else catalog, pattern)


@dataclass(frozen=True, slots=True)
class RateInfo:
    """One spot candidate's interruption rate and where it comes from."""

    instance_type: str
    location: Location | None
    monthly_fraction: float
    per_hr: float
    band: str
    source: str
    widened_monthly: tuple[float, float] | None = None
    """No trace covers the offer: its fallback band widened one band each side (monthly shares)."""


def price_interruptions(
    candidates: Sequence[Candidate],
    *,
    facts: SpotFacts,
    default_location: Location,
    overrides: Mapping[str, float] | None,
    model: TraceModel | None = None,
) -> tuple[tuple[Candidate, ...], list[RateInfo]]:
    """Candidates with their spot interruption rate (per second) set, and what each rate rests on.

    An override keyed `provider/region/type` wins over one keyed by the type alone, which wins over the
    interruption model fitted to traces (`model`, srift.spot: the offer carries its laws, and its rate is
    one VM's mean), which wins over the shipped facts (a published band). Values are monthly shares of VMs
    interrupted (0..1). With a model, an offer it does not cover names its fallback band and widens it.
    """
    overrides = dict(overrides or {})
    for key, value in overrides.items():
        if not (isinstance(value, int | float) and 0 <= value < 1):
            raise InvalidInput(
                f"{value!r} is not a share in [0, 1)",
                hint="give the share of VMs interrupted per month, e.g. 0.075",
                field=f"interruption_rates.{key}",
            )
    out, infos = [], []
    for cand in candidates:
        if cand.market is not Market.SPOT:
            out.append(cand)
            continue
        where = cand.location or default_location
        exact = f"{where.key}/{cand.name}"
        if exact in overrides or cand.name in overrides:
            fraction = float(overrides.get(exact, overrides.get(cand.name, 0.0)))
            info = RateInfo(
                cand.name, cand.location, fraction, monthly_to_hourly_rate(fraction), "given", "the request"
            )
        elif model is not None and model.covers(
            provider=where.provider, region=where.region, instance_type=cand.name
        ):
            offer = SpotOffer(model, where.provider, where.region, cand.name)
            lam_hr = offer.interruptions_per_s(1) * 3600.0
            zones = model.zones(provider=where.provider, region=where.region, instance_type=cand.name)
            info = RateInfo(
                cand.name,
                cand.location,
                hourly_to_monthly_fraction(lam_hr),
                lam_hr,
                "traces",
                f"fitted to traces of {cand.name} in {', '.join(zones)} (srift/spot/data/public-traces.json, "
                "from skypilot-org/spot-traces): time to interruption and capacity gaps per fleet size",
            )
            infos.append(info)
            out.append(replace(cand, interruptions_per_s=lam_hr / 3600.0, spot_offer=offer))
            continue
        else:
            rate = facts.rate(provider=where.provider, region=where.region, instance_type=cand.name)
            low, high = facts.widened(rate.band)
            untraced = (
                f"; no trace covers {cand.name} in {where.key}: fallback band {rate.band}, widened one band "
                f"each side to {low:.1%}..{high:.1%} a month"
                if model is not None
                else ""
            )
            info = RateInfo(
                cand.name,
                cand.location,
                rate.monthly_fraction,
                rate.per_hr,
                rate.band,
                rate.source + untraced,
                widened_monthly=(low, high) if model is not None else None,
            )
        infos.append(info)
        out.append(replace(cand, interruptions_per_s=info.per_hr / 3600.0))
    return tuple(out), infos


def with_pipeline(profiles: Sequence[ModelProfile], pipe: InputPipeline | None) -> list[ModelProfile]:
    """The profiles with the request's input pipeline (when given) in place of their own."""
    if pipe is None:
        return list(profiles)
    return [replace(p, input_pipeline=pipe) for p in profiles]


def feed_view(
    candidates: Sequence[Candidate], *, read_gbps: float | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """What each candidate type's input pipeline can feed against what its GPUs train, and notes for the
    types that stall at their largest batch (the plan avoids them or flags the stall)."""
    from srift.domain import FleetMember
    from srift.sim.data import feed_rate

    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    seen: set[tuple[str, str]] = set()
    for cand in candidates:
        key = (cand.name, cand.location.key if cand.location else "")
        if key in seen or cand.profile.input_pipeline is None:
            continue
        seen.add(key)
        top = cand.max_vm_batch
        member = FleetMember(instance=cand.instance, count=1, batch=top, profile=cand.profile)
        rate = feed_rate(member, read_gbps=read_gbps)
        assert rate is not None
        gpu_rate = top / cand.floor_s(top)
        stalls_above = None
        if rate.samples_per_s < gpu_rate:
            stalls_above = max(
                (b for b in range(cand.min_vm_batch, top + 1) if b / cand.floor_s(b) <= rate.samples_per_s),
                default=0,
            )
            limit = (
                f"{rate.loader_cores} loader vCPU(s) decode {rate.decode_samples_per_s:.0f} samples/s"
                if rate.bound == "decode"
                else f"reads deliver {rate.read_samples_per_s:.0f} samples/s"
            )
            where = f" in {cand.location.key}" if cand.location else ""
            notes.append(
                f"{cand.name}{where} is data-loading bound: its {limit}, its GPUs train {gpu_rate:.0f} "
                f"samples/s at batch {top}"
                + (f"; batches above {stalls_above} per VM stall" if stalls_above else "; every batch stalls")
                + " (plans that use it pay the stall; more vCPUs per GPU avoid it)"
            )
        rows.append(
            {
                "instance_type": cand.name,
                "location": cand.location.key if cand.location else None,
                "loader_cores": rate.loader_cores,
                "samples_per_s": rate.samples_per_s,
                "bound": rate.bound,
                "gpu_samples_per_s": gpu_rate,
                "stalls_above_batch": stalls_above,
            }
        )
    return rows, notes


def locations_view(config: Config, problem: Problem, geo: GeoContext) -> list[dict[str, Any]]:
    """VMs, GPUs and hourly price per location of a plan (empty when it does not span locations)."""
    if len(config.locations) < 2 and not any(c.location for c in problem.candidates):
        return []
    by_key = {(c.name, c.market, c.location): c for c in problem.candidates}
    rows: dict[Location, dict[str, Any]] = {}
    for ch in config.choices:
        if ch.location is None:
            continue
        cand = by_key[(ch.instance_type, ch.market, ch.location)]
        info = geo.catalog.region(ch.location)
        row = rows.setdefault(
            ch.location,
            {
                "location": ch.location.key,
                "provider": ch.location.provider,
                "region": ch.location.region,
                "continent": info.continent.value if info else None,
                "place": info.place if info else "",
                "vms": 0,
                "gpus": 0,
                "usd_per_hr": 0.0,
            },
        )
        row["vms"] += ch.count
        row["gpus"] += ch.count * cand.devices
        row["usd_per_hr"] += ch.count * cand.offer.price_usd_per_hr
    return list(rows.values())


def egress_view(
    config: Config, problem: Problem, geo: GeoContext, *, iterations: int
) -> list[dict[str, Any]]:
    """The plan's egress flows: bytes per iteration, route, price and total over the (uninterrupted) run."""
    fleet = problem.fleet(config_groups(config, problem))
    if not spans_locations(fleet):
        return []
    grad = gradient_bytes(layer_arrays(fleet[0].profile))
    return [
        {
            "source": f.source.key,
            "destination": f.destination.key,
            "route": f.route.value,
            "gb_per_iteration": f.bytes_per_iteration / 1e9,
            "usd_per_gb": f.usd_per_gb,
            "usd": f.usd_per_iteration * iterations,
        }
        for f in egress_flows(fleet, grad_bytes=grad, geo=geo)
    ]


def cost_line(p: Prediction) -> dict[str, float]:
    """Instances and egress, separated."""
    return {
        "instances_usd": p.instances_usd,
        "egress_usd": p.egress_usd,
        "total_usd": p.cost_usd,
        "egress_share": p.egress_share,
    }


def config_groups(config: Config, problem: Problem) -> Groups:
    """`config` as groups (candidate index, count, batch) of `problem`, in the optimizer's sorted order."""
    index = {(c.name, c.market, c.location): i for i, c in enumerate(problem.candidates)}
    return tuple(
        sorted(
            (index[(ch.instance_type, ch.market, ch.location)], ch.count, ch.batch) for ch in config.choices
        )
    )


def _rates(problem: Problem, groups: Groups, p: Prediction) -> RunRates:
    iterations = problem.constraints.iterations
    usd_per_s = problem.usd_per_s(groups)
    time = p.uninterrupted_time_s if p.uninterrupted_time_s is not None else p.total_time_s
    cost = p.uninterrupted_cost_usd if p.uninterrupted_cost_usd is not None else p.cost_usd
    egress_each = max(cost - time * usd_per_s, 0.0) / iterations
    return problem.run_rates(
        groups, iteration_s=p.iteration_s, usd_per_s=usd_per_s, egress_usd_per_iteration=egress_each
    )


@dataclass(frozen=True, slots=True)
class PredictedConfig:
    """A configuration of some problem and its prediction (the optimizer's records, or a fallback plan)."""

    problem: Problem
    groups: Groups
    prediction: Prediction


def spot_outlook(
    *,
    plan: Plan,
    problem: Problem,
    evaluated: Iterable[PredictedConfig],
    fallback: PredictedConfig | None,
    policy: SpotPolicy,
    rates: Sequence[RateInfo],
) -> dict[str, Any] | None:
    """A spot plan's Monte Carlo outlook (Srift §4.5 re-planning among the evaluated configurations)."""
    chosen = config_groups(plan.config, problem)
    if problem.interruptions_per_s(chosen) <= 0:
        return None
    alts, start = _alternatives(evaluated, fallback, problem=problem, chosen=chosen)
    if start is None:
        return None
    c = problem.constraints
    mc = monte_carlo(
        alts,
        start=start,
        iterations=c.iterations,
        policy=policy,
        replan=ReplanPolicy.REPLAN,
        time_limit_s=c.time_limit_s,
        budget_usd=c.budget_usd,
        minimize_cost=c.objective.value == "min_cost",
    )
    closed = expected_run(alts.items[start].rates, iterations=c.iterations, policy=policy)
    base = alts.items[start].rates
    uninterrupted = c.iterations * base.iteration_s
    return {
        "method": "monte carlo over interruptions with Srift §4.5 re-planning",
        "samples": mc.samples,
        "expected_time_s": mc.mean_time_s,
        "expected_cost_usd": mc.mean_cost_usd,
        "uninterrupted_time_s": uninterrupted,
        "uninterrupted_cost_usd": uninterrupted * base.usd_per_s
        + c.iterations * base.egress_usd_per_iteration,
        "time_p10_s": mc.time_p10_s,
        "time_p50_s": mc.time_p50_s,
        "time_p90_s": mc.time_p90_s,
        "cost_p90_usd": mc.cost_p90_usd,
        "expected_interruptions": mc.mean_interruptions,
        "p_interrupted": mc.p_interrupted,
        "p_meets_time_limit": mc.p_meets_time_limit,
        "p_within_budget": mc.p_within_budget,
        "closed_form_time_s": closed.time_s,
        "checkpoint_interval_s": policy.checkpoint_interval_s,
        "restart_s": policy.restart_s,
        "rates": _rates_document(plan, rates),
    }


def _alternatives(
    evaluated: Iterable[PredictedConfig],
    fallback: PredictedConfig | None,
    *,
    problem: Problem,
    chosen: Groups,
) -> tuple[Alternatives, int | None]:
    """The configurations a spot run may re-plan among (the evaluated ones, then the fallback), as counts
    per distinct spot candidate (one slot per candidate sort key, across problems), and the index of the
    `chosen` groups of `problem` among them (None when it was not evaluated)."""
    keys: list[tuple[str, str, str]] = []
    index: dict[tuple[str, str, str], int] = {}
    lam: list[float] = []
    offers: list[SpotOffer | None] = []

    def slot(cand: Candidate) -> int:
        key = cand.sort_key
        if key not in index:
            index[key] = len(keys)
            keys.append(key)
            lam.append(cand.interruptions_per_s)
            offers.append(cand.spot_offer if cand.interruptions_per_s > 0 else None)
        return index[key]

    raw: list[tuple[dict[int, int], RunRates, str]] = []
    start = None
    fallback_index = None
    for item in [*evaluated, *([fallback] if fallback else [])]:
        counts: dict[int, int] = {}
        for i, n, _ in item.groups:
            j = slot(item.problem.candidates[i])
            counts[j] = counts.get(j, 0) + n
        raw.append(
            (
                counts,
                _rates(item.problem, item.groups, item.prediction),
                item.problem.config(item.groups).label(),
            )
        )
        if item.problem is problem and tuple(item.groups) == chosen:
            start = len(raw) - 1
        if fallback is not None and item is fallback:
            fallback_index = len(raw) - 1
    width = len(keys)
    alts = Alternatives(
        items=[Alternative(tuple(c.get(j, 0) for j in range(width)), r, label) for c, r, label in raw],
        candidate_rates_per_s=tuple(lam),
        fallback=fallback_index,
        candidate_offers=tuple(offers) if any(o is not None for o in offers) else (),
    )
    return alts, start


def _rates_document(plan: Plan, rates: Sequence[RateInfo]) -> list[dict[str, Any]]:
    """The interruption rates of the plan's spot choices and what each rests on."""
    return [
        {
            "instance_type": r.instance_type,
            "location": r.location.key if r.location else None,
            "monthly_fraction": r.monthly_fraction,
            "per_hr": r.per_hr,
            "band": r.band,
            "source": r.source,
            "widened_monthly": list(r.widened_monthly) if r.widened_monthly else None,
        }
        for r in rates
        if any(
            ch.instance_type == r.instance_type and ch.location == r.location and ch.market is Market.SPOT
            for ch in plan.config.choices
        )
    ]


def finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
