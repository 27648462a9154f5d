"""Predictions as an application service: resolve profiles, prices and the bandwidth model, then simulate.

A request names a fleet (instance type, market, count, per-VM batch per choice) and the model's profiles;
the answer is the simulator's iteration estimate scaled to `iterations` and billed per second at the
catalog price of each choice's market. Nothing is stored. Every input problem is an InvalidInput (422),
and missing data (an unknown instance type, profile id or model) a NotFound (404); each names the request
field at fault and how to fix it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from srift.domain import (
    BusBandwidthModel,
    Choice,
    CommMode,
    Config,
    FleetMember,
    InstanceType,
    Market,
    MarketChoice,
    ModelProfile,
    Offer,
    Prediction,
)
from srift.domain.network import NetworkSpec
from srift.domain.requests import FleetQuery, PredictionQuery
from srift.domain.sharding import Setup
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.limits import MAX_PS_VMS
from srift.optimize.evaluate import SimEvaluator
from srift.optimize.strategies import SetupResult, StrategyEvaluator, setups_for
from srift.services.calibration import CorrectionTable, calibration_sources, fleet_shares, load_table
from srift.services.memory import check_ddp_memory, check_fleet_member
from srift.services.network import check_transport, network_spec, network_view
from srift.services.placement import with_pipeline
from srift.services.profiles import resolve_profiles, source_label, with_estimates
from srift.services.sharding import (
    NO_OFFERED,
    ONLY_ALLOWED,
    OfferedTypes,
    allowed_setups,
    choice_setup,
    fleet_strategy_view,
    memory_hint,
)
from srift.services.views import (
    breakdown_document,
    choice_document,
    predicted_document,
    unused_type_keys,
)
from srift.settings import Settings
from srift.sim import IterationEstimate, simulate, to_prediction
from srift.sim.result import with_band

MAX_MC_LAYER_WORK = 2_000_000
"""mc_samples × layers above this would keep a request busy for minutes; asked to lower mc_samples."""

MAX_PS_LAYER_WORK = 200_000
"""VMs × layers above this in parameter-server mode would likewise take too long."""


@dataclass(frozen=True, slots=True)
class FleetPrediction:
    """One fleet's prediction: the fleet, the offers that price it, the simulator's answer and its sources."""

    config: Config
    members: tuple[FleetMember, ...]
    offers: tuple[Offer, ...]
    iterations: int
    comm: CommMode
    usd_per_hr: float
    prediction: Prediction
    sources: tuple[str, ...]
    network: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    """What the request gave that this prediction could not use (srift.services.predictions._ignored)."""
    strategy: dict[str, Any] | None = None
    """How the fleet runs under the request's `strategy` (srift.services.sharding.fleet_strategy_view);
    None when the request names none (plain DDP, and the answer has no strategy section, as before)."""

    def document(self) -> dict[str, Any]:
        """PredictionOut's fields (`strategy` only when the request named one)."""
        view = self.strategy
        return {
            "label": self.config.label(),
            "choices": [
                {
                    **choice_document(
                        instance_type=m.instance.name,
                        market=o.market.value,
                        count=m.count,
                        batch=m.batch,
                        gpus=m.instance.devices,
                        price_usd_per_hr=o.price_usd_per_hr,
                        instance_gpus=o.instance.gpu_count,
                        profile=m.profile,
                        gpu_memory_gib=m.instance.gpu_memory_gib,
                    ),
                    **(choice_setup(view, m.instance.name) if view is not None else {}),
                }
                for m, o in zip(self.members, self.offers, strict=True)
            ],
            "precision": self.members[0].profile.precision.value,
            "estimated": sorted({m.instance.name for m in self.members if m.profile.is_estimate}),
            "global_batch": self.config.global_batch,
            "iterations": self.iterations,
            "comm": self.comm.value,
            "usd_per_hr": self.usd_per_hr,
            "predicted": predicted_document(self.prediction),
            "breakdown": breakdown_document(self.prediction.breakdown),
            "network": self.network,
            "sources": list(self.sources),
            "warnings": [*self.notes, *self.prediction.breakdown.warnings],
            **({"strategy": view} if view is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class SweepPrediction:
    """Several fleets predicted in one call, in request order, and the network assumed over all of them."""

    predictions: tuple[FleetPrediction, ...]
    network: dict[str, Any]
    elapsed_s: float

    def document(self) -> dict[str, Any]:
        """PredictionSweepOut's fields."""
        return {
            "predictions": [p.document() for p in self.predictions],
            "count": len(self.predictions),
            "network": self.network,
            "elapsed_s": self.elapsed_s,
        }


def _offers(
    *,
    session: Session,
    request: PredictionQuery,
    region: str,
    configs: Sequence[tuple[str, FleetQuery]],
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
        raise NotFound(exc.detail, hint=exc.hint, field=bad) from exc
    return {(o.instance.name, o.market.value): o for o in offers}


def _gpu_types(*, session: Session, query: PredictionQuery, region: str) -> tuple[InstanceType, ...]:
    """The GPU instance types priced in the request's provider and region, from the catalog's in-memory copy
    (what a hint may name when DDP cannot hold the model at batch 1)."""
    from srift.catalog.store import list_instance_types

    entries = list_instance_types(
        session=session, provider=query.provider, region=region, min_gpus=1, snapshot=query.snapshot
    )
    return tuple(e.instance for e in entries)


def build_fleet(
    *,
    request: PredictionQuery,
    profiles: Sequence[tuple[ModelProfile, str]],
    offers: dict[tuple[str, str], Offer],
    config: FleetQuery | None = None,
    at: str = "config",
    memory: bool = True,
    region_types: Sequence[InstanceType] = (),
) -> tuple[list[FleetMember], list[Offer], list[str]]:
    """Fleet members, their offers and the profile sources used; InvalidInput names the choice at fault.

    A choice with `gpus` uses that many of each VM's GPUs: its member's instance type is the catalog type
    with that GPU count (the VM is still priced whole). `memory` False leaves DDP's memory check out (a
    request with a strategy checks the memory of its setups instead, `_Context.setups`); when DDP cannot hold
    a choice's model at batch 1, its hint names those of `region_types` whose GPUs would.
    """
    fleet = config if config is not None else request.config
    assert fleet is not None
    members, used_offers, used_sources = [], [], []
    seen: set[tuple[str, str]] = set()
    partial: dict[str, int | None] = {}
    for i, choice in enumerate(fleet.choices):
        where = f"{at}.choices[{i}]"
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
        if choice.gpus is not None and choice.gpus > inst.gpu_count:
            raise InvalidInput(
                f"{inst.name} has {inst.gpu_count} GPU(s), fewer than the {choice.gpus} asked for",
                hint=f"use gpus ≤ {inst.gpu_count}, or leave gpus out to use them all"
                if inst.gpu_count
                else "leave gpus out: this type has no GPU",
                field=f"{where}.gpus",
            )
        if partial.setdefault(inst.name, choice.gpus) != choice.gpus:
            raise InvalidInput(
                f"{inst.name} is used with {partial[inst.name] or 'all'} and {choice.gpus or 'all'} GPUs "
                "in one fleet",
                hint="use the same number of GPUs on every VM of one type",
                field=f"{where}.gpus",
            )
        if choice.gpus is not None:
            inst = dataclasses.replace(inst, gpu_count=choice.gpus)
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
        _check_even_split(choice.batch, inst.devices, inst.name, field=f"{where}.batch")
        per_device = choice.batch / inst.devices
        # Memory and device checks (srift.services.memory): a stand-in CPU profile is marked in the sources.
        for note in check_fleet_member(
            prof,
            inst,
            per_gpu_batch=per_device,
            allow_cpu_profiles=request.allow_cpu_profiles,
            field=f"{where}.instance_type",
            memory=memory,
            others=region_types,
        ):
            if note not in used_sources:
                used_sources.append(note)
        if per_device > prof.max_batch:
            raise InvalidInput(
                f"batch {choice.batch} is {per_device:g} per GPU on {inst.name} ({inst.devices} device(s)), "
                f"above the profile's max_batch {prof.max_batch}",
                hint=f"use a batch ≤ {prof.max_batch * inst.devices} per {inst.name}, or more VMs",
                field=f"{where}.batch",
            )
        if request.comm is CommMode.PARAMETER_SERVER and sum(c.count for c in fleet.choices) > MAX_PS_VMS:
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


def _check_even_split(batch: int, devices: int, name: str, *, field: str) -> None:
    """Refuse a VM batch its GPUs cannot share evenly (DDP gives every rank the same whole batch), naming the
    runnable batches nearest to it (issue 48: a fleet that cannot run is refused, as plans never make one)."""
    if devices <= 1 or batch % devices == 0:
        return
    below, above = batch // devices * devices, (batch // devices + 1) * devices
    nearest = f"{below} or {above}" if below else f"{above}"
    splits = [g for g in range(1, devices) if batch % g == 0]
    raise InvalidInput(
        f"batch {batch} does not split evenly over {name}'s {devices} GPUs ({batch / devices:g} per GPU)",
        hint=f"use a batch that is a multiple of {devices} ({nearest}), or use fewer GPUs per VM "
        f"(gpus: {max(splits)} runs {batch // max(splits)} per GPU)",
        field=field,
    )


def predict(
    *,
    session: Session,
    settings: Settings,
    query: PredictionQuery,
    bandwidth: BusBandwidthModel | None = None,
) -> FleetPrediction:
    """Simulate the query's fleet (`config`) and price it.

    `bandwidth` overrides the active model (tests, what-if); by default the active learned model answers for
    the types it covers and the α-β prior, under the query's network assumptions, for the rest.
    """
    if query.config is None:
        raise InvalidInput(
            "is missing", hint="give one fleet under config (or use configs for a sweep)", field="config"
        )
    context = _Context.of(session=session, settings=settings, query=query, bandwidth=bandwidth)
    return context.fleet(query.config, at="config")


def predict_sweep(
    *,
    session: Session,
    settings: Settings,
    query: PredictionQuery,
    bandwidth: BusBandwidthModel | None = None,
) -> SweepPrediction:
    """Predict every fleet of `configs`: profiles, prices and the bandwidth model are resolved once, and
    the model's answers are shared between fleets, so each fleet takes milliseconds."""
    started = time.perf_counter()
    if not query.configs:
        raise InvalidInput("is empty", hint="list at least one fleet under configs", field="configs")
    context = _Context.of(session=session, settings=settings, query=query, bandwidth=bandwidth)
    fleets = tuple(context.fleet(cfg, at=f"configs[{k}]") for k, cfg in enumerate(query.configs))
    overall = network_view(
        context.network,
        instances=[inst for _, cfg in context.configs for inst in context.instances(cfg)],
        model=context.model,
        multi_node=any(sum(m.count for m in f.members) >= 2 for f in fleets),
    )
    return SweepPrediction(fleets, overall, time.perf_counter() - started)


def _ignored(query: PredictionQuery, configs: Sequence[tuple[str, FleetQuery]]) -> tuple[str, ...]:
    """Notes for what the request gives that no fleet of it uses, which would otherwise be dropped without a
    word: a `network.measured_gbps` key naming a type no fleet has (srift.services.views.unused_type_keys),
    and `ps_servers` above 1 under comm allreduce."""
    names = sorted({c.instance_type for _, cfg in configs for c in cfg.choices})
    notes = unused_type_keys(
        "network.measured_gbps",
        query.network.measured_gbps or {},
        names,
        missing="no fleet of this request has a",
    )
    if query.comm is not CommMode.PARAMETER_SERVER and query.ps_servers != 1:
        notes += (
            f"ps_servers {query.ps_servers} ignored: it counts parameter servers, and comm is "
            f"{query.comm.value} (give comm parameter_server to use them)",
        )
    return notes


SPOT_NOT_PRICED = (
    "spot interruptions are not priced in: total time and cost are the uninterrupted run's (a spot plan's "
    "predicted.uninterrupted_time_s and uninterrupted_cost_usd); `srift plan` (POST /v1/plans) with market "
    "spot gives them as the expectation over interruptions"
)
"""The note of a prediction with spot VMs: a plan of the same spot fleet reports more, since its total time
and cost are expected over interruptions (docs/spot.md), and nothing else in the answer says which it is."""


def _spot_note(offers: Sequence[Offer]) -> tuple[str, ...]:
    """SPOT_NOT_PRICED when any of the fleet's VMs are bought on the spot market, else nothing."""
    return (SPOT_NOT_PRICED,) if any(o.market is Market.SPOT for o in offers) else ()


def answer(*, session: Session, settings: Settings, query: PredictionQuery) -> dict[str, Any]:
    """The document for a prediction query: PredictionOut's fields for `config`, PredictionSweepOut's for
    `configs` (exactly one of them must be given)."""
    if (query.config is None) == (query.configs is None):
        raise InvalidInput(
            "give exactly one of config (one fleet) or configs (a sweep)",
            hint="put one fleet under config, or a list of fleets under configs",
            field="config",
        )
    if query.configs is not None:
        return predict_sweep(session=session, settings=settings, query=query).document()
    return predict(session=session, settings=settings, query=query).document()


def plain_ddp_only(query: PredictionQuery) -> tuple[str, str] | None:
    """The request field, and its value, that asks for what only the served (plain DDP) simulator models:
    `mc_samples` above 0 (Monte Carlo samples) or `comm` parameter_server. With one, a strategy considers
    plain DDP without checkpointing alone (srift.api.schemas.predictions STRATEGY_SIMULATED); None when
    neither is asked."""
    if query.mc_samples > 0:
        return "mc_samples", str(query.mc_samples)
    if query.comm is not CommMode.ALLREDUCE:
        return "comm", query.comm.value
    return None


def check_strategy(query: PredictionQuery) -> None:
    """The request's strategy rules (srift.api.schemas.predictions STRATEGY_NEEDED, STRATEGY_SIMULATED):
    `checkpointing` only with a strategy; with Monte Carlo samples or parameter servers, which only plain
    DDP's simulator models, a strategy that allows plain DDP without checkpointing (ddp or auto, checkpointing
    not true), which is then all it considers. InvalidInput names the field."""
    if query.strategy is None:
        if query.checkpointing is not None:
            raise InvalidInput(
                "is given without a strategy",
                hint="give strategy too (e.g. ddp, zero2, full_shard or auto), or leave checkpointing out: "
                "without a strategy the prediction is plain DDP without checkpointing",
                field="checkpointing",
            )
        return
    asked = plain_ddp_only(query)
    if asked is None or Setup() in setups_for(query.strategy, query.checkpointing):
        return
    name, value = asked
    setup = f"strategy {query.strategy.value}" + (
        f" with checkpointing {str(query.checkpointing).lower()}" if query.checkpointing is not None else ""
    )
    keep = "mc_samples at 0" if name == "mc_samples" else "comm at allreduce"
    raise InvalidInput(
        f"{name} {value} is not modelled under {setup}: its setups run on the sharded simulator, which "
        "models allreduce collectives without Monte Carlo samples, and only plain DDP without "
        "checkpointing runs on the one that models them",
        hint=f"leave {keep} to predict {setup}, or give strategy ddp or auto with checkpointing false or "
        f"null (with {name} {value} they predict plain DDP without checkpointing)",
        field=name,
    )


def _narrowed_view(view: dict[str, Any], query: PredictionQuery, asked: tuple[str, str]) -> dict[str, Any]:
    """The strategy view of plain DDP when the request's `asked` field (plain_ddp_only) left its strategy
    that one setup of several: `why` says so and how to compare them all (`why_kind` only_allowed)."""
    assert query.strategy is not None
    name, value = asked
    keep = "mc_samples 0" if name == "mc_samples" else "comm allreduce"
    why = (
        f"only DDP without checkpointing was compared: {name} {value} is modelled for plain DDP alone (the "
        f"sharded simulator models allreduce collectives without Monte Carlo samples); give {keep} to "
        f"compare every setup strategy {query.strategy.value} allows"
    )
    return {**view, "why": why, "why_kind": ONLY_ALLOWED}


def _none_fits(
    results: Sequence[SetupResult],
    *,
    query: PredictionQuery,
    members: Sequence[FleetMember],
    chooser: StrategyEvaluator,
    at: str,
    offered: OfferedTypes,
) -> Infeasible:
    """The 409 when no setup the request's `strategy` allows fits the fleet (`members`, checked by `chooser`):
    each setup's reason (a profile without the model's memory facts, or a GPU the setup overfills), and what
    to change (srift.services.sharding.memory_hint, naming the `offered` types whose GPU memory would hold
    it); a sweep's names the fleet (`at`)."""
    assert query.strategy is not None
    fleet = "this fleet" if at == "config" else f"the fleet {at}"
    setups = ", ".join(r.setup.label() for r in results)
    reasons = "; ".join(r.reason for r in results)
    if all("says nothing of its memory" in r.reason for r in results):
        hint = (
            "profile the model with `srift profile` (its profiles record the memory facts sharded setups "
            "need), or give strategy ddp, or leave strategy out"
        )
    else:
        hint = memory_hint(
            [members],
            chooser=chooser,
            strategy=query.strategy,
            checkpointing=query.checkpointing,
            more_vms="more VMs or GPUs so sharding spreads the model",
            offered=offered,
        )
    return Infeasible(
        f"no setup strategy {query.strategy.value} allows ({setups}) fits {fleet}: {reasons}",
        hint=hint,
        field="strategy",
    )


def _ddp_alone_overfills(exc: InvalidInput, *, query: PredictionQuery, asked: tuple[str, str]) -> Infeasible:
    """The 409 when plain DDP, the one setup the request's `asked` field (plain_ddp_only) leaves a strategy
    that allows several, overfills a GPU of the fleet (`exc`, DDP's memory check): it names that field,
    since giving it up lets the strategy compare the sharded setups, which may fit."""
    assert query.strategy is not None
    name, value = asked
    keep = "mc_samples 0" if name == "mc_samples" else "comm allreduce"
    return Infeasible(
        f"plain DDP without checkpointing, the one setup strategy {query.strategy.value} has with {name} "
        f"{value}, does not fit ({exc.field}: {exc.detail})",
        hint=f"give {keep} so strategy {query.strategy.value} compares the sharded setups too, or {exc.hint}",
        field=name,
    )


@dataclass(frozen=True, slots=True)
class _Context:
    """What every fleet of one query shares: profiles, offers, network assumptions, bandwidth model."""

    query: PredictionQuery
    profiles: list[tuple[ModelProfile, str]]
    offers: dict[tuple[str, str], Offer]
    network: NetworkSpec
    model: BusBandwidthModel
    memo: BusBandwidthModel
    configs: tuple[tuple[str, FleetQuery], ...]
    corrections: CorrectionTable | None = None
    ignored: tuple[str, ...] = ()
    """What the request gives that no fleet of it uses (_ignored), said in every fleet's warnings."""
    evaluator: SimEvaluator | None = None
    """The simulator as a plan's evaluator (srift.services.plans._evaluator), built when the request names a
    strategy: each fleet's setups are compared on it as a plan compares them (`setups`)."""
    offered: OfferedTypes = NO_OFFERED
    """The GPU instance types priced in the request's provider and region (the catalog's in-memory copy): a
    hint names those whose GPUs hold the model when DDP cannot at batch 1 (srift.services.memory), or when no
    setup fits a fleet (`_none_fits`)."""

    @classmethod
    def of(
        cls,
        *,
        session: Session,
        settings: Settings,
        query: PredictionQuery,
        bandwidth: BusBandwidthModel | None,
    ) -> _Context:
        from srift.bandwidth.registry import active_model
        from srift.sim.network import MemoBandwidth

        check_strategy(query)
        configs = (
            (("config", query.config),)
            if query.config is not None
            else tuple((f"configs[{k}]", c) for k, c in enumerate(query.configs or ()))
        )
        region = query.region or settings.default_region
        resolved = resolve_profiles(session=session, selection=query.selection)
        piped = with_pipeline([p for p, _ in resolved], query.input_pipeline)
        profiles = [(p, source) for p, (_, source) in zip(piped, resolved, strict=True)]
        offers = _offers(session=session, request=query, region=region, configs=configs)
        _, estimated = with_estimates([p for p, _ in profiles], [o.instance for o in offers.values()])
        profiles = [*profiles, *((p, source_label("estimate", p)) for p in estimated)]
        network = network_spec(session=session, query=query.network)
        model = (
            bandwidth
            if bandwidth is not None
            else active_model(session=session, settings=settings, network=network)
        )
        # Calibration hook (srift.services.calibration): corrections learned from measured runs.
        corrections = load_table(session=session, model=profiles[0][0].model, network=network)
        evaluator = (
            SimEvaluator(
                bandwidth=model,
                seed=query.seed,
                straggler_iters=query.straggler_iters,
                config=query.sim_config,
                read_gbps=query.read_gbps,
            )
            if query.strategy is not None
            else None
        )
        return cls(
            query,
            profiles,
            offers,
            network,
            model,
            MemoBandwidth(model),
            configs,
            corrections,
            _ignored(query, configs),
            evaluator,
            OfferedTypes(
                _gpu_types(session=session, query=query, region=region), f"{query.provider}/{region}"
            ),
        )

    def instances(self, config: FleetQuery) -> list[InstanceType]:
        return [self.offers[(c.instance_type, c.market.value)].instance for c in config.choices]

    def setups(self, members: Sequence[FleetMember], *, at: str) -> tuple[StrategyEvaluator | None, Any]:
        """The fleet under the request's strategy, as a plan evaluates a candidate fleet: the allowed setups
        (srift.services.sharding.allowed_setups) and, when they are more than plain DDP, the chooser that
        compares them (its memory checks and simulators), with the strategy view. (None, None) without a
        strategy. DDP alone keeps DDP's memory check; Infeasible when no allowed setup fits the fleet."""
        query = self.query
        if query.strategy is None or self.evaluator is None:
            return None, None
        setups = allowed_setups(members, strategy=query.strategy, checkpointing=query.checkpointing)
        asked = plain_ddp_only(query)
        narrowed = asked is not None and setups != (Setup(),)
        if asked is not None:
            setups = (Setup(),)  # check_strategy: the strategy allows it
        if setups == (Setup(),):
            for i, m in enumerate(members):
                try:
                    check_ddp_memory(
                        m.profile,
                        m.instance,
                        per_gpu_batch=m.per_device_batch,
                        field=f"{at}.choices[{i}].instance_type",
                        others=self.offered.types,
                        suggest_strategy=not narrowed,
                    )
                except InvalidInput as exc:
                    if not narrowed or asked is None:
                        raise
                    raise _ddp_alone_overfills(exc, query=query, asked=asked) from exc
            view = fleet_strategy_view(members, None, requested=query.strategy)
            return None, _narrowed_view(view, query, asked) if narrowed and asked is not None else view
        chooser = StrategyEvaluator(
            self.evaluator, setups, max_update_s=max(m.profile.update_s for m in members)
        )
        choice = chooser.choose(members)
        if choice.chosen is None:
            raise _none_fits(
                choice.results, query=query, members=members, chooser=chooser, at=at, offered=self.offered
            )
        return chooser, fleet_strategy_view(members, chooser, requested=query.strategy)

    def fleet(self, config: FleetQuery, *, at: str) -> FleetPrediction:
        query = self.query
        members, used_offers, profile_sources = build_fleet(
            request=query,
            profiles=self.profiles,
            offers=self.offers,
            config=config,
            at=at,
            memory=query.strategy is None,
            region_types=self.offered.types,
        )
        check_transport(
            ((f"{at}.choices[{i}].instance_type", m.instance) for i, m in enumerate(members)), self.network
        )
        layers = max(len(m.profile.layers) for m in members)
        if query.mc_samples * layers > MAX_MC_LAYER_WORK:
            raise InvalidInput(
                f"{query.mc_samples} Monte Carlo samples of a {layers}-layer model are too many for a "
                "request",
                hint=f"use mc_samples ≤ {MAX_MC_LAYER_WORK // layers}",
                field="mc_samples",
            )
        vms = sum(m.count for m in members)
        if query.comm is CommMode.PARAMETER_SERVER and vms * layers > MAX_PS_LAYER_WORK:
            raise InvalidInput(
                f"parameter-server mode for {vms} VMs and {layers} layers is too much work for one request",
                hint="use fewer VMs, or comm=allreduce",
                field="comm",
            )
        chooser, view = self.setups(members, at=at)
        estimate: IterationEstimate = self.planned(members, chooser) or simulate(
            members,
            bandwidth=self.memo,
            seed=query.seed,
            straggler_iters=query.straggler_iters,
            mc_samples=query.mc_samples,
            comm=query.comm,
            ps_servers=query.ps_servers,
            iterations=query.iterations,
            config=query.sim_config,
            read_gbps=query.read_gbps,
        )
        usd_per_hr = sum(m.count * o.price_usd_per_hr for m, o in zip(members, used_offers, strict=True))
        prediction = to_prediction(estimate, iterations=query.iterations, usd_per_s=usd_per_hr / 3600.0)
        if self.corrections is not None:  # calibration hook: learned corrections, "calibrated on N runs"
            prediction = self.corrections.apply(prediction, fleet_shares(members))
        gpus = {c.instance_type: c.gpus for c in config.choices}
        fleet_config = Config(
            tuple(
                Choice(
                    instance_type=m.instance.name,
                    market=o.market,
                    count=m.count,
                    batch=m.batch,
                    gpus=gpus.get(m.instance.name),
                )
                for m, o in zip(members, used_offers, strict=True)
            )
        )
        price_sources = list(dict.fromkeys(f"price:{o.source} ({o.as_of.isoformat()})" for o in used_offers))
        model_sources = [s for s in estimate.sources if not s.startswith("profile:")]
        return FleetPrediction(
            config=fleet_config,
            members=tuple(members),
            offers=tuple(used_offers),
            iterations=query.iterations,
            comm=query.comm,
            usd_per_hr=usd_per_hr,
            prediction=prediction,
            sources=(*profile_sources, *model_sources, *price_sources, *calibration_sources(prediction)),
            network=network_view(
                self.network, instances=[m.instance for m in members], model=self.model, multi_node=vms >= 2
            ),
            notes=(*self.ignored, *_spot_note(used_offers)),
            strategy=view,
        )

    def planned(
        self, members: Sequence[FleetMember], chooser: StrategyEvaluator | None
    ) -> IterationEstimate | None:
        """The fleet's estimate under the setup `chooser` chose, with its band, exactly as a plan's evaluator
        answers it (`StrategyEvaluator.__call__` and `band`); None when that setup is plain DDP (or there is
        no chooser): then the served simulator answers, with the request's Monte Carlo samples, comm mode
        and parameter servers."""
        chosen = chooser.choose(members).chosen if chooser is not None else None
        if chooser is None or chosen is None or chosen.setup == Setup() or chosen.estimate is None:
            return None
        return with_band(chosen.estimate, chooser.band(members, iterations=self.query.iterations))
