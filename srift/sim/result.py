"""What the simulator returns: the iteration estimate, the communication mode, and the Prediction it makes."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TypeVar

from srift.domain import Band, Breakdown, Prediction
from srift.domain.planning import CommMode as CommMode
from srift.errors import InvalidInput, require_number


@dataclass(frozen=True, slots=True)
class IterationEstimate:
    """One iteration on one fleet: mean seconds, quantiles, where the time goes, and what it rests on.

    `breakdown` adds up: compute_s + straggler_wait_s + exposed_intra_s + exposed_network_s == iteration_s.
    `sources` names each profile used (model@accelerator) and each bandwidth answer ("xgb:…", "prior:…").
    """

    iteration_s: float
    iteration_p10_s: float
    iteration_p50_s: float
    iteration_p90_s: float
    breakdown: Breakdown
    sources: tuple[str, ...]
    band: Band | None = None


def to_prediction(
    estimate: IterationEstimate,
    *,
    iterations: int,
    usd_per_s: float,
    egress_usd_per_iteration: float = 0.0,
) -> Prediction:
    """Scale an iteration estimate to `iterations` iterations, billed per second at `usd_per_s` for the fleet.

    `usd_per_s` is Σ count·price_usd_per_hr/3600 over the fleet; cost = total_time_s · usd_per_s (per-second
    billing, no rounding up to whole hours) + iterations · egress_usd_per_iteration (gradient bytes leaving
    each location, see srift.sim.geo).
    """
    if iterations < 1:
        raise InvalidInput(
            f"{iterations} is below 1", hint="ask for at least one iteration", field="iterations"
        )
    if usd_per_s < 0:
        raise InvalidInput(f"{usd_per_s} is negative", hint="prices are ≥ 0", field="usd_per_s")
    require_number(egress_usd_per_iteration, field="egress", hint="egress costs are ≥ 0")
    total_time_s = estimate.iteration_s * iterations
    egress_usd = egress_usd_per_iteration * iterations
    return Prediction(
        iteration_s=estimate.iteration_s,
        iteration_p10_s=estimate.iteration_p10_s,
        iteration_p50_s=estimate.iteration_p50_s,
        iteration_p90_s=estimate.iteration_p90_s,
        total_time_s=total_time_s,
        cost_usd=total_time_s * usd_per_s + egress_usd,
        breakdown=estimate.breakdown,
        sources=estimate.sources,
        egress_usd=egress_usd,
        band=estimate.band,
    )


def granularity_of(*, compute_s: float, communication_s: float) -> float:
    """Compute / communication seconds of one iteration (Erben et al.; `Breakdown.granularity`): below 1 the
    job is communication-bound; inf when nothing is communicated (one GPU)."""
    return compute_s / communication_s if communication_s > 0 else math.inf


def fleet_usd_per_s(prices_usd_per_hr: list[tuple[int, float]]) -> float:
    """Σ count·price_usd_per_hr/3600 over (count, price_usd_per_hr) pairs: the fleet's per-second price."""
    return sum(count * price for count, price in prices_usd_per_hr) / 3600.0


_Banded = TypeVar("_Banded", IterationEstimate, Prediction)


def with_band(estimate: _Banded, band: Band) -> _Banded:
    """The estimate (or prediction) with `band`, its iteration p10/p50/p90 taken from it (p50 the estimate
    itself)."""
    t = estimate.iteration_s
    return replace(
        estimate,
        iteration_p10_s=t * band.factor(0.1),
        iteration_p50_s=t,
        iteration_p90_s=t * band.factor(0.9),
        band=band,
    )
