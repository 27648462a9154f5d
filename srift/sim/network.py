"""Turns a fleet and a bandwidth model into exchange stages: intra-node reduction, then the inter-node ring.

Hierarchy. A multi-GPU instance first reduces inside the node: a ring over its `gpu_count` GPUs, with the
bus bandwidth the model gives for (world_size=g, nodes=1), which for the α-β prior is the instance's
interconnect. Then the nodes run an allreduce among themselves: a ring over the N nodes with the model's
answer for (world_size=N, nodes=N) — one rank per node, because after the intra-node step each node holds
one reduced copy and its NIC carries 2s(N−1)/N bytes. A fleet of one node has no network stage; a fleet of
single-GPU VMs has no intra stage. (The intra-node broadcast back is folded into the intra stage.)

Mixed fleets. The inter-node ring runs at the pace of its slowest member: for each size the smallest bus
bandwidth any member's type gets, and the smallest cap. When the model has probed a ring of these types
(`mixed_ring_factors`, srift.bandwidth.mixed), its rates and cap are scaled by what that ring measured
against its slowest type alone. The intra stage likewise takes, per size, the slowest member's intra-node
reduction.

Rates and cap. The model is asked once per stage and instance type, in one batched call, for every distinct
layer size rounded up to a power of two (Srift §4.3: models are trained on powers of two) plus
CAP_PROBE_BYTES. A stage's cap is the bus bandwidth of that largest buffer — what the links sustain when
saturated — but never below any single size's own bus bandwidth, so a lone transfer always runs at its own
rate. Bus bandwidths are turned into payload rates (bits of gradient per second) for a ring of n ranks:
payload = busbw · n / (2(n−1)), so a lone layer of s bytes takes 2s(n−1)/(n·busbw) seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from srift.domain import BandwidthEstimate, BusBandwidthModel, FleetMember, InstanceType
from srift.domain.bandwidth import BusbwQuery, Collective, WrappedBandwidth
from srift.sim.exchange import Stage

CAP_PROBE_BYTES = 1 << 29
"""512 MiB, the largest buffer Srift's grid probe measures; its bus bandwidth is a stage's cap."""

MIN_BUSBW_GBPS = 1e-6
"""A model answer at or below zero (or not finite) is replaced by this, with a warning."""


def pow2_ceil(n_bytes: int) -> int:
    """The smallest power of two ≥ n_bytes (1 for 0 or 1)."""
    return 1 if n_bytes <= 1 else 1 << (n_bytes - 1).bit_length()


@dataclass(frozen=True, slots=True)
class StagePlan:
    """A stage ready for `exchange`, with the bandwidth answers it rests on."""

    stage: Stage
    sources: tuple[str, ...]
    residual_cv: float
    warnings: tuple[str, ...] = ()


def _ask(
    model: BusBandwidthModel, instance: InstanceType, *, world_size: int, nodes: int, sizes: Sequence[int]
) -> tuple[BandwidthEstimate, list[float], list[str]]:
    estimate = model.predict(
        instance=instance, world_size=world_size, nodes=nodes, buffer_bytes=[*sizes, CAP_PROBE_BYTES]
    )
    values = list(estimate.busbw_gbps)
    if len(values) != len(sizes) + 1:
        raise ValueError(
            f"bandwidth model {estimate.source} answered {len(values)} values for {len(sizes) + 1} sizes"
        )
    warnings = []
    for i, value in enumerate(values):
        if not (math.isfinite(value) and value > 0):
            values[i] = MIN_BUSBW_GBPS
            warnings.append(
                f"{estimate.source} predicted {value} Gbit/s for {instance.name} ({world_size} ranks); "
                f"used {MIN_BUSBW_GBPS} instead"
            )
    return estimate, values, warnings


def _stage(
    name: str,
    per_type: Sequence[tuple[BandwidthEstimate, list[float], int, list[str]]],
) -> StagePlan:
    """Combine per-type answers (busbw list with the cap last, ring size) into the slowest-member stage."""
    rates: list[float] | None = None
    cap = math.inf
    for _, values, ranks, _ in per_type:
        to_payload = 1e9 * ranks / (2.0 * (ranks - 1))
        own = [v * to_payload for v in values[:-1]]
        cap_t = max([values[-1] * to_payload, *own])
        rates = own if rates is None else [min(a, b) for a, b in zip(rates, own, strict=True)]
        cap = min(cap, cap_t)
    assert rates is not None
    sources = tuple(dict.fromkeys(est.source for est, _, _, _ in per_type))
    residual = max(est.residual_cv for est, _, _, _ in per_type)
    warnings = tuple(w for *_, ws in per_type for w in ws)
    return StagePlan(Stage(name, tuple(rates), cap), sources, residual, warnings)


def _distinct_types(fleet: Sequence[FleetMember]) -> list[InstanceType]:
    return list({(m.instance.provider, m.instance.name): m.instance for m in fleet}.values())


_MISSING = object()


def _plan_cache(model: BusBandwidthModel) -> dict[tuple[object, ...], StagePlan | None] | None:
    cache = getattr(model, "stage_plans", None)
    return cache if isinstance(cache, dict) else None


def _remembered(
    model: BusBandwidthModel, key: tuple[object, ...], build: Callable[[], StagePlan | None]
) -> StagePlan | None:
    """`build()`, remembered under `key` in the model's stage-plan cache when it keeps one (MemoBandwidth)."""
    cache = _plan_cache(model)
    if cache is None:
        return build()
    found = cache.get(key, _MISSING)
    if found is _MISSING:
        found = cache[key] = build()
    return found  # type: ignore[return-value]


