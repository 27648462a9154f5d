"""Spot interruptions priced in: a run's expected time and cost, closed form and Monte Carlo with re-planning.

Model. Each spot VM is interrupted at its own rate λ (per second; srift.catalog.geo turns a published
monthly band into one), independently, so a fleet with spot VMs is interrupted at Λ = Σ count·λ while it
works. The run checkpoints every `checkpoint_interval_s` seconds of progress (at least every iteration);
an interruption loses the work since the last checkpoint, and the run waits `restart_s` (Srift §5.4
assumed EC2's 150 s launch time) before it goes on from that checkpoint. While waiting, the fleet is
billed as if all of it ran (the survivors keep running, the replacement boots); egress is billed per
iteration actually run, redone ones included. On-demand VMs are never interrupted.

Closed form (restart in place, one fleet throughout). A segment of x seconds of work between checkpoints
takes, in expectation (failures at rate Λ during work, none during the restart),

    g(x) = (1/Λ + D)·(e^{Λx} − 1)        with E[interruptions] = e^{Λx} − 1, E[work] = (e^{Λx} − 1)/Λ,

and the run is ⌊W/c⌋ segments of c plus one of the rest, W = N·t_iter. This is what the optimizer's search
uses to compare spot and on-demand fleets (cheap, and exact for the restart-in-place model with exponential
times to interruption; trace laws below).

Monte Carlo (Srift §4.5). `monte_carlo` draws interruption times and, at each, asks a `Replanner` what to
run next: `RESTART` keeps the fleet (the closed form's model, used to check it), `REPLAN` does what §4.5
does: the interrupted (type, location) spot offer is not chosen again (its surviving VMs may stay), and
the best configuration for the remaining iterations, time and budget is chosen among the alternatives the
optimizer evaluated (the plan's on-demand fallback among them); when none meets the remaining limits it
runs the fallback, or the fastest alternative. It reports expected time and cost, their quantiles and
P(meets the time limit) / P(within budget), in the same vocabulary as the uninterrupted prediction.

Laws fitted to traces (srift.spot, issue 57). A spot offer the public traces cover carries a `SpotOffer`:
per zone and period of its region, how long capacity for n VMs lasts (a Weibull-tailed empirical law, not
an exponential) and how long it stays away. Then the closed form prices, per period, the restart-in-place
run under the law itself (`renewal_run`: each relaunch runs for a fresh draw of the law, not an
exponential of rate Λ = 1 / E[up(n)]), a wait of E[gap(n)] after each interruption (unbilled: the fleet is
gone) besides the billed restart, and the expected wait for capacity at the start, and averages the
periods; the Monte Carlo draws each run's period, its times to interruption from the law (fresh after every
relaunch) and its capacity gaps, so that its RESTART policy and the closed form model the same run. A fleet
with band-priced VMs beside its one traced group is priced the same way under the law of the first of the
two interruptions (`ThinnedLaw`: the traced draw or the band VMs' exponential, whichever comes first), the
capacity gap waited only after the traced group's. Several traced groups are still priced by the closed
form as exponential at the summed rate (the Monte Carlo draws each group's law). An offer no trace covers
keeps its published band's Poisson rate (srift.catalog.geo), which the plan says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Protocol

import numpy as np

from srift.errors import InvalidInput, require_number, require_within
from srift.spot.model import Durations, FleetLaw, TraceModel

DEFAULT_RESTART_S = 150.0
"""Srift §5.4: "we expect EC2's instance launch time to be 150s"."""
DEFAULT_CHECKPOINT_INTERVAL_S = 600.0
"""A checkpoint every 10 minutes of progress unless the request says otherwise (a choice, not a fact)."""
DEFAULT_SAMPLES = 2000
MAX_SAMPLES = 100_000
MAX_EVENTS_PER_RUN = 10_000


class ReplanPolicy(StrEnum):
    """What happens after an interruption in the Monte Carlo."""

    RESTART = "restart"
    REPLAN = "replan"


@dataclass(frozen=True, slots=True)
class SpotPolicy:
    """Checkpointing, restart delay and the Monte Carlo's size and seed."""

    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    restart_s: float = DEFAULT_RESTART_S
    samples: int = DEFAULT_SAMPLES
    seed: int = 0

    def __post_init__(self) -> None:
        require_number(
            self.checkpoint_interval_s,
            field="checkpoint_interval_s",
            hint="seconds of progress between checkpoints (0: every iteration)",
        )
        require_number(
            self.restart_s,
            field="restart_s",
            hint="seconds from an interruption until training runs again (Srift used 150)",
        )
        require_within(
            self.samples, 1, MAX_SAMPLES, field="spot_samples", hint="a few thousand samples are plenty"
        )


