"""Model selection for the bus-bandwidth learner: stratified 9/1 split, k-fold grid search by MAPE, and the
noise floor (Srift §5.3's lower bound on any model's error).

Each half (below / at-or-above the MTU) is tuned separately. The split stratifies by size bucket
(log2 bytes) × world size, so every part of the grid is tested. Test MAPE is of the model fitted on the
90 % training part with the chosen hyperparameters — the model that is then shipped or registered.
The noise floor is the MAPE of predicting every sample by the mean of all repeated samples of its own
configuration (same features, same size; configurations seen once are left out): no model that sees
only those features can do better on average.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from srift.bandwidth.features import (
    DEFAULT_MTU_BYTES,
    FALLBACK_MTU_BYTES,
    config_key,
    mtu_for,
    size_class,
)
from srift.bandwidth.learner import BusBandwidthRegressor
from srift.bandwidth.records import ProbeRecord
from srift.errors import InvalidInput

# Small on purpose: training must take seconds on a shared 2-core machine.
DEFAULT_GRID: tuple[Mapping[str, Any], ...] = (
    {"max_depth": 4, "n_estimators": 150, "learning_rate": 0.1},
    {"max_depth": 6, "n_estimators": 150, "learning_rate": 0.1},
    {"max_depth": 6, "n_estimators": 400, "learning_rate": 0.05},
    {"max_depth": 8, "n_estimators": 300, "learning_rate": 0.1},
)
MIN_SAMPLES_PER_HALF = 5
TEST_FRACTION = 0.1
"""Share of each half (below / at or above the MTU) held out to measure the version's test MAPE."""
RELIABLE_TEST_SAMPLES = 10
"""Held-out samples a half's test MAPE should average at least: a mean of n samples varies by about
1/sqrt(n) of their spread, a third at 10 and more than half below 4 (issue #23's 32 imported samples held
out about three in all and reported a 40.7 % MAPE)."""
RELIABLE_SAMPLES_PER_HALF = math.ceil(RELIABLE_TEST_SAMPLES / TEST_FRACTION)
"""Below this many samples in a half, training warns (100: 10 held out at TEST_FRACTION); see
docs/bandwidth.md."""


def mape(predicted: np.ndarray, actual: np.ndarray) -> float:
    """Mean absolute percentage error as a fraction (0.1 = 10 %)."""
    return float(np.mean(np.abs(predicted - actual) / actual))


def noise_floor(records: Sequence[ProbeRecord]) -> float | None:
    """MAPE of predicting each sample by its configuration's mean (configurations with ≥ 2 samples)."""
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in records:
        groups[config_key(r)].append(r.busbw_gbps)
    errors = [abs(v - np.mean(vs)) / v for vs in groups.values() if len(vs) >= 2 for v in vs]
    return float(np.mean(errors)) if errors else None