def intra_stage(
    fleet: Sequence[FleetMember], sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan | None:
    """The intra-node reduction over each multi-GPU member's GPUs, or None when every VM has one device."""
    return intra_stage_at(_distinct_types(fleet), sizes, model)


def intra_stage_at(
    types: Sequence[InstanceType], sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan | None:
    """The intra-node reduction of a fleet of `types` (each present), or None when none has two devices."""
    return _remembered(
        model, ("intra", tuple(types), tuple(sizes)), lambda: _intra_types(types, sizes, model)
    )


def _intra_types(
    types: Sequence[InstanceType], sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan | None:
    answers = []
    for instance in types:
        g = instance.devices
        if g >= 2:
            est, values, warnings = _ask(model, instance, world_size=g, nodes=1, sizes=sizes)
            answers.append((est, values, g, warnings))
    return _stage("intra", answers) if answers else None


def _shares_host_pcie(fleet: Sequence[FleetMember], model: BusBandwidthModel) -> bool:
    ask = getattr(model, "shares_host_pcie", None)
    return callable(ask) and any(bool(ask(m.instance)) for m in fleet if m.instance.devices >= 2)


def _serial(intra: StagePlan, net: StagePlan) -> StagePlan:
    """One stage whose lone-transfer time is the intra-node time plus the network time (no overlap)."""
    rates = tuple(
        1.0 / (1.0 / a + 1.0 / b) for a, b in zip(intra.stage.rates_bps, net.stage.rates_bps, strict=True)
    )
    cap = 1.0 / (1.0 / intra.stage.cap_bps + 1.0 / net.stage.cap_bps)
    return StagePlan(
        Stage("network", rates, max([cap, *rates])),
        tuple(dict.fromkeys((*intra.sources, *net.sources))),
        max(intra.residual_cv, net.residual_cv),
        (*intra.warnings, *net.warnings),
    )


def exchange_plans(
    fleet: Sequence[FleetMember], sizes: Sequence[int], model: BusBandwidthModel
) -> list[StagePlan]:
    """The stages a fleet's gradients pass through: intra-node, then network (either may be absent).

    When the model says a multi-GPU member's intra-node reduction and its network traffic share the host's
    PCIe (`shares_host_pcie`, the prior's TCP socket transport on PCIe GPUs: sockets stage every byte
    through host memory), the two do not overlap: they become one stage whose transfer time is their sum.
    """
    intra = intra_stage(fleet, sizes, model)
    net = network_stage(fleet, sizes, model)
    if intra is not None and net is not None and _shares_host_pcie(fleet, model):
        return [_serial(intra, net)]
    return [p for p in (intra, net) if p is not None]


def network_stage(
    fleet: Sequence[FleetMember], sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan | None:
    """The inter-node ring over all VMs at the slowest member's bus bandwidth, or None for a single VM."""
    return network_stage_at(_distinct_types(fleet), sum(m.count for m in fleet), sizes, model)


def network_stage_at(
    types: Sequence[InstanceType], nodes: int, sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan | None:
    """The inter-node ring of `nodes` VMs of `types` (each present), or None below two VMs."""
    return _remembered(
        model,
        ("network", tuple(types), nodes, tuple(sizes)),
        lambda: _network_stage(types, nodes, sizes, model),
    )


def network_rows(
    instance: InstanceType, nodes: Sequence[int], sizes: Sequence[int], model: BusBandwidthModel
) -> tuple[np.ndarray, np.ndarray]:
    """For each VM count n in `nodes` (each ≥ 2), the lone payload rates (bits/s, a column per size) and the
    cap of the inter-node ring of n VMs of `instance`: `network_stage_at((instance,), n, sizes, model)`'s
    numbers. One batched question when the model answers rings in batch (`predict_rings`, returning None
    where it cannot), else n by n."""
    batched = getattr(model, "predict_rings", None)
    values = (
        batched(instance=instance, nodes=nodes, buffer_bytes=[*sizes, CAP_PROBE_BYTES])
        if callable(batched)
        else None
    )
    if values is None:
        rates = np.zeros((len(nodes), len(sizes)))
        caps = np.zeros(len(nodes))
        for i, n in enumerate(nodes):
            plan = network_stage_at((instance,), n, sizes, model)
            assert plan is not None, "a ring of two or more VMs has a network stage"
            rates[i] = plan.stage.rates_bps
            caps[i] = plan.stage.cap_bps
        return rates, caps
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(nodes), len(sizes) + 1):
        raise ValueError(f"bandwidth model answered {values.shape} values for {(len(nodes), len(sizes) + 1)}")
    values = np.where(np.isfinite(values) & (values > 0), values, MIN_BUSBW_GBPS)
    ranks = np.asarray(nodes, dtype=np.int64).reshape(-1, 1)
    to_payload = 1e9 * ranks / (2.0 * (ranks - 1))
    rates = values[:, :-1] * to_payload
    caps = np.maximum(values[:, -1] * to_payload[:, 0], rates.max(axis=1, initial=0.0))
    return rates, caps


def _network_stage(
    types: Sequence[InstanceType], nodes: int, sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan | None:
    if nodes < 2:
        return None
    answers = []
    for instance in types:
        est, values, warnings = _ask(model, instance, world_size=nodes, nodes=nodes, sizes=sizes)
        answers.append((est, values, nodes, warnings))
    plan = _stage("network", answers)
    return _mixed(plan, types, nodes, sizes, model) if len(types) >= 2 else plan


def _mixed(
    plan: StagePlan, types: Sequence[InstanceType], nodes: int, sizes: Sequence[int], model: BusBandwidthModel
) -> StagePlan:
    """The slowest-member ring scaled by what the model measured for a ring of these types, if anything.
    Factors are at most 1, so the slowest member's rates stay an upper bound (`srift.sim.bounds`)."""
    ask = getattr(model, "mixed_ring_factors", None)
    wanted = [*sizes, CAP_PROBE_BYTES]
    factors = ask(instances=types, nodes=nodes, buffer_bytes=wanted) if callable(ask) else None
    if factors is None:
        return plan
    if len(factors) != len(wanted) or not all(math.isfinite(f) and 0 < f <= 1 for f in factors):
        raise ValueError(f"bandwidth model answered mixed-ring factors {factors} for {len(sizes) + 1} sizes")
    rates = tuple(r * f for r, f in zip(plan.stage.rates_bps, factors, strict=False))
    cap = max([plan.stage.cap_bps * factors[-1], *rates])
    ring = "+".join(sorted(t.name for t in types))
    return StagePlan(
        Stage(plan.stage.name, rates, cap),
        (*plan.sources, f"mixed-ring:{ring}"),
        plan.residual_cv,
        plan.warnings,
    )


class MemoBandwidth(WrappedBandwidth):
    """A BusBandwidthModel wrapper that remembers answers; for callers that evaluate many fleets.

    Besides the model's answers it keeps the stages built from them (`stage_plans`), so a fleet shape seen
    before costs no bandwidth work at all. The wrapped model must be pure (same request, same answer) for
    as long as the wrapper lives, so wrap a model per request or per plan, not for the life of the process.
    """

    def __init__(self, model: BusBandwidthModel, *, max_entries: int = 4096) -> None:
        super().__init__(model)
        ask = getattr(model, "shares_host_pcie", None)
        self._shares = ask if callable(ask) else None
        self.max_entries = max_entries
        self._memo: dict[BusbwQuery, BandwidthEstimate] = {}
        self.stage_plans: dict[tuple[object, ...], StagePlan | None] = {}
        self._collectives: dict[tuple[Collective, BusbwQuery], BandwidthEstimate] = {}
        self.calls = 0

    def shares_host_pcie(self, instance: InstanceType) -> bool:
        return bool(self._shares(instance)) if self._shares is not None else False

    def mixed_ring_factors(
        self, *, instances: Sequence[InstanceType], nodes: int, buffer_bytes: Sequence[int]
    ) -> list[float] | None:
        """The wrapped model's measured mixed-ring factors (`_mixed`), or None when it has none."""
        ask = getattr(self.model, "mixed_ring_factors", None)
        return ask(instances=instances, nodes=nodes, buffer_bytes=buffer_bytes) if callable(ask) else None

    def predict_rings(
        self, *, instance: InstanceType, nodes: Sequence[int], buffer_bytes: Sequence[int]
    ) -> np.ndarray | None:
        """The wrapped model's batched ring answers (`network_rows`), or None when it has none."""
        batched = getattr(self.model, "predict_rings", None)
        if not callable(batched):
            return None
        found = batched(instance=instance, nodes=nodes, buffer_bytes=buffer_bytes)
        return None if found is None else np.asarray(found, dtype=np.float64)

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        """The wrapped model's answer for `collective` (srift.bandwidth.collectives), remembered."""
        found = self._collectives.get((collective, query))
        if found is None:
            found = super().answer_collective(collective, query)
            if len(self._collectives) >= self.max_entries:
                self._collectives.clear()
            self._collectives[collective, query] = found
        return found

    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        found = self._memo.get(query)
        if found is None:
            self.calls += 1
            found = super().answer(query)
            if len(self._memo) >= self.max_entries:
                self._memo.clear()
                self.stage_plans.clear()
            self._memo[query] = found
        return found
