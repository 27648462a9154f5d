"""Corrections learned from measured runs: a shrinkage estimate of how far the compute and communication
terms of Srift's predictions are off, for one model, instance type and network setting.

Each measured run is an observation y = log(measured mean iteration / predicted) of the prediction that
planned it, whose iteration splits into compute C (forward, backward, update, straggler wait, data stall)
and exposed communication M. A correction scales the two terms by exp(θ_C) and exp(θ_M), so to first order

    y ≈ x·θ + ε,    x = (C, M) / (C + M),    ε ~ N(0, v)

with v the run's own measured noise: the standard error of its mean step time plus the drift between the
quarters of the run (a run that wanders says that another run may land elsewhere). θ starts at zero, no
correction, with prior N(0, σ0²·I): σ0 is the prediction's own band (its measured spreads), widened when
the runs themselves show the prediction off by more (empirical Bayes, by moments: σ0² ≥ (mean y² − mean
v) / mean |x|²), so a band that was too confident does not hold the correction back nor make the
calibrated band miss. The posterior is Bayesian linear regression
(ridge): runs that agree pull θ toward what they measured, each with weight 1/v, and the prior's pull fades
as they add up; a run of a mixed fleet counts for each of its types in proportion to that type's share of
the ranks. Runs of one fleet only learn x·θ, the fleet's own total; fleets of other compute/communication
mixes separate the two terms.

Once every type of a fleet has runs behind it, a calibrated prediction's band is the posterior's spread
plus the variance of the next run about the corrected centre: the run-to-run variance τ². One run says
nothing about τ² (its own noise v is how well its mean was measured, not how far the next run lands: on
the testbed runs of one fleet differ by 6–9 % while each run's noise is 1–2 %), so τ² has a scaled
inverse-χ² prior of `PRIOR_RUNS` pseudo-run at the uncalibrated band's variance, and the runs' residuals
update it with n − 1 degrees of freedom (the conjugate normal model with unknown mean and variance:
Gelman et al., "Bayesian Data Analysis", 3rd ed., ch. 3):

    τ² = (ν0·σ_band² + Σ w·r²) / (ν0 + n − 1),   never below the runs' own noise

So one run recentres the band without narrowing it; runs that agree narrow it, as far as their agreement
allows; runs that scatter more than the band said widen it. A fleet with a type no run has measured keeps
its uncalibrated band.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from srift.domain.planning import Band, Breakdown, Prediction, SpreadTerm

Vector = tuple[float, float]
Matrix = tuple[tuple[float, float], tuple[float, float]]

WARMUP_SHARE = 0.1
"""The first tenth of a run's reported steps (at least one) is left out: allocator and cache warm-up, as
`srift profile` and probes/ddp_train.py discard warm-up iterations before timing."""

BLOCKS = 4
"""A run's steps are cut into this many consecutive blocks; the variance of their means is its drift."""

MIN_STEPS = 8
"""Fewer measured steps than this (after warm-up) make no observation: no drift can be estimated."""

PRIOR_RUNS = 1.0
"""ν0, the weight of the uncalibrated band in the run-to-run variance, in runs: the weakest proper prior
(one pseudo-run), so that two runs that agree already halve its share."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One run measured against its prediction (see the module docstring)."""

    compute_share: float
    comm_share: float
    log_ratio: float
    variance: float
    prior_sigma: float
    weight: float = 1.0

    @property
    def x(self) -> Vector:
        return (self.compute_share, self.comm_share)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a run's reported step times say: mean, the variance of log(mean) and how many steps counted."""

    mean_s: float
    log_variance: float
    steps: int


def summarize_steps(iteration_s: Sequence[float]) -> RunSummary | None:
    """The mean iteration time of a run's steps (in step order) after warm-up, and the variance of its log:
    the standard error of the mean plus the drift between blocks. None with too few steps."""
    skip = max(1, math.ceil(WARMUP_SHARE * len(iteration_s)))
    kept = [t for t in iteration_s[skip:] if t > 0 and math.isfinite(t)]
    if len(kept) < MIN_STEPS:
        return None
    logs = [math.log(t) for t in kept]
    within = statistics.variance(logs) / len(logs)
    size = len(logs) // BLOCKS
    means = [statistics.fmean(logs[k * size : (k + 1) * size]) for k in range(BLOCKS)]
    drift = statistics.variance(means)
    return RunSummary(statistics.fmean(kept), within + drift, len(kept))


