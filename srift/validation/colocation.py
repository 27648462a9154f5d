"""The testbed's co-location factor: how much slower a host computes while the fleet's other hosts compute.

The testbed's hosts are cgroups on one machine: each has its CPU quota, but they share the machine's caches
and memory bandwidth, so four hosts computing at once each take longer than one alone (densenet: +12 … +26 %
of CPU time per step on four small hosts; docs/validation.md, cause 10). Profiles are timed on one host, so
without this factor every multi-host prediction of a memory-bound model is short. Cloud VMs of a fleet do
not share a machine: the factor exists for `srift validate` only, never for `srift plan`.

Measured, not fitted: each multi-host DDP run of the matrix ends with `Effort.colocation_rounds` rounds of
compute-only steps (probes/ddp_train.py `--colocation-rounds`: forward and backward under DDP's no_sync,
barrier-synchronised), every rank at once and then the first rank of each group alone, in the same
processes and the same seconds. A group's factor is the median over rounds of (the median of its ranks'
together-seconds) / (its first rank's alone-seconds in that round); the prediction scales that group's
profile (`ModelProfile.scaled_compute`). The DDP iterations' own times never enter it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from srift.validation.ddp import Colocation
from srift.validation.matrix import Fleet


@dataclass(frozen=True, slots=True)
class ColocationFactors:
    """Per group of a fleet (rank order): the factor and the per-round ratios it is the median of."""

    factors: tuple[float, ...]
    ratios: tuple[tuple[float, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"factors": list(self.factors), "ratios": [list(r) for r in self.ratios]}


def solo_ranks(fleet: Fleet) -> tuple[int, ...]:
    """The first rank of each group: the ranks timed alone in each co-location round."""
    firsts: list[int] = []
    rank = 0
    for group in fleet.groups:
        firsts.append(rank)
        rank += group.count
    return tuple(firsts)


def colocation_factors(fleet: Fleet, samples: Sequence[Colocation]) -> ColocationFactors | None:
    """The co-location factor of each group of `fleet` from its runs' compute-only rounds; None for a
    one-host fleet or when no round was measured. A group without a usable round gets 1."""
    if fleet.hosts < 2:
        return None
    firsts = solo_ranks(fleet)
    ratios: list[list[float]] = [[] for _ in fleet.groups]
    for sample in samples:
        if len(sample.together_s) != fleet.hosts:
            continue
        for g, (first, group) in enumerate(zip(firsts, fleet.groups, strict=True)):
            alone = sample.alone_s[first]
            if alone is None:
                continue
            for k, alone_s in enumerate(alone):
                together = [sample.together_s[r][k] for r in range(first, first + group.count)]
                if alone_s > 0 and all(math.isfinite(t) and t > 0 for t in together):
                    ratios[g].append(statistics.median(together) / alone_s)
    if not any(ratios):
        return None
    return ColocationFactors(
        factors=tuple(statistics.median(r) if r else 1.0 for r in ratios),
        ratios=tuple(tuple(r) for r in ratios),
    )
