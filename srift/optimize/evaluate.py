"""How the optimizer prices a configuration: an injected Evaluator (the simulator, or a test model), memoised.

The search prunes with two lower bounds, so an Evaluator promises (its *contract*):
- `iteration_s ≥ floor_factor · max over groups of (forward + backward at that group's per-GPU batch)`, and
- `cost_usd ≥ total_time_s · Σ count · price_usd_per_s`, `total_time_s = iterations · iteration_s`.
`Evaluations` checks both after every evaluation and records violations, which the plan reports as warnings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from srift.domain import BusBandwidthModel, Constraints, FleetMember, Objective, Prediction
from srift.optimize.space import Groups, Problem


class Evaluator(Protocol):
    """Predicts a fleet's iteration time and the cost of `iterations` iterations at `usd_per_s`."""

    @property
    def floor_factor(self) -> float:
        """How far below the compute floor its iteration time may go (1.0: never)."""
        ...

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction: ...


class SimEvaluator:
    """The Srift simulator (srift.sim.simulate + to_prediction) as an Evaluator.

    The simulator samples stragglers over `straggler_iters` iterations, so its mean compute can sit below the
    raw forward + backward time by sampling noise; `floor_factor` allows 6 standard errors of that mean
    (1 − 6·cv/√straggler_iters, cv the largest profile straggler_cv), which keeps pruning safe.
    """

    def __init__(
        self,
        *,
        bandwidth: BusBandwidthModel,
        seed: int = 0,
        straggler_iters: int = 100,
        max_straggler_cv: float = 0.1,
        comm: Any = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.seed = seed
        self.straggler_iters = straggler_iters
        self.comm = comm
        self._floor_factor = max(0.0, 1.0 - 6.0 * max_straggler_cv / math.sqrt(max(straggler_iters, 1)))

    @property
    def floor_factor(self) -> float:
        return self._floor_factor

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        from srift.sim import CommMode, simulate, to_prediction

        estimate = simulate(
            fleet,
            bandwidth=self.bandwidth,
            seed=self.seed,
            straggler_iters=self.straggler_iters,
            comm=self.comm if self.comm is not None else CommMode.ALLREDUCE,
        )
        return to_prediction(estimate, iterations=iterations, usd_per_s=usd_per_s)


def objective_value(prediction: Prediction, objective: Objective) -> float:
    return prediction.cost_usd if objective is Objective.MIN_COST else prediction.total_time_s


def secondary_value(prediction: Prediction, objective: Objective) -> float:
    return prediction.total_time_s if objective is Objective.MIN_COST else prediction.cost_usd


def meets(prediction: Prediction, constraints: Constraints) -> bool:
    """N·t_iter ≤ time_limit_s and cost ≤ budget_usd, for the limits that are given."""
    if constraints.time_limit_s is not None and prediction.total_time_s > constraints.time_limit_s:
        return False
    return constraints.budget_usd is None or prediction.cost_usd <= constraints.budget_usd


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
        self.seconds = 0.0

    @property
    def floor_factor(self) -> float:
        return min(1.0, max(0.0, float(self.evaluator.floor_factor)))

    def __len__(self) -> int:
        return len(self.records)

    def evaluate(self, groups: Groups, *, constraints: Constraints | None = None) -> Evaluated:
        """Evaluate (or recall) `groups`; feasibility is judged against `constraints` (default: problem's)."""
        constraints = constraints or self.problem.constraints
        hit = self.records.get(groups)
        if hit is None:
            import time

            start = time.perf_counter()
            usd_per_s = self.problem.usd_per_s(groups)
            prediction = self.evaluator(
                self.problem.fleet(groups),
                iterations=self.problem.constraints.iterations,
                usd_per_s=usd_per_s,
            )
            self.seconds += time.perf_counter() - start
            floor = self.problem.floor_s(groups) * self.floor_factor
            if prediction.iteration_s < floor * (1 - 1e-12) or prediction.cost_usd < (
                prediction.total_time_s * usd_per_s * (1 - 1e-12)
            ):
                self.violations += 1
            hit = Evaluated(groups, prediction, meets(prediction, self.problem.constraints))
            self.records[groups] = hit
        if constraints is not self.problem.constraints:
            return Evaluated(hit.groups, hit.prediction, meets(hit.prediction, constraints))
        return hit

    def mean_seconds(self) -> float:
        return self.seconds / len(self.records) if self.records else 0.0
