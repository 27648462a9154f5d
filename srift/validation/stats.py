"""Report math: percentage errors, MAPE, underestimates and their 90th percentile, measurement noise.

Errors are signed relative errors of a prediction against a measurement, (predicted − measured) / measured,
so a negative error is an underestimate: the run took longer than predicted, the costly mistake (a plan that
misses its deadline or budget). Srift §5.3 reports the MAPE and the 90th percentile of the underestimation
error (the size of the underestimates, |error| over the cases that were underestimated): 8.9 % and 13.5 %.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def relative_error(predicted: float, measured: float) -> float:
    """(predicted − measured) / measured; measured must be positive."""
    if not (measured > 0 and math.isfinite(measured)):
        raise ValueError(f"measured value must be a positive number, got {measured!r}")
    return (predicted - measured) / measured


def mape(errors: Sequence[float]) -> float:
    """Mean absolute percentage error as a fraction (0.089 = 8.9 %); NaN for no errors."""
    return statistics.fmean(abs(e) for e in errors) if errors else math.nan


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0 ≤ p ≤ 100) with linear interpolation between order statistics (numpy's
    default); NaN for no values."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside 0..100")
    if not values:
        return math.nan
    ordered = sorted(values)
    h = (len(ordered) - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (h - lo)


@dataclass(frozen=True, slots=True)
class ErrorSummary:
    """Accuracy over a set of cases (fractions, not percent)."""

    cases: int
    mape: float
    underestimates: int
    underestimate_share: float
    underestimate_p90: float
    worst_underestimate: float
    worst_overestimate: float
    mean_error: float

    def to_dict(self) -> dict[str, float | int | None]:
        return {k: _finite(getattr(self, k)) for k in self.__slots__}


def _finite(value: float | int) -> float | int | None:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def summarize(errors: Sequence[float]) -> ErrorSummary:
    """MAPE, share of underestimates (error < 0) and the 90th percentile of their size."""
    under = [-e for e in errors if e < 0]
    over = [e for e in errors if e > 0]
    return ErrorSummary(
        cases=len(errors),
        mape=mape(errors),
        underestimates=len(under),
        underestimate_share=len(under) / len(errors) if errors else math.nan,
        underestimate_p90=percentile(under, 90) if under else 0.0 if errors else math.nan,
        worst_underestimate=max(under, default=0.0),
        worst_overestimate=max(over, default=0.0),
        mean_error=statistics.fmean(errors) if errors else math.nan,
    )


def group_by(items: Iterable[T], key: Callable[[T], str]) -> dict[str, list[T]]:
    """Items grouped by key, groups in sorted key order."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return dict(sorted(groups.items()))


def repeat_noise(means: Sequence[float]) -> float:
    """Spread of one case's repeated measurements: the mean absolute deviation from their mean, relative to
    that mean (a repeat's "error" against the case's measured value). 0 for fewer than two repeats."""
    if len(means) < 2:
        return 0.0
    centre = statistics.fmean(means)
    return statistics.fmean(abs(m - centre) for m in means) / centre


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over mean; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    centre = statistics.fmean(values)
    return statistics.stdev(values) / centre if centre > 0 else math.nan
