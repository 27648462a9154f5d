"""How plans and predictions render their numbers: one JSON shape for predictions, breakdowns, choices."""

from __future__ import annotations

import math
from typing import Any

from srift.domain import Breakdown, Prediction


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def predicted_document(p: Prediction) -> dict[str, float]:
    """Iteration time (mean, p10/p50/p90), total time and cost."""
    return {
        "iteration_s": p.iteration_s,
        "iteration_p10_s": p.iteration_p10_s,
        "iteration_p50_s": p.iteration_p50_s,
        "iteration_p90_s": p.iteration_p90_s,
        "total_time_s": p.total_time_s,
        "cost_usd": p.cost_usd,
    }


def breakdown_document(b: Breakdown) -> dict[str, Any]:
    """Where an iteration's time goes (granularity null when there is no communication)."""
    return {
        "forward_s": b.forward_s,
        "backward_s": b.backward_s,
        "compute_s": b.compute_s,
        "straggler_wait_s": b.straggler_wait_s,
        "exposed_intra_s": b.exposed_intra_s,
        "exposed_network_s": b.exposed_network_s,
        "communication_s": b.communication_s,
        "granularity": finite_or_none(b.granularity),
        "warnings": list(b.warnings),
    }


def choice_document(
    *,
    instance_type: str,
    market: str,
    count: int,
    batch: int,
    gpus: int,
    price_usd_per_hr: float,
    instance_gpus: int | None = None,
) -> dict[str, Any]:
    """One fleet choice: `count` VMs of a type and market, `batch` samples per VM over the `gpus` it uses
    (of the type's `instance_gpus`)."""
    return {
        "instance_type": instance_type,
        "market": market,
        "count": count,
        "batch": batch,
        "gpus": gpus,
        "per_gpu_batch": batch / gpus,
        "price_usd_per_hr": price_usd_per_hr,
        "instance_gpus": instance_gpus,
    }
