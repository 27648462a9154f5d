"""Strategy as a search dimension: each fleet runs its fastest setup (strategy, checkpointing) that fits.

`StrategyEvaluator` wraps the served evaluator (`SimEvaluator`, PyTorch DDP). For a fleet it checks every
allowed setup's memory on every member's GPU (`srift.domain.sharding`), simulates those that fit (DDP with
the served simulator, the others with `srift.sim.sharded`) and answers the fastest; for one fleet the
fastest is also the cheapest (same VMs, same price per second). `MemoryProblem` is the problem whose
configurations are within caps only when some setup fits, so a fleet that no strategy can hold is never
feasible, whatever its predicted time.

Bounds. With DDP alone (a model whose memory is known, planned with DDP only) the served evaluator's
answers and bounds are used as they are, and only memory is added. With other setups the bound is
the served bound without its network stage (`srift.sim.bounds`, network=False: the straggler-aware
compute C̄ plus the slowest update) less the largest update time of any candidate: every setup's iteration
is at least C̄ (the sharded timeline never ends before it) and its update is at least 0, so the bound
holds for every setup, whichever wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from srift.domain import Band, Constraints, FleetMember, ModelProfile, Prediction
from srift.domain.sharding import (
    MemoryBasis,
    MemoryUnknown,
    Setup,
    Strategy,
    StrategyChoice,
    StrategyMemory,
    fsdp_units,
    gpu_fit,
    is_mixed,
    memory_basis,
    strategy_memory,
)
from srift.optimize.evaluate import SimEvaluator
from srift.optimize.space import Groups, Problem

if TYPE_CHECKING:
    from srift.sim.bounds import Extension, PartialFleet
    from srift.sim.result import IterationEstimate

GIB = 2**30


def setups_for(choice: StrategyChoice, checkpointing: bool | None) -> tuple[Setup, ...]:
    """The setups a request allows: its strategy (or every one for `auto`), with and without
    checkpointing unless it says which."""
    strategies = list(Strategy) if choice is StrategyChoice.AUTO else [Strategy(choice.value)]
    flags = (False, True) if checkpointing is None else (checkpointing,)
    return tuple(Setup(s, checkpointing=c) for s in strategies for c in flags)


@dataclass(frozen=True, slots=True)
class SetupResult:
    """One setup on one fleet: whether it fits (else why not), each member's memory per GPU at its
    batch, and, when simulated, its estimate."""

    setup: Setup
    fits: bool
    reason: str = ""
    memory: tuple[StrategyMemory | None, ...] = ()
    estimate: IterationEstimate | None = None


@dataclass(frozen=True, slots=True)
class SetupChoice:
    """The chosen setup of a fleet (None when none fits) and every setup's result."""

    chosen: SetupResult | None
    results: tuple[SetupResult, ...]


def capacity_bytes(member: FleetMember) -> float:
    """Memory one rank may use: the GPU's, or for a CPU type the VM's RAM per rank."""
    inst = member.instance
    if inst.gpu_count > 0 and inst.gpu_memory_gib > 0:
        return inst.gpu_memory_gib * GIB
    return inst.memory_gib * GIB / max(1, inst.devices)


