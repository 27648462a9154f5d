"""Predictions as an application service: resolve profiles, prices and the bandwidth model, then simulate.

A request names a fleet (instance type, market, count, per-VM batch per choice) and the model's profiles;
the answer is the simulator's iteration estimate scaled to `iterations` and billed per second at the
catalog price of each choice's market. Nothing is stored. Every input problem is an InvalidInput (422)
that names the request field at fault and how to fix it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from srift.api.schemas.predictions import FleetConfigIn, PredictionRequest
from srift.domain import (
    BusBandwidthModel,
    Choice,
    Config,
    FleetMember,
    InstanceType,
    MarketChoice,
    ModelProfile,
    Offer,
)
from srift.domain.network import NetworkSpec
from srift.errors import InvalidInput, NotFound
from srift.services.network import check_transport, network_view, resolve_network
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


def _offers(
    *, session: Session, request: PredictionRequest, region: str, configs: Sequence[tuple[str, FleetConfigIn]]
) -> dict[tuple[str, str], Offer]:
    from srift.catalog.store import get_offers

    names = list(dict.fromkeys(c.instance_type for _, cfg in configs for c in cfg.choices))
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
            (
                f"{where}.choices[{i}].instance_type"
                for where, cfg in configs
                for i, c in enumerate(cfg.choices)
                if repr(c.instance_type) in exc.detail
            ),
            f"{configs[0][0]}.choices[0].instance_type",
        )
        raise InvalidInput(exc.detail, hint=exc.hint, field=bad) from exc
    return {(o.instance.name, o.market.value): o for o in offers}


def build_fleet(
    *,
    request: PredictionRequest,
    profiles: Sequence[tuple[ModelProfile, str]],
    offers: dict[tuple[str, str], Offer],
    config: FleetConfigIn | None = None,
    where: str = "config",
) -> tuple[list[FleetMember], list[Offer], list[str]]:
    """Fleet members, their offers and the profile sources used; InvalidInput names the choice at fault.

    A choice with `gpus` uses that many of each VM's GPUs: its member's instance type is the catalog type
    with that GPU count (the VM is still priced whole).
    """
    fleet_config = config if config is not None else request.config
    assert fleet_config is not None
    members, used_offers, used_sources = [], [], []
    seen: set[tuple[str, str]] = set()
    partial: dict[str, int | None] = {}
    for i, choice in enumerate(fleet_config.choices):
        at = f"{where}.choices[{i}]"
        key = (choice.instance_type, choice.market.value)
        if key in seen:
            raise InvalidInput(
                f"{choice.instance_type} ({choice.market.value}) is listed twice",
                hint="give each instance type and market once, with the total count",
                field=f"{at}.instance_type",
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
                field=f"{at}.market" if other else f"{at}.instance_type",
            )
        inst = offer.instance
        if choice.gpus is not None:
            if choice.gpus > inst.gpu_count:
                raise InvalidInput(
                    f"{inst.name} has {inst.gpu_count} GPU(s), fewer than the {choice.gpus} asked for",
                    hint=f"use gpus ≤ {inst.gpu_count}, or leave gpus out to use them all"
                    if inst.gpu_count
                    else "leave gpus out: this type has no GPU",
                    field=f"{at}.gpus",
                )
            if partial.setdefault(inst.name, choice.gpus) != choice.gpus:
                raise InvalidInput(
                    f"{inst.name} is used with {partial[inst.name]} and {choice.gpus} GPUs in one fleet",
                    hint="use the same number of GPUs on every VM of one type",
                    field=f"{at}.gpus",
                )
            inst = dataclasses.replace(inst, gpu_count=choice.gpus)
        elif partial.setdefault(inst.name, None) is not None:
            raise InvalidInput(
                f"{inst.name} is used with {partial[inst.name]} GPUs and with all of them in one fleet",
                hint="use the same number of GPUs on every VM of one type",
                field=f"{at}.gpus",
            )
        match = next(((p, src) for p, src in profiles if inst.matches_accelerator(p.accelerator)), None)
        if match is None:
            have = ", ".join(sorted({p.accelerator for p, _ in profiles}))
            raise InvalidInput(
                f"no profile for {inst.name}'s accelerator {inst.accelerator!r} (profiles cover: {have})",
                hint=f"profile the model on {inst.accelerator} (`srift profile --upload`), or choose an "
                f"instance type with one of: {have}",
                field=f"{at}.instance_type",
            )
        prof, source = match
        per_device = choice.batch / inst.devices
        if per_device > prof.max_batch:
            raise InvalidInput(
                f"batch {choice.batch} is {per_device:g} per GPU on {inst.name} ({inst.devices} device(s)), "
                f"above the profile's max_batch {prof.max_batch}",
                hint=f"use a batch ≤ {prof.max_batch * inst.devices} per {inst.name}, or more VMs",
                field=f"{at}.batch",
            )
        if (
            request.comm is CommMode.PARAMETER_SERVER
            and sum(c.count for c in fleet_config.choices) > MAX_PS_VMS
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


def network_of(*, session: Session | None, request: PredictionRequest) -> NetworkSpec:
    """The request's NetworkSpec (measured rates from probe jobs resolved)."""
    net = request.network
    return resolve_network(
        session=session,
        transport=net.transport,
        library=net.library,
        placement_group=net.placement_group,
        flows_per_peer=net.flows_per_peer,
        measured_gbps=net.measured_gbps,
        probe_job_ids=net.probe_job_ids,
    )


