"""Spreads of measured compute times: robust log-spreads, drift between timing passes, interpolation.

A profile's compute term of the prediction band (`ModelProfile.compute_spread`) comes from these.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np


def robust_log_spread(values: list[float]) -> float:
    """1.4826 × the median absolute deviation of ln(values), widened by √(1 + 1/n) (the spread of one
    more observation around the median); 0 for fewer than two positive values."""
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    if len(logs) < 2:
        return 0.0
    logs.sort()
    center = _median(logs)
    mad = _median(sorted(abs(x - center) for x in logs))
    return 1.4826 * mad * math.sqrt(1.0 + 1.0 / len(logs))


def _median(ordered: list[float]) -> float:
    n = len(ordered)
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def sample_spreads(measured: Any) -> list[tuple[int, float]]:
    """Per breakpoint, the spread of forward+backward over the profile's own samples."""
    if not isinstance(measured, dict):
        return []
    try:
        batches = [int(b) for b in measured["batches"]]
        fw = measured["forward_s"]
        bw = measured["backward_s"]
        out = []
        for i, b in enumerate(batches):
            totals = [float(f) + float(w) for f, w in zip(fw[i], bw[i], strict=False)]
            out.append((b, robust_log_spread(totals)))
    except (KeyError, IndexError, TypeError, ValueError):
        return []
    return sorted(out)


def pass_spreads(passes: Any, *, at_least: int = 3) -> list[tuple[int, float]]:
    """Per breakpoint, the spread of the per-pass medians of forward+backward (with ≥ `at_least` passes):
    the compute term of profiles whose passes kept no samples."""
    if not isinstance(passes, list) or len(passes) < at_least:
        return []
    try:
        by_batch: dict[int, list[float]] = {}
        for entry in passes:
            for b, t in zip(entry["batches"], entry["compute_s"], strict=True):
                by_batch.setdefault(int(b), []).append(float(t))
    except (KeyError, TypeError, ValueError):
        return []
    return sorted((b, robust_log_spread(ts)) for b, ts in by_batch.items() if len(ts) >= at_least)


def drift_spreads(passes: Any, *, runs: int, at_least: int = 3) -> list[tuple[int, float]]:
    """Per breakpoint, how far the mean of `runs` runs, taken at independent times, may fall from the mean
    of the passes, from each pass's own samples (`compute_samples_s`, with ≥ `at_least` passes).

    A pass's mean moves for two reasons: the host's speed at that moment (drift, which a run meets too)
    and the few samples it averages (a quota-bound step reads its CPU time or several throttled periods,
    which a run's tens of iterations average out, and the straggler term carries). One-way random-effects
    analysis of variance on the logs of the samples separates them: with J passes of n_j samples,
    σ_drift² = max(0, (MSB − MSW) / n₀), n₀ = (N − Σn_j² / N) / (J − 1). The spread is
    √(σ_drift² / runs + s² / J): the runs' drift, plus the curve's own error as the mean of J passes
    (s² the variance of the logs of the passes' means). [] where a pass has no samples."""
    if not isinstance(passes, list) or len(passes) < at_least:
        return []
    try:
        batches = [int(b) for b in passes[0]["batches"]]
        grouped = [[[float(t) for t in ts] for ts in p["compute_samples_s"]] for p in passes]
        means = [[float(t) for t in p["compute_s"]] for p in passes]
        if any(len(g) != len(batches) or len(m) != len(batches) for g, m in zip(grouped, means, strict=True)):
            return []
    except (KeyError, IndexError, TypeError, ValueError):
        return []
    out = []
    for i, b in enumerate(batches):
        logs = [[math.log(t) for t in g[i] if t > 0 and math.isfinite(t)] for g in grouped]
        pass_logs = [math.log(m[i]) for m in means if m[i] > 0 and math.isfinite(m[i])]
        if any(not ys for ys in logs) or len(pass_logs) < at_least:
            return []
        drift2, _ = variance_components(logs)
        curve2 = statistics.variance(pass_logs) / len(pass_logs)
        out.append((b, math.sqrt(drift2 / max(runs, 1) + curve2)))
    return sorted(out)


def variance_components(groups: list[list[float]]) -> tuple[float, float]:
    """One-way random-effects ANOVA of non-empty groups (method of moments, unequal group sizes): the
    between-group variance component, 0 where the groups vary no more than their members do, and the
    within-group mean square (MSW). (0, 0) with fewer than two groups or no member repeated."""
    j = len(groups)
    n = sum(len(g) for g in groups)
    if j < 2 or n <= j:
        return 0.0, 0.0
    grand = sum(sum(g) for g in groups) / n
    group_means = [sum(g) / len(g) for g in groups]
    within = sum(sum((y - m) ** 2 for y in g) for g, m in zip(groups, group_means, strict=True)) / (n - j)
    between = sum(len(g) * (m - grand) ** 2 for g, m in zip(groups, group_means, strict=True)) / (j - 1)
    n0 = (n - sum(len(g) ** 2 for g in groups) / n) / (j - 1)
    return max(0.0, (between - within) / n0), within


def interpolated(points: list[tuple[int, float]], batch: float) -> float:
    """The value at `batch` of per-breakpoint `points` (sorted, non-empty): linear between breakpoints,
    held beyond them (numpy's interp)."""
    return float(np.interp(batch, [b for b, _ in points], [v for _, v in points]))
