"""The iteration simulator: compute with stragglers, overlapped allreduce or parameter servers, breakdown.

Entry point: `simulate(fleet, bandwidth=model, ...)` → IterationEstimate (`simulate_with(fleet, inputs)`
takes those inputs as one `IterationInputs`); `to_prediction` scales it to a run
and prices it. `MemoBandwidth` wraps a bandwidth model for callers that evaluate many fleets (the optimizer).
"""

from srift.sim.iteration import IterationInputs, simulate, simulate_with, validate_fleet
from srift.sim.network import MemoBandwidth
from srift.sim.result import CommMode, IterationEstimate, fleet_usd_per_s, to_prediction

__all__ = [
    "CommMode",
    "IterationEstimate",
    "IterationInputs",
    "MemoBandwidth",
    "fleet_usd_per_s",
    "simulate",
    "simulate_with",
    "to_prediction",
    "validate_fleet",
]
