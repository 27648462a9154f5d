"""Predictions as an application service: resolve profiles, prices and the bandwidth model, then simulate.

A request names a fleet (instance type, market, count, per-VM batch per choice) and the model's profiles;
the answer is the simulator's iteration estimate scaled to `iterations` and billed per second at the
catalog price of each choice's market. Nothing is stored. Every input problem is an InvalidInput (422)
that names the request field at fault and how to fix it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from srift.api.schemas.predictions import PredictionRequest
from srift.domain import (
    BusBandwidthModel,
    Choice,
    Config,
    FleetMember,
    MarketChoice,
    ModelProfile,
    Offer,
)
from srift.errors import InvalidInput, NotFound
from srift.settings import Settings
from srift.sim import CommMode, IterationEstimate, simulate, to_prediction

MAX_PS_VMS = 64
"""Parameter-server mode simulates every VM's steps; larger fleets should use allreduce."""

MAX_MC_LAYER_WORK = 2_000_000
"""mc_samples × layers above this would keep a request busy for minutes; asked to lower mc_samples."""

MAX_PS_LAYER_WORK = 200_000
"""VMs × layers above this in parameter-server mode would likewise take too long."""


def resolve_profiles(
    *,
    session: Session,
    profile_ids: Sequence[int] | None,
    profiles: Sequence[dict[str, Any]] | None,
    model: str | None,
) -> list[tuple[ModelProfile, str]]:
    """The request's profiles (preference order: as given, newest stored first) with a source name each."""
    from srift.profiling.store import find_profiles, get_profile

    if sum(x is not None for x in (profile_ids, profiles, model)) != 1:
        raise InvalidInput(
            "give exactly one of profile_ids, profiles or model",
            hint="name stored profiles by id, inline profile documents, or a model with stored profiles",
            field="profile_ids",
        )
    out: list[tuple[ModelProfile, str]] = []
    if profile_ids is not None:
        if not profile_ids:
            raise InvalidInput("is empty", hint="list at least one stored profile id", field="profile_ids")
        for k, pid in enumerate(profile_ids):
            try:
                prof = get_profile(session=session, profile_id=pid)
            except NotFound as exc:
                raise InvalidInput(exc.detail, hint=exc.hint, field=f"profile_ids[{k}]") from exc
            out.append((prof, f"profile:{pid} {prof.model}@{prof.accelerator}"))
    elif profiles is not None:
        if not profiles:
            raise InvalidInput("is empty", hint="inline at least one profile document", field="profiles")
        for k, doc in enumerate(profiles):
            try:
                prof = ModelProfile.from_dict(doc)
            except InvalidInput as exc:
                where = f"profiles[{k}].{exc.field}" if exc.field else f"profiles[{k}]"
                raise InvalidInput(exc.detail, hint=exc.hint, field=where) from exc
            out.append((prof, f"profile:inline {prof.model}@{prof.accelerator}"))
    else:
        assert model is not None
        found = find_profiles(session=session, model=model)
        if not found:
            raise InvalidInput(
                f"no stored profiles of model {model!r}",
                hint="profile the model (`srift profile --upload`), or give profile_ids or inline profiles",
                field="model",
            )
        out = [(p, f"profile:{pid} {p.model}@{p.accelerator}") for pid, p in reversed(found)]
    models = sorted({p.model for p, _ in out})
    if len(models) > 1:
        raise InvalidInput(
            f"the profiles are of different models ({', '.join(models)})",
            hint="give the profiles of one model (one per accelerator)",
            field="profiles" if profiles is not None else "profile_ids",
        )
    return out


def _offers(*, session: Session, request: PredictionRequest, region: str) -> dict[tuple[str, str], Offer]:
    from srift.catalog.store import get_offers

    names = list(dict.fromkeys(c.instance_type for c in request.config.choices))
    try:
        offers = get_offers(
            session=session,
            provider=request.provider,
            region=region,
            names=names,
            market=MarketChoice.ANY,
            snapshot=request.snapshot,
        )
    except NotFound as exc:
        if exc.field != "names":
            raise
        bad = next(
            (i for i, c in enumerate(request.config.choices) if repr(c.instance_type) in exc.detail), 0
        )
        raise InvalidInput(exc.detail, hint=exc.hint, field=f"config.choices[{bad}].instance_type") from exc
    return {(o.instance.name, o.market.value): o for o in offers}


