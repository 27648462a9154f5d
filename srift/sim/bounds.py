"""Lower bounds of `simulate()`'s iteration time, for a fleet and for every fleet that extends it.

The optimizer prunes with these, so each is a promise about the simulator (tested against it):

- Compute. The simulator's compute phase ends at C̄ = max(mean over iterations of the slowest VM's draw,
  max over members of ρ_m · mean_m). Draws come from common random numbers (`srift.sim.compute`): a
  member's stream depends only on what it is, never on the other members, and the largest of k normals
  grows with k. So C̄ of a fleet is at most C̄ of any fleet holding the same members plus others; it is
  computed exactly. A member under a CPU quota may start its steps on fresh quota (`_point`), so here its
  compute is `ModelProfile.compute_floor_s`, less its largest saving (the compute less the saving grows
  with the compute, and the simulator's compute also holds the loop overhead).
- Exchange. Layer j is released at a_j = max over members of ρ_m (fw_m + ready_frac_j · bw_m) (more members:
  later), then passes the intra-node and network stages in tandem; in each stage a transfer never runs faster
  than its size class's lone rate and the stage never moves more than its cap. So the exchange ends no
  earlier than max over j of (a_j + Σ stages bits_j / rate) and, per stage, than a_j + (bits released at or
  after a_j) / cap. A stage that a fleet lacks but an extension could gain only delays the exchange, so
  leaving it out keeps a lower bound.
- Extensions (`Extension`). A stage runs at the slowest type present, per size class (more types: slower).
  The network stage's rates also depend on the final VM count n, which lies in [min_nodes, max_nodes]: the
  bound takes, per size class, the fastest rate any such n gives (no monotonicity in n is assumed of the
  bandwidth model; its answers are tabled per type and n). When the extension must add a VM of one of the
  `later` types, the final fleet is at most as fast as the fastest of them joined with the types present.
  Above MAX_TABLE_NODES VMs no table is built and the network stage is left out (still a bound).
- Iteration = max(C̄, exchange end) + the slowest member's update_s (more members: no less).

`Bounder` builds what the bound needs member by member (`PartialFleet`), so a search that grows fleets one
group at a time pays for each member once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from srift.domain import BusBandwidthModel, FleetMember, InstanceType, ModelProfile
from srift.domain.geo import Location
from srift.sim.compute import member_base, member_key, straggler_rows
from srift.sim.layers import LayerArrays, bucket_groups, bucketed, layer_arrays
from srift.sim.network import CAP_PROBE_BYTES, intra_stage_at, network_rows, network_stage_at

MAX_TABLE_NODES = 4096
"""Extension bounds table the bandwidth model's answers up to this many VMs; above, no network stage."""


@dataclass(frozen=True, slots=True)
class Extension:
    """The fleets that extend a partial fleet: its members followed by others, with between `min_nodes` and
    `max_nodes` VMs in all and, when `later` is not empty, at least one VM of one of those types. With
    `min_compute_s`, one of the added members computes (forward + backward) for at least that long, with a
    profile among `later_profiles`. With `spans`, the fleets span two or more locations (the bounds then
    use the link between locations, `Bounder.use_links`)."""

    min_nodes: int
    max_nodes: int
    later: tuple[InstanceType, ...] = ()
    min_compute_s: float = 0.0
    later_profiles: tuple[ModelProfile, ...] = ()
    spans: bool = False


@dataclass(frozen=True, slots=True)
class PartialFleet:
    """A fleet's members so far, reduced to what the bound needs: the slowest draw of each straggler
    iteration, max ρ·mean, each layer's release time, the slowest update, the types and the VM count."""

    slowest: np.ndarray
    rho_mean_s: float
    arrive: np.ndarray
    update_s: float
    types: tuple[InstanceType, ...]
    names: tuple[str, ...]
    ids: tuple[int, ...]
    nodes: int
    bases: tuple[str, ...]
    canon: LayerArrays
    buckets: tuple[tuple[str, ...], ...] | None
    locations: tuple[Location, ...] = ()


