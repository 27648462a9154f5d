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

Two options, not the default (measured in docs/BENCHMARKS.md's terms on 2026-12-06, see `choose_two_stage`
and `Nowcast.draw_rates`): a two-stage nowcast, the fitted law updated by a long look-back (days: the
market's level) and that by the short one (hours: the state), its constants chosen with each fit block left
out of the law; and drawing each timeline's rates from the posterior instead of taking their mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from srift.errors import InvalidInput
from srift.spot.model import FleetLaw, Half, TraceBlock, TraceModel, renewal_timelines, split_blocks
from srift.spot.traces import SpotTrace

_Item = TypeVar("_Item")

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
    long_lookback_s: float = 0.0
    long_up_prior_runs: float = 0.0
    long_gap_prior_runs: float = 0.0
    draw_rates: bool = False

    def __post_init__(self) -> None:
        names = ["lookback_s", "up_prior_runs", "gap_prior_runs"]
        if self.long_lookback_s != 0.0:
            names += ["long_lookback_s", "long_up_prior_runs", "long_gap_prior_runs"]
        for name in names:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(
                    f"nowcast {name} {value} is not a positive number",
                    hint=f"give {name} > 0 (or choose it with srift.spot.nowcast.choose_nowcast)",
                    field=name,
                )
        if self.long_lookback_s != 0.0 and self.long_lookback_s <= self.lookback_s:
            raise InvalidInput(
                f"nowcast long look-back {self.long_lookback_s} s is not longer than its short look-back "
                f"{self.lookback_s} s",
                hint="give long_lookback_s > lookback_s (or 0 for one stage)",
                field="long_lookback_s",
            )

    @property
    def two_stage(self) -> bool:
        """Whether the law is first updated by a long look-back (the market's level) before the short one."""
        return self.long_lookback_s > 0

    def describe(self) -> str:
        long = (
            f"long look-back {self.long_lookback_s / 3600:g} h (the fitted law weighs as "
            f"{self.long_up_prior_runs:.3g} up runs and {self.long_gap_prior_runs:.3g} gaps), then "
            if self.two_stage
            else ""
        )
        weighs = "that" if self.two_stage else "the fitted law"
        drawn = "; each timeline's rates drawn from their posterior" if self.draw_rates else ""
        return (
            f"{long}look-back {self.lookback_s / 3600:g} h; {weighs} weighs as {self.up_prior_runs:.3g} up "
            f"runs and {self.gap_prior_runs:.3g} gaps{drawn}" + (f" ({self.note})" if self.note else "")
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
    change[:1] = True  # (an empty series, no past at all, has no first tick)
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


def look_back(
    up: np.ndarray, starts: np.ndarray, nowcast: Nowcast, *, tick_s: float, floor: np.ndarray | None = None
) -> tuple[Recent, Recent | None]:
    """The nowcast's look-backs before each start: the short one, [start − lookback, start), and for a
    two-stage nowcast the long one before it, [start − long_lookback, start − lookback) (disjoint, so no
    tick counts twice); both cut at `floor`."""
    starts = np.asarray(starts, dtype=np.int64)
    short = recent_past(up, starts, lookback_s=nowcast.lookback_s, tick_s=tick_s, floor=floor)
    if not nowcast.two_stage:
        return short, None
    base = np.zeros_like(starts) if floor is None else np.asarray(floor, dtype=np.int64)
    end = np.maximum(starts - max(1, round(nowcast.lookback_s / tick_s)), base)
    long = recent_past(
        up, end, lookback_s=nowcast.long_lookback_s - nowcast.lookback_s, tick_s=tick_s, floor=base
    )
    return short, long


def posterior_factors(
    law: FleetLaw,
    recent: Recent,
    nowcast: Nowcast,
    *,
    long: Recent | None = None,
    prior: tuple[np.ndarray | float, np.ndarray | float] = (1.0, 1.0),
) -> tuple[np.ndarray, np.ndarray]:
    """Per start, the factors on the law's up and gap durations: the posterior mean run over the fitted one
    (module docstring). Two-stage (`long`, the long look-back, given): the fitted law updated by the long
    look-back is the prior the short look-back updates. `prior`: factors on the fitted law's means before
    any update (1: the law itself; the chooser's leave-one-block-out means, `choose_two_stage`)."""
    u, g = law.up.mean_s, law.gap.mean_s
    up_mean, gap_mean = u * np.asarray(prior[0]), g * np.asarray(prior[1])
    if long is not None and nowcast.two_stage:
        la, lb = nowcast.long_up_prior_runs, nowcast.long_gap_prior_runs
        up_mean = (la * up_mean + long.up_s) / (la + long.up_ended)
        gap_mean = (lb * gap_mean + long.down_s) / (lb + long.down_ended)
    a, b = nowcast.up_prior_runs, nowcast.gap_prior_runs
    up_mean = (a * up_mean + recent.up_s) / (a + recent.up_ended)
    gap_mean = (b * gap_mean + recent.down_s) / (b + recent.down_ended)
    return up_mean / u, gap_mean / g


def nowcast_availability(law: FleetLaw, factors: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The conditioned law's long-run availability, E[up′] / (E[up′] + E[gap′]), per start, from the
    factors on its up and gap means (`posterior_factors`)."""
    up, gap = factors[0] * law.up.mean_s, factors[1] * law.gap.mean_s
    return np.asarray(up / (up + gap))


def nowcast_timelines(
    law: FleetLaw,
    rng: np.random.Generator,
    recent: Recent,
    nowcast: Nowcast,
    *,
    ticks: int,
    tick_s: float,
    long: Recent | None = None,
) -> np.ndarray:
    """One synthetic availability timeline (bool, starts × ticks) per start, from the law conditioned on that
    start's recent past: durations scaled by `posterior_factors`, the first run the state seen just before
    the start lasting on from its age. With `nowcast.draw_rates`, each timeline's rates are drawn from their
    Gamma posterior (shape: prior runs + runs ended; mean: the posterior mean rate) instead of taken at
    their mean: the mean cost is not linear in the rates, so the plug-in rate's cost is not the posterior's
    expected cost."""
    n = recent.size
    fu, fg = posterior_factors(law, recent, nowcast, long=long)
    if nowcast.draw_rates:
        shape_u = nowcast.up_prior_runs + recent.up_ended
        shape_g = nowcast.gap_prior_runs + recent.down_ended
        fu = fu / np.maximum(rng.gamma(shape_u) / shape_u, 1e-12)
        fg = fg / np.maximum(rng.gamma(shape_g) / shape_g, 1e-12)
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
    return renewal_timelines(
        rng, law.up, law.gap, state, rest, ticks=ticks, tick_s=tick_s, up_factor=fu, gap_factor=fg
    )


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


def _nb_loglik(
    prior_runs: float, mean_s: float | np.ndarray, ended: np.ndarray, exposed_s: np.ndarray
) -> float:
    """log P(ended | exposed) under rate ~ Gamma(a, a·mean), ended ~ Poisson(rate · exposed): negative
    binomial (the Gamma–Poisson marginal), without the terms free of a (`mean_s`: one for every piece, or
    one per piece)."""
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


def _availability_ahead(up: np.ndarray, starts: np.ndarray, span: int) -> np.ndarray:
    """The share of the `span` ticks from each of `starts` that `up` is up: what a nowcast of the availability
    over the job's horizon is scored against in the cross-validations."""
    cs = np.concatenate(([0], np.cumsum(up)))
    return np.asarray((cs[starts + span] - cs[starts]) / span)


def _mean_square_gap(
    groups: Iterable[tuple[FleetLaw, float, Sequence[_Item]]],
    *,
    up_of: Callable[[_Item], np.ndarray],
    predict: Callable[[FleetLaw, _Item, np.ndarray], np.ndarray],
    horizon_s: float,
) -> float:
    """What both cross-validations score: per (law, weight, items) group, the mean square gap between
    `predict`'s availability and the availability over the next `horizon_s` (`_availability_ahead`), from a
    start every CV_STRIDE_S within each item's up series (`up_of`, the horizon whole within it); the groups'
    means averaged with their weights (inf when no item has a start)."""
    total = weight = 0.0
    for law, w, items in groups:
        span = max(1, round(horizon_s / law.tick_s))
        stride = max(1, round(CV_STRIDE_S / law.tick_s))
        errs = []
        for item in items:
            up = up_of(item)
            starts = np.arange(1, up.size - span + 1, stride)
            if starts.size == 0:
                continue
            errs.append((predict(law, item, starts) - _availability_ahead(up, starts, span)) ** 2)
        if errs:
            total += w * float(np.mean(np.concatenate(errs)))
            weight += w
    return total / weight if weight else math.inf


def cross_validated_error(
    model: TraceModel, segments: Sequence[TraceBlock], nowcast: Nowcast, *, horizon_s: float
) -> float:
    """The mean square gap between the nowcast availability and the availability over the next `horizon_s`,
    from a start every CV_STRIDE_S within each segment (the look-back cut at the segment's start, the
    horizon whole within it); each trace weighs alike."""

    def predict(law: FleetLaw, up: np.ndarray, starts: np.ndarray) -> np.ndarray:
        rec = recent_past(
            up, starts, lookback_s=nowcast.lookback_s, tick_s=law.tick_s, floor=np.zeros_like(starts)
        )
        return nowcast_availability(law, posterior_factors(law, rec, nowcast))

    groups = [(law, 1.0 / _trace_size(model, law), series) for law, series in _law_series(model, segments)]
    return _mean_square_gap(groups, up_of=lambda up: up, predict=predict, horizon_s=horizon_s)


def _least_error(
    trials: Sequence[tuple[float, Nowcast]], *, none: str, hint: str, field: str
) -> tuple[float, Nowcast]:
    """The (error, nowcast) trial with the least cross-validated error, the first of equals: how both
    choosers pick their constants. InvalidInput (`none`, naming `field`) when there is no trial to pick."""
    best = min(trials, key=lambda trial: trial[0], default=None)
    if best is None:
        raise InvalidInput(none, hint=hint, field=field)
    return best


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
    trials: list[tuple[float, Nowcast]] = []
    for lookback in candidates_s:
        a_up, a_gap = prior_strengths(model, segments, lookback_s=lookback)
        trial = Nowcast(lookback, a_up, a_gap)
        trials.append((cross_validated_error(model, segments, trial, horizon_s=horizon_s), trial))
    err, chosen = _least_error(
        trials,
        none="no look-back candidate to choose from",
        hint="pass at least one candidate look-back in seconds",
        field="candidates_s",
    )
    return replace(
        chosen,
        note=(
            f"chosen on the fitted blocks only ({half.value}): prior strengths by empirical Bayes, "
            f"look-back by cross-validation over a {horizon_s / 3600:.1f} h horizon "
            f"(RMS error {math.sqrt(err):.3f})"
        ),
    )


LONG_LOOKBACK_CANDIDATES_S = tuple(h * 3600.0 for h in (16, 32, 64, 128))
"""The two-stage nowcast's long look-backs (the market's level over days; the single-stage grid's powers of
two continued past its end, 64 h, to 128 h), chosen by cross-validation on the fit half with the short one."""
SHORT_LOOKBACK_CANDIDATES_S = tuple(h * 3600.0 for h in (1, 2, 4, 8))
"""The two-stage nowcast's short look-backs (the current state over hours; the single-stage grid's first
four)."""


@dataclass(frozen=True, slots=True)
class _Held:
    """One fit segment of a law's fleet: its up series and the leave-one-block-out factors on the law's
    mean up time and mean gap (the same trace's other fit segments' renewal–reward means over all of its
    fit segments')."""

    up: np.ndarray
    up_factor: float
    gap_factor: float


def _held_out(model: TraceModel, segments: Sequence[TraceBlock]) -> list[tuple[FleetLaw, float, list[_Held]]]:
    """Per law: its weight (each trace alike) and its fit segments with their leave-one-block-out prior
    factors. In the fit half the fitted law has seen every segment it is checked on; a window on the check
    half is on days it has not seen, so the chooser's prior for a segment is the law as the other segments
    alone would put it (a trace with one segment keeps the law: factor 1)."""
    out = []
    for law, series in _law_series(model, segments):
        tick = law.tick_s
        whole = [
            recent_past(up, np.array([up.size]), lookback_s=up.size * tick, tick_s=tick) for up in series
        ]
        tu = np.array([float(r.up_s[0]) for r in whole])
        ku = np.array([float(r.up_ended[0]) for r in whole])
        tg = np.array([float(r.down_s[0]) for r in whole])
        kg = np.array([float(r.down_ended[0]) for r in whole])
        held = []
        for i, up in enumerate(series):
            fu = fg = 1.0
            if len(series) > 1:
                ou, og = tu.sum() - tu[i], tg.sum() - tg[i]
                oku, okg = ku.sum() - ku[i], kg.sum() - kg[i]
                if ou > 0 and oku > 0 and tu.sum() > 0 and ku.sum() > 0:
                    fu = (ou / oku) / (tu.sum() / ku.sum())
                if og > 0 and okg > 0 and tg.sum() > 0 and kg.sum() > 0:
                    fg = (og / okg) / (tg.sum() / kg.sum())
            held.append(_Held(up, fu, fg))
        out.append((law, 1.0 / _trace_size(model, law), held))
    return out


def _eb_strength(
    pieces: Sequence[tuple[float, np.ndarray, np.ndarray, np.ndarray]],
) -> float:
    """Empirical Bayes: the prior strength maximising the weighed negative-binomial marginal likelihood of
    pieces (weight, prior mean per piece, ended runs per piece, exposure per piece)."""
    from scipy import optimize

    if not pieces:
        return PRIOR_RUNS_BOUNDS[1]
    lo, hi = (math.log(x) for x in PRIOR_RUNS_BOUNDS)

    def nll(log_a: float) -> float:
        a = math.exp(log_a)
        return -sum(w * _nb_loglik(a, mean, k, t) for w, mean, k, t in pieces)

    res = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    return float(math.exp(float(res.x)))


def _stage_strengths(
    held: Sequence[tuple[FleetLaw, float, list[_Held]]],
    trial: Nowcast,
    *,
    stage_lookback_s: float,
    long: bool,
) -> tuple[float, float]:
    """The prior strengths (up, gap) of one stage by empirical Bayes over consecutive pieces of the stage's
    look-back in each segment. Long stage (`long`): the prior is the leave-one-block-out law. Short stage:
    the prior of a piece is the leave-one-block-out law updated by the long look-back before that piece
    (with `trial`'s long-stage strengths)."""
    up_pieces: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    gap_pieces: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    for law, w, segs in held:
        span = max(1, round(stage_lookback_s / law.tick_s))
        parts = []
        for h in segs:
            ends = np.arange(span, h.up.size + 1, span)
            if ends.size == 0:
                continue
            rec = recent_past(h.up, ends, lookback_s=stage_lookback_s, tick_s=law.tick_s, floor=ends - span)
            mu = np.full(ends.size, law.up.mean_s * h.up_factor)
            mg = np.full(ends.size, law.gap.mean_s * h.gap_factor)
            if not long:
                lead = recent_past(
                    h.up,
                    ends - span,
                    lookback_s=trial.long_lookback_s - trial.lookback_s,
                    tick_s=law.tick_s,
                    floor=np.zeros_like(ends),
                )
                la, lb = trial.long_up_prior_runs, trial.long_gap_prior_runs
                mu = (la * mu + lead.up_s) / (la + lead.up_ended)
                mg = (lb * mg + lead.down_s) / (lb + lead.down_ended)
            parts.append((mu, mg, rec))
        if not parts:
            continue
        up_pieces.append(
            (
                w,
                np.concatenate([p[0] for p in parts]),
                np.concatenate([p[2].up_ended for p in parts]),
                np.concatenate([p[2].up_s for p in parts]),
            )
        )
        gap_pieces.append(
            (
                w,
                np.concatenate([p[1] for p in parts]),
                np.concatenate([p[2].down_ended for p in parts]),
                np.concatenate([p[2].down_s for p in parts]),
            )
        )
    return _eb_strength(up_pieces), _eb_strength(gap_pieces)


def _held_out_error(
    held: Sequence[tuple[FleetLaw, float, list[_Held]]], trial: Nowcast, *, horizon_s: float
) -> float:
    """cross_validated_error with each segment's prior the leave-one-block-out law (`_held_out`) and the
    trial's look-backs (one or two stages), cut at the segment's start."""

    def predict(law: FleetLaw, h: _Held, starts: np.ndarray) -> np.ndarray:
        short, long = look_back(h.up, starts, trial, tick_s=law.tick_s, floor=np.zeros_like(starts))
        factors = posterior_factors(law, short, trial, long=long, prior=(h.up_factor, h.gap_factor))
        return nowcast_availability(law, factors)

    return _mean_square_gap(held, up_of=lambda h: h.up, predict=predict, horizon_s=horizon_s)


def choose_two_stage(
    model: TraceModel,
    traces: Sequence[SpotTrace],
    *,
    half: Half,
    block_s: float,
    horizon_s: float,
    long_candidates_s: Sequence[float] = LONG_LOOKBACK_CANDIDATES_S,
    short_candidates_s: Sequence[float] = SHORT_LOOKBACK_CANDIDATES_S,
) -> Nowcast:
    """A two-stage nowcast's constants from the `half` the model was fitted on, and nothing else: the fitted
    law, updated by the long look-back (the market's level over days), is the prior the short look-back
    (the current state over hours) updates. Each stage's prior strengths by empirical Bayes (the long
    stage's on pieces of the long look-back, the short stage's on pieces of the short one with the long
    look-back before each piece as its prior); the pair of look-backs by cross-validation over `horizon_s`.
    Unlike `choose_nowcast`, every choice here sees each fit segment with the law its other segments give
    (leave one block out, `_held_out`): the check half is on days the law has not seen, and a chooser whose
    prior has already seen the segment it predicts favours the prior over any look-back."""
    segments = [s for t in traces for s in split_blocks(t, half, block_s=block_s)]
    held = _held_out(model, segments)
    trials: list[tuple[float, Nowcast]] = []
    long_strengths: dict[float, tuple[float, float]] = {}
    for long_s in long_candidates_s:
        for short_s in short_candidates_s:
            if short_s >= long_s:
                continue
            if long_s not in long_strengths:
                probe = Nowcast(
                    short_s, 1.0, 1.0, long_lookback_s=long_s, long_up_prior_runs=1.0, long_gap_prior_runs=1.0
                )
                long_strengths[long_s] = _stage_strengths(held, probe, stage_lookback_s=long_s, long=True)
            la, lb = long_strengths[long_s]
            first = Nowcast(
                short_s, 1.0, 1.0, long_lookback_s=long_s, long_up_prior_runs=la, long_gap_prior_runs=lb
            )
            a, b = _stage_strengths(held, first, stage_lookback_s=short_s, long=False)
            trial = Nowcast(
                short_s, a, b, long_lookback_s=long_s, long_up_prior_runs=la, long_gap_prior_runs=lb
            )
            trials.append((_held_out_error(held, trial, horizon_s=horizon_s), trial))
    err, chosen = _least_error(
        trials,
        none="no pair of look-backs (long longer than short) to choose from",
        hint="pass a long candidate look-back longer than some short one, in seconds",
        field="long_candidates_s",
    )
    return replace(
        chosen,
        note=(
            f"two-stage, chosen on the fitted blocks only ({half.value}), each block with the law of the "
            f"others: prior strengths by empirical Bayes, look-backs by cross-validation over a "
            f"{horizon_s / 3600:.1f} h horizon (RMS error {math.sqrt(err):.3f})"
        ),
    )
