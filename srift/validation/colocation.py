"""The testbed's co-location factor: how much slower a host computes while the fleet's other hosts compute.

The testbed's hosts are cgroups on one machine: each has its CPU quota, but they share the machine's caches
and memory bandwidth, so four hosts computing at once each take longer than one alone (densenet: +12 … +26 %
of CPU time per step on four small hosts; docs/validation.md at 0856b84, cause 10). Profiles are timed on
one host, so without this factor every multi-host prediction of a memory-bound model is short. Cloud VMs of
a fleet do not share a machine: the factor exists for `srift validate` only (the testbed adapter), never
for `srift plan`.

Measured, not fitted: each multi-host DDP run of the matrix ends with `Effort.colocation_rounds` rounds of
compute-only steps (probes/ddp_train.py `--colocation-rounds`: forward and backward under DDP's no_sync,
barrier-synchronised), every rank at once and then the first rank of each group alone, in the same
processes and the same seconds, each step starting one CPU quota period after its barrier
(`--colocation-idle-s`) and timed on the process's CPU clock (the wall seconds are recorded beside).
Co-location costs CPU work (caches, memory bandwidth), while a step's wall time under a quota also depends
on where in its period it starts: run 8 (wall clock, no idle wait) read cnn's small hosts ×0.72 and large
hosts ×1.25 … ×1.49 in every mixed fleet, because a solo rank's together-step followed its own solo step
back to back (throttled) and its solo step an idle wait; run 11 (wall clock after an idle period, so every
step started on a fresh quota) still read cnn ×1.98 / ×1.34 on 2 + 2 hosts at 16/48, where a step is a few
quota periods long and the period's phase at its start decides a whole throttled period. On hourglass
(600 ms steps on four small hosts) the two clocks agree (wall ×1.021, CPU ×1.016).

A group's factor is the median over rounds of (the median of its ranks' together-seconds) / (its first rank's
alone-seconds in that round); the testbed adapter scales that group's profile
(`srift.validation.adapter.colocated_profile`) and, where the together-steps vary more from step to step and
rank to rank than the profile's iterations did alone, takes their std/mean as the group's straggler cv (hosts
computing at once on one machine also straggle more: densenet on four small hosts, one rank 1.44 s where the
others took 1.07–1.15 s).
The DDP iterations' own times never enter either.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from srift.validation.ddp import Colocation
from srift.validation.matrix import Fleet


@dataclass(frozen=True, slots=True)
class ColocationFactors:
    """Per group of a fleet (rank order): the factor, the per-round ratios it is the median of, and the
    straggler cv of its together-steps (None with fewer than three degrees of freedom)."""

    factors: tuple[float, ...]
    ratios: tuple[tuple[float, ...], ...]
    straggler_cv: tuple[float | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "factors": list(self.factors),
            "ratios": [list(r) for r in self.ratios],
            "straggler_cv": list(self.straggler_cv),
        }


def solo_ranks(fleet: Fleet) -> tuple[int, ...]:
    """The first rank of each group: the ranks timed alone in each co-location round."""
    return tuple(itertools.accumulate((g.count for g in fleet.groups[:-1]), initial=0))


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
        straggler_cv=tuple(_together_cv(fleet, samples, g) for g in range(len(fleet.groups))),
    )


def _together_cv(fleet: Fleet, samples: Sequence[Colocation], group: int) -> float | None:
    """std/mean of group `group`'s together-steps (every rank, every round), pooled over runs around each
    run's own mean (a run's drift is not a straggler); None below three degrees of freedom."""
    first = solo_ranks(fleet)[group]
    count = fleet.groups[group].count
    squares, dof = 0.0, 0
    for sample in samples:
        if len(sample.together_s) != fleet.hosts:
            continue
        steps = [
            t for r in range(first, first + count) for t in sample.together_s[r] if math.isfinite(t) and t > 0
        ]
        if len(steps) < 2:
            continue
        mean = statistics.fmean(steps)
        squares += sum((t / mean - 1.0) ** 2 for t in steps)
        dof += len(steps) - 1
    return math.sqrt(squares / dof) if dof >= 3 else None