class UpLaw(Protocol):
    """What the closed form reads of a law of time to interruption (`renewal_run`)."""

    def sf(self, x_s: np.ndarray | float) -> np.ndarray: ...

    def mean_within_s(self, x_s: np.ndarray | float) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Regime:
    """One traced period of a fleet's spot market: its interruption rate Λ (1 / E[up], plus `band_per_s`),
    the capacity gap expected after an interruption of the traced group, and the wait for capacity expected
    at the start (both unbilled); and the law of the fleet's time to interruption (`up`: the period's law,
    or with band-priced VMs beside it the `ThinnedLaw` of both), which the closed form then uses in place
    of an exponential of rate Λ. `band_per_s` is the summed rate of the band-priced VMs beside the traced
    group: their interruptions find capacity at once (no gap)."""

    interruptions_per_s: float
    wait_s: float
    start_wait_s: float
    up: UpLaw | None = field(default=None, compare=False, repr=False)
    band_per_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RunRates:
    """What a fleet does: seconds per iteration, USD per second of VMs, USD of egress per iteration, and
    its interruption rate Λ (per second, Σ count·λ over its spot VMs); with trace laws, the capacity gap
    waited out after each interruption and at the start (unbilled), and the periods to average over."""

    iteration_s: float
    usd_per_s: float
    egress_usd_per_iteration: float
    interruptions_per_s: float
    wait_s: float = 0.0
    start_wait_s: float = 0.0
    regimes: tuple[Regime, ...] = ()


@dataclass(frozen=True, slots=True)
class Expectation:
    """Expected total time and cost of a run, and the expected number of interruptions."""

    time_s: float
    cost_usd: float
    egress_usd: float
    interruptions: float


def checkpoint_every_s(policy: SpotPolicy, iteration_s: float) -> float:
    """Work seconds between checkpoints: whole iterations, at least one."""
    if iteration_s <= 0:
        return policy.checkpoint_interval_s
    k = max(1, math.floor(policy.checkpoint_interval_s / iteration_s))
    return k * iteration_s


def expected_run(rates: RunRates, *, iterations: int, policy: SpotPolicy) -> Expectation:
    """Closed-form expectation of a run on one fleet that restarts in place (module docstring); with
    `regimes`, the mean of each period's expectation (under the period's law where it has one)."""
    if rates.regimes:
        each = [_expected_regime(rates, r, iterations=iterations, policy=policy) for r in rates.regimes]
        n = len(each)
        return Expectation(
            sum(e.time_s for e in each) / n,
            sum(e.cost_usd for e in each) / n,
            sum(e.egress_usd for e in each) / n,
            sum(e.interruptions for e in each) / n,
        )
    work = iterations * rates.iteration_s
    lam = rates.interruptions_per_s
    if lam <= 0 or work <= 0:
        return Expectation(
            work,
            work * rates.usd_per_s + iterations * rates.egress_usd_per_iteration,
            iterations * rates.egress_usd_per_iteration,
            0.0,
        )
    worked, fails = _exponential_run(lam, work_s=work, every_s=checkpoint_every_s(policy, rates.iteration_s))
    return _expectation(rates, policy, worked_s=worked, fails=fails, waited_s=fails * rates.wait_s)


