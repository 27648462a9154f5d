"""How the optimizer prices a configuration: an injected Evaluator (the simulator, or a test model), memoised.

The search prunes with two lower bounds, so an Evaluator promises (its *contract*):
- `iteration_s ≥ floor_factor · max over groups of (forward + backward at that group's per-GPU batch)`, and
- `cost_usd ≥ total_time_s · Σ count · price_usd_per_s`, `total_time_s = iterations · iteration_s`.
`Evaluations` checks both after every evaluation and records violations, which the plan reports as warnings.
`Evaluations` is also the one place that judges a configuration (`judge`): whether its prediction meets the
limits and the fleet respects the request's caps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Protocol

from srift.domain import (
    Band,
    BusBandwidthModel,
    Constraints,
    FleetMember,
    InstanceType,
    ModelProfile,
    Objective,
    Prediction,
)
from srift.domain.geo import AllreducePattern, Location
from srift.domain.simulation import SERVED, SimConfig
from srift.optimize.space import Group, Groups, Problem

SCALE_ROUNDING = 1.0 - 1e-9
"""`Evaluations.limit_scales` are lowered by this factor, so that float rounding in the band never lets a
configuration's quantile fall below its bound."""

if TYPE_CHECKING:
    from srift.sim.bounds import Extension, PartialFleet
    from srift.sim.geo import GeoContext
    from srift.sim.result import IterationEstimate


class Evaluator(Protocol):
    """Predicts a fleet's iteration time and the cost of `iterations` iterations at `usd_per_s`.

    An evaluator may also offer `iteration_bound_s(fleet, *, extension=None) -> float`, a cheaper lower bound
    of its iteration time for `fleet` or, given an `srift.sim.bounds.Extension`, for every fleet whose members
    are `fleet`'s followed by others as it describes; the search uses it to skip configurations and whole
    subtrees (srift.optimize.exhaustive); and
    `band(fleet, *, iterations) -> Band`, the spread of its prediction, which limits are checked against at
    the request's confidence (an evaluator without one is taken at its word: a band of zero width); and,
    with a band, `band_compute_spread(profile) -> float`, a log-spread s ≥ 0 its band always reaches for a
    member of that profile: sigma ≥ ln(T_slow / T) for the prediction T of any fleet holding such a member,
    where T_slow ≥ floor_factor · e^s · that member's forward + backward (`Evaluations.limit_scales`).
    """

    @property
    def floor_factor(self) -> float:
        """How far below the compute floor its iteration time may go (1.0: never)."""
        ...

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction: ...