@dataclass(frozen=True, slots=True)
class Correction:
    """The posterior of θ = (log compute factor, log communication factor) for one key."""

    mean: Vector = (0.0, 0.0)
    cov: Matrix = ((0.0, 0.0), (0.0, 0.0))
    runs: float = 0.0
    prior_sigma: float = 0.0
    between_variance: float = 0.0

    @property
    def factors(self) -> Vector:
        """(compute factor, communication factor): what the two terms are multiplied by."""
        return (math.exp(self.mean[0]), math.exp(self.mean[1]))

    def variance_along(self, x: Vector) -> float:
        """xᵀ·cov·x: the posterior variance of the correction of a prediction with term shares x."""
        (a, b), (_, d) = self.cov
        return a * x[0] ** 2 + 2 * b * x[0] * x[1] + d * x[1] ** 2


def fit(observations: Sequence[Observation], *, prior_sigma: float | None = None) -> Correction:
    """The posterior after `observations` (none: no correction, the prior's variance)."""
    sigma0 = prior_sigma
    if sigma0 is None:
        sigma0 = statistics.median(o.prior_sigma for o in observations) if observations else 0.0
    band_sigma = sigma0
    weights = sum(o.weight for o in observations)
    if observations and weights > 0:
        mean_y2 = sum(o.weight * o.log_ratio**2 for o in observations) / weights
        mean_v = sum(o.weight * o.variance for o in observations) / weights
        mean_x2 = sum(o.weight * (o.compute_share**2 + o.comm_share**2) for o in observations) / weights
        sigma0 = max(sigma0, math.sqrt(max(0.0, mean_y2 - mean_v) / mean_x2))
    if sigma0 <= 0:
        return Correction(runs=float(weights))
    p11 = p22 = 1.0 / sigma0**2
    p12 = 0.0
    h1 = h2 = 0.0
    for o in observations:
        w = o.weight / max(o.variance, 1e-12)
        c, m = o.x
        p11 += w * c * c
        p12 += w * c * m
        p22 += w * m * m
        h1 += w * c * o.log_ratio
        h2 += w * m * o.log_ratio
    det = p11 * p22 - p12 * p12
    cov: Matrix = ((p22 / det, -p12 / det), (-p12 / det, p11 / det))
    mean: Vector = (cov[0][0] * h1 + cov[0][1] * h2, cov[1][0] * h1 + cov[1][1] * h2)
    between = 0.0
    if observations:
        noise = sum(o.weight * o.variance for o in observations) / weights
        squares = sum(
            o.weight * (o.log_ratio - mean[0] * o.compute_share - mean[1] * o.comm_share) ** 2
            for o in observations
        )
        freedom = max(0.0, weights - 1.0)
        repeat = (PRIOR_RUNS * band_sigma**2 + squares) / (PRIOR_RUNS + freedom)
        between = max(noise, repeat)
    return Correction(mean, cov, float(weights), sigma0, between)


@dataclass(frozen=True, slots=True)
class FleetCorrection:
    """The correction of one fleet: its types' corrections weighted by their shares of the ranks."""

    log_factors: Vector
    sigma: float | None
    runs: int
    text: str

    @property
    def factors(self) -> Vector:
        return (math.exp(self.log_factors[0]), math.exp(self.log_factors[1]))


COMPUTE_TERMS = ("forward_s", "backward_s", "compute_s", "update_s", "straggler_wait_s", "data_stall_s")
"""The Breakdown's seconds that a type's compute factor scales."""
COMMUNICATION_TERMS = ("exposed_intra_s", "exposed_network_s", "exposed_location_s", "communication_s")
"""The Breakdown's seconds that its communication factor scales."""


def _scaled(value: object, names: tuple[str, ...], factor: float) -> dict[str, Any]:
    """`value`'s fields `names`, each times `factor` (for dataclasses.replace)."""
    return {name: getattr(value, name) * factor for name in names}


