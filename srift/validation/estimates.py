"""A case's prediction as the validation report keeps it: the simulator's estimate, ready for JSON."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srift.sim import IterationEstimate


def estimate_document(estimate: IterationEstimate, *, iterations: int) -> dict[str, Any]:
    """A case's prediction as its report keeps it: p10/p50/p90 with the band's terms (over `iterations`
    measured iterations), the breakdown and the sources."""
    b = estimate.breakdown
    band = estimate.band
    return {
        "iteration_s": estimate.iteration_s,
        "iteration_p10_s": estimate.iteration_p10_s,
        "iteration_p90_s": estimate.iteration_p90_s,
        "band": {
            "sigma": band.sigma if band else 0.0,
            "iterations": iterations,
            "terms": [
                {"source": t.source, "spread": t.spread, "sigma": t.sigma, "measured_by": t.measured_by}
                for t in (band.terms if band else ())
            ],
        },
        "breakdown": {
            "forward_s": b.forward_s,
            "backward_s": b.backward_s,
            "update_s": b.update_s,
            "compute_s": b.compute_s,
            "straggler_wait_s": b.straggler_wait_s,
            "exposed_intra_s": b.exposed_intra_s,
            "exposed_network_s": b.exposed_network_s,
            "communication_s": b.communication_s,
            "exposed_location_s": b.exposed_location_s,
            "granularity": b.granularity if math.isfinite(b.granularity) else None,
            "warnings": list(b.warnings),
        },
        "sources": list(estimate.sources),
    }