class SimEvaluator:
    """The Srift simulator (srift.sim.simulate + to_prediction) as an Evaluator, with its bounds.

    The simulator's iteration is max(C̄, end of the gradient exchange), where C̄ is never below the slowest
    member's forward + backward (so floor_factor is 1). `iteration_bound_s` is `srift.sim.bounds`: the exact
    straggler-aware compute phase and, from the simulator's own stage plans, the least time the exchange can
    take, for a fleet and for the fleets that extend it, far cheaper than simulating. Construction imports
    the simulator's lazily imported modules, so that they do not count against a solving budget.
    `config` is the served simulator configuration (PyTorch DDP's buckets by default; the bound works on
    the same buckets; see `srift.sim.simulate`). For fleets across locations it uses `geo`'s links and
    allreduce pattern, and prices the gradient bytes leaving each location (srift.sim.geo); `read_gbps`
    is the input pipeline's read rate (srift.sim.data). Across locations the flat ring's network stage is
    never faster than the same VMs' ring in one location, so the bounds hold as they are; the hierarchical
    pattern (a ring inside each location, then one across them) can beat that ring when the link between
    locations is fast, so with it the bounds leave the network stage out (looser, still bounds).
    """

    floor_factor = 1.0

    def __init__(
        self,
        *,
        bandwidth: BusBandwidthModel,
        seed: int = 0,
        straggler_iters: int = 100,
        config: SimConfig = SERVED,
        geo: GeoContext | None = None,
        read_gbps: float | None = None,
    ) -> None:
        import importlib

        from srift.sim.bounds import Bounder
        from srift.sim.network import MemoBandwidth

        for module in ("srift.sim", "scipy.special"):
            importlib.import_module(module)
        from srift.sim import IterationInputs

        self.inputs = IterationInputs(
            bandwidth=MemoBandwidth(bandwidth),
            seed=seed,
            straggler_iters=straggler_iters,
            config=config,
            geo=geo,
            read_gbps=read_gbps,
        )
        self.bounder = Bounder(
            bandwidth=self.bandwidth,
            seed=seed,
            straggler_iters=straggler_iters,
            bucket_cap_mb=config.bucket_cap_mb if config.bucket_cap_bytes is not None else None,
            network=geo is None or geo.pattern is not AllreducePattern.HIERARCHICAL,
        )
        self._last: tuple[tuple[FleetMember, ...], IterationEstimate] | None = None

    @property
    def bandwidth(self) -> BusBandwidthModel:
        """The bandwidth model, remembered (`MemoBandwidth`): the search asks it the same questions."""
        return self.inputs.bandwidth

    @property
    def seed(self) -> int:
        return self.inputs.seed

    @property
    def straggler_iters(self) -> int:
        return self.inputs.straggler_iters

    @property
    def geo(self) -> GeoContext | None:
        return self.inputs.geo

    def _simulated(self, fleet: Sequence[FleetMember]) -> IterationEstimate:
        """`srift.sim.iteration.simulation_point` of `fleet`, remembered for the last fleet asked: the search
        prices a configuration and then asks its band (and a calibrated evaluator its estimate again), so
        the same fleet comes twice or thrice in a row; the simulation is deterministic under these inputs,
        and an equal fleet (same types, counts, batches, profiles, locations) gets the same answer."""
        from srift.sim.iteration import simulation_point

        key = tuple(fleet)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        point = simulation_point(key, self.inputs)
        self._last = (key, point)
        return point

    def estimate(self, fleet: Sequence[FleetMember]) -> IterationEstimate:
        """The served simulator's iteration estimate for `fleet` under this evaluator's inputs (no band)."""
        from srift.sim.iteration import unbanded

        return unbanded(self._simulated(fleet))

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        from srift.sim import to_prediction
        from srift.sim.geo import egress_flows, egress_usd_per_iteration, gradient_bytes, spans_locations
        from srift.sim.iteration import default_geo
        from srift.sim.layers import layer_arrays

        estimate = self.estimate(fleet)
        egress = 0.0
        if spans_locations(fleet):
            flows = egress_flows(
                fleet,
                grad_bytes=gradient_bytes(layer_arrays(fleet[0].profile)),
                geo=self.geo or default_geo(),
            )
            egress = egress_usd_per_iteration(flows)
        return to_prediction(
            estimate, iterations=iterations, usd_per_s=usd_per_s, egress_usd_per_iteration=egress
        )

    def band(self, fleet: Sequence[FleetMember], *, iterations: int) -> Band:
        """The simulator's band for the fleet's mean iteration over `iterations` (see srift.sim.band)."""
        from srift.sim.iteration import band_point

        banded = band_point(self._simulated(fleet), fleet, self.inputs, iterations=iterations)
        return banded.band or Band()

    def band_compute_spread(self, profile: ModelProfile) -> float:
        """The least log-spread of the band's compute term for a member of `profile` (Evaluator): the band
        simulates the fleet again with every member's forward, backward and update e^s slower, s its
        profile's `compute_spread` at its batch (srift.sim.band), and takes the term ln(T_slow / T) with
        T_slow that simulation's iteration, which is never below the slowed member's forward + backward
        (floor_factor 1, as for any fleet). So s is at least the profile's least spread over batches."""
        return profile.least_compute_spread(runs=1)

    def iteration_bound_s(self, fleet: Sequence[FleetMember], *, extension: Extension | None = None) -> float:
        """A lower bound of this evaluator's iteration time for `fleet` or, with `extension`, for every fleet
        that extends it as described (srift.sim.bounds)."""
        partial: PartialFleet | None = None
        for member in fleet:
            partial = self.bounder.add(partial, member)
        assert partial is not None
        return self.bounder.bound_s(partial, extension)

    def grow(self, partial: PartialFleet | None, member: FleetMember) -> PartialFleet:
        """`partial` with one more member, for `partial_bound_s` (incremental bounds of growing fleets)."""
        return self.bounder.add(partial, member)

    def use_locations(self, locations: Sequence[Location]) -> None:
        """Tell the bounds which locations a search's fleets may span: a fleet across two or more of them
        exchanges no faster than over the fastest link between any two (flat ring; the hierarchical
        pattern keeps the bounds without a network stage)."""
        import itertools

        from srift.domain.geo import AllreducePattern
        from srift.sim.iteration import default_geo

        context = self.geo or default_geo()
        if context.pattern is AllreducePattern.HIERARCHICAL or len(set(locations)) < 2:
            return
        links = [context.catalog.link(a, b) for a, b in itertools.permutations(set(locations), 2)]
        self.bounder.use_links(
            latency_s=min(lk.latency_s for lk in links), bandwidth_bps=max(lk.bandwidth_bps for lk in links)
        )

    def type_partial(
        self, instance: InstanceType, profile: ModelProfile, *, least_compute_s: float, forward_share: float
    ) -> PartialFleet:
        """A state for `partial_bound_s` standing for any member of `instance` (srift.sim.bounds)."""
        return self.bounder.type_partial(
            instance, profile, least_compute_s=least_compute_s, forward_share=forward_share
        )

    def partial_bound_s(self, partial: PartialFleet, *, extension: Extension | None = None) -> float:
        """`iteration_bound_s` of the fleet that `partial` was grown from."""
        return self.bounder.bound_s(partial, extension)


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
        self._grow = getattr(evaluator, "grow", None)
        self._partial_bound = getattr(evaluator, "partial_bound_s", None)
        self._bounds: dict[Groups, float] = {}
        use = getattr(evaluator, "use_locations", None)
        located = [c.location for c in problem.candidates if c.location is not None]
        if use is not None and located:
            use(located)

    @property
    def floor_factor(self) -> float:
        return min(1.0, max(0.0, float(self.evaluator.floor_factor)))

    def __len__(self) -> int:
        return len(self.records)

    def limit_scales(self, constraints: Constraints) -> tuple[float, ...]:
        """Per candidate, μ ≥ 1 such that the confidence quantile of any configuration's total time and
        cost is at least N · T_v and N · T_v · Σ count · price, with T_v ≥ the iteration time T and T_v ≥
        μ · floor_factor · forward + backward of each group's VM: the search compares these with the limits
        (srift.optimize.exhaustive). All 1 when no limit is given, at the median or below, or when the
        evaluator does not bound its band's compute term (`band_compute_spread`).

        Why: with a limit and a confidence q above the median, a configuration the search may accept has
        its band (`needs_band`), and its quantiles are the prediction's × exp(z · sigma), z = Φ⁻¹(q) > 0;
        expected spot time and cost are never below the uninterrupted ones, and the cost never below
        T · N · rent (the contract). The band's sigma ≥ ln(T' / T), T' = max(T, T_slow), T_slow ≥ e^s · c
        for each member (s its `band_compute_spread`, c its scaled forward + backward). Take T_v = T^(1−κ)
        · T'^κ, κ = min(z, 1): exp(z · sigma) · T ≥ T^(1−z) · T'^z ≥ T_v (for z > 1, T'^z / T^(z−1) ≥ T'
        as T' ≥ T); T_v ≥ T as T' ≥ T; and T_v ≥ c^(1−κ) · (e^s · c)^κ = e^(κ·s) · c as T, T' ≥ c."""
        c = constraints
        ones = tuple(1.0 for _ in self.problem.candidates)
        spread = getattr(self.evaluator, "band_compute_spread", None)
        if (
            spread is None
            or not c.limited
            or c.confidence <= 0.5
            or getattr(self.evaluator, "band", None) is None
        ):
            return ones
        kappa = min(NormalDist().inv_cdf(c.confidence), 1.0)
        return tuple(
            max(1.0, math.exp(kappa * max(0.0, float(spread(x.profile)))) * SCALE_ROUNDING)
            for x in self.problem.candidates
        )

    def iteration_bound_s(self, groups: Groups) -> float | None:
        """The evaluator's lower bound of t_iter for `groups`, or None when it offers none."""
        if self._bound is None:
            return None
        value = self._bounds.get(groups)
        if value is None:
            value = float(self._bound(self.problem.fleet(groups)))
            self._bounds[groups] = value
        return value

    def grow(self, partial: object | None, group: Group) -> object | None:
        """The evaluator's incremental state of a configuration with one more group (None: not offered)."""
        if self._grow is None:
            return None
        grown: object = self._grow(partial, self.problem.fleet((group,))[0])
        return grown

    def partial_bound_s(self, partial: object, *, extension: Extension | None = None) -> float:
        """The evaluator's lower bound of t_iter for the configuration `partial` was grown from or, with
        `extension`, for every configuration that keeps its groups and adds others as it describes."""
        assert self._partial_bound is not None
        return float(self._partial_bound(partial, extension=extension))

    def type_partial(self, index: int, *, least_compute_s: float, forward_share: float) -> object | None:
        """The evaluator's state standing for any group of candidate `index` (None: not offered)."""
        make = getattr(self.evaluator, "type_partial", None)
        if make is None or self._partial_bound is None:
            return None
        cand = self.problem.candidates[index]
        state: object | None = make(
            cand.instance, cand.profile, least_compute_s=least_compute_s, forward_share=forward_share
        )
        return state

    def judge(self, groups: Groups, prediction: Prediction, constraints: Constraints) -> bool:
        """Whether a configuration is feasible: its prediction meets the limits and it respects the caps."""
        return self.problem.within_caps(groups, constraints) and meets(prediction, constraints)

    def evaluate(self, groups: Groups, *, constraints: Constraints | None = None) -> Evaluated:
        """Evaluate (or recall) `groups`; feasibility is judged against `constraints` (default: problem's)."""
        constraints = constraints or self.problem.constraints
        hit = self.records.get(groups)
        if hit is None:
            start = time.perf_counter()
            usd_per_s = self.problem.usd_per_s(groups)
            raw = self.evaluator(
                self.problem.fleet(groups),
                iterations=self.problem.constraints.iterations,
                usd_per_s=usd_per_s,
            )
            prediction = self.problem.priced_in(groups, raw)
            self.seconds += time.perf_counter() - start
            if self._breaks_contract(groups, raw, prediction, usd_per_s=usd_per_s):
                self.violations += 1
            if needs_band(prediction, self.problem.constraints):
                prediction = self._banded(groups, prediction)
            hit = Evaluated(groups, prediction, self.judge(groups, prediction, self.problem.constraints))
            self.records[groups] = hit
        if constraints is not self.problem.constraints:
            if needs_band(hit.prediction, constraints):
                hit = self.banded(groups)
            return Evaluated(hit.groups, hit.prediction, self.judge(groups, hit.prediction, constraints))
        return hit

    def _breaks_contract(
        self, groups: Groups, raw: Prediction, priced: Prediction, *, usd_per_s: float
    ) -> bool:
        """Whether the evaluator's prediction `raw` breaks the contract the search prunes with (module
        docstring; t_iter also ≥ the evaluator's own bound when one was asked), or pricing interruptions
        in (`priced`) lowered the time or cost below the uninterrupted ones. The cost rule is checked on
        `raw`: an interrupted run's expected time counts waits for capacity that are not billed
        (srift.optimize.spot), so its expected cost may be below expected time × rent, while it is never
        below the uninterrupted cost, which is what the search's cost bounds rest on."""
        tol = 1 - 1e-9
        floor = self.problem.floor_s(groups) * self.floor_factor
        bound = self._bounds.get(groups, 0.0)
        return (
            raw.iteration_s < max(floor, bound) * tol
            or raw.cost_usd < raw.total_time_s * usd_per_s * tol
            or priced.total_time_s < raw.total_time_s * tol
            or priced.cost_usd < raw.cost_usd * tol
        )

    def banded(self, groups: Groups) -> Evaluated:
        """The evaluated configuration with its prediction's band (computed once, then remembered)."""
        hit = self.evaluate(groups)
        if hit.prediction.band is not None:
            return hit
        prediction = self._banded(groups, hit.prediction)
        hit = Evaluated(groups, prediction, self.judge(groups, prediction, self.problem.constraints))
        self.records[groups] = hit
        return hit

    def _banded(self, groups: Groups, prediction: Prediction) -> Prediction:
        from srift.sim.result import with_band

        start = time.perf_counter()
        band_fn = getattr(self.evaluator, "band", None)
        band = (
            band_fn(self.problem.fleet(groups), iterations=self.problem.constraints.iterations)
            if band_fn is not None
            else Band()
        )
        self.bands += 1
        self.seconds += time.perf_counter() - start
        return with_band(prediction, band)