def build_fleet(
    *,
    request: PredictionRequest,
    profiles: Sequence[tuple[ModelProfile, str]],
    offers: dict[tuple[str, str], Offer],
) -> tuple[list[FleetMember], list[Offer], list[str]]:
    """Fleet members, their offers and the profile sources used; InvalidInput names the choice at fault."""
    members, used_offers, used_sources = [], [], []
    seen: set[tuple[str, str]] = set()
    for i, choice in enumerate(request.config.choices):
        where = f"config.choices[{i}]"
        key = (choice.instance_type, choice.market.value)
        if key in seen:
            raise InvalidInput(
                f"{choice.instance_type} ({choice.market.value}) is listed twice",
                hint="give each instance type and market once, with the total count",
                field=f"{where}.instance_type",
            )
        seen.add(key)
        offer = offers.get(key)
        if offer is None:
            other = [m for (name, m) in offers if name == choice.instance_type]
            region = request.region or "the default region"
            raise InvalidInput(
                f"{choice.instance_type} has no {choice.market.value} price in {request.provider}/{region}",
                hint=(
                    f"use market {other[0]}" if other else "pick another region, snapshot or instance type"
                ),
                field=f"{where}.market" if other else f"{where}.instance_type",
            )
        inst = offer.instance
        match = next(((p, src) for p, src in profiles if inst.matches_accelerator(p.accelerator)), None)
        if match is None:
            have = ", ".join(sorted({p.accelerator for p, _ in profiles}))
            raise InvalidInput(
                f"no profile for {inst.name}'s accelerator {inst.accelerator!r} (profiles cover: {have})",
                hint=f"profile the model on {inst.accelerator} (`srift profile --upload`), or choose an "
                f"instance type with one of: {have}",
                field=f"{where}.instance_type",
            )
        prof, source = match
        per_device = choice.batch / inst.devices
        if per_device > prof.max_batch:
            raise InvalidInput(
                f"batch {choice.batch} is {per_device:g} per GPU on {inst.name} ({inst.devices} device(s)), "
                f"above the profile's max_batch {prof.max_batch}",
                hint=f"use a batch ≤ {prof.max_batch * inst.devices} per {inst.name}, or more VMs",
                field=f"{where}.batch",
            )
        if (
            request.comm is CommMode.PARAMETER_SERVER
            and sum(c.count for c in request.config.choices) > MAX_PS_VMS
        ):
            raise InvalidInput(
                f"parameter-server mode simulates at most {MAX_PS_VMS} VMs",
                hint="use comm=allreduce for larger fleets",
                field="comm",
            )
        members.append(FleetMember(instance=inst, count=choice.count, batch=choice.batch, profile=prof))
        used_offers.append(offer)
        if source not in used_sources:
            used_sources.append(source)
    return members, used_offers, used_sources


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def predict(
    *,
    session: Session,
    settings: Settings,
    request: PredictionRequest,
    bandwidth: BusBandwidthModel | None = None,
) -> dict[str, Any]:
    """Simulate the request's fleet and price it; returns PredictionOut's fields.

    `bandwidth` overrides the active model (tests, what-if); by default the active learned model answers for
    the types it covers and the α-β prior for the rest.
    """
    from srift.bandwidth.registry import active_model

    region = request.region or settings.default_region
    profiles = resolve_profiles(
        session=session, profile_ids=request.profile_ids, profiles=request.profiles, model=request.model
    )
    offers = _offers(session=session, request=request, region=region)
    members, used_offers, profile_sources = build_fleet(request=request, profiles=profiles, offers=offers)
    layers = max(len(m.profile.layers) for m in members)
    if request.mc_samples * layers > MAX_MC_LAYER_WORK:
        raise InvalidInput(
            f"{request.mc_samples} Monte Carlo samples of a {layers}-layer model are too many for a request",
            hint=f"use mc_samples ≤ {MAX_MC_LAYER_WORK // layers}",
            field="mc_samples",
        )
    vms = sum(m.count for m in members)
    if request.comm is CommMode.PARAMETER_SERVER and vms * layers > MAX_PS_LAYER_WORK:
        raise InvalidInput(
            f"parameter-server mode for {vms} VMs and {layers} layers is too much work for one request",
            hint="use fewer VMs, or comm=allreduce",
            field="comm",
        )
    model = bandwidth if bandwidth is not None else active_model(session=session, settings=settings)
    estimate: IterationEstimate = simulate(
        members,
        bandwidth=model,
        seed=request.seed,
        straggler_iters=request.straggler_iters,
        mc_samples=request.mc_samples,
        comm=request.comm,
        ps_servers=request.ps_servers,
    )
    usd_per_hr = sum(m.count * o.price_usd_per_hr for m, o in zip(members, used_offers, strict=True))
    prediction = to_prediction(estimate, iterations=request.iterations, usd_per_s=usd_per_hr / 3600.0)
    config = Config(
        tuple(
            Choice(instance_type=m.instance.name, market=o.market, count=m.count, batch=m.batch)
            for m, o in zip(members, used_offers, strict=True)
        )
    )
    price_sources = list(dict.fromkeys(f"price:{o.source} ({o.as_of.isoformat()})" for o in used_offers))
    model_sources = [s for s in estimate.sources if not s.startswith("profile:")]
    b = prediction.breakdown
    return {
        "label": config.label(),
        "choices": [
            {
                "instance_type": m.instance.name,
                "market": o.market.value,
                "count": m.count,
                "batch": m.batch,
                "gpus": m.instance.devices,
                "per_gpu_batch": m.per_device_batch,
                "price_usd_per_hr": o.price_usd_per_hr,
            }
            for m, o in zip(members, used_offers, strict=True)
        ],
        "global_batch": config.global_batch,
        "iterations": request.iterations,
        "comm": request.comm.value,
        "usd_per_hr": usd_per_hr,
        "predicted": {
            "iteration_s": prediction.iteration_s,
            "iteration_p10_s": prediction.iteration_p10_s,
            "iteration_p50_s": prediction.iteration_p50_s,
            "iteration_p90_s": prediction.iteration_p90_s,
            "total_time_s": prediction.total_time_s,
            "cost_usd": prediction.cost_usd,
        },
        "breakdown": {
            "forward_s": b.forward_s,
            "backward_s": b.backward_s,
            "compute_s": b.compute_s,
            "straggler_wait_s": b.straggler_wait_s,
            "exposed_intra_s": b.exposed_intra_s,
            "exposed_network_s": b.exposed_network_s,
            "communication_s": b.communication_s,
            "granularity": _num(b.granularity),
            "warnings": list(b.warnings),
        },
        "sources": [*profile_sources, *model_sources, *price_sources],
        "warnings": list(b.warnings),
    }