def stratified_split(
    records: Sequence[ProbeRecord], *, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test): per stratum (size bucket × world size) a shuffled `test_fraction` goes to test.

    Strata too small to give one test sample are pooled, so tiny data sets still get a test part.
    """
    rng = np.random.default_rng(seed)
    strata: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        strata[(int(math.log2(r.buffer_bytes)), r.world_size)].append(i)
    test: list[int] = []
    pooled: list[int] = []
    for key in sorted(strata):
        members = strata[key]
        k = round(len(members) * test_fraction)
        if k == 0:
            pooled.extend(members)
            continue
        chosen = rng.permutation(members)
        test.extend(int(i) for i in chosen[:k])
    if pooled:
        k = max(1, round(len(pooled) * test_fraction)) if len(pooled) >= 2 else 0
        test.extend(int(i) for i in rng.permutation(pooled)[:k])
    test_set = set(test)
    train = np.array([i for i in range(len(records)) if i not in test_set], dtype=int)
    return train, np.array(sorted(test_set), dtype=int)


def _kfold(n: int, *, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    order = np.random.default_rng(seed).permutation(n)
    parts = np.array_split(order, folds)
    return [(np.concatenate([p for j, p in enumerate(parts) if j != i]), parts[i]) for i in range(folds)]


@dataclass(frozen=True, slots=True)
class HalfReport:
    """Selection and test figures of one half (small: below the MTU; large: at or above)."""

    n_train: int
    n_test: int
    best_params: dict[str, Any]
    cv_mape: float | None
    test_mape: float | None
    noise_floor: float | None
    residual_cv: float | None


@dataclass(frozen=True, slots=True)
class TrainingReport:
    """What one training run measured; stored as the version's metrics."""

    small: HalfReport
    large: HalfReport
    n_samples: int
    seed: int
    folds: int
    train_s: float
    grid: list[dict[str, Any]] = field(default_factory=list)
    residual_cv_by_size: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        return {
            "residual_cv_by_size": dict(self.residual_cv_by_size),
            "test_mape_small": self.small.test_mape,
            "test_mape_large": self.large.test_mape,
            "noise_floor_small": self.small.noise_floor,
            "noise_floor_large": self.large.noise_floor,
            "cv_mape_small": self.small.cv_mape,
            "cv_mape_large": self.large.cv_mape,
            "residual_cv_small": self.small.residual_cv,
            "residual_cv_large": self.large.residual_cv,
            "n_samples": self.n_samples,
            "n_train": self.small.n_train + self.large.n_train,
            "n_test": self.small.n_test + self.large.n_test,
            "n_small": self.small.n_train + self.small.n_test,
            "n_large": self.large.n_train + self.large.n_test,
            "train_s": round(self.train_s, 3),
            "warnings": self.warnings(),
        }

    def warnings(self) -> list[str]:
        """One line per half with fewer than RELIABLE_SAMPLES_PER_HALF samples: its test MAPE is too noisy to
        judge the version by, and the model has seen few configurations there."""
        lines = []
        for side, half in (("below", self.small), ("at or above", self.large)):
            n = half.n_train + half.n_test
            if n < RELIABLE_SAMPLES_PER_HALF:
                lines.append(
                    f"only {n} samples {side} the MTU (at least {RELIABLE_SAMPLES_PER_HALF} per half are "
                    f"needed for a test MAPE over {RELIABLE_TEST_SAMPLES} held-out samples; this one rests "
                    f"on {half.n_test}): judge this version with care, and probe more buffer sizes and world "
                    f"sizes {side} the MTU before activating it"
                )
        return lines

    def hyperparams(self) -> dict[str, Any]:
        return {
            "small": self.small.best_params,
            "large": self.large.best_params,
            "grid": self.grid,
            "folds": self.folds,
            "seed": self.seed,
            "test_fraction": TEST_FRACTION,
            "scoring": "mape",
        }


