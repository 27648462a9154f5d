"""Frozen domain values shared by every layer (catalog, profiling, bandwidth, sim, optimize, api)."""

from srift.domain.bandwidth import BandwidthEstimate, BusBandwidthModel
from srift.domain.catalog import InstanceType, Interconnect, Market, MarketChoice, Offer
from srift.domain.planning import (
    DEFAULT_CONFIDENCE,
    Band,
    BaselineResult,
    BatchPolicy,
    Breakdown,
    Choice,
    CommMode,
    Config,
    Constraints,
    FleetMember,
    Objective,
    ParetoPoint,
    Plan,
    Prediction,
    SearchMode,
    SpreadTerm,
)
from srift.domain.profile import (
    PROFILE_SCHEMA_VERSION,
    ComputeCurve,
    LayerGrad,
    LayerProfile,
    ModelProfile,
)
from srift.domain.states import JobState, TrainingState

__all__ = [
    "DEFAULT_CONFIDENCE",
    "PROFILE_SCHEMA_VERSION",
    "Band",
    "BandwidthEstimate",
    "BaselineResult",
    "BatchPolicy",
    "Breakdown",
    "BusBandwidthModel",
    "Choice",
    "CommMode",
    "ComputeCurve",
    "Config",
    "Constraints",
    "FleetMember",
    "InstanceType",
    "Interconnect",
    "JobState",
    "LayerGrad",
    "LayerProfile",
    "Market",
    "MarketChoice",
    "ModelProfile",
    "Objective",
    "Offer",
    "ParetoPoint",
    "Plan",
    "Prediction",
    "SearchMode",
    "SpreadTerm",
    "TrainingState",
]