def _exponential_run(lam: float, *, work_s: float, every_s: float) -> tuple[float, float]:
    """Expected seconds worked and interruptions of `work_s` of work checkpointed every `every_s` when the
    fleet is interrupted at rate `lam` (> 0): ⌊W/c⌋ segments of g(c) and one of the rest (module docstring).
    """
    full = math.floor(work_s / every_s + 1e-9)
    rest = max(work_s - full * every_s, 0.0)
    fails = full * math.expm1(lam * every_s) + math.expm1(lam * rest)
    return fails / lam, fails


def _expectation(
    rates: RunRates, policy: SpotPolicy, *, worked_s: float, fails: float, waited_s: float
) -> Expectation:
    """Time, cost and egress from the expected seconds worked (redone ones included), interruptions and
    seconds waited for capacity after them: each interruption adds the billed restart; the capacity gaps
    and the start wait are unbilled."""
    billed_s = worked_s + fails * policy.restart_s
    time_s = billed_s + waited_s + rates.start_wait_s
    egress = worked_s / rates.iteration_s * rates.egress_usd_per_iteration
    return Expectation(time_s, billed_s * rates.usd_per_s + egress, egress, fails)


def _expected_regime(rates: RunRates, regime: Regime, *, iterations: int, policy: SpotPolicy) -> Expectation:
    """One period's expectation: under its law of time to interruption where it has one (`renewal_run`),
    else the exponential closed form at its rate Λ. Only the traced group's interruptions wait out a
    capacity gap: the band-priced VMs' are a Poisson stream at `band_per_s` while the fleet works, so they
    number band_per_s × E[seconds worked] (exact for either law) and the traced group's the rest."""
    period = RunRates(
        rates.iteration_s,
        rates.usd_per_s,
        rates.egress_usd_per_iteration,
        regime.interruptions_per_s,
        regime.wait_s,
        regime.start_wait_s,
    )
    work = iterations * rates.iteration_s
    if work <= 0 or (regime.up is None and regime.interruptions_per_s <= 0):
        return expected_run(period, iterations=iterations, policy=policy)
    every = checkpoint_every_s(policy, rates.iteration_s)
    if regime.up is None:
        worked, fails = _exponential_run(regime.interruptions_per_s, work_s=work, every_s=every)
    else:
        worked, fails = renewal_run(regime.up, work_s=work, every_s=every)
    traced_fails = max(fails - regime.band_per_s * worked, 0.0)
    return _expectation(period, policy, worked_s=worked, fails=fails, waited_s=traced_fails * regime.wait_s)