def _half_params(half: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {f"{half}_params": dict(params)}


def _tune_half(
    records: Sequence[ProbeRecord],
    *,
    half: str,
    base: BusBandwidthRegressor,
    grid: Sequence[Mapping[str, Any]],
    folds: int,
    seed: int,
) -> tuple[dict[str, Any], float | None]:
    """Best grid point by mean k-fold MAPE on `records` (all from one half)."""
    if len(grid) == 1 or len(records) < 2 * folds:
        return dict(grid[0]), None
    target = np.array([r.busbw_gbps for r in records])
    best: tuple[float, dict[str, Any]] | None = None
    for params in grid:
        scores = []
        for train_idx, val_idx in _kfold(len(records), folds=folds, seed=seed):
            model = BusBandwidthRegressor(**{**base.get_params(), **_half_params(half, params)})
            model.fit([records[i] for i in train_idx])
            scores.append(mape(model.predict([records[i] for i in val_idx]), target[val_idx]))
        score = float(np.mean(scores))
        if best is None or score < best[0]:
            best = (score, dict(params))
    assert best is not None
    return best[1], best[0]


def tune_and_fit(
    records: Sequence[ProbeRecord],
    *,
    seed: int = 0,
    folds: int = 3,
    grid: Sequence[Mapping[str, Any]] = DEFAULT_GRID,
    mtu_bytes: Mapping[str, int] | None = None,
    default_mtu_bytes: int = FALLBACK_MTU_BYTES,
    small_objective: str = "reg:pseudohubererror",
    large_objective: str = "reg:squarederror",
) -> tuple[BusBandwidthRegressor, TrainingReport]:
    """Split 9/1 (stratified), tune each half by k-fold MAPE on the 90 %, fit, and test on the 10 %."""
    started = time.perf_counter()
    if folds < 2 or not grid:
        raise InvalidInput("need ≥ 2 folds and a non-empty grid", hint="use the defaults", field="folds")
    mtu = dict(DEFAULT_MTU_BYTES if mtu_bytes is None else mtu_bytes)
    base = BusBandwidthRegressor(
        mtu_bytes=mtu,
        default_mtu_bytes=default_mtu_bytes,
        small_objective=small_objective,
        large_objective=large_objective,
        random_state=seed,
    )
    base._validated_params()
    halves: dict[str, list[ProbeRecord]] = {"small": [], "large": []}
    for r in records:
        halves["small" if r.buffer_bytes < mtu_for(r.provider, mtu, default_mtu_bytes) else "large"].append(r)
    for half, members in halves.items():
        if len(members) < MIN_SAMPLES_PER_HALF:
            side = "below" if half == "small" else "at or above"
            raise InvalidInput(
                f"only {len(members)} samples {side} the MTU; need at least {MIN_SAMPLES_PER_HALF}",
                hint="probe buffer sizes on both sides of the MTU (e.g. 4 B .. 64 MiB), or widen the filters",
            )
    reports: dict[str, HalfReport] = {}
    chosen: dict[str, Any] = {}
    train_all: list[ProbeRecord] = []
    tests: dict[str, list[ProbeRecord]] = {}
    for half, members in halves.items():
        train_idx, test_idx = stratified_split(members, test_fraction=TEST_FRACTION, seed=seed)
        train = [members[i] for i in train_idx]
        tests[half] = [members[i] for i in test_idx]
        train_all.extend(train)
        best, cv = _tune_half(train, half=half, base=base, grid=grid, folds=folds, seed=seed)
        chosen[f"{half}_params"] = best
        reports[half] = HalfReport(
            n_train=len(train),
            n_test=len(test_idx),
            best_params=best,
            cv_mape=cv,
            test_mape=None,
            noise_floor=noise_floor(members),
            residual_cv=None,
        )
    by_size = residuals_by_size(train_all, base=base, chosen=chosen, folds=folds, seed=seed)
    model = BusBandwidthRegressor(**{**base.get_params(), **chosen}).fit(train_all)
    for half, test in tests.items():
        if not test:
            continue
        actual = np.array([r.busbw_gbps for r in test])
        predicted = model.predict(test)
        rel = (predicted - actual) / actual
        old = reports[half]
        reports[half] = HalfReport(
            n_train=old.n_train,
            n_test=old.n_test,
            best_params=old.best_params,
            cv_mape=old.cv_mape,
            test_mape=mape(predicted, actual),
            noise_floor=old.noise_floor,
            residual_cv=float(np.std(rel)),
        )
    report = TrainingReport(
        small=reports["small"],
        large=reports["large"],
        n_samples=len(records),
        seed=seed,
        folds=folds,
        train_s=time.perf_counter() - started,
        grid=[dict(g) for g in grid],
        residual_cv_by_size=by_size,
    )
    return model, report


def residuals_by_size(
    records: Sequence[ProbeRecord],
    *,
    base: BusBandwidthRegressor,
    chosen: Mapping[str, Any],
    folds: int,
    seed: int,
) -> dict[str, float]:
    """The spread (standard deviation of the log of predicted / measured) of out-of-fold predictions with
    the chosen parameters, per size class (key: log2 of the class's smallest size); classes with fewer than
    5 samples are left out. Predictions use these to widen their bands where the model is less sure."""
    if len(records) < 2 * folds:
        return {}
    logs: dict[int, list[float]] = defaultdict(list)
    for train_idx, val_idx in _kfold(len(records), folds=folds, seed=seed):
        model = BusBandwidthRegressor(**{**base.get_params(), **chosen})
        model.fit([records[i] for i in train_idx])
        held = [records[i] for i in val_idx]
        for r, predicted in zip(held, model.predict(held), strict=True):
            if predicted > 0 and r.busbw_gbps > 0:
                logs[size_class(r.buffer_bytes)].append(math.log(predicted / r.busbw_gbps))
    return {str(k): float(np.std(v)) for k, v in sorted(logs.items()) if len(v) >= 5}
