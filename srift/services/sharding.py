"""The plan pipeline's strategy phase: which setups a request allows, memory feasibility, and what plans say.

`allowed_setups` turns the request's `strategy` and `checkpointing` into setups (`srift.optimize.
strategies`), before the memory checks (`srift.services.memory` caps each type's batch to what DDP holds
only when DDP is the one setup); `strategy_phase` (after the evaluator is built) keeps the served evaluator
and problem for DDP alone, else makes the problem a `MemoryProblem`, so fleets no allowed setup fits are
infeasible.

`strategy_view` says, for the chosen fleet, how to run it (strategy, wrapping, checkpointing, precision,
memory per GPU and its parts) and how every other setup compares (its time, or why it does not fit);
`choice_setup` is the setup each choice shows; `memory_infeasible` words the 409 when no fleet can
hold the model, and `memory_hint` what can make one fit (a prediction's 409 says it the same way), naming
the offered types whose GPU memory would hold it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srift.domain import FleetMember, InstanceType, ModelProfile, Plan
from srift.domain.sharding import SHARDING_KEY, Setup, StrategyChoice, is_mixed
from srift.errors import Infeasible
from srift.limits import MAX_COUNT
from srift.optimize.evaluate import Evaluator, SimEvaluator
from srift.optimize.space import Candidate, Problem
from srift.optimize.strategies import MemoryProblem, StrategyEvaluator, setups_for

GIB = 2**30


def allowed_setups(
    candidates: Sequence[Candidate] | Sequence[FleetMember],
    *,
    strategy: StrategyChoice,
    checkpointing: bool | None,
) -> tuple[Setup, ...]:
    """The setups a request allows on these candidates (a plan's) or fleet members (a prediction's).

    A strategy the request names is taken at its word. `auto` compares every setup when sharding can
    matter: some candidate's profile carries the model's sharding facts (the sharded reference models), or
    DDP cannot hold the model at batch 1 on some candidate GPU (the training memory model); otherwise it
    plans DDP as before, each type's batch within what DDP holds (srift.services.memory)."""
    setups = setups_for(strategy, checkpointing)
    if strategy is not StrategyChoice.AUTO:
        return setups
    if any(SHARDING_KEY in (c.profile.extra or {}) for c in candidates) or any(
        _ddp_cannot_hold(c) for c in candidates
    ):
        return setups
    return (Setup(),)


def _ddp_cannot_hold(candidate: Candidate | FleetMember) -> bool:
    from srift.services.memory import batch_limit

    limit = batch_limit(candidate.profile, candidate.instance)
    return limit is not None and limit.memory_batch < 1


def strategy_phase(
    problem: Problem, evaluator: SimEvaluator, *, setups: Sequence[Setup]
) -> tuple[Problem, Evaluator]:
    """Phase 8b: with DDP alone the served problem and evaluator as they are; otherwise each fleet runs
    its fastest setup that fits (`StrategyEvaluator`) and fleets no setup fits are infeasible
    (`MemoryProblem`)."""
    setups = tuple(setups) or (Setup(),)
    if setups == (Setup(),):
        return problem, evaluator
    profiles = [c.profile for c in problem.candidates]
    max_update = max((p.update_s for p in profiles), default=0.0)
    chooser = StrategyEvaluator(evaluator, setups, max_update_s=max_update)
    fields = {f: getattr(problem, f) for f in ("candidates", "constraints", "batch_policy", "notes", "spot")}
    return MemoryProblem(**fields, fits=chooser.fits), chooser


def chooser_of(evaluator: Evaluator) -> StrategyEvaluator | None:
    """The strategy chooser behind `evaluator`, also when it is wrapped (srift.services.calibration)."""
    if isinstance(evaluator, StrategyEvaluator):
        return evaluator
    inner = getattr(evaluator, "inner", None)
    return chooser_of(inner) if inner is not None else None


def _fleet(plan: Plan, problem: Problem) -> list[FleetMember]:
    index = {(c.name, c.market, c.location): c for c in problem.candidates}
    out = []
    for ch in plan.config.choices:
        cand = index[(ch.instance_type, ch.market, ch.location)]
        out.append(
            FleetMember(
                instance=cand.instance,
                count=ch.count,
                batch=ch.batch,
                profile=cand.profile,
                location=ch.location,
            )
        )
    return out


