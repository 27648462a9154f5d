"""Pure helpers of the compute model: the largest-batch search, the four breakpoints and their refinement
where the curve bends, the curve fit, the pooling of further timing passes into a profile, MAPE."""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srift.domain.profile import ComputeCurve, ModelProfile
from srift.errors import InvalidInput


def largest_fitting(fits: Callable[[int], bool], *, cap: int) -> int:
    """The largest batch in [1, cap] for which `fits` is true, assuming fitting is monotone in the batch.

    Doubles from 1 until a batch fails or the cap is reached, then bisects between the last batch that fit
    and the first that did not; about 2·log2(answer) calls. Returns 0 when batch 1 does not fit.
    """
    if cap < 1:
        raise InvalidInput(f"{cap} is below 1", hint="give a batch cap ≥ 1", field="max_batch")
    if not fits(1):
        return 0
    lo, hi = 1, None
    batch = 2
    while batch <= cap:
        if not fits(batch):
            hi = batch
            break
        lo = batch
        batch *= 2
    if hi is None:
        if lo == cap or fits(cap):
            return cap
        hi = cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def breakpoints(max_batch: int) -> tuple[int, ...]:
    """The sampled batch sizes 1, ⅓, ⅔ and all of `max_batch` (rounded, without repeats)."""
    if max_batch < 1:
        raise InvalidInput(f"{max_batch} is below 1", hint="max_batch is ≥ 1", field="max_batch")
    points = {1, max(1, round(max_batch / 3)), max(1, round(2 * max_batch / 3)), max_batch}
    return tuple(sorted(points))


BEND_TOLERANCE = 0.08
"""A segment is split at its (geometric) midpoint when the time measured there is this far (relative) from
the chord: above the typical session-to-session noise floor of the profile_curves benchmark on this
shared CPU (median about 6 %, single runs 1.6–22 %), below the 10–50 % by which a small-batch knee
misses it."""
MAX_BEND_CHECKS = 9
"""At most this many midpoints are measured in all (the first three are the paper segments' own)."""


@dataclass(frozen=True, slots=True)
class PointTiming:
    """Forward+backward at one batch in one round: the median of the repeats and their spread."""

    median_s: float
    spread: float = 0.0
    """Half the interquartile range of the repeats, relative to their median (0 with fewer than 2)."""

    @classmethod
    def of(cls, samples_s: Sequence[float]) -> PointTiming:
        median_s = statistics.median(samples_s)
        if len(samples_s) < 2 or median_s <= 0:
            return cls(median_s)
        q1, _, q3 = statistics.quantiles(samples_s, n=4, method="inclusive")
        return cls(median_s, (q3 - q1) / 2 / median_s)


@dataclass(frozen=True, slots=True)
class BendCheck:
    """One measured segment midpoint: how far the straight segment [lo, hi] misses it, and the verdict."""

    batch: int
    lo: int
    hi: int
    deviation: float
    """(measured − chord) / measured at `batch`; positive when the segment underestimates it."""
    noise: float
    """The largest timing spread at `lo`, `batch` and `hi` (relative; recorded, not used to decide: gating
    splits at twice the spread, tried with arithmetic midpoints, missed wide_mlp's knee on a busy machine
    whose repeats spread by 9–17 %)."""
    split: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "segment": [self.lo, self.hi],
            "deviation": round(self.deviation, 4),
            "noise": round(self.noise, 4),
            "split": self.split,
        }


def midpoint(lo: int, hi: int) -> int | None:
    """The integer batch halfway between two breakpoints on a log scale, or None when none lies between.

    Kernel regimes change at batch sizes spread over orders of magnitude (1 → 8 → 40 on one CPU core), so
    the geometric mean looks where a bend shows: on [1, 85] it checks batch 9, where the chord misses
    wide_mlp's small-batch knee by 10–50 % (mostly over 30 %), not batch 43, where it misses by 5–13 %
    (so a busy machine's noise decided whether the knee was found).
    """
    mid = round(math.sqrt(lo * hi))
    return mid if lo < mid < hi else None