def renewal_run(up: UpLaw, *, work_s: float, every_s: float) -> tuple[float, float]:
    """Expected seconds worked (lost work included) and interruptions of `work_s` of work checkpointed every
    `every_s`, when each (re)launch of the fleet runs for a fresh draw τ of `up` (the Monte Carlo's
    restart-in-place model with trace laws): τ ≥ the work left finishes it; else the run loses what it did
    since its last checkpoint, ⌊τ/c⌋ checkpoints further on, and relaunches.

    Exact, not an exponential's: with the shipped trace laws (shapes below 1, a fresh fleet the likeliest to
    go) an exponential of the same mean up time put the expected time a median 16 Monte Carlo standard
    errors from the Monte Carlo's (−44 % to +13 %; docs/spot.md "The interruption model"). The run
    is J segments (the last one the rest of the work); from state j (j checkpoints done, w_j = W − j·c
    left) a launch moves on k segments with π_k = P(kc ≤ τ < (k+1)c) while k < J−1−j, into the last state
    with P((J−1−j)c ≤ τ < w_j), and finishes with P(τ ≥ w_j). The expected launches u_j in the states
    before the last are a discrete renewal equation, U(z) = 1 / (1 − Σ π_k z^k); then the expectations
    are Σ u_j E[min(τ, w_j)] worked and Σ u_j P(τ < w_j) interruptions. Past MAX_SEGMENTS segments (a
    checkpoint every few seconds of a long run) the checkpoints are taken W / MAX_SEGMENTS apart: each
    interruption may then lose up to that much more work (on a day-long run, 21 s against hours between
    interruptions), and the search's cost of the closed form stays bounded."""
    c = max(every_s, work_s / MAX_SEGMENTS)
    full = math.floor(work_s / c + 1e-9)
    segments = full + (1 if work_s - full * c > 1e-9 * c else 0)
    left = work_s - c * np.arange(segments)  # w_j
    # P(τ ≥ x): the left limit of the survival (a law fitted on ticks has atoms, e.g. at 600 s).
    at_least = up.sf(np.nextafter(c * np.arange(segments + 1), -np.inf))
    finish = up.sf(np.nextafter(left, -np.inf))
    launches = np.empty(segments)
    before = segments - 1
    if before:
        step = at_least[:-1] - at_least[1:]  # π_k
        launches[:before] = _series_inverse(np.concatenate(([1.0 - step[0]], -step[1:before])))
        into_last = float(np.dot(launches[:before], at_least[before:0:-1] - finish[:before]))
    else:
        into_last = 1.0
    launches[before] = into_last / finish[before] if finish[before] > 0 else math.inf
    worked = float(np.dot(launches, up.mean_within_s(left)))
    fails = float(np.dot(launches, 1.0 - finish))
    return worked, fails


MAX_SEGMENTS = 4096
"""The most checkpoint intervals `renewal_run` resolves (its docstring)."""
_DIRECT_TERMS = 512
"""Up to this many terms a power series is inverted term by term (O(n²)); past it by Newton's iteration
with FFT products (O(n log n)), e.g. a checkpoint every iteration of a day-long run."""


def _series_inverse(f: np.ndarray) -> np.ndarray:
    """The first len(f) coefficients of 1 / Σ f_k z^k (f_0 ≠ 0)."""
    n = f.size
    g = np.empty(n)
    g[0] = 1.0 / f[0]
    if n <= _DIRECT_TERMS:
        for j in range(1, n):
            g[j] = -float(np.dot(f[1 : j + 1], g[j - 1 :: -1])) * g[0]
        return g
    have = 1
    while have < n:
        upto = min(2 * have, n)
        err = -_product(f[:upto], g[:have], upto)
        err[0] += 2.0
        g[:upto] = _product(g[:have], err, upto)
        have = upto
    return g