ONLY_ALLOWED = "only_allowed"
"""`why_kind` of a plan whose request allowed one setup: nothing else was weighed."""
ONLY_CHECKABLE = "only_checkable"
"""`why_kind` of an `auto` plan that planned DDP alone: no candidate's profile carries the model's sharding
facts and DDP holds the model on every candidate GPU (`allowed_setups`)."""
FASTEST_FITS = "fastest_fits"
"""`why_kind` of a plan whose setup is the fastest of those compared that fits its fleet."""
NONE_FITS = "none_fits"
"""`why_kind` of a fleet no allowed setup fits."""
WHY_KINDS = (ONLY_ALLOWED, ONLY_CHECKABLE, FASTEST_FITS, NONE_FITS)
"""Which case a plan's strategy `why` words, for programs (and the dashboard) to tell them apart."""


def strategy_view(
    plan: Plan, problem: Problem, evaluator: Evaluator, *, requested: StrategyChoice
) -> dict[str, Any]:
    """How the plan's fleet runs and why (module docstring); `requested` is the request's `strategy`, which
    tells a DDP the request allowed alone from a DDP `auto` could not check any other strategy for."""
    return fleet_strategy_view(_fleet(plan, problem), chooser_of(evaluator), requested=requested)


def fleet_strategy_view(
    fleet: Sequence[FleetMember], chooser: StrategyEvaluator | None, *, requested: StrategyChoice
) -> dict[str, Any]:
    """How `fleet` runs under the setups `chooser` compares (None: plain DDP alone) and why: a plan's
    strategy section (`strategy_view`), and a prediction's that names a strategy."""
    mixed = is_mixed(fleet[0].profile) if fleet else False
    precision = "mixed (bf16 compute, fp32 master weights and reduction)" if mixed else "fp32"
    if chooser is None:
        setup = Setup()
        kind = ONLY_CHECKABLE if requested is StrategyChoice.AUTO else ONLY_ALLOWED
        return {
            "strategy": setup.strategy.value,
            "checkpointing": False,
            "wrap": None,
            "precision": precision,
            "how": setup.how(mixed=mixed),
            "why": _why_ddp_alone(kind),
            "why_kind": kind,
            "memory": [],
            "compared": [],
        }
    choice = chooser.choose(fleet)
    compared = []
    for r in choice.results:
        entry: dict[str, Any] = {
            "setup": r.setup.label(),
            "strategy": r.setup.strategy.value,
            "checkpointing": r.setup.checkpointing,
            "fits": r.fits,
            "iteration_s": r.estimate.iteration_s if r.estimate is not None else None,
            "reason": r.reason or None,
            "peak_gib": max(
                (m.peak_bytes(f.per_device_batch) / GIB for m, f in zip(r.memory, fleet, strict=False) if m),
                default=None,
            ),
        }
        compared.append(entry)
    chosen = choice.chosen
    if chosen is None:
        return {
            "strategy": None,
            "compared": compared,
            "why": "no setup fits this fleet",
            "why_kind": NONE_FITS,
        }
    setup = chosen.setup
    memory = [
        {
            "instance_type": f.instance.name,
            "capacity_gib": _capacity_gib(f),
            **(m.to_dict(f.per_device_batch) if m is not None else {"peak_bytes": None}),
        }
        for m, f in zip(chosen.memory, fleet, strict=False)
    ]
    return {
        "strategy": setup.strategy.value,
        "checkpointing": setup.checkpointing,
        "wrap": setup.wrap.value if setup.strategy.sharded else None,
        "precision": precision,
        "how": setup.how(mixed=mixed),
        **_why(choice.results, setup, requested=requested),
        "memory": memory,
        "compared": compared,
    }


def _capacity_gib(member: FleetMember) -> float:
    from srift.optimize.strategies import capacity_bytes

    return round(capacity_bytes(member) / GIB, 3)


def _why_ddp_alone(kind: str) -> str:
    """Why a plan runs DDP when no other setup was weighed: the request allowed it alone, or `auto` had no
    other strategy it could check."""
    if kind == ONLY_ALLOWED:
        return "only DDP was allowed by the request (strategy ddp, without activation checkpointing)"
    return (
        "only DDP could be checked: the profiles carry no sharding facts (the block facts the sharded "
        "strategies' memory is placed with) and DDP holds the model on every candidate GPU; name a strategy "
        "in the request to plan it"
    )


