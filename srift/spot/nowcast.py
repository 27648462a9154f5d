"""A nowcast: the fitted law of a fleet conditioned on what a user knows when the run starts.

The fitted law (srift.spot.model.FleetLaw) is one stationary law per trace period. The market moves within a
period (docs/BENCHMARKS.md "spot on real traces": one trace's fleet was available 0.51 of the time in its
even 2-day blocks and 0.87 in its odd ones), so one stationary law fitted on some days cannot give the mean
cost of runs started on other days. A user planning a run knows the market's recent past (their own
launch/interruption log, `srift traces import`; or the cloud's recent interruption frequency): this module
turns that past into a law for the run about to start, never using anything after its start.

- Recent past (`Recent`): over the look-back of `lookback_s` before the start, the time the fleet's capacity
  was up and down, how many up runs and down runs ended, the state just before the start and how long it
  had lasted (its age, at most the look-back).
- Rescaled law (`posterior_factors`): the fitted law's mean up time U and mean gap G are each updated as a
  Gamma–Poisson rate: the rate 1/U of up runs ending has the prior Gamma(a, a·U) (mean 1/U, `a` pseudo
  runs) and the look-back adds k ended runs over T seconds up, so the posterior mean run is
  (a·U + T) / (a + k) (renewal–reward's estimate of a mean run, as the fitted law's own scale,
  srift.spot.model.Runs.exposure_mean_s, with the fitted law as prior data). The law's shape is kept; its
  durations are scaled by the posterior over the prior mean.
- State at start (`nowcast_timelines`): the run starts in the state seen just before it, which lasts on
  from its age (the scaled law conditioned on lasting that long); without any look-back the start is the
  scaled law's stationary state.

The constants are chosen on the fit half only (`choose_nowcast`): the prior strengths a (up, gap) by empirical
Bayes — the Gamma–Poisson marginal likelihood (negative binomial) of the counts in the fit half's
consecutive look-back pieces, so that the prior is as wide as the fit half's own variation between pieces —
and the look-back by cross-validation in the fit half: of LOOKBACK_CANDIDATES_S, the one whose nowcast of the
availability over the job's horizon (E[up′] / (E[up′] + E[gap′])) is closest in mean square to the
availability the fit half then showed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srift.errors import InvalidInput
from srift.spot.model import FleetLaw, Half, TraceBlock, TraceModel, split_blocks
from srift.spot.traces import SpotTrace

LOOKBACK_CANDIDATES_S = tuple(h * 3600.0 for h in (1, 2, 4, 8, 16, 32, 64))
"""The look-backs cross-validation chooses from (a grid of powers of two, 1 h to 64 h: a choice; the one
used is chosen on the fit half, `choose_nowcast`)."""
PRIOR_RUNS_BOUNDS = (1e-2, 1e4)
"""Where empirical Bayes looks for the prior strength (pseudo runs): from a prior worth almost nothing to one
that outweighs any look-back."""
CV_STRIDE_S = 1800.0
"""Cross-validation nowcasts from a start every 30 minutes of the fit half (the replay's stride)."""


@dataclass(frozen=True, slots=True)
class Nowcast:
    """How the recent past conditions a law: the look-back and the prior strengths (pseudo runs) of the
    fitted law's mean up time and mean gap, and how they were chosen."""

    lookback_s: float
    up_prior_runs: float
    gap_prior_runs: float
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("lookback_s", "up_prior_runs", "gap_prior_runs"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(
                    f"nowcast {name} {value} is not a positive number",
                    hint=f"give {name} > 0 (or choose it with srift.spot.nowcast.choose_nowcast)",
                    field=name,
                )

    def describe(self) -> str:
        return (
            f"look-back {self.lookback_s / 3600:g} h; the fitted law weighs as {self.up_prior_runs:.3g} up "
            f"runs and {self.gap_prior_runs:.3g} gaps" + (f" ({self.note})" if self.note else "")
        )


@dataclass(frozen=True, slots=True)
class Recent:
    """The recent past at each of several start instants (arrays, one entry per start): seconds up and down
    and runs of each kind that ended within the look-back; whether the fleet was up just before the start
    (`known`: False where there was no look-back at all) and how long that state had lasted (its age, at
    most the look-back)."""

    up_s: np.ndarray
    down_s: np.ndarray
    up_ended: np.ndarray
    down_ended: np.ndarray
    state_up: np.ndarray
    age_s: np.ndarray
    known: np.ndarray

    @property
    def size(self) -> int:
        return int(self.up_s.size)

    def repeat(self, times: int) -> Recent:
        return Recent(*(np.repeat(getattr(self, f), times) for f in Recent.__slots__))


def recent_past(
    up: np.ndarray, starts: np.ndarray, *, lookback_s: float, tick_s: float, floor: np.ndarray | None = None
) -> Recent:
    """What the look-back before each start (a tick index of `up`, bool per tick: the fleet could run) shows.
    `floor`: per start, the first tick the look-back may use (default 0, the series' start)."""
    up = np.asarray(up, dtype=bool)
    starts = np.asarray(starts, dtype=np.int64)
    span = max(1, round(lookback_s / tick_s))
    lo = np.maximum(starts - span, 0 if floor is None else np.asarray(floor, dtype=np.int64))
    lo = np.minimum(lo, starts)
    cs_up = np.concatenate(([0], np.cumsum(up)))
    fall = np.zeros(up.size, dtype=np.int64)  # fall[i]: up at i−1, down at i (an up run ended at i)
    rise = np.zeros(up.size, dtype=np.int64)
    fall[1:] = up[:-1] & ~up[1:]
    rise[1:] = ~up[:-1] & up[1:]
    cs_fall = np.concatenate(([0], np.cumsum(fall)))
    cs_rise = np.concatenate(([0], np.cumsum(rise)))
    up_ticks = cs_up[starts] - cs_up[lo]
    # A change at i is seen when ticks i−1 and i both lie in [lo, start): i in [lo + 1, start).
    a = np.minimum(lo + 1, starts)
    up_ended = cs_fall[starts] - cs_fall[a]
    down_ended = cs_rise[starts] - cs_rise[a]
    known = starts > lo
    last = np.clip(starts - 1, 0, max(up.size - 1, 0))
    state = up[last] & known if up.size else np.zeros(starts.size, dtype=bool)
    # Age: ticks since the last change at or before start−1, within the look-back.
    change = np.zeros(up.size, dtype=bool)
    change[1:] = up[1:] != up[:-1]
    change[0] = True
    run_start = np.maximum.accumulate(np.where(change, np.arange(up.size), 0)) if up.size else change
    age_ticks = np.where(known, starts - np.maximum(run_start[last] if up.size else 0, lo), 0)
    return Recent(
        up_s=up_ticks * tick_s,
        down_s=(starts - lo - up_ticks) * tick_s,
        up_ended=up_ended.astype(float),
        down_ended=down_ended.astype(float),
        state_up=np.asarray(state, dtype=bool),
        age_s=age_ticks * tick_s,
        known=known,
    )


def posterior_factors(law: FleetLaw, recent: Recent, nowcast: Nowcast) -> tuple[np.ndarray, np.ndarray]:
    """Per start, the factors on the law's up and gap durations: the posterior mean run over the fitted one
    (module docstring)."""
    u, g = law.up.mean_s, law.gap.mean_s
    a, b = nowcast.up_prior_runs, nowcast.gap_prior_runs
    up_mean = (a * u + recent.up_s) / (a + recent.up_ended)
    gap_mean = (b * g + recent.down_s) / (b + recent.down_ended)
    return up_mean / u, gap_mean / g


def nowcast_availability(law: FleetLaw, recent: Recent, nowcast: Nowcast) -> np.ndarray:
    """The conditioned law's long-run availability, E[up′] / (E[up′] + E[gap′]), per start."""
    fu, fg = posterior_factors(law, recent, nowcast)
    up, gap = fu * law.up.mean_s, fg * law.gap.mean_s
    return np.asarray(up / (up + gap))


def nowcast_timelines(
    law: FleetLaw, rng: np.random.Generator, recent: Recent, nowcast: Nowcast, *, ticks: int, tick_s: float
) -> np.ndarray:
    """One synthetic availability timeline (bool, starts × ticks) per start, from the law conditioned on that
    start's recent past: durations scaled by `posterior_factors`, the first run the state seen just before
    the start lasting on from its age."""
    n = recent.size
    fu, fg = posterior_factors(law, recent, nowcast)
    state = np.array(recent.state_up, dtype=bool)
    rest = np.zeros(n)
    for i in range(n):
        f, dist = (fu[i], law.up) if state[i] else (fg[i], law.gap)
        if recent.known[i]:
            age = float(recent.age_s[i])
            rest[i] = f * float(dist.sample_beyond(rng, age / f, 1)[0]) - age
        else:
            avail = fu[i] * law.up.mean_s / (fu[i] * law.up.mean_s + fg[i] * law.gap.mean_s)
            state[i] = rng.random() < avail
            f, dist = (fu[i], law.up) if state[i] else (fg[i], law.gap)
            rest[i] = f * float(dist.sample_residual(rng, 1)[0])
    rest = np.maximum(rest, 0.0)
    horizon = ticks * tick_s
    out = np.zeros((n, ticks), dtype=bool)
    t = np.zeros(n)
    edges = (np.arange(ticks) + 0.5) * tick_s  # as FleetLaw.timeline: ticks looked at half a tick in
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
        rest[idx] = np.where(state[idx], fu[idx] * law.up.sample(rng, k), fg[idx] * law.gap.sample(rng, k))
        active[idx] = end < horizon
    return out


def _law_series(model: TraceModel, segments: Sequence[TraceBlock]) -> list[tuple[FleetLaw, list[np.ndarray]]]:
    """Every fitted law of the model with the fit segments' up series for its fleet size."""
    by_trace: dict[str, list[TraceBlock]] = {}
    for seg in segments:
        by_trace.setdefault(seg.trace.name, []).append(seg)
    out = []
    for law in model.laws:
        segs = by_trace.get(law.period, [])
        if not segs or law.nodes > segs[0].trace.node_count or law.zone != segs[0].trace.zone:
            continue
        out.append((law, [s.counts >= law.nodes for s in segs]))
    return out


def _nb_loglik(prior_runs: float, mean_s: float, ended: np.ndarray, exposed_s: np.ndarray) -> float:
    """log P(ended | exposed) under rate ~ Gamma(a, a·mean), ended ~ Poisson(rate · exposed): negative
    binomial (the Gamma–Poisson marginal), without the terms free of a."""
    from scipy import special  # type: ignore[import-untyped]  # here: importing scipy costs ~0.5 s

    a, b = prior_runs, prior_runs * mean_s
    return float(
        np.sum(
            special.gammaln(a + ended)
            - special.gammaln(a)
            + a * np.log(b / (b + exposed_s))
            + ended * np.log(np.where(exposed_s > 0, exposed_s / (b + exposed_s), 1.0))
        )
    )


def prior_strengths(
    model: TraceModel, segments: Sequence[TraceBlock], *, lookback_s: float
) -> tuple[float, float]:
    """Empirical Bayes: the prior strengths (up, gap) that maximise the marginal likelihood of the runs
    ended in consecutive look-back pieces of the segments (each trace weighing alike, its fleet sizes
    sharing its weight)."""
    from scipy import optimize

    pieces: list[tuple[float, float, float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for law, series in _law_series(model, segments):
        recents = []
        for up in series:
            span = max(1, round(lookback_s / law.tick_s))
            ends = np.arange(span, up.size + 1, span)
            if ends.size == 0:
                continue
            recents.append(recent_past(up, ends, lookback_s=lookback_s, tick_s=law.tick_s, floor=ends - span))
        if not recents:
            continue
        pieces.append(
            (
                law.up.mean_s,
                law.gap.mean_s,
                1.0 / _trace_size(model, law),
                np.concatenate([r.up_ended for r in recents]),
                np.concatenate([r.up_s for r in recents]),
                np.concatenate([r.down_ended for r in recents]),
                np.concatenate([r.down_s for r in recents]),
            )
        )
    if not pieces:
        return PRIOR_RUNS_BOUNDS[1], PRIOR_RUNS_BOUNDS[1]
    lo, hi = (math.log(x) for x in PRIOR_RUNS_BOUNDS)

    def best(up: bool) -> float:
        def nll(log_a: float) -> float:
            a = math.exp(log_a)
            return -sum(
                w * _nb_loglik(a, mu if up else mg, ku if up else kg, tu if up else tg)
                for mu, mg, w, ku, tu, kg, tg in pieces
            )

        res = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
        return float(math.exp(float(res.x)))

    return best(True), best(False)


def _trace_size(model: TraceModel, law: FleetLaw) -> int:
    """How many fleet sizes the law's period has in the model (its trace's VMs)."""
    return sum(1 for other in model.laws if other.period == law.period and other.zone == law.zone)


def cross_validated_error(
    model: TraceModel, segments: Sequence[TraceBlock], nowcast: Nowcast, *, horizon_s: float
) -> float:
    """The mean square gap between the nowcast availability and the availability over the next `horizon_s`,
    from a start every CV_STRIDE_S within each segment (the look-back cut at the segment's start, the
    horizon whole within it); each trace weighs alike."""
    total = weight = 0.0
    for law, series in _law_series(model, segments):
        span = max(1, round(horizon_s / law.tick_s))
        stride = max(1, round(CV_STRIDE_S / law.tick_s))
        errs = []
        for up in series:
            starts = np.arange(1, up.size - span + 1, stride)
            if starts.size == 0:
                continue
            rec = recent_past(
                up, starts, lookback_s=nowcast.lookback_s, tick_s=law.tick_s, floor=np.zeros_like(starts)
            )
            pred = nowcast_availability(law, rec, nowcast)
            cs = np.concatenate(([0], np.cumsum(up)))
            seen = (cs[starts + span] - cs[starts]) / span
            errs.append((pred - seen) ** 2)
        if errs:
            w = 1.0 / _trace_size(model, law)
            total += w * float(np.mean(np.concatenate(errs)))
            weight += w
    return total / weight if weight else math.inf


def choose_nowcast(
    model: TraceModel,
    traces: Sequence[SpotTrace],
    *,
    half: Half,
    block_s: float,
    horizon_s: float,
    candidates_s: Sequence[float] = LOOKBACK_CANDIDATES_S,
) -> Nowcast:
    """The nowcast's constants from the `half` the model was fitted on, and nothing else (module docstring):
    per candidate look-back the empirical-Bayes prior strengths, then the look-back with the least
    cross-validated error over `horizon_s`."""
    segments = [s for t in traces for s in split_blocks(t, half, block_s=block_s)]
    best: tuple[float, Nowcast] | None = None
    for lookback in candidates_s:
        a_up, a_gap = prior_strengths(model, segments, lookback_s=lookback)
        trial = Nowcast(lookback, a_up, a_gap)
        err = cross_validated_error(model, segments, trial, horizon_s=horizon_s)
        if best is None or err < best[0]:
            best = (err, trial)
    if best is None:
        raise InvalidInput(
            "no look-back candidate to choose from",
            hint="pass at least one candidate look-back in seconds",
            field="candidates_s",
        )
    err, chosen = best
    return Nowcast(
        chosen.lookback_s,
        chosen.up_prior_runs,
        chosen.gap_prior_runs,
        note=(
            f"chosen on the fitted blocks only ({half.value}): prior strengths by empirical Bayes, "
            f"look-back by cross-validation over a {horizon_s / 3600:.1f} h horizon "
            f"(RMS error {math.sqrt(err):.3f})"
        ),
    )
