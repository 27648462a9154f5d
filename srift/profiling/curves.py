"""Pure helpers of the compute model: the largest-batch search, the four breakpoints, the curve fit, MAPE."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from srift.domain.profile import ComputeCurve
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


def fit_curve(batches: Sequence[int], times_s: Sequence[float]) -> ComputeCurve:
    """The piecewise-linear curve through the measured points (one segment between each pair of breakpoints).

    With the paper's four breakpoints this is the 3-segment model of Srift §4.1; times are floored at one
    nanosecond so a curve stays valid when a timer reads zero.
    """
    pairs = sorted(zip(batches, times_s, strict=True))
    return ComputeCurve(tuple(b for b, _ in pairs), tuple(max(t, 1e-9) for _, t in pairs))


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
