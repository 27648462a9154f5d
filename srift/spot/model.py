"""An interruption and capacity model fitted to spot traces: a FleetLaw per trace period and fleet size.

What a trace teaches, for a fleet of n VMs of one type in one zone (n ≤ the trace's fleet size), from the
ticks where at least n VMs were available ("up") and those where fewer were ("down"):

- time to interruption: how long spot capacity for the fleet lasts: the empirical law of the up runs
  (Kaplan–Meier, `Durations`), with a Weibull fitted by maximum likelihood for its summary and its tail. A
  run of m ticks lasted between (m−1) and (m+1) ticks (interval-censored for the Weibull; m ticks for the
  empirical law); a run cut by the end of the data lasted at least what was seen (right-censored), one the
  data opens with is left out (its start is unknown). Not
  exponential: the fitted shapes are below 1 (a fresh fleet is the likeliest to go, one that has lasted is
  likelier to last; docs/BENCHMARKS.md "spot on real traces"); shape 1 is Srift's old Poisson model.
- capacity gap: how long, once capacity went, until n VMs could be had again: the same kind of law of the
  down runs. This replaces the fixed 150 s restart for a fleet whose capacity is gone.
- the time scale of both: the empirical laws above give the shape; each is then scaled so that its mean is
  the time the data spent in that state over the number of its runs that ended (renewal–reward: for an
  alternating process watched long enough, the mean of a run whatever its law, and the laws' availability
  E[up] / (E[up] + E[gap]) is then the share of ticks the data was up). The runs a block opens with have
  no seen start and are left out of the shape, but their time counts here: a block that is one long
  outage (whose start and end lie outside it) has no run at all for the shape, and without this its whole
  outage would be missing from the gap law. On the fit half of the 16-VM us-east-2b trace (2023-08-27),
  the unscaled laws put 16 VMs' availability at 0.66 where the data had them up 0.46 of the time, and
  4-VM us-east-2a (2023-08-03) at 0.91 against 0.72 (docs/BENCHMARKS.md "spot on real traces").
- correlation between a fleet's VMs: from the traces that hold several VMs, how many go at once (the
  sizes of the drops in the count) and how the mean up and down times scale with the fleet size n
  (mean_up(n) ∝ n^−β, mean_gap(n) ∝ n^γ; β = 1 would be independent VMs, β = 0 VMs that always go
  together). A fleet larger than any trace of its zone covers is extrapolated from the largest covered
  size with these exponents, and says so.

Each trace is a period of its zone's market and keeps its own laws (a fleet size n ≤ its VMs fitted on it,
a larger one extrapolated); a zone's or a region's prediction mixes its periods alike. `split_blocks` cuts
a trace into alternating blocks of days (`fit` / `check` halves): the shipped model is fitted on the `fit`
half only, so that the other half can judge it (benchmarks/spot_traces.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from srift.errors import InvalidInput
from srift.spot.traces import SpotTrace, region_of_zone

MODEL_FORMAT = "srift-spot-model/1"
SPLIT_BLOCK_S = 2 * 86_400.0
"""The fit/check split cuts every trace into blocks of 2 days: even blocks fit, odd blocks check."""
MIN_RUNS = 3
"""A law needs at least this many observed runs (of each kind) to be fitted; else it is not fitted."""


class Half(StrEnum):
    """Which blocks of a trace a model sees: the fit half (even blocks), the check half (odd), or all."""

    FIT = "fit"
    CHECK = "check"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class TraceBlock:
    """A stretch of one trace: counts from tick `start` on, and the trace it comes from."""

    trace: SpotTrace
    start: int
    counts: np.ndarray = field(repr=False)

    @property
    def gap_s(self) -> float:
        return self.trace.gap_s


def split_blocks(trace: SpotTrace, half: Half, *, block_s: float = SPLIT_BLOCK_S) -> list[TraceBlock]:
    """The trace's blocks of `block_s` seconds that belong to `half` (the last block may be shorter)."""
    counts = trace.array()
    if half is Half.ALL:
        return [TraceBlock(trace, 0, counts)]
    per = max(1, round(block_s / trace.gap_s))
    out = []
    for b, start in enumerate(range(0, counts.size, per)):
        if (b % 2 == 0) == (half is Half.FIT):
            piece = counts[start : start + per]
            if piece.size >= 2:
                out.append(TraceBlock(trace, start, piece))
    return out