def _why(results: Sequence[Any], setup: Setup, *, requested: StrategyChoice) -> dict[str, str]:
    """`why` and `why_kind` of a chosen setup: the only one the request allowed, or the fastest that fits."""
    chosen = next(r for r in results if r.setup == setup)
    assert chosen.estimate is not None
    t = chosen.estimate.iteration_s
    if len(results) == 1 and requested is not StrategyChoice.AUTO:
        return {
            "why": f"only {setup.label()} was allowed by the request ({t:.3g} s per iteration)",
            "why_kind": ONLY_ALLOWED,
        }
    others = []
    for r in results:
        if r.setup == setup:
            continue
        if not r.fits:
            others.append(f"{r.setup.label()} does not fit")
        elif r.estimate is not None:
            others.append(f"{r.setup.label()} {r.estimate.iteration_s / t:.2f}×")
    text = f"{setup.label()} is the fastest setup that fits this fleet ({t:.3g} s per iteration)"
    if others:
        text += "; the others: " + ", ".join(others)
    return {"why": text, "why_kind": FASTEST_FITS}


def choice_setup(view: Mapping[str, Any], instance_type: str) -> dict[str, Any]:
    """What a choice of `instance_type` in a plan runs, from the plan's strategy view: strategy,
    checkpointing, wrapping, precision and, where the view knows it, the memory per GPU."""
    memory = {m["instance_type"]: m for m in view.get("memory", [])}
    fields = {key: view.get(key) for key in ("strategy", "checkpointing", "wrap", "precision")}
    found = memory.get(instance_type)
    if found and found.get("peak_bytes") is not None:
        fields["memory_per_gpu_bytes"] = int(found["peak_bytes"])
    return fields


def memory_infeasible(
    problem: Problem,
    evaluator: Evaluator,
    model: str,
    *,
    strategy: StrategyChoice,
    checkpointing: bool | None,
    offered: OfferedTypes,
) -> Infeasible | None:
    """The 409 when no fleet can hold the model: what each setup the request allows (its `strategy` and
    `checkpointing`) needs per GPU on each candidate at its largest fleet, against the GPU's memory, and
    only the changes that can make one fit (`memory_hint`, naming `offered` types with more GPU memory that
    would hold it); None when memory is not what failed."""
    chooser = chooser_of(evaluator)
    if chooser is None or not isinstance(problem, MemoryProblem) or not problem.candidates:
        return None
    lines = []
    fleets = []
    for cand in problem.candidates:
        fleet = [
            FleetMember(instance=cand.instance, count=cand.cap, batch=cand.devices, profile=cand.profile)
        ]
        if chooser.fits(fleet):
            return None
        fleets.append(fleet)
        best = min(
            (chooser.memory(fleet, s) for s in chooser.setups),
            key=lambda found: min((m.peak_bytes(1) for m in found[1] if m is not None), default=float("inf")),
        )
        need = min((m.peak_bytes(1) for m in best[1] if m is not None), default=None)
        if need is not None:
            lines.append(f"{cand.cap}×{cand.name} needs {need / GIB:.1f} GiB per GPU at batch 1")
    if not lines:
        return Infeasible(
            f"the memory of {model} is not known (its profiles carry no structure), so no sharded setup can "
            "be checked against a GPU's memory",
            hint="use strategy ddp or auto (sharded setups are planned only for models whose memory is "
            "known), or profile the model with `srift profile`, whose profiles record its structure",
            field="strategy",
        )
    shown = "; ".join(lines[:6]) + (f"; and {len(lines) - 6} more" if len(lines) > 6 else "")
    hint = memory_hint(
        fleets,
        chooser=chooser,
        strategy=strategy,
        checkpointing=checkpointing,
        more_vms="more VMs (max_count_per_type or availability) so sharding spreads the model over more GPUs",
        offered=offered,
    )
    setups = ", ".join(s.label() for s in chooser.setups)
    return Infeasible(
        f"no fleet can hold {model}: under every setup strategy {strategy.value} allows ({setups}), over the "
        f"most VMs allowed, at one sample per GPU: {shown}",
        hint=hint,
        field="strategy",
    )


@dataclass(frozen=True, slots=True)
class OfferedTypes:
    """The GPU instance types the request's catalog offers in its location(s), `where` ("aws/us-east-1",
    several joined by commas): those a 409 may name as having more GPU memory (`memory_hint`)."""

    types: tuple[InstanceType, ...] = ()
    where: str = "the request's region"


NO_OFFERED = OfferedTypes()
"""No offered types: a 409 then names none as having more GPU memory."""


