"""Configurations, constraints, predictions and plans: what the simulator and optimizer exchange."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from statistics import NormalDist

from srift.domain.catalog import InstanceType, Market
from srift.domain.geo import Location
from srift.domain.profile import ModelProfile


class Objective(StrEnum):
    """What a plan minimises: cost (within the time limit) or time (within the budget)."""

    MIN_COST = "min_cost"
    MIN_TIME = "min_time"


class SearchMode(StrEnum):
    """How the optimizer searches (srift.optimize.solver): every configuration, eager (a few VMs of one type
    before the next), or auto (exhaustive for part of the budget, then eager if it did not finish)."""

    EXHAUSTIVE = "exhaustive"
    EAGER = "eager"
    AUTO = "auto"


class BatchPolicy(StrEnum):
    """Which per-VM batch sizes the search may use (see `srift.optimize.space`)."""

    POW2_SPLIT = "pow2_split"
    POW2 = "pow2"
    ANY = "any"


class CommMode(StrEnum):
    """How gradients are exchanged: ring allreduce (Srift) or parameter servers (Li et al.)."""

    ALLREDUCE = "allreduce"
    PARAMETER_SERVER = "parameter_server"


@dataclass(frozen=True, slots=True)
class Choice:
    """`count` VMs of one type and market, each given `batch` samples per iteration (split over its GPUs;
    `gpus` of them when only part of each VM's GPUs is used).

    `location` is where they run when a plan may span locations (None: the request's one region).
    """

    instance_type: str
    market: Market
    count: int
    batch: int
    gpus: int | None = None
    location: Location | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """A fleet: Srift's `counts[i]` and `batches[i]` per instance type."""

    choices: tuple[Choice, ...]

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(c.count for c in self.choices)

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(c.batch for c in self.choices)

    @property
    def global_batch(self) -> int:
        return sum(c.count * c.batch for c in self.choices)

    @property
    def vm_count(self) -> int:
        return sum(c.count for c in self.choices)

    @property
    def locations(self) -> tuple[Location, ...]:
        """The distinct locations of the fleet, in the order they first appear (empty when none is named)."""
        return tuple(dict.fromkeys(c.location for c in self.choices if c.location is not None))

    def label(self) -> str:
        """Srift's `<count><type>@<batch>` notation, e.g. "16g4dn.8xlarge@64"; `[location]` whenever the
        choices carry one (a plan across locations: each configuration says where, even at one location)."""
        return " + ".join(
            f"{c.count}×{c.instance_type}"
            + (f"[{c.gpus}gpu]" if c.gpus is not None else "")
            + f"@{c.batch}"
            + ("" if c.market is Market.SPOT else " (od)")
            + (f" [{c.location.key}]" if c.location is not None else "")
            for c in self.choices
        )


@dataclass(frozen=True, slots=True)
class FleetMember:
    """One group of identical VMs as the simulator sees it: type, how many, per-VM batch, and its profile."""

    instance: InstanceType
    count: int
    batch: int
    profile: ModelProfile
    location: Location | None = None

    @property
    def per_device_batch(self) -> float:
        return self.batch / self.instance.devices


DEFAULT_CONFIDENCE = 0.9
"""Plans check their limits against this quantile of time and cost unless asked otherwise."""
MIN_CONFIDENCE = 0.5
MAX_CONFIDENCE = 0.99


@dataclass(frozen=True, slots=True)
class Constraints:
    """What the user asks: global batch, iterations, objective, and optional limits.

    `max_gpus` and `max_vms` cap the fleet's size (GPUs, or devices for CPU types, and VMs in all).

    `confidence` is the quantile of the predicted time and cost that must meet the limits (0.5: the median,
    i.e. the prediction itself; 0.9: nine runs in ten finish within the limit, as far as the prediction's
    measured spreads tell).
    """

    global_batch: int
    iterations: int
    objective: Objective
    time_limit_s: float | None = None
    budget_usd: float | None = None
    max_gpus: int | None = None
    max_vms: int | None = None
    confidence: float = DEFAULT_CONFIDENCE

    @property
    def limited(self) -> bool:
        return self.time_limit_s is not None or self.budget_usd is not None


@dataclass(frozen=True, slots=True)
class SpreadTerm:
    """One measured source of a prediction's uncertainty and what it adds to it.

    `spread` is the source's own measured relative spread (the standard deviation of the log of what it
    measures, e.g. a profile's step times); `sigma` is what it adds to the log-spread of the predicted mean
    iteration time (the simulator re-simulates with that input one spread slower).
    """

    source: str
    spread: float
    sigma: float
    measured_by: str


@dataclass(frozen=True, slots=True)
class Band:
    """Where the measured mean iteration time of a run falls around the prediction: log-normal with
    log-standard-deviation `sigma` = √Σ term.sigma² (the terms are independent measurements), so the q-th
    quantile is the prediction × exp(z_q · sigma). A band of sigma 0 is the prediction itself."""

    sigma: float = 0.0
    terms: tuple[SpreadTerm, ...] = ()

    @classmethod
    def of(cls, terms: tuple[SpreadTerm, ...]) -> Band:
        kept = tuple(t for t in terms if t.sigma > 0)
        return cls(math.sqrt(sum(t.sigma**2 for t in kept)), kept)

    def factor(self, q: float) -> float:
        """The q-th quantile as a multiple of the prediction (1 at q = 0.5)."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile {q} is outside (0, 1)")
        return math.exp(NormalDist().inv_cdf(q) * self.sigma) if self.sigma > 0 else 1.0

    def probability_within(self, ratio: float) -> float:
        """P(measured ≤ ratio × prediction)."""
        if ratio <= 0 or math.isnan(ratio):
            return 0.0
        if self.sigma <= 0:
            return 1.0 if ratio >= 1.0 else 0.0
        return NormalDist().cdf(math.log(ratio) / self.sigma)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Where one iteration's time goes, in Stash's terms (seconds per iteration).

    compute_s + straggler_wait_s + exposed_intra_s + exposed_network_s + data_stall_s == iteration_s.
    `granularity` is compute / communication (Erben); below 1 the job is communication-bound. `update_s` is
    the optimizer step after the exchange, counted in compute_s (compute_s = forward_s + backward_s +
    update_s). `data_stall_s` is the time the slowest VM's input pipeline (decode on its vCPUs, reads from
    storage or the network) adds on top (Stash's CPU and disk stalls); `exposed_location_s` is the part of
    exposed_network_s spent on links between locations.
    """

    forward_s: float
    backward_s: float
    compute_s: float
    straggler_wait_s: float
    exposed_intra_s: float
    exposed_network_s: float
    communication_s: float
    granularity: float
    warnings: tuple[str, ...] = ()
    update_s: float = 0.0
    data_stall_s: float = 0.0
    exposed_location_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Prediction:
    """Predicted iteration time (mean and quantiles), totals for N iterations, and what they rest on.

    `band` is the spread of the run's mean iteration time (None when it was not computed: the optimizer
    computes it only for the configurations whose limits need it and for what it reports). Total time and
    cost scale with it: they are N iterations at the same mean, billed per second.
    `cost_usd` includes `egress_usd`, what the gradient traffic leaving each location costs over the run.
    When spot interruptions are priced in, `total_time_s` and `cost_usd` are expectations over them and
    `uninterrupted_time_s` / `uninterrupted_cost_usd` hold the run without any (else they are equal).
    """

    iteration_s: float
    iteration_p10_s: float
    iteration_p50_s: float
    iteration_p90_s: float
    total_time_s: float
    cost_usd: float
    breakdown: Breakdown
    sources: tuple[str, ...] = ()
    band: Band | None = None
    egress_usd: float = 0.0
    uninterrupted_time_s: float | None = None
    uninterrupted_cost_usd: float | None = None

    def total_time_quantile_s(self, q: float) -> float:
        return self.total_time_s * (self.band or Band()).factor(q)

    def cost_quantile_usd(self, q: float) -> float:
        return self.cost_usd * (self.band or Band()).factor(q)

    def p_time_within(self, time_limit_s: float) -> float:
        """P(the run finishes within `time_limit_s`)."""
        if self.total_time_s <= 0:
            return 1.0
        return (self.band or Band()).probability_within(time_limit_s / self.total_time_s)

    def p_cost_within(self, budget_usd: float) -> float:
        """P(the run costs at most `budget_usd`)."""
        if self.cost_usd <= 0:
            return 1.0
        return (self.band or Band()).probability_within(budget_usd / self.cost_usd)

    @property
    def instances_usd(self) -> float:
        """What the VMs cost (cost_usd without egress)."""
        return self.cost_usd - self.egress_usd

    @property
    def egress_share(self) -> float:
        """Egress as a share of the whole cost (0 when nothing is billed)."""
        return self.egress_usd / self.cost_usd if self.cost_usd > 0 else 0.0


@dataclass(frozen=True, slots=True)
class BaselineResult:
    """A static policy's configuration (CAP or TAP) and Srift's prediction for it."""

    policy: str
    config: Config
    prediction: Prediction
    feasible: bool


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One evaluated configuration's total time and cost; `chosen` marks the plan."""

    label: str
    total_time_s: float
    cost_usd: float
    feasible: bool
    on_front: bool
    chosen: bool = False


@dataclass(frozen=True, slots=True)
class DiminishingReturns:
    """A much cheaper (or smaller) fleet nearly as fast as the plan, and what the plan's extra buys.

    `seconds_per_usd` and `seconds_per_gpu` are the marginal seconds the plan saves per extra dollar and
    per extra GPU over `alternative` (None when the plan does not spend more of that).
    """

    alternative: Config
    total_time_s: float
    cost_usd: float
    gpus: int
    plan_gpus: int
    seconds_saved: float
    extra_usd: float
    extra_gpus: int
    seconds_per_usd: float | None
    seconds_per_gpu: float | None


@dataclass(frozen=True, slots=True)
class Plan:
    """The optimizer's answer: the chosen fleet, its prediction, baselines and the evaluated space.

    `proven_optimal` is True when an exhaustive search closed its bound (no configuration can do better);
    otherwise `optimality_gap`, when known, is how far (a fraction of the plan's objective) the optimum could
    be below the plan, from the least bound of what the exhaustive search left unexplored.
    `pareto_total` counts every evaluated configuration (`pareto` may hold a sample of them plus the front).
    `diminishing_returns` is set when a much cheaper or smaller fleet is nearly as fast
    (srift.optimize.returns).
    """

    config: Config
    predicted: Prediction
    constraints: Constraints
    time_headroom_s: float | None
    budget_headroom_usd: float | None
    baselines: dict[str, BaselineResult | None]
    pareto: tuple[ParetoPoint, ...]
    solve_time_s: float
    configs_evaluated: int
    mode: SearchMode
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    proven_optimal: bool = False
    pareto_total: int = 0
    optimality_gap: float | None = None
    diminishing_returns: DiminishingReturns | None = None