@dataclass(frozen=True, slots=True)
class Weibull:
    """A Weibull law of durations: P(X > x) = exp(−(x/scale)^shape)."""

    shape: float
    scale_s: float

    def __post_init__(self) -> None:
        if not (
            math.isfinite(self.shape) and self.shape > 0 and math.isfinite(self.scale_s) and self.scale_s > 0
        ):
            raise InvalidInput(
                f"Weibull shape {self.shape} and scale {self.scale_s} s are not both positive",
                hint="give shape > 0 and scale_s > 0",
                field="law",
            )

    @property
    def mean_s(self) -> float:
        return self.scale_s * math.gamma(1.0 + 1.0 / self.shape)

    @property
    def second_moment_s2(self) -> float:
        return self.scale_s**2 * math.gamma(1.0 + 2.0 / self.shape)

    def sf(self, x_s: np.ndarray | float) -> np.ndarray:
        """P(X > x). Far past the scale of a steep law (a very regular log fits shapes in the hundreds) the
        power overflows to inf, whose exp(−inf) = 0 is the survival there: the overflow is not an error."""
        x = np.maximum(np.asarray(x_s, dtype=float), 0.0)
        with np.errstate(over="ignore"):
            return np.asarray(np.exp(-((x / self.scale_s) ** self.shape)))

    def mean_within_s(self, x_s: np.ndarray | float) -> np.ndarray:
        """E[min(X, x)] = ∫₀ˣ P(X > t) dt: the time a run drawn from the law spends before `x` (how long a
        run that is interrupted or reaches x lasts, on average). λ Γ(1 + 1/k) P(1/k, (x/λ)^k), P the
        regularised lower incomplete gamma."""
        from scipy import special  # type: ignore[import-untyped]  # here: importing scipy costs ~0.5 s

        x = np.maximum(np.asarray(x_s, dtype=float), 0.0)
        with np.errstate(over="ignore"):
            z = (x / self.scale_s) ** self.shape
        return np.asarray(self.mean_s * special.gammainc(1.0 / self.shape, z))

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        return self.scale_s * rng.weibull(self.shape, size)

    def sample_residual(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """What is left of a duration seen at a random instant (length-biased, then a uniform point of it).

        A length-biased Weibull(k, λ) is λ·G^{1/k} with G ~ Gamma(1 + 1/k)."""
        whole = self.scale_s * rng.gamma(1.0 + 1.0 / self.shape, 1.0, size) ** (1.0 / self.shape)
        return whole * rng.random(size)

    def sample_beyond(self, rng: np.random.Generator, after_s: float, size: int) -> np.ndarray:
        """Draws given the duration exceeds `after_s`."""
        return _conditional_weibull(self, after_s, rng, size)

    def scaled(self, factor: float) -> Weibull:
        return Weibull(self.shape, self.scale_s * factor)

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "scale_s": self.scale_s, "mean_s": self.mean_s}


def fit_weibull(lower_s: np.ndarray, upper_s: np.ndarray) -> Weibull:
    """Maximum-likelihood Weibull for interval-censored durations (upper = inf: right-censored).

    Log-likelihood Σ log(S(lower) − S(upper)), maximised over (log shape, log scale) from the moment
    estimate of an exponential; the library's generic fit (scipy.stats.weibull_min.fit on CensoredData)
    gives the same answer about 50× slower."""
    lo = np.asarray(lower_s, dtype=float)
    hi = np.asarray(upper_s, dtype=float)
    if lo.size == 0 or np.any(lo < 0) or np.any(hi <= lo):
        raise ValueError("durations need 0 ≤ lower < upper")
    finite = np.isfinite(hi)
    mid = np.where(finite, (lo + np.where(finite, hi, 0.0)) / 2.0, lo)
    start = np.array([0.0, math.log(max(float(mid.mean()), 1.0))])

    def nll(theta: np.ndarray) -> float:
        k, lam = math.exp(theta[0]), math.exp(theta[1])
        with np.errstate(over="ignore"):  # a power past the float range is inf: S = 0 there (Weibull.sf)
            a = (lo / lam) ** k
            b = np.where(finite, (np.where(finite, hi, 0.0) / lam) ** k, np.inf)
        if not np.all(np.isfinite(a)):  # a run outlasted where S is 0: impossible under (k, λ)
            return math.inf
        # log(e^-a − e^-b) = −a + log1p(−e^{−(b−a)})
        diff = np.minimum(b - a, 700.0)
        term = -a + np.log(-np.expm1(-diff))
        return float(-np.sum(term))

    from scipy import optimize  # here: ~0.5 s that only a fit needs

    res = optimize.minimize(
        nll, start, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000}
    )
    k, lam = math.exp(float(res.x[0])), math.exp(float(res.x[1]))
    return Weibull(shape=k, scale_s=lam)


_LOG_Z_MAX = math.log(1e300)
"""Below this log z = k·log(a/λ), z = (a/λ)^k is computed as written: it stays in the float range."""


def _conditional_weibull(law: Weibull, after_s: float, rng: np.random.Generator, size: int) -> np.ndarray:
    """Draws of a Weibull X given X > after_s: λ((after/λ)^k + E)^{1/k}, E ~ Exp(1).

    A steep law (a clockwork log fits shapes in the hundreds) puts z = (after/λ)^k past the float range a
    little beyond its scale; there the draws are after · (1 + E/z)^{1/k}, with 1/z = e^{−log z} ≤ 1e-300."""
    draws = rng.exponential(1.0, size)
    log_z = law.shape * math.log(after_s / law.scale_s) if after_s > 0.0 else -math.inf
    if log_z < _LOG_Z_MAX:
        z = (after_s / law.scale_s) ** law.shape
        return np.asarray(law.scale_s * (z + draws) ** (1.0 / law.shape))
    return np.asarray(after_s * np.exp(np.log1p(draws * math.exp(-log_z)) / law.shape))


