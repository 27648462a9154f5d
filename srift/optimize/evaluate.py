"""How the optimizer prices a configuration: an injected Evaluator (the simulator, or a test model), memoised.

The search prunes with two lower bounds, so an Evaluator promises (its *contract*):
- `iteration_s ≥ floor_factor · max over groups of (forward + backward at that group's per-GPU batch)`, and
- `cost_usd ≥ total_time_s · Σ count · price_usd_per_s`, `total_time_s = iterations · iteration_s`.
`Evaluations` checks both after every evaluation and records violations, which the plan reports as warnings.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from srift.domain import Band, BusBandwidthModel, Constraints, FleetMember, Objective, Prediction
from srift.optimize.space import Groups, Problem


class Evaluator(Protocol):
    """Predicts a fleet's iteration time and the cost of `iterations` iterations at `usd_per_s`.

    An evaluator may also offer `iteration_bound_s(fleet) -> float`, a cheaper lower bound of its iteration
    time, which the search uses to skip configurations (rule 5 of srift.optimize.search), and
    `band(fleet, *, iterations) -> Band`, the spread of its prediction, which limits are checked against at
    the request's confidence (an evaluator without one is taken at its word: a band of zero width).
    """

    @property
    def floor_factor(self) -> float:
        """How far below the compute floor its iteration time may go (1.0: never)."""
        ...

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction: ...


class SimEvaluator:
    """The Srift simulator (srift.sim.simulate + to_prediction) as an Evaluator, with its exchange bound.

    The simulator's iteration is max(C̄, end of the gradient exchange), where C̄ is never below the slowest
    member's forward + backward (so floor_factor is 1). Its exchange releases layer j at a_j ≥ max over
    members of (fw + ready_frac_j · bw) and passes it through the intra-node and network stages in tandem; in
    each stage a transfer never runs faster than its size class's lone rate, and the stage never moves more
    than its cap. `iteration_bound_s` computes, from the simulator's own stage plans, max over j of
    a_j + Σ_stages bits_j / rate, and, per stage, a_j + (bits of the layers released at or after a_j) / cap:
    lower bounds of the exchange's end and so of t_iter, far cheaper than simulating. Construction imports
    the simulator's lazily imported modules, so that they do not count against a solving budget.
    With `bucket_cap_mb` the simulator (and the bound, on the same buckets) reduces gradients in PyTorch
    DDP's buckets (see `srift.sim.simulate`).
    """

    floor_factor = 1.0

    def __init__(
        self,
        *,
        bandwidth: BusBandwidthModel,
        seed: int = 0,
        straggler_iters: int = 100,
        bucket_cap_mb: float | None = None,
    ) -> None:
        import importlib

        from srift.sim.network import MemoBandwidth

        for module in ("srift.sim", "scipy.special"):
            importlib.import_module(module)
        self.bandwidth = MemoBandwidth(bandwidth)
        self.seed = seed
        self.straggler_iters = straggler_iters
        self.bucket_cap_mb = bucket_cap_mb

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        from srift.sim import simulate, to_prediction

        estimate = simulate(
            fleet,
            bandwidth=self.bandwidth,
            seed=self.seed,
            straggler_iters=self.straggler_iters,
            bucket_cap_mb=self.bucket_cap_mb,
            band=False,
        )
        return to_prediction(estimate, iterations=iterations, usd_per_s=usd_per_s)

    def band(self, fleet: Sequence[FleetMember], *, iterations: int) -> Band:
        """The simulator's band for the fleet's mean iteration over `iterations` (see srift.sim.band)."""
        from srift.sim import simulate

        estimate = simulate(
            fleet,
            bandwidth=self.bandwidth,
            seed=self.seed,
            straggler_iters=self.straggler_iters,
            bucket_cap_mb=self.bucket_cap_mb,
            iterations=iterations,
        )
        return estimate.band or Band()

    def iteration_bound_s(self, fleet: Sequence[FleetMember]) -> float:
        import numpy as np

        from srift.sim.iteration import with_buckets
        from srift.sim.layers import layer_arrays
        from srift.sim.network import exchange_plans

        if self.bucket_cap_mb is not None:
            fleet = with_buckets(fleet, bucket_cap_mb=self.bucket_cap_mb)

        fw = [m.profile.forward.time_s(m.per_device_batch) for m in fleet]
        bw = [m.profile.backward.time_s(m.per_device_batch) for m in fleet]
        compute = max(f + b for f, b in zip(fw, bw, strict=True))
        canon = layer_arrays(fleet[0].profile)
        if canon.bits.size == 0:
            return compute
        stages = [p.stage for p in exchange_plans(fleet, canon.sizes, self.bandwidth)]
        if not stages:
            return compute
        arrive = np.full(canon.bits.size, -np.inf)
        for m, f, b in zip(fleet, fw, bw, strict=True):
            arrive = np.maximum(arrive, f + canon.aligned_ready_frac(layer_arrays(m.profile)) * b)
        bits, klass = canon.bits, canon.klass
        release = arrive
        bound = compute
        for stage in stages:
            order = np.argsort(release, kind="stable")
            after = np.cumsum(bits[order][::-1])[::-1]
            bound = max(bound, float(np.max(release[order] + after / stage.cap_bps)))
            release = release + bits / np.asarray(stage.rates_bps)[klass]
            bound = max(bound, float(np.max(release)))
        return bound


def objective_value(prediction: Prediction, objective: Objective) -> float:
    return prediction.cost_usd if objective is Objective.MIN_COST else prediction.total_time_s


def secondary_value(prediction: Prediction, objective: Objective) -> float:
    return prediction.total_time_s if objective is Objective.MIN_COST else prediction.cost_usd


def meets(prediction: Prediction, constraints: Constraints) -> bool:
    """The `confidence` quantile of the total time ≤ time_limit_s and of the cost ≤ budget_usd, for the
    limits that are given (a prediction without a band is its own quantile)."""
    q = constraints.confidence
    if (
        constraints.time_limit_s is not None
        and prediction.total_time_quantile_s(q) > constraints.time_limit_s
    ):
        return False
    return constraints.budget_usd is None or prediction.cost_quantile_usd(q) <= constraints.budget_usd


def needs_band(prediction: Prediction, constraints: Constraints) -> bool:
    """Whether feasibility at the constraints' confidence needs the prediction's band: a limit is given,
    the confidence is above the median, the median meets the limits (else no quantile above it can) and
    the band is not known yet."""
    return (
        prediction.band is None
        and constraints.limited
        and constraints.confidence > 0.5
        and meets(prediction, constraints)
    )


@dataclass(frozen=True, slots=True)
class Evaluated:
    """One evaluated configuration."""

    groups: Groups
    prediction: Prediction
    feasible: bool


class Evaluations:
    """Memoised evaluation of configurations of one problem; every record feeds the Pareto front."""

    def __init__(self, problem: Problem, evaluator: Evaluator) -> None:
        self.problem = problem
        self.evaluator = evaluator
        self.records: dict[Groups, Evaluated] = {}
        self.violations = 0
        self.bands = 0
        self.seconds = 0.0
        self._bound = getattr(evaluator, "iteration_bound_s", None)
        self._bounds: dict[Groups, float] = {}

    @property
    def floor_factor(self) -> float:
        return min(1.0, max(0.0, float(self.evaluator.floor_factor)))

    def __len__(self) -> int:
        return len(self.records)

    def iteration_bound_s(self, groups: Groups) -> float | None:
        """The evaluator's lower bound of t_iter for `groups`, or None when it offers none."""
        if self._bound is None:
            return None
        value = self._bounds.get(groups)
        if value is None:
            value = float(self._bound(self.problem.fleet(groups)))
            self._bounds[groups] = value
        return value

    def evaluate(self, groups: Groups, *, constraints: Constraints | None = None) -> Evaluated:
        """Evaluate (or recall) `groups`; feasibility is judged against `constraints` (default: problem's)."""
        constraints = constraints or self.problem.constraints
        hit = self.records.get(groups)
        if hit is None:
            start = time.perf_counter()
            usd_per_s = self.problem.usd_per_s(groups)
            prediction = self.evaluator(
                self.problem.fleet(groups),
                iterations=self.problem.constraints.iterations,
                usd_per_s=usd_per_s,
            )
            self.seconds += time.perf_counter() - start
            floor = self.problem.floor_s(groups) * self.floor_factor
            bound = self._bounds.get(groups, 0.0)
            tol = 1 - 1e-9
            if (
                prediction.iteration_s < max(floor, bound) * tol
                or prediction.cost_usd < prediction.total_time_s * usd_per_s * tol
            ):
                self.violations += 1
            if needs_band(prediction, self.problem.constraints):
                prediction = self._banded(groups, prediction)
            hit = Evaluated(groups, prediction, meets(prediction, self.problem.constraints))
            self.records[groups] = hit
        if constraints is not self.problem.constraints:
            if needs_band(hit.prediction, constraints):
                hit = self.banded(groups)
            return Evaluated(hit.groups, hit.prediction, meets(hit.prediction, constraints))
        return hit

    def banded(self, groups: Groups) -> Evaluated:
        """The evaluated configuration with its prediction's band (computed once, then remembered)."""
        hit = self.evaluate(groups)
        if hit.prediction.band is not None:
            return hit
        prediction = self._banded(groups, hit.prediction)
        hit = Evaluated(groups, prediction, meets(prediction, self.problem.constraints))
        self.records[groups] = hit
        return hit

    def _banded(self, groups: Groups, prediction: Prediction) -> Prediction:
        from srift.sim.result import with_prediction_band

        start = time.perf_counter()
        band_fn = getattr(self.evaluator, "band", None)
        band = (
            band_fn(self.problem.fleet(groups), iterations=self.problem.constraints.iterations)
            if band_fn is not None
            else Band()
        )
        self.bands += 1
        self.seconds += time.perf_counter() - start
        return with_prediction_band(prediction, band)