def memory_hint(
    fleets: Sequence[Sequence[FleetMember]],
    *,
    chooser: StrategyEvaluator,
    strategy: StrategyChoice,
    checkpointing: bool | None,
    more_vms: str,
    offered: OfferedTypes,
) -> str:
    """The hint of a 409 when no setup `chooser` compares fits any of `fleets` (a plan's and a prediction's
    share it): "use a, b, or c" from the changes that can make one fit, and only those: `more_vms` (the
    request's words for it) when a compared setup that shards fits those types at the most VMs a request may
    give (MAX_COUNT each) at 1 per GPU (DDP keeps the whole model on every GPU, and hybrid sharding spreads it
    only over one VM's GPUs); a smaller batch per GPU when a fleet runs more than 1 and some setup fits it at
    1 per GPU (under DDP alone, more VMs help only that way); types with more GPU memory, naming those
    `offered` that hold it (`roomier_types`), left out when none does; checkpointing when the request rules
    it out and a setup with it can fit; a strategy that shards fully when the request's does not and full
    sharding can fit. When none of them can alone, it says so plainly, naming where it looked."""
    widest = [[dataclasses.replace(m, count=MAX_COUNT, batch=m.instance.devices) for m in f] for f in fleets]

    def can_fit(setups: Sequence[Setup], among: Sequence[Sequence[FleetMember]]) -> bool:
        return any(not chooser.memory(f, s)[0] for f in among for s in setups)

    sharded = [s for s in chooser.setups if s.strategy.sharded]
    changes = [more_vms] if can_fit(sharded, widest) else []
    ones = [[dataclasses.replace(m, batch=m.instance.devices) for m in f] for f in fleets]
    if ones != [list(f) for f in fleets] and can_fit(chooser.setups, ones):
        smaller = "a smaller batch per GPU"
        changes.append(smaller if sharded else f"{smaller} (the global batch over more VMs)")
    roomier = roomier_types(fleets, chooser=chooser, offered=offered.types)
    if roomier:
        changes.append(f"types with more GPU memory (e.g. {', '.join(roomier)})")
    if checkpointing is False and can_fit(setups_for(strategy, True), widest):
        changes.append("checkpointing true (or null)")
    fully = strategy is StrategyChoice.FULL_SHARD or strategy is StrategyChoice.AUTO
    if not fully and can_fit(setups_for(StrategyChoice.FULL_SHARD, checkpointing), widest):
        ddp = strategy is StrategyChoice.DDP
        changes.append(
            "a sharded strategy (strategy full_shard, or auto)" if ddp else "strategy full_shard (or auto)"
        )
    if not changes:
        return (
            f"no change alone lets a fleet hold the model: no type offered in {offered.where} has GPUs "
            f"large enough for a setup strategy {strategy.value} allows at one sample per GPU, and neither "
            "more VMs, checkpointing nor full sharding fit the types given; use another provider or region"
        )
    if len(changes) == 1:
        return f"use {changes[0]}"
    return "use " + ", ".join(changes[:-1]) + f", or {changes[-1]}"


def roomier_types(
    fleets: Sequence[Sequence[FleetMember]], *, chooser: StrategyEvaluator, offered: Sequence[InstanceType]
) -> list[str]:
    """The types of `offered` not in `fleets` whose GPUs have more memory than some fleet's smallest and hold
    the model there: a fleet of that type alone, with at least as many GPUs as that fleet (whole VMs), fits
    under some setup `chooser` compares at 1 per GPU (its members' profile on the other GPU, as the DDP
    422 checks it). At least as many GPUs, so the type alone is the change; named as the DDP 422 names
    types (srift.services.memory.types_to_name)."""
    from srift.services.memory import types_to_name

    used = {m.instance.name for f in fleets for m in f}
    holding: dict[str, InstanceType] = {}
    for fleet in fleets:
        if not fleet:
            continue
        smallest = min(m.instance.gpu_memory_gib for m in fleet)
        gpus = sum(m.count * m.instance.devices for m in fleet)
        for other in offered:
            if other.name in used or other.name in holding or other.gpu_count < 1:
                continue
            if other.gpu_memory_gib <= smallest:
                continue
            count = max(1, math.ceil(gpus / other.devices))
            swapped = [dataclasses.replace(fleet[0], instance=other, count=count, batch=other.devices)]
            if any(not chooser.memory(swapped, s)[0] for s in chooser.setups):
                holding[other.name] = other
    return types_to_name(holding.values())


def profiles_model(profiles: Sequence[ModelProfile]) -> str:
    return profiles[0].model if profiles else "the model"
