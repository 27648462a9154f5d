"""Location as a level of the exchange: the links between locations, the ring's order, and egress bytes.

When a fleet's VMs sit in several locations (regions, zones, clouds), gradients cross slow links with
latency. The shape depends on `AllreducePattern`:

`ring` (PyTorch DDP with gloo or NCCL's ring). One ring over all N VMs, grouped by location, visiting the
L locations in the order that makes the slowest crossing fastest. Each of the 2(N−1) steps moves s/N bytes
over every hop at once and waits for the slowest hop. A crossing's bytes are serialised on its link
(s/(N·β) per step), and a chunk of data meets a crossing on L of every N hops it travels, so over the
whole ring its latency adds L·α/N per step on the critical path:

    step(s) = max(in-location step(s), L·α/N + s/(N·β)),   t(s) = 2(N−1)·step(s)

where β is the link's one-stream bandwidth (capped by both VMs' NICs) and α its one-way latency, for the
worst crossing of the ring. For N = L = 2 this is 2α + s/β. The in-location step comes from the bandwidth
model as for any ring (srift.sim.network). Each location sends 2(N−1)/N·s bytes per iteration to the next
location of the ring.

`hierarchical` (Hivemind's grouped averaging; hierarchical allreduce). Each location reduces among its own
VMs (the "network" stage at the pace of the slowest location), then one VM per location runs a ring over
the L locations (the "location" stage: t(s) = 2(L−1)·(α + s/(L·β))), and the result is shared back inside
each location (folded into the first stage). Each location sends 2(L−1)/L·s bytes per iteration.

Latency is a rate here, like everything in the exchange: a size class runs at s̄/t(s̄), where s̄ is the mean
size of the class's layers (not the power of two the bandwidth model is asked about), so latency-bound
small layers are not charged for bytes they do not have.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srift.catalog.geo import GeoCatalog
from srift.domain import BusBandwidthModel, FleetMember
from srift.domain.geo import AllreducePattern, EgressFlow, Link, Location
from srift.errors import InvalidInput
from srift.sim.exchange import Stage
from srift.sim.layers import LayerArrays
from srift.sim.network import CAP_PROBE_BYTES, StagePlan, network_stage

MAX_LOCATIONS = 8
"""Most locations one fleet may span (the ring order is searched exhaustively: (L−1)!/2 orders)."""


@dataclass(frozen=True, slots=True)
class GeoContext:
    """What the simulator needs to place a fleet: the network facts and how gradients cross locations."""

    catalog: GeoCatalog
    pattern: AllreducePattern = AllreducePattern.RING


def fleet_locations(fleet: Sequence[FleetMember]) -> list[Location]:
    """The fleet's distinct locations in first-seen order (members without one count as one location)."""
    out: list[Location] = []
    for m in fleet:
        if m.location is not None and m.location not in out:
            out.append(m.location)
    return out


def spans_locations(fleet: Sequence[FleetMember]) -> bool:
    """True when members name two or more distinct locations."""
    return len(fleet_locations(fleet)) >= 2


def _check(fleet: Sequence[FleetMember]) -> list[Location]:
    locations = fleet_locations(fleet)
    if any(m.location is None for m in fleet):
        raise InvalidInput(
            "some fleet members name a location and others do not",
            hint="give every member a location, or none",
            field="fleet.location",
        )
    if len(locations) > MAX_LOCATIONS:
        raise InvalidInput(
            f"the fleet spans {len(locations)} locations (at most {MAX_LOCATIONS})",
            hint="use fewer regions or zones",
            field="fleet.location",
        )
    return locations


def _nic_gbps(fleet: Sequence[FleetMember], location: Location) -> float:
    return min(m.instance.network_gbps for m in fleet if m.location == location)


def hop_link(fleet: Sequence[FleetMember], geo: GeoCatalog, a: Location, b: Location) -> Link:
    """The link from `a` to `b`, its bandwidth capped by the slower NIC of the VMs at either end."""
    link = geo.link(a, b)
    cap = min(_nic_gbps(fleet, a), _nic_gbps(fleet, b))
    if link.bandwidth_gbps <= cap:
        return link
    return Link(cap, link.latency_ms, f"{link.source}; capped at the VMs' {cap:g} Gbit/s NIC")


def ring_order(
    fleet: Sequence[FleetMember], geo: GeoCatalog, *, probe_bytes: int = 1 << 30
) -> list[Location]:
    """The order of locations around the ring whose slowest crossing (for `probe_bytes`) is fastest.

    Ties go to the cheaper order (egress $/GB summed over the crossings), then to first-seen order.
    """
    locations = _check(fleet)
    if len(locations) <= 2:
        return locations
    first, rest = locations[0], locations[1:]
    best: tuple[float, float, int] | None = None
    chosen = locations
    for rank, perm in enumerate(itertools.permutations(rest)):
        order = [first, *perm]
        hops = list(zip(order, order[1:] + order[:1], strict=True))
        worst = max(
            hop_link(fleet, geo, a, b).latency_s + probe_bytes * 8 / hop_link(fleet, geo, a, b).bandwidth_bps
            for a, b in hops
        )
        usd = sum(geo.egress_usd_per_gb(a, b) for a, b in hops)
        key = (worst, usd, rank)
        if best is None or key < best:
            best, chosen = key, order
    return chosen


def crossings(order: Sequence[Location]) -> list[tuple[Location, Location]]:
    """The (from, to) hops between consecutive locations of a ring, the last one back to the first."""
    if len(order) < 2:
        return []
    if len(order) == 2:
        return [(order[0], order[1]), (order[1], order[0])]
    return list(zip(order, [*order[1:], order[0]], strict=True))