def predict(
    *,
    session: Session,
    settings: Settings,
    request: PredictionRequest,
    bandwidth: BusBandwidthModel | None = None,
) -> dict[str, Any]:
    """Simulate the request's fleet (or each fleet of a sweep) and price it; returns PredictionOut's fields,
    or PredictionSweepOut's ({predictions, count, elapsed_s}) for `configs`.

    `bandwidth` overrides the active model (tests, what-if); by default the active learned model answers for
    the types it covers and the α-β prior, under the request's network assumptions, for the rest.
    """
    from srift.bandwidth.registry import active_model
    from srift.sim.network import MemoBandwidth

    started = time.perf_counter()
    if (request.config is None) == (request.configs is None):
        raise InvalidInput(
            "give exactly one of config (one fleet) or configs (a sweep)",
            hint="put one fleet under config, or a list of fleets under configs",
            field="config",
        )
    configs = (
        [("config", request.config)]
        if request.config is not None
        else [(f"configs[{k}]", c) for k, c in enumerate(request.configs or [])]
    )
    region = request.region or settings.default_region
    profiles = resolve_profiles(
        session=session, profile_ids=request.profile_ids, profiles=request.profiles, model=request.model
    )
    offers = _offers(session=session, request=request, region=region, configs=configs)
    network = network_of(session=session, request=request)
    model = (
        bandwidth
        if bandwidth is not None
        else active_model(session=session, settings=settings, network=network)
    )
    memo = MemoBandwidth(model)
    answers = [
        _predict_one(
            request=request,
            profiles=profiles,
            offers=offers,
            config=cfg,
            where=where,
            network=network,
            model=model,
            memo=memo,
        )
        for where, cfg in configs
    ]
    if request.config is not None:
        return answers[0]
    every = [inst for _, cfg in configs for inst in _instances(cfg, offers)]
    overall = network_view(
        network,
        instances=every,
        model=model,
        multi_node=any(sum(c.count for c in cfg.choices) >= 2 for _, cfg in configs),
    )
    return {
        "predictions": answers,
        "count": len(answers),
        "network": overall,
        "elapsed_s": time.perf_counter() - started,
    }


def _instances(config: FleetConfigIn, offers: dict[tuple[str, str], Offer]) -> list[InstanceType]:
    return [offers[(c.instance_type, c.market.value)].instance for c in config.choices]


def _predict_one(
    *,
    request: PredictionRequest,
    profiles: Sequence[tuple[ModelProfile, str]],
    offers: dict[tuple[str, str], Offer],
    config: FleetConfigIn,
    where: str,
    network: NetworkSpec,
    model: BusBandwidthModel,
    memo: BusBandwidthModel,
) -> dict[str, Any]:
    members, used_offers, profile_sources = build_fleet(
        request=request, profiles=profiles, offers=offers, config=config, where=where
    )
    check_transport(
        ((f"{where}.choices[{i}].instance_type", m.instance) for i, m in enumerate(members)), network
    )
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
    estimate: IterationEstimate = simulate(
        members,
        bandwidth=memo,
        seed=request.seed,
        straggler_iters=request.straggler_iters,
        mc_samples=request.mc_samples,
        comm=request.comm,
        ps_servers=request.ps_servers,
    )
    usd_per_hr = sum(m.count * o.price_usd_per_hr for m, o in zip(members, used_offers, strict=True))
    prediction = to_prediction(estimate, iterations=request.iterations, usd_per_s=usd_per_hr / 3600.0)
    chosen = {c.instance_type: c.gpus for c in config.choices}
    fleet_config = Config(
        tuple(
            Choice(
                instance_type=m.instance.name,
                market=o.market,
                count=m.count,
                batch=m.batch,
                gpus=chosen.get(m.instance.name),
            )
            for m, o in zip(members, used_offers, strict=True)
        )
    )
    price_sources = list(dict.fromkeys(f"price:{o.source} ({o.as_of.isoformat()})" for o in used_offers))
    model_sources = [s for s in estimate.sources if not s.startswith("profile:")]
    b = prediction.breakdown
    multi_node = vms >= 2
    return {
        "label": fleet_config.label(),
        "choices": [
            {
                "instance_type": m.instance.name,
                "market": o.market.value,
                "count": m.count,
                "batch": m.batch,
                "gpus": m.instance.devices,
                "per_gpu_batch": m.per_device_batch,
                "price_usd_per_hr": o.price_usd_per_hr,
                "instance_gpus": o.instance.gpu_count,
            }
            for m, o in zip(members, used_offers, strict=True)
        ],
        "global_batch": fleet_config.global_batch,
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
        "network": network_view(
            network,
            instances=[m.instance for m in members],
            model=model,
            multi_node=multi_node,
        ),
        "sources": [*profile_sources, *model_sources, *price_sources],
        "warnings": list(b.warnings),
    }