class StrategyEvaluator:
    """An Evaluator that picks each fleet's fastest fitting setup (module docstring)."""

    floor_factor = 1.0

    def __init__(self, base: SimEvaluator, setups: Sequence[Setup], *, max_update_s: float) -> None:
        import srift.sim.sharded  # noqa: F401  (imported before any solve budget runs)

        self.base = base
        self.setups = tuple(setups)
        self.max_update_s = max_update_s
        self.bandwidth = base.bandwidth
        self._choices: dict[tuple[object, ...], SetupChoice] = {}
        self._fits: dict[tuple[object, ...], bool] = {}
        self.served_only = self.setups == (Setup(),)
        """Plain DDP is the only setup: the served evaluator's answers and bounds as they are."""
        self._bases: dict[int, MemoryBasis | None] = {}
        self._bounder: object | None = None

    # -- memory -------------------------------------------------------------------------------------------

    def _basis(self, profile: ModelProfile) -> MemoryBasis | None:
        key = id(profile)
        if key not in self._bases:
            self._bases[key] = memory_basis(profile)
        return self._bases[key]

    def memory(
        self, fleet: Sequence[FleetMember], setup: Setup
    ) -> tuple[str, tuple[StrategyMemory | None, ...]]:
        """Why `setup` does not fit `fleet` ("" when it does), and each member's memory."""
        world = sum(m.count * m.instance.devices for m in fleet)
        out: list[StrategyMemory | None] = []
        for m in fleet:
            basis = self._basis(m.profile)
            if basis is None:
                if setup.strategy is Strategy.DDP and not setup.checkpointing:
                    out.append(None)
                    continue
                return (
                    f"{setup.label()}: {m.profile.model}'s profile on {m.instance.name} says nothing of its "
                    "memory (profile it with `srift profile`, which measures it)",
                    tuple(out),
                )
            if setup.strategy is Strategy.HYBRID and len({x.instance.devices for x in fleet}) > 1:
                return "hybrid: types with different GPU counts cannot share one shard size", tuple(out)
            try:
                use = strategy_memory(
                    basis,
                    fsdp_units(m.profile),
                    setup,
                    world_size=world,
                    gpus_per_node=m.instance.devices,
                    mixed=is_mixed(m.profile),
                    cuda=m.instance.gpu_count > 0,
                )
            except MemoryUnknown as exc:
                return f"{setup.label()}: {exc.detail}", tuple(out)
            reason = gpu_fit(use, capacity_bytes=capacity_bytes(m), batch=m.per_device_batch)
            out.append(use)
            if reason is not None:
                return f"on {m.instance.name}: {reason}", tuple(out)
        return "", tuple(out)

    # -- choosing --------------------------------------------------------------------------------------

    @staticmethod
    def _key(fleet: Sequence[FleetMember]) -> tuple[object, ...]:
        return tuple((m.instance.provider, m.instance.name, m.count, m.batch, id(m.profile)) for m in fleet)

    def choose(self, fleet: Sequence[FleetMember]) -> SetupChoice:
        """Every setup's fit and, for those that fit, estimate; the fastest of them (remembered)."""
        key = self._key(fleet)
        found = self._choices.get(key)
        if found is None:
            found = self._choices[key] = self._choose(fleet)
        return found

    def _choose(self, fleet: Sequence[FleetMember]) -> SetupChoice:
        results = []
        ddp: IterationEstimate | None = None
        for setup in self.setups:
            reason, memory = self.memory(fleet, setup)
            if reason:
                results.append(SetupResult(setup, False, reason, memory))
                continue
            estimate, ddp = self._simulate(fleet, setup, ddp)
            results.append(SetupResult(setup, True, "", memory, estimate))
        fitting = [r for r in results if r.fits and r.estimate is not None]
        chosen = min(fitting, key=_rank, default=None)
        return SetupChoice(chosen, tuple(results))

    def _simulate(
        self, fleet: Sequence[FleetMember], setup: Setup, ddp: IterationEstimate | None
    ) -> tuple[IterationEstimate, IterationEstimate | None]:
        base = self.base
        if setup.strategy is Strategy.DDP:
            run = with_recompute(fleet) if setup.checkpointing else fleet
            estimate = base.estimate(run)
            if setup.checkpointing:
                estimate = replace(estimate, sources=(*estimate.sources, f"strategy:{setup.label()}"))
            return estimate, (ddp if setup.checkpointing else estimate)
        run = with_recompute(fleet) if setup.checkpointing and setup.strategy is Strategy.ZERO1 else fleet
        return self._sharded(run, setup), ddp

    def _sharded(
        self, fleet: Sequence[FleetMember], setup: Setup, *, band_iterations: int | None = None
    ) -> IterationEstimate:
        """`fleet` under the sharded `setup`, simulated with the served model's bandwidth, seed and straggler
        draws; with its band over `band_iterations` iterations when given."""
        from srift.sim.sharded import simulate_sharded

        base = self.base
        return simulate_sharded(
            fleet,
            bandwidth=base.bandwidth,
            setup=setup,
            seed=base.seed,
            straggler_iters=base.straggler_iters,
            iterations=band_iterations or 1,
            band=band_iterations is not None,
        )

    def fits(self, fleet: Sequence[FleetMember]) -> bool:
        """Whether some setup's memory fits every member (no simulation; remembered)."""
        key = self._key(fleet)
        found = self._fits.get(key)
        if found is None:
            found = self._fits[key] = any(not self.memory(fleet, s)[0] for s in self.setups)
        return found

    # -- the Evaluator -----------------------------------------------------------------------------------

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        from srift.sim import to_prediction

        choice = self.choose(fleet)
        if choice.chosen is None or choice.chosen.setup == Setup():
            if choice.chosen is not None:
                return self.base(fleet, iterations=iterations, usd_per_s=usd_per_s)
            estimate = self._least_memory_estimate(fleet, choice)
        else:
            assert choice.chosen.estimate is not None
            estimate = choice.chosen.estimate
        return to_prediction(estimate, iterations=iterations, usd_per_s=usd_per_s)

    def _least_memory_estimate(self, fleet: Sequence[FleetMember], choice: SetupChoice) -> IterationEstimate:
        """What to answer for a fleet no setup fits (a finite prediction; `MemoryProblem` keeps the fleet
        infeasible): the allowed setup that shards the most, simulated."""
        order = (Strategy.FULL_SHARD, Strategy.ZERO2, Strategy.ZERO1, Strategy.HYBRID, Strategy.DDP)
        allowed = [s for s in self.setups if not s.checkpointing] or list(self.setups)
        setup = min(allowed, key=lambda s: order.index(s.strategy))
        if setup.strategy is Strategy.HYBRID and len({m.instance.devices for m in fleet}) > 1:
            setup = Setup()
        estimate, _ = self._simulate(fleet, setup, None)
        return estimate

    def band(self, fleet: Sequence[FleetMember], *, iterations: int) -> Band:
        choice = self.choose(fleet)
        if choice.chosen is None or choice.chosen.setup == Setup():
            return self.base.band(fleet, iterations=iterations)
        setup = choice.chosen.setup
        if setup.strategy is Strategy.DDP:
            return self.base.band(with_recompute(fleet), iterations=iterations)
        return self._sharded(fleet, setup, band_iterations=iterations).band or Band()

    # -- bounds -----------------------------------------------------------------------------------------

    def _compute_bounder(self) -> object:
        if self._bounder is None:
            from srift.sim.bounds import Bounder

            self._bounder = Bounder(
                bandwidth=self.base.bandwidth,
                seed=self.base.seed,
                straggler_iters=self.base.straggler_iters,
                bucket_cap_mb=None,
                network=False,
            )
        return self._bounder

    def grow(self, partial: PartialFleet | None, member: FleetMember) -> PartialFleet:
        if self.served_only:
            return self.base.grow(partial, member)
        bounder = self._compute_bounder()
        grown: PartialFleet = bounder.add(partial, member)  # type: ignore[attr-defined]
        return grown

    def partial_bound_s(self, partial: PartialFleet, *, extension: Extension | None = None) -> float:
        if self.served_only:
            return self.base.partial_bound_s(partial, extension=extension)
        bound: float = self._compute_bounder().bound_s(partial, extension)  # type: ignore[attr-defined]
        return max(0.0, bound - self.max_update_s)

    def iteration_bound_s(self, fleet: Sequence[FleetMember], *, extension: Extension | None = None) -> float:
        if self.served_only:
            return self.base.iteration_bound_s(fleet, extension=extension)
        partial: PartialFleet | None = None
        for member in fleet:
            partial = self.grow(partial, member)
        assert partial is not None
        return self.partial_bound_s(partial, extension=extension)