def class_bytes(canon: LayerArrays) -> list[float]:
    """Mean payload bytes of the layers in each size class (the class's power of two when it is empty)."""
    out = []
    for k, size in enumerate(canon.sizes):
        members = canon.bits[canon.klass == k]
        out.append(float(members.mean()) / 8.0 if members.size else float(size))
    return out


def _to_plan(
    name: str, rates: list[float], cap: float, sources: Sequence[str], warnings: Sequence[str]
) -> StagePlan:
    cap = max(cap, *rates)
    return StagePlan(Stage(name, tuple(rates), cap), tuple(dict.fromkeys(sources)), 0.0, tuple(warnings))


def ring_plans(
    fleet: Sequence[FleetMember], canon: LayerArrays, bandwidth: BusBandwidthModel, geo: GeoCatalog
) -> tuple[list[StagePlan], list[float]]:
    """The flat ring's network stage across locations, and the link's share of each class's time."""
    order = ring_order(fleet, geo)
    n = sum(m.count for m in fleet)
    ell = len(order)
    base = network_stage(fleet, canon.sizes, bandwidth)
    assert base is not None  # two locations hold at least two VMs
    links = [hop_link(fleet, geo, a, b) for a, b in crossings(order)]
    means = class_bytes(canon)

    def link_rate(nbytes: float) -> float:
        step = max(ell * lk.latency_s / n + nbytes * 8 / (n * lk.bandwidth_bps) for lk in links)
        return nbytes * 8 / (2 * (n - 1) * step)

    rates, link_share = [], []
    for k, own in enumerate(base.stage.rates_bps):
        lr = link_rate(means[k])
        rates.append(min(own, lr))
        link_share.append(1.0 if lr < own else 0.0)
    cap = min(base.stage.cap_bps, link_rate(float(CAP_PROBE_BYTES)))
    sources = [
        *base.sources,
        *(f"link {a.key}→{b.key}: {lk.source}" for (a, b), lk in zip(crossings(order), links, strict=True)),
    ]
    plan = _to_plan("network", rates, cap, sources, base.warnings)
    return [plan], link_share


def hierarchical_plans(
    fleet: Sequence[FleetMember], canon: LayerArrays, bandwidth: BusBandwidthModel, geo: GeoCatalog
) -> list[StagePlan]:
    """The in-location stage (slowest location) and the ring over one VM per location."""
    order = ring_order(fleet, geo)
    ell = len(order)
    plans: list[StagePlan] = []
    inside: list[StagePlan] = []
    for loc in order:
        sub = [m for m in fleet if m.location == loc]
        plan = network_stage(sub, canon.sizes, bandwidth)
        if plan is not None:
            inside.append(plan)
    if inside:
        rates = [min(p.stage.rates_bps[k] for p in inside) for k in range(len(canon.sizes))]
        cap = min(p.stage.cap_bps for p in inside)
        plans.append(
            _to_plan(
                "network",
                rates,
                cap,
                [s for p in inside for s in p.sources],
                [w for p in inside for w in p.warnings],
            )
        )
    links = [hop_link(fleet, geo, a, b) for a, b in crossings(order)]
    means = class_bytes(canon)

    def rate(nbytes: float) -> float:
        step = max(lk.latency_s + nbytes * 8 / (ell * lk.bandwidth_bps) for lk in links)
        return nbytes * 8 / (2 * (ell - 1) * step)

    sources = [
        f"link {a.key}→{b.key}: {lk.source}" for (a, b), lk in zip(crossings(order), links, strict=True)
    ]
    plans.append(_to_plan("location", [rate(b) for b in means], rate(float(CAP_PROBE_BYTES)), sources, ()))
    return plans


def gradient_bytes(canon: LayerArrays) -> float:
    """Expected gradient bytes one VM contributes per iteration (Σ grad_bytes · exec_prob)."""
    return float(np.sum(canon.bits)) / 8.0


def egress_flows(fleet: Sequence[FleetMember], *, grad_bytes: float, geo: GeoContext) -> list[EgressFlow]:
    """Bytes per iteration each location sends to another, with route and price (empty for one location).

    Ring: every crossing carries 2(N−1)/N of the gradient bytes; hierarchical: 2(L−1)/L. Traffic inside a
    location is billed at the intra-zone price and listed only when that price is above zero.
    """
    if not spans_locations(fleet):
        return []
    order = ring_order(fleet, geo.catalog)
    n = sum(m.count for m in fleet)
    ell = len(order)
    per_crossing = grad_bytes * (
        2 * (n - 1) / n if geo.pattern is AllreducePattern.RING else 2 * (ell - 1) / ell
    )
    flows = []
    for a, b in crossings(order):
        flows.append(
            EgressFlow(
                source=a,
                destination=b,
                route=geo.catalog.route(a, b),
                bytes_per_iteration=per_crossing,
                usd_per_gb=geo.catalog.egress_usd_per_gb(a, b),
            )
        )
    for loc in order:
        vms = sum(m.count for m in fleet if m.location == loc)
        price = geo.catalog.egress_usd_per_gb(loc, loc)
        if vms >= 2 and price > 0:
            hops = vms - 1
            per_hop = (
                grad_bytes * 2 * (n - 1) / n
                if geo.pattern is AllreducePattern.RING
                else grad_bytes * 2 * (vms - 1) / vms
            )
            flows.append(
                EgressFlow(
                    source=loc,
                    destination=loc,
                    route=geo.catalog.route(loc, loc),
                    bytes_per_iteration=per_hop * hops,
                    usd_per_gb=price,
                )
            )
    return flows


def egress_usd_per_iteration(flows: Sequence[EgressFlow]) -> float:
    return math.fsum(f.usd_per_iteration for f in flows)
