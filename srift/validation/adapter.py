"""The testbed adapter: what the emulated cloud does that cloud hardware does not, kept out of the product.

The testbed's hosts are cgroups with CPU quotas on one shared machine, linked by `tc`-shaped veths. Two of
their behaviours change what a DDP iteration takes there, and neither exists on a GPU VM:

- **Fresh quota.** Under a quota of q of a core per period P, steps back to back run at q; a rank that
  waits idle (for slower members or the exposed exchange) leaves quota unused, and its next step runs that
  much unthrottled: it saves (1 − q)·min(idle, P, compute) wall seconds (`fresh_quota_saving_s`).
- **Co-location.** The hosts share the machine's caches and memory bandwidth, so hosts computing at once
  each take longer than one alone (srift.validation.colocation measures the factor in each run).

Neither is a term of the simulator. The adapter turns the testbed's measured profiles into the profiles
its hosts show in a given fleet and then asks the served simulator (`srift.sim.simulate` with
`srift.domain.simulation.SERVED`, exactly what `POST /v1/predictions` runs) about them: the prediction
*model* is the product's; only its inputs are the testbed's. No product module imports this one (an
import-linter contract in pyproject.toml says so).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from srift.domain import BusBandwidthModel, ComputeCurve, FleetMember, ModelProfile
from srift.domain.simulation import SERVED
from srift.errors import require_number
from srift.sim import simulate
from srift.sim.band import communicates
from srift.sim.geo import GeoContext
from srift.validation.colocation import ColocationFactors

LOOP_OVERHEAD_KEYS = ("loop_overhead_s", "ddp_overhead_s")
"""The profile's measured per-iteration loop costs, CPU work that a quota throttles like compute."""


def cpu_share(profile: ModelProfile) -> tuple[float, float] | None:
    """(share of a core each of the profile's threads gets, CFS period in seconds) under the CPU quota
    `srift profile` read from its cgroup (`extra["cpu_quota"]`), or None where no quota binds (none
    recorded, or at least one core per thread)."""
    found = (profile.extra or {}).get("cpu_quota")
    if not isinstance(found, dict):
        return None
    cores, period = found.get("cores"), found.get("period_s")
    if not (isinstance(cores, int | float) and isinstance(period, int | float)):
        return None
    share, period_s = float(cores) / max(1, profile.threads or 1), float(period)
    return (share, period_s) if 0 < share < 1.0 and period_s > 0 else None


def fresh_quota_saving_s(profile: ModelProfile, *, idle_s: float, compute_s: float) -> float:
    """Wall seconds a step of `compute_s` (as profiled, back to back) saves when it follows `idle_s`
    seconds idle: (1 − q)·min(idle, P, compute) under a quota of q per period P (`cpu_share`), 0 where no
    quota binds. Unused quota expires with its period, and a step cannot run faster than its CPU time."""
    share = cpu_share(profile)
    if share is None or idle_s <= 0 or compute_s <= 0:
        return 0.0
    q, period_s = share
    return (1.0 - q) * min(idle_s, period_s, compute_s)


def scaled_compute(profile: ModelProfile, factor: float) -> ModelProfile:
    """`profile` with forward, backward and its measured loop overhead taking `factor` times as long
    (`extra["compute_scale"]` records it)."""
    require_number(
        factor,
        field="compute_scale",
        hint="give the ratio of compute seconds in the fleet to compute seconds as profiled (> 0)",
        positive=True,
        what="compute scale",
    )
    extra = dict(profile.extra)
    for key in LOOP_OVERHEAD_KEYS:
        value = extra.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            extra[key] = value * factor
    extra["compute_scale"] = factor * float(profile.extra.get("compute_scale", 1.0))
    return dataclasses.replace(
        profile,
        forward=ComputeCurve(profile.forward.batches, tuple(t * factor for t in profile.forward.times_s)),
        backward=ComputeCurve(profile.backward.batches, tuple(t * factor for t in profile.backward.times_s)),
        extra=extra,
    )


def colocated_profile(profile: ModelProfile, factors: ColocationFactors, group: int) -> ModelProfile:
    """`profile` as group `group` of the fleet computes: scaled by its factor, and with the straggler cv
    of its together-steps where that is larger than the profile's own (measured alone)."""
    scaled = scaled_compute(profile, factors.factors[group])
    cv = factors.straggler_cv[group]
    if cv is not None and cv > scaled.straggler_cv:
        scaled = dataclasses.replace(scaled, straggler_cv=cv)
    return scaled


def fresh_quota_scales(fleet: Sequence[FleetMember], *, busy_s: float) -> list[float] | None:
    """Each member's compute scale after its fresh-quota saving at its idle time in an iteration busy for
    `busy_s` (compute and exchange), or None when no member saves anything."""
    if all(cpu_share(m.profile) is None for m in fleet):
        return None
    scales = []
    for m in fleet:
        compute_s = m.profile.compute_s(m.per_device_batch) + m.profile.loop_overhead_s(distributed=True)
        saving_s = fresh_quota_saving_s(m.profile, idle_s=busy_s - compute_s, compute_s=compute_s)
        scales.append((compute_s - saving_s) / compute_s if compute_s > 0 else 1.0)
    return None if all(k == 1.0 for k in scales) else scales


def testbed_fleet(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int,
    geo: GeoContext | None = None,
    colocation: ColocationFactors | None = None,
) -> list[FleetMember]:
    """The fleet with each member's profile as its testbed hosts compute in it: co-located (when the runs
    measured it), then with the fresh-quota saving at the idle time the served simulator predicts for
    the co-located fleet (one pass). Without a quota or co-location the fleet is returned as given."""
    members = list(fleet)
    if colocation is not None:
        members = [
            dataclasses.replace(m, profile=colocated_profile(m.profile, colocation, g))
            for g, m in enumerate(members)
        ]
    if not communicates(members):
        return members
    first = simulate(members, bandwidth=bandwidth, seed=seed, config=SERVED, geo=geo, band=False)
    busy_s = first.iteration_s - first.breakdown.update_s - first.breakdown.data_stall_s
    scales = fresh_quota_scales(members, busy_s=busy_s)
    if scales is None:
        return members
    return [
        dataclasses.replace(m, profile=scaled_compute(m.profile, k)) if k != 1.0 else m
        for m, k in zip(members, scales, strict=True)
    ]