@dataclass(frozen=True)
class Durations:
    """An empirical law of durations: the Kaplan–Meier survival of the observed runs (right-censored runs
    count as at risk until they were cut), and past the longest run the fitted Weibull, conditioned on
    lasting that long. Observed runs of m ticks are taken to last m ticks, so that a timeline drawn from
    the law at the same tick reproduces the run lengths the trace showed."""

    times_s: np.ndarray
    events: np.ndarray
    censored: np.ndarray
    weibull: Weibull
    _surv: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        at_risk = np.cumsum((self.events + self.censored)[::-1])[::-1].astype(float)
        factor = 1.0 - np.divide(self.events, at_risk, out=np.zeros(self.times_s.size), where=at_risk > 0)
        object.__setattr__(self, "_surv", np.cumprod(factor))

    @classmethod
    def from_runs(cls, lower_s: np.ndarray, upper_s: np.ndarray, *, tick_s: float) -> Durations:
        """From interval-censored runs (runs_of): m ticks seen → m·tick; a cut run is censored there."""
        finite = np.isfinite(upper_s)
        value = np.where(finite, (lower_s + np.where(finite, upper_s, 0.0)) / 2.0, lower_s + tick_s)
        times, inverse = np.unique(np.round(value, 6), return_inverse=True)
        events = np.bincount(inverse, weights=finite.astype(float), minlength=times.size)
        censored = np.bincount(inverse, weights=(~finite).astype(float), minlength=times.size)
        return cls(times, events, censored, fit_weibull(lower_s, upper_s))

    @property
    def last_s(self) -> float:
        return float(self.times_s[-1])

    @property
    def tail_mass(self) -> float:
        """P(X > the longest run seen): what the Weibull tail carries."""
        return float(self._surv[-1])

    def sf(self, x_s: np.ndarray | float) -> np.ndarray:
        x = np.asarray(x_s, dtype=float)
        idx = np.searchsorted(self.times_s, x, side="right") - 1
        body = np.where(idx >= 0, self._surv[np.clip(idx, 0, None)], 1.0)
        ratio = self.weibull.sf(x) / max(float(self.weibull.sf(self.last_s)), 1e-300)
        return np.asarray(np.where(x > self.last_s, self.tail_mass * ratio, body))

    @property
    def mean_s(self) -> float:
        # ∫ S = Σ S(t_{i-1}) (t_i − t_{i−1}) over the body, then S(t_last) × E[X − t_last | X > t_last].
        prev = np.concatenate(([1.0], self._surv[:-1]))
        widths = np.diff(np.concatenate(([0.0], self.times_s)))
        return float(np.sum(prev * widths)) + self.tail_mass * residual_mean_s(self.weibull, self.last_s)

    def mean_within_s(self, x_s: np.ndarray | float) -> np.ndarray:
        """E[min(X, x)] = ∫₀ˣ P(X > t) dt: the body's steps up to x, then the Weibull tail conditioned on
        lasting past the longest run (as `sf` and `mean_s` read the law)."""
        x = np.maximum(np.asarray(x_s, dtype=float), 0.0)
        prev = np.concatenate(([1.0], self._surv))  # S on [t_{i-1}, t_i), t_0 = 0, then S(t_last)
        edges = np.concatenate(([0.0], self.times_s))
        below = np.concatenate(([0.0], np.cumsum(prev[:-1] * np.diff(edges))))  # ∫₀^{t_i} S
        idx = np.searchsorted(edges, np.minimum(x, self.last_s), side="right") - 1
        body = below[idx] + (np.minimum(x, self.last_s) - edges[idx]) * prev[idx]
        beyond = x > self.last_s
        if not np.any(beyond):
            return np.asarray(body)
        w = self.weibull
        z_last = (self.last_s / w.scale_s) ** w.shape
        if z_last < 700.0:
            # ∫_last^x S_w / S_w(last) = E_w (Q(1/k, z_last) − Q(1/k, z_x)) e^{z_last}, Q the regularised
            # upper incomplete gamma (differences of small Q keep their precision far into the tail).
            from scipy import special

            with np.errstate(over="ignore"):
                z = (x[beyond] / w.scale_s) ** w.shape
            upper = special.gammaincc(1.0 / w.shape, np.array([z_last, *z]))
            tail = w.mean_s * (upper[0] - upper[1:]) * math.exp(z_last)
        else:  # past the float range of e^{z_last}: the residual means (a far tail, hardly ever used)
            tail = np.array(
                [
                    residual_mean_s(w, self.last_s)
                    - math.exp(z_last - (v / w.scale_s) ** w.shape) * residual_mean_s(w, v)
                    for v in x[beyond]
                ]
            )
        out = np.array(body, dtype=float)
        out[beyond] = below[-1] + self.tail_mass * np.minimum(tail, residual_mean_s(w, self.last_s))
        return out

    @property
    def second_moment_s2(self) -> float:
        prev = np.concatenate(([1.0], self._surv[:-1]))
        mass = prev - self._surv
        body = float(np.sum(mass * self.times_s**2))
        return body + self.tail_mass * beyond_second_moment_s2(self.weibull, self.last_s)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        u = rng.random(size)
        cdf = 1.0 - self._surv
        idx = np.searchsorted(cdf, u, side="left")
        body = self.times_s[np.clip(idx, 0, self.times_s.size - 1)]
        tail = u > cdf[-1]
        if not np.any(tail):
            return np.asarray(body)
        out = np.array(body, dtype=float)
        out[tail] = _conditional_weibull(self.weibull, self.last_s, rng, int(np.sum(tail)))
        return out

    def sample_beyond(self, rng: np.random.Generator, after_s: float, size: int) -> np.ndarray:
        """Draws given the duration exceeds `after_s` (the body's longer runs, then the tail)."""
        if after_s >= self.last_s:
            return _conditional_weibull(self.weibull, max(after_s, self.last_s), rng, size)
        s_after = float(self.sf(after_s))
        u = rng.random(size) * s_after  # P(X > x) = u, uniform over (0, S(after))
        cdf_left = 1.0 - self._surv
        target = 1.0 - u
        idx = np.searchsorted(cdf_left, target, side="left")
        out = self.times_s[np.clip(idx, 0, self.times_s.size - 1)].astype(float)
        tail = target > cdf_left[-1]
        if np.any(tail):
            out[tail] = _conditional_weibull(self.weibull, self.last_s, rng, int(np.sum(tail)))
        return np.asarray(np.maximum(out, after_s))

    def sample_residual(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """What is left of a duration seen at a random instant (a length-biased draw, then a uniform point
        of it): the law of density S(t) / E[X], drawn by inverting its distribution ∫₀ᵗ S / E[X]
        (`mean_within_s`). Picking length-biased among a pool of 16 draws per sample, as this did before,
        put the mean left of a shipped law's gaps 13–33 % below E[X²] / (2 E[X]) for one draw at a time (the
        Monte Carlo's start wait): a pool of 16 rarely holds the long gaps the mean rests on."""
        target = rng.random(size) * self.mean_s
        prev = np.concatenate(([1.0], self._surv))
        edges = np.concatenate(([0.0], self.times_s))
        below = np.concatenate(([0.0], np.cumsum(prev[:-1] * np.diff(edges))))
        idx = np.clip(np.searchsorted(below, target, side="right") - 1, 0, edges.size - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(prev[idx] > 0, edges[idx] + (target - below[idx]) / prev[idx], edges[idx])
        tail = target > below[-1]
        if np.any(tail) and self.tail_mass > 0:
            out[tail] = self._tail_at(self.last_s, (target[tail] - below[-1]) / self.tail_mass)
        return np.asarray(out)

    def _tail_at(self, last_s: float, within_s: np.ndarray) -> np.ndarray:
        """The x past `last_s` where ∫_last^x S_w / S_w(last) = `within_s` (S_w the Weibull tail): the
        incomplete gamma inverted; far past the float range of 1 / S_w(last), last + within (rare)."""
        from scipy import special  # here: importing scipy costs ~0.5 s

        w = self.weibull
        z_last = (last_s / w.scale_s) ** w.shape
        if z_last >= 700.0:
            return np.asarray(last_s + within_s)
        # Q(1/k, z_x) = Q(1/k, z_last) − within · e^{−z_last} / E_w (as in mean_within_s), inverted.
        upper = float(special.gammaincc(1.0 / w.shape, z_last)) - within_s * math.exp(-z_last) / w.mean_s
        z = special.gammainccinv(1.0 / w.shape, np.clip(upper, 1e-300, 1.0))
        return np.asarray(np.maximum(w.scale_s * z ** (1.0 / w.shape), last_s))

    def scaled(self, factor: float) -> Durations:
        return Durations(self.times_s * factor, self.events, self.censored, self.weibull.scaled(factor))

    def to_dict(self) -> dict[str, Any]:
        return {
            "weibull": {"shape": self.weibull.shape, "scale_s": self.weibull.scale_s},
            "mean_s": self.mean_s,
            "runs": [
                [float(t), int(e), int(c)]
                for t, e, c in zip(self.times_s, self.events, self.censored, strict=True)
            ],
        }


def durations_from_dict(doc: Mapping[str, Any]) -> Durations:
    rows = np.asarray(doc["runs"], dtype=float).reshape(-1, 3)
    w = doc["weibull"]
    return Durations(rows[:, 0], rows[:, 1], rows[:, 2], Weibull(float(w["shape"]), float(w["scale_s"])))


@dataclass(frozen=True, slots=True)
class Runs:
    """Up and down runs of a fleet of n VMs over some segments: interval bounds in seconds."""

    up_lower_s: np.ndarray
    up_upper_s: np.ndarray
    down_lower_s: np.ndarray
    down_upper_s: np.ndarray
    up_ticks: int
    ticks: int
    observed_s: float
    starts: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    """Every run, cut or not, as rows (up 0/1, ticks, cut by the segment's end 0/1, how many): where a
    window can start (srift.spot.model.FleetLaw.timeline)."""

    @property
    def availability(self) -> float:
        return self.up_ticks / self.ticks if self.ticks else 0.0

    def exposure_mean_s(self, *, up: bool) -> float:
        """The time spent up (or down) over the number of up (down) runs that ended within a segment:
        renewal–reward's estimate of the mean run, whatever the law (module docstring). It counts every
        tick, those of the runs a segment opens with included, which the law's shape leaves out."""
        kind = self.starts[:, 0] > 0.5 if up else self.starts[:, 0] < 0.5
        ended = float(np.sum(self.starts[:, 3] * (kind & (self.starts[:, 2] < 0.5))))
        spent = self.up_ticks if up else self.ticks - self.up_ticks
        return spent * (self.observed_s / max(self.ticks, 1)) / max(ended, 1.0)


def runs_of(segments: Iterable[TraceBlock], nodes: int) -> Runs:
    """Every up and down run (≥ `nodes` available, or fewer) of the segments, as intervals (see module)."""
    ul: list[float] = []
    uu: list[float] = []
    dl: list[float] = []
    du: list[float] = []
    up_ticks = ticks = 0
    observed = 0.0
    every: dict[tuple[int, int, int], int] = {}
    for seg in segments:
        up = seg.counts >= nodes
        g = seg.gap_s
        ticks += up.size
        up_ticks += int(up.sum())
        observed += up.size * g
        change = np.flatnonzero(np.diff(up.astype(np.int8))) + 1
        bounds = np.concatenate(([0], change, [up.size]))
        for j in range(bounds.size - 1):
            a, b = int(bounds[j]), int(bounds[j + 1])
            key = (int(up[a]), b - a, int(b == up.size))
            every[key] = every.get(key, 0) + 1
            if a == 0:
                continue
            m = b - a
            lower = (m - 1) * g
            upper = math.inf if b == up.size else (m + 1) * g
            if up[a]:
                ul.append(lower)
                uu.append(upper)
            else:
                dl.append(lower)
                du.append(upper)
    starts = np.array([[*k, c] for k, c in sorted(every.items())], dtype=float).reshape(-1, 4)
    return Runs(np.array(ul), np.array(uu), np.array(dl), np.array(du), up_ticks, ticks, observed, starts)


def drop_sizes(segments: Iterable[TraceBlock]) -> dict[int, int]:
    """How many VMs went at once: the size of every decrease of the count, tick to tick, over the segments."""
    out: dict[int, int] = {}
    for seg in segments:
        d = -np.diff(seg.counts)
        for size in d[d > 0]:
            out[int(size)] = out.get(int(size), 0) + 1
    return dict(sorted(out.items()))


class DurationLaw(Protocol):
    """What the simulator and the policy need of a law of durations (Weibull, Durations)."""

    @property
    def mean_s(self) -> float: ...

    @property
    def second_moment_s2(self) -> float: ...

    def sf(self, x_s: np.ndarray | float) -> np.ndarray: ...

    def mean_within_s(self, x_s: np.ndarray | float) -> np.ndarray: ...

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray: ...

    def sample_residual(self, rng: np.random.Generator, size: int) -> np.ndarray: ...

    def sample_beyond(self, rng: np.random.Generator, after_s: float, size: int) -> np.ndarray: ...

    def scaled(self, factor: float) -> DurationLaw: ...

    def to_dict(self) -> dict[str, Any]: ...


def shape_of(law: DurationLaw) -> float:
    """The Weibull shape of a law (fitted to the runs for an empirical one)."""
    return law.weibull.shape if isinstance(law, Durations) else law.shape if isinstance(law, Weibull) else 1.0


def law_from_dict(doc: Mapping[str, Any], where: str) -> DurationLaw:
    """A law as to_dict wrote it: empirical runs (with their Weibull) or a Weibull alone."""
    try:
        if "runs" in doc:
            return durations_from_dict(doc)
        return Weibull(shape=float(doc["shape"]), scale_s=float(doc["scale_s"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{where} is not a law (runs with a Weibull, or shape and scale_s)",
            hint="regenerate the model file (srift traces fit)",
            field=where,
        ) from exc


class LawSource(StrEnum):
    """Where a fleet's law comes from."""

    FITTED = "fitted"
    SPARSE = "sparse"
    EXTRAPOLATED = "extrapolated"


@dataclass(frozen=True, slots=True)
class FleetLaw:
    """How spot capacity for `nodes` VMs of one type in one zone came and went over one trace's period.

    `period` names the trace (its source path): a zone's laws from different traces are kept apart, as
    different periods of the same market, and a prediction mixes them (module docstring)."""

    provider: str
    zone: str
    instance_type: str
    nodes: int
    period: str
    up: DurationLaw
    gap: DurationLaw
    availability: float
    up_runs: int
    gap_runs: int
    observed_s: float
    tick_s: float
    source: LawSource = LawSource.FITTED
    note: str = ""
    starts: np.ndarray | None = field(default=None, repr=False, compare=False)
    """The fitted period's runs (srift.spot.model.Runs.starts): windows start where the data's did."""

    @property
    def region(self) -> str:
        return region_of_zone(self.provider, self.zone)

    @property
    def model_availability(self) -> float:
        """The share of time the alternating up/down process spends up: E[up] / (E[up] + E[gap])."""
        return self.up.mean_s / (self.up.mean_s + self.gap.mean_s)

    @property
    def interruptions_per_s(self) -> float:
        """The long-run rate of the fleet's interruptions while it runs: 1 / E[up]."""
        return 1.0 / self.up.mean_s

    def describe(self) -> str:
        what = (
            f"{self.nodes}×{self.instance_type} in {self.provider}/{self.zone} ({self.period}): "
            "capacity lasts "
            f"{self.up.mean_s / 3600:.2f} h on average (Weibull shape {shape_of(self.up):.2f}), comes back "
            f"after {self.gap.mean_s / 3600:.2f} h (shape {shape_of(self.gap):.2f}); {self.up_runs} up and "
            f"{self.gap_runs} down runs over {self.observed_s / 86_400:.1f} days"
        )
        return what + (f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "up": self.up.to_dict(),
            "gap": self.gap.to_dict(),
            "availability": self.availability,
            "up_runs": self.up_runs,
            "gap_runs": self.gap_runs,
            "observed_days": self.observed_s / 86_400.0,
            "tick_s": self.tick_s,
            "source": self.source.value,
            "note": self.note,
            "starts": None if self.starts is None else self.starts.astype(int).tolist(),
        }

    def _start(self, rng: np.random.Generator, runs: int, tick_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Where each timeline starts: up or not, and how long that state still lasts.

        With the fitted period's runs: a random tick of the data (a run drawn in proportion to its length,
        a uniform tick of it), lasting what was left of its run there (a run the data cut lasts on, drawn
        from the law beyond what was seen). Without (an extrapolated fleet size): the alternating process
        seen at a random instant, up with probability E[up] / (E[up] + E[gap])."""
        if self.starts is None or self.starts.size == 0 or abs(tick_s - self.tick_s) > 1e-9:
            state = rng.random(runs) < self.model_availability
            rest = np.where(state, self.up.sample_residual(rng, runs), self.gap.sample_residual(rng, runs))
            return state, rest
        up, ticks, cut, count = self.starts.T
        pick = rng.choice(ticks.size, size=runs, p=ticks * count / np.sum(ticks * count))
        state = up[pick] > 0.5
        left = np.floor(rng.random(runs) * ticks[pick]) + 1.0  # ticks of the run from here on, 1..m
        rest = left * tick_s
        for i in np.flatnonzero(cut[pick] > 0.5):
            law = self.up if state[i] else self.gap
            seen = ticks[pick[i]] * tick_s
            rest[i] += float(law.sample_beyond(rng, seen, 1)[0]) - seen
        return state, rest

    def timeline(self, rng: np.random.Generator, *, runs: int, ticks: int, tick_s: float) -> np.ndarray:
        """`runs` synthetic availability timelines (bool, runs × ticks) from this law (see `_start`)."""
        state, rest = self._start(rng, runs, tick_s)
        return renewal_timelines(rng, self.up, self.gap, state, rest, ticks=ticks, tick_s=tick_s)


def renewal_timelines(
    rng: np.random.Generator,
    up: DurationLaw,
    gap: DurationLaw,
    state: np.ndarray,
    rest: np.ndarray,
    *,
    ticks: int,
    tick_s: float,
    up_factor: np.ndarray | None = None,
    gap_factor: np.ndarray | None = None,
) -> np.ndarray:
    """Availability timelines (bool, len(state) × ticks) of an alternating renewal process: each timeline
    starts in `state` (True: up) for `rest` seconds, then alternates runs drawn from `up` and `gap`, each
    timeline's draws scaled by its `up_factor`/`gap_factor` where given (the nowcast's conditioned laws).
    `state` and `rest` are updated in place."""
    n = state.size
    horizon = ticks * tick_s
    out = np.zeros((n, ticks), dtype=bool)
    t = np.zeros(n)
    # Ticks are looked at half a tick in, so that runs of whole ticks never end exactly on one.
    edges = (np.arange(ticks) + 0.5) * tick_s
    active = np.ones(n, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        end = t[idx] + rest[idx]
        lo = np.searchsorted(edges, t[idx], side="left")
        hi = np.searchsorted(edges, end, side="left")
        for r, a, b, s in zip(idx, lo, hi, state[idx], strict=True):
            if s and b > a:
                out[r, a:b] = True
        t[idx] = end
        state[idx] = ~state[idx]
        k = idx.size
        ups = up.sample(rng, k) if up_factor is None else up_factor[idx] * up.sample(rng, k)
        gaps = gap.sample(rng, k) if gap_factor is None else gap_factor[idx] * gap.sample(rng, k)
        rest[idx] = np.where(state[idx], ups, gaps)
        active[idx] = end < horizon
    return out


@dataclass(frozen=True, slots=True)
class Scaling:
    """How mean up and down times scale with the fleet size: mean_up(n) ∝ n^−beta, mean_gap(n) ∝ n^gamma."""

    beta: float
    gamma: float
    points: int
    drops: Mapping[int, int]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "beta": self.beta,
            "gamma": self.gamma,
            "points": self.points,
            "drops": {str(k): v for k, v in self.drops.items()},
            "note": self.note,
        }


NO_SCALING = Scaling(
    beta=1.0, gamma=0.0, points=0, drops={}, note="no multi-VM trace: VMs taken as independent"
)


def fit_scaling(laws: Sequence[FleetLaw], drops: Mapping[int, int]) -> Scaling:
    """β and γ by least squares on log mean vs log n, pooled over periods (each period's curve centred on
    its own mean: periods differ in level but share the exponent); NO_SCALING without multi-VM laws."""
    by_period: dict[str, list[FleetLaw]] = {}
    for law in laws:
        if law.source is LawSource.FITTED:
            by_period.setdefault(law.period, []).append(law)
    xs: list[np.ndarray] = []
    ups: list[np.ndarray] = []
    gaps: list[np.ndarray] = []
    for group in by_period.values():
        if len({law.nodes for law in group}) < 2:
            continue
        x = np.log([law.nodes for law in group])
        u = np.log([law.up.mean_s for law in group])
        g = np.log([law.gap.mean_s for law in group])
        xs.append(x - x.mean())
        ups.append(u - u.mean())
        gaps.append(g - g.mean())
    if not xs:
        return NO_SCALING
    x = np.concatenate(xs)
    denom = float(np.sum(x * x))
    if denom <= 0:
        return NO_SCALING
    beta = -float(np.sum(x * np.concatenate(ups))) / denom
    gamma = float(np.sum(x * np.concatenate(gaps))) / denom
    return Scaling(
        beta=beta,
        gamma=gamma,
        points=int(x.size),
        drops=dict(drops),
        note=f"least squares over {len(xs)} multi-VM trace(s), {x.size} fleet sizes",
    )


def _law(segs: Sequence[TraceBlock], nodes: int) -> FleetLaw:
    trace = segs[0].trace
    r = runs_of(segs, nodes)
    up: DurationLaw
    gap: DurationLaw
    if r.up_lower_s.size >= MIN_RUNS and r.down_lower_s.size >= MIN_RUNS:
        up = Durations.from_runs(r.up_lower_s, r.up_upper_s, tick_s=trace.gap_s)
        gap = Durations.from_runs(r.down_lower_s, r.down_upper_s, tick_s=trace.gap_s)
        up = up.scaled(r.exposure_mean_s(up=True) / up.mean_s)
        gap = gap.scaled(r.exposure_mean_s(up=False) / gap.mean_s)
        source, note = LawSource.FITTED, ""
    else:
        # Too few runs to fit a shape: exponential laws with the observed time over (changes + 1), so that
        # a trace that never saw capacity go (or come) still bounds the mean by the time it watched.
        up_s = r.up_ticks * trace.gap_s
        down_s = (r.ticks - r.up_ticks) * trace.gap_s
        up = Weibull(1.0, max(up_s, trace.gap_s) / (r.up_lower_s.size + 1))
        gap = Weibull(1.0, max(down_s, trace.gap_s) / (r.down_lower_s.size + 1))
        source = LawSource.SPARSE
        note = (
            f"only {r.up_lower_s.size} up and {r.down_lower_s.size} down runs: exponential laws, "
            "observed time over (runs + 1)"
        )
    return FleetLaw(
        provider=trace.provider,
        zone=trace.zone,
        instance_type=trace.instance_type,
        nodes=nodes,
        period=trace.name,
        up=up,
        gap=gap,
        availability=r.availability,
        up_runs=int(r.up_lower_s.size),
        gap_runs=int(r.down_lower_s.size),
        observed_s=r.observed_s,
        tick_s=trace.gap_s,
        source=source,
        note=note,
        starts=r.starts,
    )


def fit_laws(segments: Sequence[TraceBlock]) -> list[FleetLaw]:
    """One FleetLaw per trace (period) and fleet size n ≤ its node count, from the trace's segments."""
    by_trace: dict[str, list[TraceBlock]] = {}
    for seg in segments:
        by_trace.setdefault(seg.trace.name, []).append(seg)
    laws = []
    for _, segs in sorted(by_trace.items()):
        for n in range(1, segs[0].trace.node_count + 1):
            laws.append(_law(segs, n))
    return laws


@dataclass(frozen=True)
class TraceModel:
    """Fitted laws per trace period and fleet size, the fleet-size scaling, and their provenance."""

    laws: tuple[FleetLaw, ...]
    scaling: Scaling
    provenance: Mapping[str, Any] = field(default_factory=dict)
    _index: dict[tuple[str, str, str], dict[str, dict[int, FleetLaw]]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        index: dict[tuple[str, str, str], dict[str, dict[int, FleetLaw]]] = {}
        for law in self.laws:
            index.setdefault((law.provider, law.zone, law.instance_type), {}).setdefault(law.period, {})[
                law.nodes
            ] = law
        object.__setattr__(self, "_index", index)

    def offers(self) -> list[tuple[str, str, str]]:
        """Every (provider, zone, type) with a law."""
        return sorted(self._index)

    def zones(self, *, provider: str, region: str, instance_type: str) -> list[str]:
        """The zones of `region` with a law for the type, in name order."""
        return sorted(
            z
            for (p, z, t) in self._index
            if p == provider and t == instance_type and region_of_zone(p, z) == region
        )

    def covers(self, *, provider: str, region: str, instance_type: str) -> bool:
        return bool(self.zones(provider=provider, region=region, instance_type=instance_type))

    def periods(self, *, provider: str, zone: str, instance_type: str) -> list[str]:
        return sorted(self._index.get((provider, zone, instance_type), {}))

    def law(
        self, *, provider: str, zone: str, instance_type: str, nodes: int, period: str
    ) -> FleetLaw | None:
        """The period's law for `nodes` VMs: fitted when its trace covers that many, else extrapolated from
        its largest size with the scaling exponents (None: the period has no law for the zone and type)."""
        by_n = self._index.get((provider, zone, instance_type), {}).get(period)
        if not by_n:
            return None
        if nodes in by_n:
            return by_n[nodes]
        below = [n for n in by_n if n < nodes]
        base = by_n[max(below)] if below else by_n[min(by_n)]
        ratio = nodes / base.nodes
        up = base.up.scaled(ratio ** (-self.scaling.beta))
        gap = base.gap.scaled(ratio**self.scaling.gamma)
        return FleetLaw(
            provider=provider,
            zone=zone,
            instance_type=instance_type,
            nodes=nodes,
            period=period,
            up=up,
            gap=gap,
            availability=up.mean_s / (up.mean_s + gap.mean_s),
            up_runs=base.up_runs,
            gap_runs=base.gap_runs,
            observed_s=base.observed_s,
            tick_s=base.tick_s,
            source=LawSource.EXTRAPOLATED,
            note=(
                f"no trace of {nodes} VMs in this period: scaled from {base.nodes} VM(s) with "
                f"β={self.scaling.beta:.2f}, γ={self.scaling.gamma:.2f}"
            ),
        )

    def zone_laws(self, *, provider: str, zone: str, instance_type: str, nodes: int) -> list[FleetLaw]:
        """The zone's law for `nodes` VMs in every period it was traced."""
        out = []
        for period in self.periods(provider=provider, zone=zone, instance_type=instance_type):
            law = self.law(
                provider=provider, zone=zone, instance_type=instance_type, nodes=nodes, period=period
            )
            if law is not None:
                out.append(law)
        return out

    def region_laws(self, *, provider: str, region: str, instance_type: str, nodes: int) -> list[FleetLaw]:
        """Every (zone, period) law of the region for the type and fleet size."""
        return [
            law
            for z in self.zones(provider=provider, region=region, instance_type=instance_type)
            for law in self.zone_laws(provider=provider, zone=z, instance_type=instance_type, nodes=nodes)
        ]

    def to_document(self) -> dict[str, Any]:
        """The model as a JSON-ready document (MODEL_FORMAT): laws, scaling, provenance."""
        rows = []
        for (p, z, t), periods in sorted(self._index.items()):
            for period, by_n in sorted(periods.items()):
                rows.append(
                    {
                        "provider": p,
                        "zone": z,
                        "instance_type": t,
                        "period": period,
                        "fleets": [by_n[n].to_dict() for n in sorted(by_n)],
                    }
                )
        return {
            "format": MODEL_FORMAT,
            "provenance": dict(self.provenance),
            "scaling": self.scaling.to_dict(),
            "laws": rows,
        }


def fit_model(
    traces: Sequence[SpotTrace],
    *,
    half: Half,
    provenance: Mapping[str, Any] | None = None,
    block_s: float = SPLIT_BLOCK_S,
) -> TraceModel:
    """Fit every trace period and fleet size the traces' `half` covers (blocks of `block_s`), and the
    fleet-size scaling."""
    segments = [s for t in traces for s in split_blocks(t, half, block_s=block_s)]
    laws = fit_laws(segments)
    multi = [s for s in segments if s.trace.node_count > 1]
    scaling = fit_scaling(laws, drop_sizes(multi))
    return TraceModel(laws=tuple(laws), scaling=scaling, provenance=dict(provenance or {}))


def model_from_document(doc: Any, *, origin: str) -> TraceModel:
    """Read a MODEL_FORMAT document back; InvalidInput names the field at fault."""
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise InvalidInput(
            f"{origin} is not a {MODEL_FORMAT} document",
            hint="regenerate it with srift traces fit",
            field="format",
        )
    laws: list[FleetLaw] = []
    try:
        for i, row in enumerate(doc["laws"]):
            for j, f in enumerate(row["fleets"]):
                where = f"laws[{i}].fleets[{j}]"
                laws.append(
                    FleetLaw(
                        provider=str(row["provider"]),
                        zone=str(row["zone"]),
                        instance_type=str(row["instance_type"]),
                        nodes=int(f["nodes"]),
                        period=str(row["period"]),
                        up=law_from_dict(f["up"], f"{where}.up"),
                        gap=law_from_dict(f["gap"], f"{where}.gap"),
                        availability=float(f["availability"]),
                        up_runs=int(f["up_runs"]),
                        gap_runs=int(f["gap_runs"]),
                        observed_s=float(f["observed_days"]) * 86_400.0,
                        tick_s=float(f["tick_s"]),
                        source=LawSource(f.get("source", "fitted")),
                        note=str(f.get("note", "")),
                        starts=None
                        if f.get("starts") is None
                        else np.asarray(f["starts"], dtype=float).reshape(-1, 4),
                    )
                )
        s = doc["scaling"]
        scaling = Scaling(
            beta=float(s["beta"]),
            gamma=float(s["gamma"]),
            points=int(s["points"]),
            drops={int(k): int(v) for k, v in s.get("drops", {}).items()},
            note=str(s.get("note", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{origin}: {exc!s} is missing or malformed",
            hint="regenerate it with srift traces fit",
            field="laws",
        ) from exc
    return TraceModel(laws=tuple(laws), scaling=scaling, provenance=dict(doc.get("provenance") or {}))


def merged(base: TraceModel, extra: TraceModel) -> TraceModel:
    """`base` with `extra`'s laws in place of its own for every (provider, zone, type) `extra` covers."""
    covered = set(extra.offers())
    laws = tuple(law for law in base.laws if (law.provider, law.zone, law.instance_type) not in covered)
    scaling = extra.scaling if extra.scaling.points else base.scaling
    return TraceModel(
        laws=laws + extra.laws,
        scaling=scaling,
        provenance={**base.provenance, "extra": dict(extra.provenance)},
    )


def beyond_second_moment_s2(law: Weibull, age_s: float) -> float:
    """E[X² | X > a] for a Weibull X: a² + 2 ∫_a^∞ x S(x) dx / S(a) = a² + λ² Γ(1 + 2/k) Q(2/k, z) e^z,
    z = (a/λ)^k. Exact: the 4096 seeded draws it replaced put E[X²] / (2 E[X]) of a shipped law's gaps
    (the mean wait for capacity at a random instant) up to 9 % high. Past the float range of e^z, a² plus
    twice a times the residual mean (the tail's asymptote)."""
    from scipy import special  # here: importing scipy costs ~0.5 s

    k, lam = law.shape, law.scale_s
    a = max(age_s, 0.0)
    log_z = k * math.log(a / lam) if a > 0.0 else -math.inf
    if log_z < math.log(600.0):
        z = (a / lam) ** k
        upper = float(special.gammaincc(2.0 / k, z))
        return a * a + lam * lam * math.gamma(1.0 + 2.0 / k) * upper * math.exp(z)
    return a * a + 2.0 * a * residual_mean_s(law, a)


def residual_mean_s(law: Weibull, age_s: float) -> float:
    """E[X − a | X > a] for a Weibull X: how much longer a run that has lasted `age_s` is expected to last."""
    from scipy import special  # here: importing scipy costs ~0.5 s

    k, lam = law.shape, law.scale_s
    # z = (a/λ)^k: a steep law (a clockwork log fits shapes in the hundreds) puts it past the float range a
    # little beyond its scale, so it is checked in logs first; there the asymptote is taken in logs too.
    log_z = k * math.log(age_s / lam) if age_s > 0.0 else -math.inf
    if log_z >= _LOG_Z_MAX:
        return lam / k * math.exp((1.0 / k - 1.0) * log_z)
    z = (max(age_s, 0.0) / lam) ** k
    # ∫_a^∞ S(x) dx / S(a) = λ Γ(1+1/k) Q(1/k, z) e^{z}  (regularised upper incomplete gamma Q)
    tail = lam * math.gamma(1.0 + 1.0 / k) * float(special.gammaincc(1.0 / k, z))
    return tail * math.exp(z) if z < 700 else lam / k * z ** (1.0 / k - 1.0)