def _rank(result: SetupResult) -> tuple[float, float]:
    """Fastest first; between setups within a part in a million of each other (the same timeline, as
    full and hybrid sharding on one node), the one needing less memory per GPU."""
    t = result.estimate.iteration_s if result.estimate is not None else math.inf
    peak = max((m.peak_bytes(1) for m in result.memory if m is not None), default=0.0)
    return (round(t, 6), peak)


def with_recompute(fleet: Sequence[FleetMember]) -> list[FleetMember]:
    """The fleet with every member's backward curve carrying its checkpointed blocks' forward again (the
    share of the forward spent in blocks, `srift.domain.sharding.fsdp_units`)."""
    from srift.domain.profile import ComputeCurve

    out = []
    for m in fleet:
        units = fsdp_units(m.profile)
        share = sum(s.share for s in units.segments if s.unit != 0)
        p = m.profile
        batches = tuple(sorted(set(p.backward.batches) | set(p.forward.batches)))
        times = tuple(p.backward.time_s(b) + share * p.forward.time_s(b) for b in batches)
        out.append(replace(m, profile=replace(p, backward=ComputeCurve(batches, times))))
    return out


@dataclass(frozen=True)
class MemoryProblem(Problem):
    """A problem whose configurations are within caps only when some setup's memory fits every member."""

    fits: Callable[[Sequence[FleetMember]], bool] = field(default=lambda fleet: True, compare=False)

    def within_caps(self, groups: Groups, constraints: Constraints | None = None) -> bool:
        if not Problem.within_caps(self, groups, constraints):
            return False
        return self.fits(self.fleet(groups))


__all__ = ["MemoryProblem", "SetupChoice", "SetupResult", "StrategyEvaluator", "setups_for", "with_recompute"]