def refine_breakpoints(
    points: Sequence[int],
    measure: Callable[[tuple[int, ...]], Mapping[int, PointTiming]],
    *,
    tolerance: float = BEND_TOLERANCE,
    max_checks: int = MAX_BEND_CHECKS,
) -> tuple[tuple[int, ...], tuple[BendCheck, ...]]:
    """The breakpoints, with each segment that bends split at its geometric `midpoint`, recursively.

    The paper's four breakpoints assume forward+backward time is linear between them. Where it is not, e.g.
    a CPU's matrix-vector kernels at batch 1 against memory-bound small-batch GEMMs and then compute-bound
    large ones (a knee near batch 40 on one core, whatever the width of an MLP), a straight segment misses
    the middle by 15–25 %. Each round `measure(batches)` times the round's midpoints together with their
    segments' endpoints (so drift between rounds does not look like a bend) and returns forward+backward
    per batch; a midpoint more than `tolerance` off its chord becomes a breakpoint and both halves are
    checked in the next round, until the halves are too narrow or `max_checks` midpoints were measured.
    """
    if tolerance <= 0:
        raise InvalidInput(
            f"{tolerance} is not positive", hint="give a tolerance > 0, e.g. 0.08", field="tolerance"
        )
    kept = set(points)
    checks: list[BendCheck] = []
    segments = list(itertools.pairwise(sorted(kept)))
    while segments and len(checks) < max_checks:
        pending = [(lo, hi, mid) for lo, hi in segments if (mid := midpoint(lo, hi)) is not None]
        pending = pending[: max_checks - len(checks)]
        if not pending:
            break
        batches = tuple(sorted({b for lo, hi, mid in pending for b in (lo, hi, mid)}))
        timed = measure(batches)
        segments = []
        for lo, hi, mid in pending:
            t_lo, t_mid, t_hi = (timed[b].median_s for b in (lo, mid, hi))
            chord = t_lo + (t_hi - t_lo) * (mid - lo) / (hi - lo)
            deviation = (t_mid - chord) / t_mid if t_mid > 0 else 0.0
            noise = max(timed[b].spread for b in (lo, mid, hi))
            split = abs(deviation) > tolerance
            checks.append(BendCheck(mid, lo, hi, deviation, noise, split))
            if split:
                kept.add(mid)
                segments += [(lo, mid), (mid, hi)]
    return tuple(sorted(kept)), tuple(checks)


def fit_curve(batches: Sequence[int], times_s: Sequence[float]) -> ComputeCurve:
    """The piecewise-linear curve through the measured points (one segment between each pair of breakpoints).

    With the paper's four breakpoints this is the 3-segment model of Srift §4.1; times are floored at one
    nanosecond so a curve stays valid when a timer reads zero.
    """
    pairs = sorted(zip(batches, times_s, strict=True))
    return ComputeCurve(tuple(b for b, _ in pairs), tuple(max(t, 1e-9) for _, t in pairs))


def mean_point(forward_s: Sequence[float], backward_s: Sequence[float]) -> tuple[float, float]:
    """One breakpoint's (forward, backward) seconds from its samples: the mean of each phase's samples.

    The mean, not the median: what a prediction is checked against, and what a user's job takes, is a
    run's mean iteration, and a machine's slow spells and a CPU quota's throttled periods only ever add
    time, so the median of skewed samples sits below their mean. Evidence is mixed (docs/validation.md at
    0856b84, round 9): replayed on the three finished runs before the change, the means raised the mean error
    by 0.3–4.5 points and improved every figure; on the two protocol runs after it, the medians' MAPE was
    0.2–1.5 points lower. The machine's speed states, not the estimator, decided those runs.
    The mean of the steps' forward + backward is the sum of the two phases' means, so pairing the phases
    of a step (what the median needed: two medians of quantised phases add up below the steps' own median,
    cause 6) is no longer needed."""
    return statistics.fmean(forward_s), statistics.fmean(backward_s)


