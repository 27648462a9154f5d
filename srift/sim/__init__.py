"""The iteration simulator: compute with stragglers, overlapped allreduce or parameter servers, breakdown."""

from srift.sim.iteration import simulate
from srift.sim.result import CommMode, IterationEstimate, fleet_usd_per_s, to_prediction

__all__ = ["CommMode", "IterationEstimate", "fleet_usd_per_s", "simulate", "to_prediction"]