def _product(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of the product of two power series (FFT)."""
    size = 1 << max(1, (a.size + b.size - 1).bit_length())
    return np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n]


@dataclass(frozen=True, slots=True)
class ThinnedLaw:
    """The time to the first of two independent interruptions: a draw of `up` (a traced group's law) and
    an exponential at `rate_per_s` (the band-priced VMs beside it), drawn afresh at every relaunch as the
    Monte Carlo draws them; P(T > t) = P(up > t)·e^{−rate·t}. What `renewal_run` reads of it."""

    up: UpLaw
    rate_per_s: float

    def sf(self, x_s: np.ndarray | float) -> np.ndarray:
        x = np.asarray(x_s, dtype=float)
        return np.asarray(self.up.sf(x) * np.exp(-self.rate_per_s * np.maximum(x, 0.0)))

    def mean_within_s(self, x_s: np.ndarray | float) -> np.ndarray:
        """E[min(T, x)] = ∫₀ˣ P(up > t) e^{−rate·t} dt by Gauss–Legendre quadrature between nodes where the
        integrand is smooth: the asked points, the steps of an empirical law's body (constant between
        them) and a grid halving towards 0 (a Weibull of shape below 1 is steep there); the first node
        sits 2⁻⁶⁰ of the way to the largest x, below which P(T > t) is 1 to within ~(2⁻⁶⁰ x / scale)^k."""
        x = np.maximum(np.asarray(x_s, dtype=float), 0.0)
        top = float(x.max(initial=0.0))
        if self.rate_per_s <= 0.0 or top <= 0.0:
            return np.asarray(self.up.mean_within_s(x))
        parts = [x.ravel(), top * 0.5 ** np.arange(_GRADING)]
        if isinstance(self.up, Durations):
            parts.append(self.up.times_s[self.up.times_s < top])
        nodes = np.unique(np.concatenate(parts))
        nodes = nodes[nodes > 0.0]
        lower = np.concatenate(([0.0], nodes[:-1]))
        width = nodes - lower
        points, weights = _gauss_legendre()
        t = lower[:, None] + width[:, None] * points[None, :]
        pieces = width * ((self.up.sf(t) * np.exp(-self.rate_per_s * t)) @ weights)
        below = np.cumsum(pieces)
        at = np.minimum(np.searchsorted(nodes, x), nodes.size - 1)
        return np.asarray(np.where(x > 0.0, below[at], 0.0))


_GRADING = 60
"""Nodes of `ThinnedLaw.mean_within_s`'s grid halving towards 0."""


@cache
def _gauss_legendre(points: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre points and weights on [0, 1] (exact for polynomials of degree 2·points − 1)."""
    x, w = np.polynomial.legendre.leggauss(points)
    return (x + 1.0) / 2.0, w / 2.0


@dataclass(frozen=True, eq=False)
class SpotOffer:
    """A spot offer's laws fitted to traces (srift.spot.model): one per traced zone and period of its
    region, for any fleet size (fitted where a trace covers it, else extrapolated)."""

    model: TraceModel
    provider: str
    region: str
    instance_type: str
    _laws: dict[int, tuple[FleetLaw, ...]] = field(default_factory=dict, repr=False)

    def laws(self, nodes: int) -> tuple[FleetLaw, ...]:
        """The periods' laws for `nodes` VMs (cached)."""
        found = self._laws.get(nodes)
        if found is None:
            found = tuple(
                self.model.region_laws(
                    provider=self.provider, region=self.region, instance_type=self.instance_type, nodes=nodes
                )
            )
            self._laws[nodes] = found
        return found

    def regimes(self, nodes: int) -> tuple[Regime, ...]:
        """Per period: Λ = 1 / E[up], E[gap] after an interruption, and the expected wait at the start
        ((1 − availability) × the mean rest of a gap seen at a random instant, E[gap²] / (2 E[gap]))."""
        return tuple(
            Regime(
                interruptions_per_s=1.0 / law.up.mean_s,
                wait_s=law.gap.mean_s,
                start_wait_s=(1.0 - law.model_availability)
                * law.gap.second_moment_s2
                / (2.0 * law.gap.mean_s),
                up=law.up,
            )
            for law in self.laws(nodes)
        )

    def interruptions_per_s(self, nodes: int) -> float:
        """Λ of `nodes` VMs averaged over the periods (a fleet's VMs go together: not nodes × one VM's)."""
        regimes = self.regimes(nodes)
        return sum(r.interruptions_per_s for r in regimes) / len(regimes) if regimes else 0.0


def fleet_rates(
    *,
    iteration_s: float,
    usd_per_s: float,
    egress_usd_per_iteration: float,
    members: Sequence[tuple[int, float, SpotOffer | None]],
) -> RunRates:
    """A fleet's rates from its spot groups (count, a VM's band rate λ, its SpotOffer or None).

    Band-priced groups add count·λ; a group with trace laws adds its Λ(count). One traced group keeps its
    periods (the closed form averages them), each under the law of the first interruption of the traced
    group or of the band-priced VMs beside it (`ThinnedLaw`), the gap waited after the traced group's
    alone; several are combined into one: Λ summed, the wait after an interruption weighed by each group's
    Λ, the start wait the longest of them."""
    band = math.fsum(n * lam for n, lam, offer in members if offer is None and n > 0)
    traced = [(n, offer) for n, _, offer in members if offer is not None and n > 0 and offer.laws(n)]
    if not traced:
        return RunRates(iteration_s, usd_per_s, egress_usd_per_iteration, band)
    if len(traced) == 1:
        n, offer = traced[0]
        regimes = tuple(
            Regime(
                r.interruptions_per_s + band,
                r.wait_s,
                r.start_wait_s,
                _thinned(r.up, band),
                band_per_s=band,
            )
            for r in offer.regimes(n)
        )
        lam = sum(r.interruptions_per_s for r in regimes) / len(regimes)
        return RunRates(iteration_s, usd_per_s, egress_usd_per_iteration, lam, regimes=regimes)
    parts = [offer.regimes(n) for n, offer in traced]
    lams = [sum(r.interruptions_per_s for r in p) / len(p) for p in parts]
    waits = [sum(r.wait_s for r in p) / len(p) for p in parts]
    starts = [sum(r.start_wait_s for r in p) / len(p) for p in parts]
    total = band + math.fsum(lams)
    wait = math.fsum(lam * w for lam, w in zip(lams, waits, strict=True)) / total
    return RunRates(
        iteration_s, usd_per_s, egress_usd_per_iteration, total, wait_s=wait, start_wait_s=max(starts)
    )


def _thinned(up: UpLaw | None, band_per_s: float) -> UpLaw | None:
    """A traced period's law with band-priced VMs beside it (`ThinnedLaw`); the law itself without."""
    if up is None or band_per_s <= 0.0:
        return up
    return ThinnedLaw(up, band_per_s)


@dataclass(frozen=True, slots=True)
class Alternative:
    """A configuration the run may switch to: its counts per candidate and its rates."""

    counts: tuple[int, ...]
    rates: RunRates
    label: str = ""


@dataclass
class Alternatives:
    """Configurations the re-planner chooses among, with each candidate's spot rate (0: on-demand)."""

    items: list[Alternative]
    candidate_rates_per_s: tuple[float, ...]
    fallback: int | None = None
    candidate_offers: tuple[SpotOffer | None, ...] = ()
    """Per candidate, its trace laws (None or absent: its band rate, exponential, capacity back at once)."""
    _counts: np.ndarray = field(init=False, repr=False)
    _it: np.ndarray = field(init=False, repr=False)
    _usd: np.ndarray = field(init=False, repr=False)
    _egress: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        width = len(self.candidate_rates_per_s)
        if any(len(a.counts) != width for a in self.items):
            raise ValueError("every alternative needs one count per candidate")
        if self.candidate_offers and len(self.candidate_offers) != width:
            raise ValueError("give one offer (or None) per candidate")
        self._counts = np.array([a.counts for a in self.items], dtype=np.int64).reshape(
            len(self.items), width
        )
        self._it = np.array([a.rates.iteration_s for a in self.items], dtype=float)
        self._usd = np.array([a.rates.usd_per_s for a in self.items], dtype=float)
        self._egress = np.array([a.rates.egress_usd_per_iteration for a in self.items], dtype=float)

    def choose(
        self,
        *,
        caps: np.ndarray,
        iterations_left: int,
        time_left_s: float | None,
        budget_left_usd: float | None,
        minimize_cost: bool,
    ) -> int:
        """The best alternative within `caps` (max count per candidate) meeting the remaining limits; else
        the fallback; else the fastest within caps; else the fallback or the first."""
        allowed = np.all(self._counts <= caps, axis=1)
        time = iterations_left * self._it
        cost = time * self._usd + iterations_left * self._egress
        ok = allowed.copy()
        if time_left_s is not None:
            ok &= time <= time_left_s
        if budget_left_usd is not None:
            ok &= cost <= budget_left_usd
        if ok.any():
            value = np.where(ok, cost if minimize_cost else time, np.inf)
            return int(np.argmin(value))
        if self.fallback is not None:
            return self.fallback
        if allowed.any():
            return int(np.argmin(np.where(allowed, time, np.inf)))
        return 0


Replanner = Callable[[int, int, np.ndarray, int, float | None, float | None], int]
"""(current alternative, interrupted candidate, caps, iterations left, time left, budget left) → next."""


@dataclass(frozen=True, slots=True)
class MonteCarlo:
    """The Monte Carlo's summary: expectations, quantiles and probabilities, over `samples` runs."""

    samples: int
    mean_time_s: float
    mean_cost_usd: float
    mean_egress_usd: float
    mean_interruptions: float
    time_p10_s: float
    time_p50_s: float
    time_p90_s: float
    cost_p90_usd: float
    p_meets_time_limit: float | None
    p_within_budget: float | None
    p_interrupted: float
    replans: int
    stderr_time_s: float


def monte_carlo(
    alternatives: Alternatives,
    *,
    start: int,
    iterations: int,
    policy: SpotPolicy,
    replan: ReplanPolicy = ReplanPolicy.REPLAN,
    time_limit_s: float | None = None,
    budget_usd: float | None = None,
    minimize_cost: bool = True,
) -> MonteCarlo:
    """Run `policy.samples` simulated runs starting on alternative `start` (module docstring)."""
    if iterations < 1:
        raise InvalidInput("is below 1", hint="ask for at least one iteration", field="iterations")
    rng = np.random.default_rng([policy.seed & 0xFFFFFFFF, 0x5B07])
    rates = np.asarray(alternatives.candidate_rates_per_s, dtype=float)
    n_cand = rates.size
    times = np.empty(policy.samples)
    costs = np.empty(policy.samples)
    egress = np.empty(policy.samples)
    events = np.zeros(policy.samples)
    replans = 0
    memo: dict[tuple[int, int, tuple[int, ...], int, int, int], int] = {}
    base_caps = np.full(n_cand, np.iinfo(np.int64).max, dtype=np.int64)
    offers = alternatives.candidate_offers or (None,) * n_cand
    traced = any(o is not None for o in offers)
    for s in range(policy.samples):
        current = start
        caps = base_caps.copy()
        counts = np.array(alternatives.items[current].counts, dtype=np.int64)
        done = 0
        elapsed = cost = spent_egress = 0.0
        n_events = 0
        # With trace laws: each run lives through one traced period per offer, drawn at its start.
        period = [int(rng.integers(1 << 30)) for _ in range(n_cand)] if traced else []
        first = True
        while done < iterations:
            alt = alternatives.items[current]
            it = alt.rates.iteration_s
            left = iterations - done
            work = left * it
            gap_law: FleetLaw | None = None
            if traced:
                tau, victim, gap_law, start_wait = _draw(rng, counts, rates, offers, period, first=first)
                first = False
                elapsed += start_wait
                lam_each = counts * rates
                lam = 0.0
            else:
                lam_each = counts * rates
                lam = float(lam_each.sum())
                tau = rng.exponential(1.0 / lam) if lam > 0 else math.inf
                victim = -1
            if tau >= work:
                elapsed += work
                cost += work * alt.rates.usd_per_s + left * alt.rates.egress_usd_per_iteration
                spent_egress += left * alt.rates.egress_usd_per_iteration
                done = iterations
                break
            n_events += 1
            if n_events > MAX_EVENTS_PER_RUN:
                raise InvalidInput(
                    f"a simulated run was interrupted more than {MAX_EVENTS_PER_RUN} times",
                    hint="interruption rates are too high for this run length; check interruption_rates",
                    field="interruption_rates",
                )
            ran = math.floor(tau / it) if it > 0 else 0
            per_ckpt = max(1, math.floor(checkpoint_every_s(policy, it) / it + 1e-9)) if it > 0 else 1
            kept = (ran // per_ckpt) * per_ckpt
            # The capacity gap (trace laws) is waited out unbilled; the restart is billed.
            gap_s = float(gap_law.gap.sample(rng, 1)[0]) if gap_law is not None else 0.0
            elapsed += tau + policy.restart_s + gap_s
            cost += (tau + policy.restart_s) * alt.rates.usd_per_s + ran * alt.rates.egress_usd_per_iteration
            spent_egress += ran * alt.rates.egress_usd_per_iteration
            done += kept
            if victim < 0:
                victim = int(rng.choice(n_cand, p=lam_each / lam))
            if replan is ReplanPolicy.RESTART:
                continue
            survivors = counts.copy()
            survivors[victim] -= 1
            caps[victim] = min(int(caps[victim]), int(survivors[victim]))
            time_left = None if time_limit_s is None else time_limit_s - elapsed
            budget_left = None if budget_usd is None else budget_usd - cost
            key = (
                current,
                victim,
                tuple(int(x) for x in caps),
                (iterations - done) * 100 // iterations,
                -1 if time_left is None else int(time_left // max(alt.rates.iteration_s, 1e-9) // 10),
                -1 if budget_left is None else int(budget_left * 100),
            )
            nxt = memo.get(key)
            if nxt is None:
                nxt = alternatives.choose(
                    caps=caps,
                    iterations_left=iterations - done,
                    time_left_s=time_left,
                    budget_left_usd=budget_left,
                    minimize_cost=minimize_cost,
                )
                memo[key] = nxt
                replans += 1
            current = nxt
            counts = np.array(alternatives.items[current].counts, dtype=np.int64)
        times[s], costs[s], egress[s], events[s] = elapsed, cost, spent_egress, n_events
    q10, q50, q90 = (float(x) for x in np.quantile(times, [0.1, 0.5, 0.9]))
    return MonteCarlo(
        samples=policy.samples,
        mean_time_s=float(times.mean()),
        mean_cost_usd=float(costs.mean()),
        mean_egress_usd=float(egress.mean()),
        mean_interruptions=float(events.mean()),
        time_p10_s=q10,
        time_p50_s=q50,
        time_p90_s=q90,
        cost_p90_usd=float(np.quantile(costs, 0.9)),
        p_meets_time_limit=None
        if time_limit_s is None
        else float(np.mean(times <= time_limit_s * (1 + 1e-12))),
        p_within_budget=None if budget_usd is None else float(np.mean(costs <= budget_usd * (1 + 1e-12))),
        p_interrupted=float(np.mean(events > 0)),
        replans=replans,
        stderr_time_s=float(times.std(ddof=1) / math.sqrt(policy.samples)) if policy.samples > 1 else 0.0,
    )


def _draw(
    rng: np.random.Generator,
    counts: np.ndarray,
    rates: np.ndarray,
    offers: Sequence[SpotOffer | None],
    period: Sequence[int],
    *,
    first: bool,
) -> tuple[float, int, FleetLaw | None, float]:
    """The next interruption of a fleet with trace laws: (time to it, the group it hits, that group's law,
    the wait for capacity before the fleet first runs). Each group with a law draws its time from its
    period's law (fresh VMs after every relaunch); a band-priced group draws an exponential at count·λ."""
    tau, victim, law_hit, start_wait = math.inf, -1, None, 0.0
    for j, n in enumerate(counts):
        if n <= 0:
            continue
        offer = offers[j]
        laws = offer.laws(int(n)) if offer is not None else ()
        if laws:
            law = laws[period[j] % len(laws)]
            if first and rng.random() > law.model_availability:
                start_wait = max(start_wait, float(law.gap.sample_residual(rng, 1)[0]))
            t = float(law.up.sample(rng, 1)[0])
            if t < tau:
                tau, victim, law_hit = t, j, law
        elif rates[j] > 0:
            t = float(rng.exponential(1.0 / (n * rates[j])))
            if t < tau:
                tau, victim, law_hit = t, j, None
    return tau, victim, law_hit, start_wait


def fleet_interruption_rate(counts: Sequence[int], rates_per_s: Sequence[float]) -> float:
    """Λ = Σ count·λ."""
    return math.fsum(n * r for n, r in zip(counts, rates_per_s, strict=True))