@dataclass(frozen=True, slots=True)
class CurveSamples:
    """Every timed forward and backward (seconds) at each batch of one timing pass."""

    batches: tuple[int, ...]
    forward_s: tuple[tuple[float, ...], ...]
    backward_s: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        if not (len(self.batches) == len(self.forward_s) == len(self.backward_s)) or not self.batches:
            raise InvalidInput(
                "needs one list of forward and one of backward times per batch",
                hint="give batches, forward_s and backward_s of equal length",
                field="samples",
            )
        for times in (*self.forward_s, *self.backward_s):
            if not times or not all(math.isfinite(t) and t >= 0 for t in times):
                raise InvalidInput(
                    "has an empty list or a negative or non-finite time",
                    hint="give at least one finite time ≥ 0 per batch",
                    field="samples",
                )

    def curves(self) -> tuple[ComputeCurve, ComputeCurve]:
        """The forward and backward curves through each batch's `mean_point`."""
        points = [mean_point(fw, bw) for fw, bw in zip(self.forward_s, self.backward_s, strict=True)]
        return (
            fit_curve(self.batches, [fw for fw, _ in points]),
            fit_curve(self.batches, [bw for _, bw in points]),
        )

    def median_times_s(self) -> dict[int, tuple[float, float]]:
        """The median (forward, backward) seconds at each batch: a direct measurement to check curves by."""
        return {
            batch: (statistics.median(fw), statistics.median(bw))
            for batch, fw, bw in zip(self.batches, self.forward_s, self.backward_s, strict=True)
        }

    def compute_s(self, batch: float) -> float:
        """Forward plus backward seconds at `batch` on this pass's curves."""
        forward, backward = self.curves()
        return forward.time_s(batch) + backward.time_s(batch)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": list(self.batches),
            "forward_s": [[round(t, 9) for t in ts] for ts in self.forward_s],
            "backward_s": [[round(t, 9) for t in ts] for ts in self.backward_s],
        }

    @classmethod
    def from_dict(cls, data: Any) -> CurveSamples:
        try:
            return cls(
                batches=tuple(int(b) for b in data["batches"]),
                forward_s=tuple(tuple(float(t) for t in ts) for ts in data["forward_s"]),
                backward_s=tuple(tuple(float(t) for t in ts) for ts in data["backward_s"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(
                f"is not a timing pass ({exc})",
                hint="give an object with batches, forward_s and backward_s lists",
                field="samples",
            ) from exc


def pool_curve_samples(profile: ModelProfile, passes: Sequence[CurveSamples]) -> ModelProfile:
    """`profile` with its curves refit to the mean, over passes, of each pass's `mean_point`.

    Each pass is one sample of the machine's speed at one moment, whatever its number of repeats: the
    profile's own (taken minutes before a validation's runs, with more repeats) counts as one pass, not
    as many samples as it took. On the testbed a pass that meets a slow spell reads up to 2× (wide_mlp,
    protocol run 12), so equal weights give the profile's own moment 1/9 of the curve with eight further
    passes, where pooling the samples gave it 5/21 (docs/validation.md at 0856b84, round 10).

    Every pass must time the profile's breakpoints (its `extra["measured"]`); the result keeps everything
    else of the profile and records the pooled samples, each pass's means and the number of passes. A
    profile pooled before (its `measured_passes` without phases) counts its pooled samples as one pass.
    """
    own = CurveSamples.from_dict((profile.extra or {}).get("measured"))
    forward = [list(ts) for ts in own.forward_s]
    backward = [list(ts) for ts in own.backward_s]
    for extra in passes:
        if extra.batches != own.batches:
            raise InvalidInput(
                f"times batches {list(extra.batches)}, the profile's breakpoints are {list(own.batches)}",
                hint="time the profile's own breakpoints (extra.measured.batches)",
                field="samples",
            )
        for i in range(len(own.batches)):
            forward[i] += extra.forward_s[i]
            backward[i] += extra.backward_s[i]
    pooled = CurveSamples(own.batches, tuple(map(tuple, forward)), tuple(map(tuple, backward)))
    recorded = (profile.extra or {}).get("measured_passes")
    earlier = (
        recorded
        if recorded and all("forward_s" in p and p["batches"] == list(own.batches) for p in recorded)
        else [_pass_means(own)]
    )
    every = [*earlier, *(_pass_means(x) for x in passes)]
    forward_curve = fit_curve(
        own.batches, [statistics.fmean(p["forward_s"][i] for p in every) for i in range(len(own.batches))]
    )
    backward_curve = fit_curve(
        own.batches, [statistics.fmean(p["backward_s"][i] for p in every) for i in range(len(own.batches))]
    )
    return dataclasses.replace(
        profile,
        forward=forward_curve,
        backward=backward_curve,
        extra={
            **profile.extra,
            "measured": pooled.to_dict(),
            "measured_passes": every,
            "timing_passes": int((profile.extra or {}).get("timing_passes", 1)) + len(passes),
        },
    )


def _pass_means(samples: CurveSamples) -> dict[str, Any]:
    """One pass's `mean_point` per breakpoint: forward, backward and their sum (`compute_s`), and each
    step's forward + backward (`compute_samples_s`; `ModelProfile.compute_spread` separates the drift
    between passes from the passes' sampling noise with these)."""
    points = [mean_point(fw, bw) for fw, bw in zip(samples.forward_s, samples.backward_s, strict=True)]
    return {
        "batches": list(samples.batches),
        "forward_s": [fw for fw, _ in points],
        "backward_s": [bw for _, bw in points],
        "compute_s": [fw + bw for fw, bw in points],
        "compute_samples_s": [
            [round(f + b, 9) for f, b in zip(fw, bw, strict=False)]
            for fw, bw in zip(samples.forward_s, samples.backward_s, strict=True)
        ],
    }


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error, in percent, of predictions against measurements."""
    if len(predicted) != len(measured) or not measured:
        raise ValueError("mape needs two equally long, non-empty sequences")
    return 100.0 * statistics.fmean(abs(p - m) / m for p, m in zip(predicted, measured, strict=True))


def coefficient_of_variation(values: Sequence[float]) -> float:
    """std/mean (sample standard deviation); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    if mean <= 0 or not math.isfinite(mean):
        return 0.0
    return statistics.stdev(values) / mean