def term_shares(breakdown: Breakdown) -> tuple[float, float]:
    """(C, M) seconds of an iteration: compute (with straggler wait and data stall) and exposed exchange."""
    compute = breakdown.compute_s + breakdown.straggler_wait_s + breakdown.data_stall_s
    comm = breakdown.exposed_intra_s + breakdown.exposed_network_s
    return compute, comm


def for_fleet(
    corrections: Mapping[str, Correction], shares: Mapping[str, float], *, x: Vector, runs: int
) -> FleetCorrection | None:
    """Combine the types' corrections for a fleet whose ranks are `shares` (type → share, summing to 1)
    and whose prediction has term shares `x`. None when no type of the fleet has learned anything."""
    if not any(corrections.get(t, Correction()).runs > 0 for t in shares):
        return None
    lc = sum(w * corrections.get(t, Correction()).mean[0] for t, w in shares.items())
    lm = sum(w * corrections.get(t, Correction()).mean[1] for t, w in shares.items())
    spread = 0.0
    between = 0.0
    for t, w in shares.items():
        c = corrections.get(t)
        if c is None or c.runs <= 0 or c.prior_sigma <= 0:
            return FleetCorrection((lc, lm), None, runs, _text(lc, lm, runs))
        spread += w * math.sqrt(c.variance_along(x))
        between += w * c.between_variance
    return FleetCorrection((lc, lm), math.sqrt(spread**2 + between), runs, _text(lc, lm, runs))


def _text(lc: float, lm: float, runs: int) -> str:
    return (
        f"calibrated on {runs} run{'s' if runs != 1 else ''}: compute ×{math.exp(lc):.3g}, "
        f"communication ×{math.exp(lm):.3g}"
    )


def corrected(prediction: Prediction, fleet: FleetCorrection) -> Prediction:
    """`prediction` with its compute and exchange terms scaled by the fleet's factors, its totals with them,
    and its band the calibrated spread when every type of the fleet has one (see the module docstring)."""
    a, b = fleet.factors
    bd = prediction.breakdown
    compute, comm = term_shares(bd)
    if compute + comm <= 0:
        return prediction
    f = (a * compute + b * comm) / (compute + comm)
    breakdown = replace(
        bd,
        **_scaled(bd, COMPUTE_TERMS, a),
        **_scaled(bd, COMMUNICATION_TERMS, b),
        granularity=bd.granularity * a / b,
    )
    band = prediction.band
    if band is not None and fleet.sigma is not None:
        band = Band(
            fleet.sigma,
            (SpreadTerm(fleet.text, fleet.sigma, fleet.sigma, "measured runs of this fleet's types"),),
        )
    instances = (prediction.cost_usd - prediction.egress_usd) * f
    return replace(
        prediction,
        **_scaled(prediction, ("iteration_s", "iteration_p10_s", "iteration_p50_s", "iteration_p90_s"), f),
        total_time_s=prediction.total_time_s * f,
        cost_usd=instances + prediction.egress_usd,
        breakdown=breakdown,
        band=band,
        sources=(*prediction.sources, f"calibration: {fleet.text}"),
        uninterrupted_time_s=None
        if prediction.uninterrupted_time_s is None
        else prediction.uninterrupted_time_s * f,
        uninterrupted_cost_usd=None
        if prediction.uninterrupted_cost_usd is None
        else prediction.uninterrupted_cost_usd * f,
    )


def network_key(
    *,
    transport: str,
    library: str,
    placement_group: bool,
    flows_per_peer: int | None,
    ena_visible: bool | None,
) -> str:
    """The network setting a correction belongs to, as text: 'tcp/nccl/no-pg/flows-auto/ena-unknown'."""
    return "/".join(
        [
            transport,
            library,
            "pg" if placement_group else "no-pg",
            f"flows-{flows_per_peer}" if flows_per_peer is not None else "flows-auto",
            "ena-unknown" if ena_visible is None else ("ena-visible" if ena_visible else "ena-hidden"),
        ]
    )
