"""The contract between bandwidth models (learned or prior) and the simulator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from srift.domain.catalog import InstanceType


class Collective(StrEnum):
    """A collective operation whose bus bandwidth a model may answer for.

    Bus bandwidth as nccl-tests defines it (NVIDIA/nccl-tests doc/PERFORMANCE.md): busbw = algbw · factor,
    algbw = S / t for a buffer of S bytes (the whole, gathered or reduced buffer), with factor 2(n−1)/n for
    allreduce and (n−1)/n for all-gather and reduce-scatter, so that each collective's busbw is comparable
    with the links' peak."""

    ALLREDUCE = "allreduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"

    def bus_factor(self, world_size: int) -> float:
        """busbw / algbw for `world_size` ranks (0 for one rank: nothing moves)."""
        n = world_size
        if n < 2:
            return 0.0
        return (2.0 if self is Collective.ALLREDUCE else 1.0) * (n - 1) / n


@dataclass(frozen=True, slots=True)
class BandwidthEstimate:
    """Predicted allreduce bus bandwidth for a batch of buffer sizes.

    `busbw_gbps` is bus bandwidth in gigabits/s (nccl-tests prints gigabytes/s: multiply by 8), one value
    per requested size. `source` names the model version (e.g. "xgb:2026-11-22T10:00:00") or
    "prior:alpha-beta".
    `residual_cv` is the model's relative error spread (std of (pred-actual)/actual), used for Monte Carlo;
    `residual_cvs`, when given, is that spread per requested size (the model's out-of-sample spread in the
    size's class, which prediction bands use), and `residual_cv` is then their largest.
    `upside_cvs` (and their largest, `upside_cv`), when given, describe the fast side only: the bandwidth's
    p90 may reach 1 + 1.2816·upside_cv times the estimate. The prior sets them when it assumed the slow one
    of two public defaults (NCCL's one-socket fallback) and the other (NCCL seeing the AWS ENA) may hold;
    prediction bands, which guard limits on the slow side, do not use them.
    """

    busbw_gbps: tuple[float, ...]
    source: str
    residual_cv: float = 0.0
    residual_cvs: tuple[float, ...] = ()
    upside_cv: float = 0.0
    upside_cvs: tuple[float, ...] = ()

    def residual_at(self, i: int) -> float:
        """The error spread of the i-th requested size."""
        return self.residual_cvs[i] if i < len(self.residual_cvs) else self.residual_cv


class BusBandwidthModel(Protocol):
    """Anything that predicts allreduce bus bandwidth across `world_size` ranks of one instance type."""

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate: ...
