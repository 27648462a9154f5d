"""The exchange slowed while members compute: a time warp of the exchange's clock.

An allreduce that runs while a member's forward or backward runs shares that host with it (gloo: CPU time
and memory bandwidth under the host's quota; NCCL: SMs and memory bandwidth), so it progresses slower:
`probes/overlap.py` measures the ratio, `comm_slowdown` (allreduce time with concurrent compute over
allreduce time alone), and `srift validate` keeps it in each profile of the type
(`ModelProfile.comm_overlap_slowdown`). A ring moves at its slowest hop, so while any member computes the
whole exchange runs at 1 / (the largest slowdown among the members still computing).

The exchange itself (srift.sim.exchange) runs at constant rates. Its clock is warped instead: work time
τ(t) advances at 1 / slowdown(t) of wall time t, so an exchange simulated at full rates on τ (arrivals
mapped by τ) and mapped back by τ⁻¹ is the same exchange slowed wherever compute ran. τ is piecewise linear
and increasing, so it keeps the order of every event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srift.sim.exchange import ExchangeResult


@dataclass(frozen=True, slots=True)
class CommWarp:
    """τ(t) through the knots (wall_s[k], work_s[k]), slope 1 after the last; τ(t) = t before the first."""

    wall_s: tuple[float, ...]
    work_s: tuple[float, ...]

    @classmethod
    def of(cls, compute_end_s: Sequence[float], slowdowns: Sequence[float]) -> CommWarp | None:
        """The warp for members computing from 0 to `compute_end_s[i]` with exchange slowdowns
        `slowdowns[i]` (≥ 1); None where none slows the exchange."""
        if len(compute_end_s) != len(slowdowns):
            raise ValueError("one slowdown per member")
        if not any(s > 1.0 and e > 0 for e, s in zip(compute_end_s, slowdowns, strict=True)):
            return None
        wall, work = [0.0], [0.0]
        for end in sorted({e for e in compute_end_s if e > 0}):
            slowest = max(s for e, s in zip(compute_end_s, slowdowns, strict=True) if e >= end)
            work.append(work[-1] + (end - wall[-1]) / max(1.0, slowest))
            wall.append(end)
        return cls(tuple(wall), tuple(work))

    def to_work(self, t_s: np.ndarray) -> np.ndarray:
        t = np.asarray(t_s, dtype=float)
        inside = np.interp(t, self.wall_s, self.work_s)
        return np.asarray(np.where(t < 0, t, inside + np.clip(t - self.wall_s[-1], 0.0, None)), dtype=float)

    def to_wall(self, tau_s: np.ndarray) -> np.ndarray:
        tau = np.asarray(tau_s, dtype=float)
        inside = np.interp(tau, self.work_s, self.wall_s)
        return np.asarray(
            np.where(tau < 0, tau, inside + np.clip(tau - self.work_s[-1], 0.0, None)), dtype=float
        )

    def result_to_wall(self, result: ExchangeResult) -> ExchangeResult:
        """An exchange simulated on work time, its finish times and busy spans back on wall time."""

        def back(values: Sequence[float]) -> tuple[float, ...]:
            return tuple(float(x) for x in self.to_wall(np.asarray(values, dtype=float))) if values else ()

        return ExchangeResult(
            finish_s=tuple(back(stage) for stage in result.finish_s),
            busy=tuple(
                tuple(zip(back([a for a, _ in spans]), back([b for _, b in spans]), strict=True))
                for spans in result.busy
            ),
        )
