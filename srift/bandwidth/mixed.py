"""Mixed rings: what a ring of two or more instance types loses against its slowest type alone, measured.

A ring's pace is set by its slowest link, so the simulator gives a mixed fleet the slowest member type's
bus bandwidth. Probes of mixed rings show more: when a fast host sends into a slower host's shaped link,
the fast sender's bursts queue and drop at the slower host's limit and TCP backs off, which a ring of the
slow type alone (every sender paced by its own link) never sees. On the validation testbed a ring of two
small and two large hosts was 2–9 % slower than four small ones (docs/validation.md at 0856b84, round 6).

Probe records of a mixed ring carry the ring's types joined by "+" (sorted, distinct: `srift.domain.rings`).
The factor of a ring at a size is the slowest member type's median time alone over the mixed ring's median
time, both on the same number of nodes with the same buffer: busbw(mixed) / busbw(slowest alone). Sizes
are pooled over node counts by the median. The factors travel with the model version (its metrics), and
the network stage of a fleet of those types multiplies its rates by them (`srift.sim.network`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srift.bandwidth.records import ProbeRecord
from srift.domain.rings import SEPARATOR as SEPARATOR
from srift.domain.rings import ring_members as ring_members
from srift.domain.rings import ring_name as ring_name


def is_mixed(record: ProbeRecord) -> bool:
    return SEPARATOR in record.instance_type


@dataclass(frozen=True, slots=True)
class MixedRing:
    """The measured factors of one mixed ring: per probed node count and buffer size, busbw(mixed) /
    busbw(slowest type alone) as measured (above 1 where the ring was faster)."""

    provider: str
    types: tuple[str, ...]
    factors: tuple[tuple[int, int, float], ...]
    """(nodes, buffer_bytes, factor) cells."""

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted({n for n, _, _ in self.factors}))

    def factor_at(self, nodes: int, buffer_bytes: int) -> float:
        """The factor of the probed node count nearest to `nodes` (the larger on a tie), at the probed size
        nearest on a log scale (the smaller on a tie; the end ones outside the probed range)."""
        near = min(self.nodes, key=lambda n: (abs(n - nodes), -n))
        cells = [(s, f) for n, s, f in self.factors if n == near]
        target = math.log2(max(buffer_bytes, 1))
        return min(cells, key=lambda sf: (abs(math.log2(sf[0]) - target), sf[0]))[1]

    @property
    def key(self) -> str:
        return f"{self.provider}/{SEPARATOR.join(self.types)}"

    def to_dict(self) -> dict[str, Any]:
        by_nodes: dict[str, dict[str, float]] = {}
        for n, size, f in self.factors:
            by_nodes.setdefault(str(n), {})[str(size)] = round(f, 6)
        return {"factor_by_nodes": by_nodes}


def _medians(records: Iterable[ProbeRecord]) -> dict[tuple[str, str, int, int], float]:
    times: dict[tuple[str, str, int, int], list[float]] = defaultdict(list)
    for r in records:
        if r.async_count == 1 and r.ranks_per_node == 1:
            times[(r.provider, r.instance_type, r.nodes, r.buffer_bytes)].append(r.time_s)
    return {k: statistics.median(v) for k, v in times.items()}


def _slowest(
    medians: Mapping[tuple[str, str, int, int], float],
    provider: str,
    members: Sequence[str],
    nodes: int,
    size: int,
) -> float | None:
    """The slowest member's median time alone on `nodes` with `size`: the largest where every member was
    probed there, else that of the member slowest on the largest node count where all were (a type too big
    to probe on as many hosts is compared where it was), when that member was probed on `nodes`."""
    alone = {m: medians.get((provider, m, nodes, size)) for m in members}
    if all(t is not None for t in alone.values()):
        return max(t for t in alone.values() if t is not None)
    common = [
        n
        for (p, m, n, s) in medians
        if p == provider
        and s == size
        and m == members[0]
        and all((provider, other, n, size) in medians for other in members)
    ]
    if not common:
        return None
    where = max(common)
    slow = max(members, key=lambda m: medians[(provider, m, where, size)])
    return alone[slow]


def measure_mixed_rings(records: Sequence[ProbeRecord]) -> list[MixedRing]:
    """The factors of every mixed ring in `records`, against its member types' own records there.

    Only one rank per node and one allreduce at a time are used (what the inter-node ring is). A cell (node
    count, size) counts where the slowest member type alone is known on as many nodes with the same buffer
    (`_slowest`). Rings without any such cell are left out.
    """
    medians = _medians(records)
    cells: dict[tuple[str, str], list[tuple[int, int, float]]] = defaultdict(list)
    for (provider, name, nodes, size), mixed_s in medians.items():
        members = ring_members(name)
        if len(members) < 2:
            continue
        slowest = _slowest(medians, provider, members, nodes, size)
        if slowest is not None:
            cells[(provider, name)].append((nodes, size, slowest / mixed_s))
    return [
        MixedRing(provider=provider, types=tuple(sorted(ring_members(name))), factors=tuple(sorted(found)))
        for (provider, name), found in sorted(cells.items())
    ]


def rings_to_metrics(rings: Iterable[MixedRing]) -> dict[str, Any]:
    """The JSON a model version stores its rings as (metrics["mixed_rings"])."""
    return {ring.key: ring.to_dict() for ring in rings}


def rings_from_metrics(data: Mapping[str, Any] | None) -> list[MixedRing]:
    """Rings back from a version's metrics; entries that do not parse are skipped (older or foreign)."""
    rings = []
    for key, value in (data or {}).items():
        provider, _, name = str(key).partition("/")
        try:
            factors = tuple(
                sorted(
                    (int(n), int(s), float(f))
                    for n, by_size in value["factor_by_nodes"].items()
                    for s, f in by_size.items()
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        valid = factors and all(n >= 2 and s >= 1 and f > 0 and math.isfinite(f) for n, s, f in factors)
        if name and len(ring_members(name)) >= 2 and valid:
            rings.append(MixedRing(provider, tuple(sorted(ring_members(name))), factors))
    return rings


class MixedRingTable:
    """The measured rings of a model version, answering for a fleet's set of types.

    A factor above 1 (a ring measured faster than its slowest type alone) is used as 1: the stage keeps the
    slowest type's rate. On the validation testbed such gains appeared on two hosts only, where the faster
    host's CPU does half of each reduction, and two-host mixed DDP runs did not get them
    (docs/validation.md at 0856b84, round 6).
    """

    def __init__(self, rings: Iterable[MixedRing]) -> None:
        self._by_types: dict[tuple[str, frozenset[str]], MixedRing] = {
            (r.provider, frozenset(r.types)): r for r in rings
        }

    def __bool__(self) -> bool:
        return bool(self._by_types)

    def factors(
        self, provider: str, type_names: Sequence[str], nodes: int, sizes: Sequence[int]
    ) -> list[float] | None:
        """Per size, the factor (at most 1) of the ring of exactly these types; else the smallest factor of
        any probed ring whose types are all among them (each of its fast-into-slow links is in the fleet's
        ring too); None when no probed ring applies."""
        wanted = frozenset(type_names)
        if len(wanted) < 2:
            return None
        exact = self._by_types.get((provider, wanted))
        rings = (
            [exact]
            if exact is not None
            else [r for (p, ts), r in self._by_types.items() if p == provider and ts <= wanted]
        )
        if not rings:
            return None
        return [min(1.0, *(r.factor_at(nodes, s) for r in rings)) for s in sizes]