class Bounder:
    """Lower bounds of one simulator configuration (bandwidth model, seed, straggler iterations, buckets).

    With `network=False` the network stage is always left out, for exchanges whose inter-node stages are
    not the single ring these bounds model (the hierarchical pattern across locations, srift.sim.geo).
    """

    def __init__(
        self,
        *,
        bandwidth: BusBandwidthModel,
        seed: int = 0,
        straggler_iters: int = 100,
        bucket_cap_mb: float | None = None,
        network: bool = True,
    ) -> None:
        self.bandwidth = bandwidth
        self.seed = seed
        self.iters = straggler_iters
        self.bucket_cap_mb = bucket_cap_mb
        self.network = network
        self._stages: dict[tuple[object, ...], list[Rates]] = {}
        self._later_ids: dict[int, tuple[tuple[InstanceType, ...], tuple[int, ...]]] = {}
        self._keep: dict[int, InstanceType] = {}
        self.cross: tuple[float, float] | None = None
        self._members: dict[tuple[int, ...], tuple[Any, ...]] = {}
        self._type_ids: dict[int, tuple[tuple[InstanceType, ...], tuple[int, ...]]] = {}
        self._tables: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._floors: dict[
            tuple[object, ...], tuple[np.ndarray, float, LayerArrays, tuple[ModelProfile, ...]]
        ] = {}

    def add(self, partial: PartialFleet | None, member: FleetMember) -> PartialFleet:
        """The partial fleet with `member` appended (the first member when `partial` is None)."""
        buckets = partial.buckets if partial is not None else None
        bases = partial.bases if partial is not None else ()
        base = member_base(member)
        repeat = bases.count(base)
        canon = partial.canon if partial is not None else None
        key = (
            id(member.instance),
            member.count,
            member.batch,
            id(member.profile),
            repeat,
            id(canon),
            id(buckets),
        )
        found = self._members.get(key)
        if found is None or found[0] is not member.instance or found[1] is not member.profile:
            found = self._members[key] = (
                member.instance,
                member.profile,
                canon,
                buckets,
                *self._member(member, key=member_key(base, repeat), canon=canon, buckets=buckets),
            )
        row, rho_mean, arrive, update_s, canon, buckets = found[4:]
        if partial is None:
            return PartialFleet(
                slowest=row,
                rho_mean_s=rho_mean,
                arrive=arrive,
                update_s=update_s,
                types=(member.instance,),
                names=(_name(member.instance),),
                ids=(self._id(member.instance),),
                nodes=member.count,
                bases=(base,),
                canon=canon,
                buckets=buckets,
                locations=(member.location,) if member.location is not None else (),
            )
        types, names, ids = partial.types, partial.names, partial.ids
        name = _name(member.instance)
        if name not in names:
            types, names = (*types, member.instance), (*names, name)
            ids = (*ids, self._id(member.instance))
        return PartialFleet(
            slowest=np.maximum(partial.slowest, row),
            rho_mean_s=max(partial.rho_mean_s, rho_mean),
            arrive=np.maximum(partial.arrive, arrive),
            update_s=max(partial.update_s, update_s),
            types=types,
            names=names,
            ids=ids,
            nodes=partial.nodes + member.count,
            bases=(*bases, base),
            canon=canon,
            buckets=buckets,
            locations=partial.locations
            if member.location is None or member.location in partial.locations
            else (*partial.locations, member.location),
        )

    def type_partial(
        self, instance: InstanceType, profile: ModelProfile, *, least_compute_s: float, forward_share: float
    ) -> PartialFleet:
        """A partial fleet standing for any member of `instance` (any count ≥ 1, any batch): no straggler
        draws (ρ ≥ 1 is dropped), its compute at least `least_compute_s` (the least forward + backward any
        batch it may take gives) and layer j released no earlier than that times (forward share + (1 −
        forward share) · ready_frac_j), `forward_share` being the least share of forward in its compute.
        Bounds of it hold for every fleet that holds such a member, in any position."""
        buckets = None
        if self.bucket_cap_mb is not None:
            buckets = bucket_groups(profile, cap_bytes=int(self.bucket_cap_mb * 2**20))
            profile = bucketed(profile, buckets)
        canon = layer_arrays(profile)
        share = min(max(forward_share, 0.0), 1.0)
        arrive = least_compute_s * (share + (1.0 - share) * canon.aligned_ready_frac(canon))
        return PartialFleet(
            slowest=np.zeros(self.iters),
            rho_mean_s=least_compute_s,
            arrive=arrive,
            update_s=profile.update_s,
            types=(instance,),
            names=(_name(instance),),
            ids=(self._id(instance),),
            nodes=1,
            bases=(),
            canon=canon,
            buckets=buckets,
        )

    def _member(
        self,
        member: FleetMember,
        *,
        key: int,
        canon: LayerArrays | None,
        buckets: tuple[tuple[str, ...], ...] | None,
    ) -> tuple[np.ndarray, float, np.ndarray, float, LayerArrays, tuple[tuple[str, ...], ...] | None]:
        """What one member adds to a partial fleet: its slowest draw per straggler iteration, ρ·mean, each
        layer's release time, its update time, and the canonical layers and buckets of the fleet."""
        profile = member.profile
        if self.bucket_cap_mb is not None:
            if buckets is None:
                buckets = bucket_groups(profile, cap_bytes=int(self.bucket_cap_mb * 2**20))
            profile = bucketed(profile, buckets)
        d = member.instance.devices
        fw = profile.forward.time_s(member.batch / d)
        bw = profile.backward.time_s(member.batch / d)
        mean = fw + bw
        floor = profile.compute_floor_s(member.batch / d)
        if 0 < floor < mean:
            fw, bw = fw * floor / mean, bw * floor / mean
            mean = fw + bw
        (row,) = straggler_rows(
            [mean], [profile.straggler_cv], [member.count], [key], seed=self.seed, iters=self.iters
        )
        rho = max(1.0, float(row.sum()) / self.iters / mean) if mean > 0 else 1.0
        canon = canon if canon is not None else layer_arrays(profile)
        arrive = rho * (fw + canon.aligned_ready_frac(layer_arrays(profile)) * bw)
        return row, rho * mean, arrive, profile.update_s, canon, buckets

    def bound_s(self, partial: PartialFleet, extension: Extension | None = None) -> float:
        """A lower bound of the iteration time of the fleet (no `extension`) or of every fleet `extension`
        describes."""
        compute_end = max(float(partial.slowest.sum()) / self.iters, partial.rho_mean_s)
        canon = partial.canon
        arrive, update_s = partial.arrive, partial.update_s
        if extension is not None and extension.min_compute_s > 0 and extension.later_profiles:
            compute_end = max(compute_end, extension.min_compute_s)
            floor, least_update = self._later_floor(partial, extension.later_profiles)
            arrive = np.maximum(arrive, floor * extension.min_compute_s)
            update_s = max(update_s, least_update)
        if canon.bits.size == 0:
            return compute_end + update_s
        later = extension.later if extension is not None else ()
        later_ids = self._later_ids.get(id(later))
        if later_ids is None or later_ids[0] is not later:
            later_ids = self._later_ids[id(later)] = (later, tuple(self._id(t) for t in later))
        nodes = partial.nodes
        lo = hi = nodes
        if extension is not None:
            lo = max(nodes + (1 if later else 0), extension.min_nodes)
            hi = max(extension.max_nodes, nodes)
        spans = self.cross is not None and (
            len(partial.locations) >= 2 or (extension is not None and extension.spans)
        )
        key = (partial.ids, canon.sizes, later_ids[1], lo, hi, spans)
        stages = self._stages.get(key)
        if stages is None:
            intra = _intra(partial.types, canon.sizes, self.bandwidth, later)
            network = (
                self._network(partial.types, canon.sizes, lo=lo, hi=hi, later=later) if self.network else None
            )
            if network is not None and spans:
                network = self._across(network, canon, nodes=lo)
            stages = self._stages[key] = [x for x in (intra, network) if x is not None]
        if not stages:
            return compute_end + update_s
        bits, klass = canon.bits, canon.klass
        release = arrive
        end = -np.inf
        for rates, cap in stages:
            order = release.argsort(kind="stable")
            after = bits[order][::-1].cumsum()[::-1]
            end = max(end, float((release[order] + after / cap).max()))
            release = release + bits / rates[klass]
            end = max(end, float(release.max()))
        return max(compute_end, end) + update_s

    def _ids(self, types: tuple[InstanceType, ...]) -> tuple[int, ...]:
        """`_id` of each of `types`, remembered per tuple object (the search passes the same tuples)."""
        found = self._type_ids.get(id(types))
        if found is None or found[0] is not types:
            found = self._type_ids[id(types)] = (types, tuple(self._id(t) for t in types))
        return found[1]

    def use_links(self, *, latency_s: float, bandwidth_bps: float) -> None:
        """Bound fleets that span locations with the fastest link between any two of the locations a
        search allows (least one-way latency, most one-stream bandwidth): a flat ring over N VMs in L ≥ 2
        locations steps no faster than (2α + s/β)/N (srift.sim.geo), so a class of mean size s moves at most
        s·N / (2(N−1)(2α + s/β))."""
        self.cross = (latency_s, bandwidth_bps)

    def _across(self, stage: Rates, canon: LayerArrays, *, nodes: int) -> Rates:
        """The network stage of a fleet that spans locations, capped by the fastest link (`use_links`) at
        `nodes` VMs, the fewest it may have (more VMs: slower)."""
        from srift.sim.geo import class_bytes

        assert self.cross is not None
        alpha, beta = self.cross
        n = max(nodes, 2)

        def rate(nbytes: float) -> float:
            bits = nbytes * 8
            return bits * n / (2 * (n - 1) * (2 * alpha + bits / beta))

        rates, cap = stage
        capped = np.minimum(rates, [rate(b) for b in class_bytes(canon)])
        # as srift.sim.geo's stage: the cap never below a lone transfer's own rate
        return capped, max(min(cap, rate(float(CAP_PROBE_BYTES))), float(capped.max(initial=0.0)))

    def _id(self, instance: InstanceType) -> int:
        """A cache key for an instance type object (kept alive, so that its id is never reused)."""
        self._keep.setdefault(id(instance), instance)
        return id(instance)

    def _network(
        self,
        types: tuple[InstanceType, ...],
        sizes: tuple[int, ...],
        *,
        lo: int,
        hi: int,
        later: tuple[InstanceType, ...],
    ) -> Rates | None:
        """Upper bounds of the network stage's lone rates and cap over final VM counts lo..hi, joined with the
        fastest of the `later` types when the fleet must grow by one of them, or None when the stage may be
        absent."""
        if lo < 2 or lo > hi:
            return None
        if lo == hi and not later:
            plan = network_stage_at(types, lo, sizes, self.bandwidth)
            return None if plan is None else (np.asarray(plan.stage.rates_bps), plan.stage.cap_bps)
        if hi > MAX_TABLE_NODES:
            return None
        rates, caps = self._table(types, sizes, hi, combine=np.minimum)
        rates, caps = rates[lo : hi + 1], caps[lo : hi + 1]
        if later:
            best, best_caps = self._table(later, sizes, hi, combine=np.maximum)
            rates = np.minimum(rates, best[lo : hi + 1])
            caps = np.minimum(caps, best_caps[lo : hi + 1])
        return rates.max(axis=0), float(caps.max())

    def _table(
        self, types: tuple[InstanceType, ...], sizes: tuple[int, ...], top: int, *, combine: np.ufunc
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows n = 0..≥top of the network stage's lone rates (a column per size class) and cap for n VMs of
        each type, combined over `types` by `combine` (minimum: the stage of all of them; maximum: the
        fastest of them); rows below 2 are zero."""
        key = (self._ids(types), sizes, combine.__name__ if len(types) > 1 else "")
        found = self._tables.get(key)
        if found is not None and found[0].shape[0] > top:
            return found
        rows = min(max(top + 1, 2 * found[0].shape[0] if found is not None else 0, 16), MAX_TABLE_NODES + 1)
        if len(types) == 1:
            rates = np.zeros((rows, len(sizes)))
            caps = np.zeros(rows)
            rates[2:], caps[2:] = network_rows(types[0], range(2, rows), sizes, self.bandwidth)
        else:
            parts = [self._table((t,), sizes, rows - 1, combine=combine) for t in types]
            rates = combine.reduce([p[0][:rows] for p in parts])
            caps = combine.reduce([p[1][:rows] for p in parts])
        self._tables[key] = (rates, caps)
        return rates, caps

    def _later_floor(
        self, partial: PartialFleet, profiles: tuple[ModelProfile, ...]
    ) -> tuple[np.ndarray, float]:
        """Per layer (canon order), the least ready fraction any of `profiles` gives it (a member computing
        for c releases layer j no earlier than that times c, since forward time is ≥ 0), and their least
        update_s."""
        canon = partial.canon
        key = ("later", id(canon), tuple(id(p) for p in profiles))
        found = self._floors.get(key)
        if found is None:
            used = profiles
            if partial.buckets is not None:
                used = tuple(bucketed(p, partial.buckets) for p in profiles)
            fracs = [canon.aligned_ready_frac(layer_arrays(p)) for p in used]
            least = (np.min(fracs, axis=0), min(p.update_s for p in profiles))
            found = self._floors[key] = (*least, canon, profiles)
        return found[0], found[1]


def iteration_lower_bound_s(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int = 0,
    straggler_iters: int = 100,
    bucket_cap_mb: float | None = None,
    extension: Extension | None = None,
) -> float:
    """A lower bound of `simulate(fleet, ...)`'s iteration_s with the same arguments; with `extension`, of
    every fleet it describes."""
    bounder = Bounder(
        bandwidth=bandwidth, seed=seed, straggler_iters=straggler_iters, bucket_cap_mb=bucket_cap_mb
    )
    partial: PartialFleet | None = None
    for member in fleet:
        partial = bounder.add(partial, member)
    assert partial is not None, "an empty fleet has no iteration time"
    return bounder.bound_s(partial, extension)


Rates = tuple[np.ndarray, float]


_MISSING: object = object()


def _name(instance: InstanceType) -> str:
    return f"{instance.provider}/{instance.name}"


def _intra(
    types: tuple[InstanceType, ...],
    sizes: tuple[int, ...],
    bandwidth: BusBandwidthModel,
    later: tuple[InstanceType, ...],
) -> Rates | None:
    """Upper bounds of the intra stage's lone rates and cap, or None when the stage may be absent."""
    own = intra_stage_at(types, sizes, bandwidth)
    out: Rates | None = (np.asarray(own.stage.rates_bps), own.stage.cap_bps) if own is not None else None
    if later and all(t.devices >= 2 for t in later):
        plans = [intra_stage_at((t,), sizes, bandwidth) for t in later]
        rates = np.max([np.asarray(p.stage.rates_bps) for p in plans if p is not None], axis=0)
        cap = max(p.stage.cap_bps for p in plans if p is not None)
        out = (rates, cap) if out is None else (np.minimum(out[0], rates), min(out[1], cap))
    return out


__all__ = ["Bounder", "Extension", "PartialFleet", "iteration_lower_bound_s"]
