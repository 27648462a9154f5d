"""BusBandwidthRegressor: two XGBoost models split at the MTU, scikit-learn style (Srift §4.2).

Below the MTU allreduce is latency-bound, above it bandwidth-bound; one model over both predicts negative
bandwidth for small buffers, so we fit one per half: pseudo-Huber loss for the small half (robust to
the outliers of tiny transfers) and squared error for the large one, both selectable. By default the
models learn log busbw, so a prediction is exp(·) > 0; with `log_target=False` predictions are clipped to
MIN_BUSBW_GBPS. Import this module lazily: it pulls in xgboost and scikit-learn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from srift.bandwidth.features import (
    DEFAULT_MTU_BYTES,
    FALLBACK_MTU_BYTES,
    FEATURE_NAMES,
    build_vocabulary,
    feature_matrix,
    host_profiles,
    host_rows,
    mtu_for,
)
from srift.bandwidth.records import ProbeRecord
from srift.domain.host import HOST_FIELDS, HostFacts
from srift.errors import InvalidInput

OBJECTIVES = ("reg:pseudohubererror", "reg:squarederror", "reg:absoluteerror", "reg:gamma")
MIN_BUSBW_GBPS = 1e-9
DEFAULT_XGB_PARAMS: Mapping[str, Any] = {
    "n_estimators": 300,
    "max_depth": 6,
    "learning_rate": 0.1,
    "min_child_weight": 1.0,
    "subsample": 1.0,
    "huber_slope": 1.0,
}
_XGB_KEYS = frozenset(DEFAULT_XGB_PARAMS)
_MIN_SAMPLES_PER_HALF = 2


@dataclass(frozen=True, slots=True)
class _Params:
    mtu_bytes: dict[str, int]
    default_mtu_bytes: int
    small: dict[str, Any]
    large: dict[str, Any]


class BusBandwidthRegressor(BaseEstimator, RegressorMixin):  # type: ignore[misc]
    """Predicts allreduce bus bandwidth (Gbit/s) from probe records (X: a sequence of ProbeRecord).

    Parameters (validated together in `_validated_params`, at fit time, as scikit-learn does):
      mtu_bytes: provider → MTU in bytes (None: DEFAULT_MTU_BYTES: 9001 for aws and testbed);
      default_mtu_bytes: MTU of providers not in the map; sizes < MTU go to the small model;
      small_objective / large_objective: XGBoost objectives of the two halves;
      log_target: learn log(busbw) (predictions always > 0) instead of busbw (clipped at MIN_BUSBW_GBPS);
      small_params / large_params: XGBoost hyperparameters per half (keys of DEFAULT_XGB_PARAMS);
      random_state, n_jobs: seed and threads of XGBoost.

    Learned attributes: vocabulary_, hosts_, small_booster_, large_booster_ (None when that half had no
    samples; the other half then answers), mtu_bytes_, n_features_in_, feature_names_in_.
    """

    def __init__(
        self,
        *,
        mtu_bytes: Mapping[str, int] | None = None,
        default_mtu_bytes: int = FALLBACK_MTU_BYTES,
        small_objective: str = "reg:pseudohubererror",
        large_objective: str = "reg:squarederror",
        log_target: bool = True,
        small_params: Mapping[str, Any] | None = None,
        large_params: Mapping[str, Any] | None = None,
        random_state: int = 0,
        n_jobs: int = 1,
    ) -> None:
        self.mtu_bytes = mtu_bytes
        self.default_mtu_bytes = default_mtu_bytes
        self.small_objective = small_objective
        self.large_objective = large_objective
        self.log_target = log_target
        self.small_params = small_params
        self.large_params = large_params
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _validated_params(self) -> _Params:
        """Every parameter check in one place; returns the resolved values."""
        mtu = dict(DEFAULT_MTU_BYTES if self.mtu_bytes is None else self.mtu_bytes)
        for provider, value in [*mtu.items(), ("default", self.default_mtu_bytes)]:
            if isinstance(value, bool) or not isinstance(value, int) or not 64 <= value <= 1 << 20:
                raise InvalidInput(
                    f"MTU for {provider} must be an integer number of bytes in 64..1048576, got {value!r}",
                    hint="use e.g. 9001 for EC2 or 1500 for Ethernet",
                    field="mtu_bytes",
                )
        for name in ("small_objective", "large_objective"):
            if getattr(self, name) not in OBJECTIVES:
                raise InvalidInput(
                    f"{name} {getattr(self, name)!r} is not supported",
                    hint=f"use one of {', '.join(OBJECTIVES)}",
                    field=name,
                )
        if not isinstance(self.n_jobs, int) or self.n_jobs < 1:
            raise InvalidInput("n_jobs must be ≥ 1", hint="use 1 on shared machines", field="n_jobs")
        halves = {}
        for name in ("small_params", "large_params"):
            given = dict(getattr(self, name) or {})
            unknown = sorted(set(given) - _XGB_KEYS)
            if unknown:
                raise InvalidInput(
                    f"{name} has unknown keys {unknown}", hint=f"use {sorted(_XGB_KEYS)}", field=name
                )
            merged = {**DEFAULT_XGB_PARAMS, **given}
            checks = (
                ("n_estimators", 1, 5000),
                ("max_depth", 1, 16),
                ("learning_rate", 1e-4, 1.0),
                ("min_child_weight", 0.0, 1e4),
                ("subsample", 0.05, 1.0),
                ("huber_slope", 1e-4, 1e3),
            )
            for key, low, high in checks:
                value = merged[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                    raise InvalidInput(
                        f"{name}.{key} must be in [{low}, {high}], got {value!r}",
                        hint="pick a value in range",
                        field=f"{name}.{key}",
                    )
            halves[name] = merged
        return _Params(
            mtu_bytes={k.lower(): int(v) for k, v in mtu.items()},
            default_mtu_bytes=int(self.default_mtu_bytes),
            small=halves["small_params"],
            large=halves["large_params"],
        )

    def _small_mask(self, records: Sequence[ProbeRecord], mtu: Mapping[str, int], default: int) -> np.ndarray:
        return np.array([r.buffer_bytes < mtu_for(r.provider, mtu, default) for r in records], dtype=bool)

    def _fit_half(
        self, features: np.ndarray, target: np.ndarray, *, objective: str, params: Mapping[str, Any]
    ) -> Any:
        import xgboost as xgb

        booster_params = {
            "objective": objective,
            "max_depth": int(params["max_depth"]),
            "eta": float(params["learning_rate"]),
            "min_child_weight": float(params["min_child_weight"]),
            "subsample": float(params["subsample"]),
            "base_score": float(np.median(target)),
            "nthread": self.n_jobs,
            "seed": self.random_state,
            "verbosity": 0,
        }
        if objective == "reg:pseudohubererror":
            booster_params["huber_slope"] = float(params["huber_slope"])
        data = xgb.DMatrix(features, label=target, feature_names=list(FEATURE_NAMES), nthread=self.n_jobs)
        return xgb.train(booster_params, data, num_boost_round=int(params["n_estimators"]))

    def fit(self, X: Sequence[ProbeRecord], y: Sequence[float] | np.ndarray | None = None) -> Self:
        """Fit both halves on probe records; `y` defaults to each record's busbw_gbps."""
        params = self._validated_params()
        records = list(X)
        if len(records) < _MIN_SAMPLES_PER_HALF:
            raise InvalidInput(
                f"need at least {_MIN_SAMPLES_PER_HALF} samples to fit, got {len(records)}",
                hint="store more probe samples (srift probe run / import)",
            )
        target = np.asarray([r.busbw_gbps for r in records] if y is None else y, dtype=np.float64)
        if target.shape != (len(records),) or not np.all(np.isfinite(target)) or target.min() <= 0:
            raise InvalidInput(
                "targets must be one positive finite busbw per sample",
                hint="drop samples with zero bandwidth",
            )
        self.vocabulary_ = build_vocabulary(records)
        self.hosts_: dict[tuple[str, str], HostFacts] = host_profiles(records)
        self.mtu_bytes_ = params.mtu_bytes
        self.default_mtu_bytes_ = params.default_mtu_bytes
        features = feature_matrix(records, self.vocabulary_)
        label = np.log(target) if self.log_target else target
        small = self._small_mask(records, params.mtu_bytes, params.default_mtu_bytes)
        self.small_booster_ = (
            self._fit_half(features[small], label[small], objective=self.small_objective, params=params.small)
            if small.sum() >= _MIN_SAMPLES_PER_HALF
            else None
        )
        self.large_booster_ = (
            self._fit_half(
                features[~small], label[~small], objective=self.large_objective, params=params.large
            )
            if (~small).sum() >= _MIN_SAMPLES_PER_HALF
            else None
        )
        if self.small_booster_ is None and self.large_booster_ is None:
            raise InvalidInput(
                "too few samples on either side of the MTU",
                hint="probe more buffer sizes, below and above the MTU",
            )
        self.n_features_in_ = len(FEATURE_NAMES)
        self.feature_names_in_ = np.asarray(FEATURE_NAMES, dtype=object)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "vocabulary_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("BusBandwidthRegressor is not fitted yet; call fit() first")

    def predict_features(self, features: np.ndarray, *, small: np.ndarray) -> np.ndarray:
        """Busbw (Gbit/s, ≥ MIN_BUSBW_GBPS) for encoded rows; `small` marks rows below their MTU."""
        self._check_fitted()
        out = np.empty(len(features), dtype=np.float64)
        for mask, booster, other in (
            (small, self.small_booster_, self.large_booster_),
            (~small, self.large_booster_, self.small_booster_),
        ):
            if not mask.any():
                continue
            model: Any = booster if booster is not None else other
            out[mask] = model.inplace_predict(features[mask])
        if self.log_target:
            out = np.exp(np.clip(out, math.log(MIN_BUSBW_GBPS), 30.0))
        return np.maximum(out, MIN_BUSBW_GBPS)

    def predict(self, X: Sequence[ProbeRecord]) -> np.ndarray:
        """Predicted busbw (Gbit/s) per record (measurement fields are ignored)."""
        self._check_fitted()
        records = list(X)
        if not records:
            return np.empty(0)
        features = feature_matrix(records, self.vocabulary_)
        return self.predict_features(
            features, small=self._small_mask(records, self.mtu_bytes_, self.default_mtu_bytes_)
        )

    def covers(self, *, provider: str, instance_type: str) -> bool:
        self._check_fitted()
        return (provider, instance_type) in self.hosts_

    def predict_host(
        self, profile: HostFacts, *, sizes: np.ndarray, world_size: int, nodes: int, async_count: int
    ) -> np.ndarray:
        """Vectorised busbw (Gbit/s) for one host profile over many buffer sizes."""
        self._check_fitted()
        rows = host_rows(
            profile,
            self.vocabulary_,
            sizes=sizes,
            world_size=world_size,
            nodes=nodes,
            async_count=async_count,
        )
        mtu = mtu_for(profile.provider, self.mtu_bytes_, self.default_mtu_bytes_)
        return self.predict_features(rows, small=np.asarray(sizes) < mtu)

    # -- artifacts -------------------------------------------------------------------------------------

    def save(self, directory: Path) -> dict[str, Any]:
        """Write small.json / large.json (XGBoost JSON boosters); return the metadata needed to load them."""
        self._check_fitted()
        directory.mkdir(parents=True, exist_ok=True)
        files = {}
        for half, booster in (("small", self.small_booster_), ("large", self.large_booster_)):
            if booster is not None:
                booster.save_model(str(directory / f"{half}.json"))
                files[half] = f"{half}.json"
        return {
            "params": _jsonable(self.get_params()),
            "feature_names": list(FEATURE_NAMES),
            "vocabulary": self.vocabulary_,
            "hosts": [h.host_facts() for h in self.hosts_.values()],
            "mtu_bytes": self.mtu_bytes_,
            "default_mtu_bytes": self.default_mtu_bytes_,
            "files": files,
        }

    @classmethod
    def load(cls, directory: Path, learner: Mapping[str, Any]) -> BusBandwidthRegressor:
        """Rebuild a fitted regressor from `save`'s files and metadata."""
        import xgboost as xgb

        if list(learner.get("feature_names", [])) != list(FEATURE_NAMES):
            raise InvalidInput(
                f"model in {directory} was trained on other features",
                hint="retrain it with `srift models train`",
            )
        model = cls(**learner["params"])
        model.vocabulary_ = {k: list(v) for k, v in learner["vocabulary"].items()}
        model.hosts_ = {
            (h["provider"], h["instance_type"]): HostFacts(**{k: h[k] for k in HOST_FIELDS})
            for h in learner["hosts"]
        }
        model.mtu_bytes_ = {k: int(v) for k, v in learner["mtu_bytes"].items()}
        model.default_mtu_bytes_ = int(learner["default_mtu_bytes"])
        files = learner.get("files", {})
        for half in ("small", "large"):
            booster = None
            if half in files:
                booster = xgb.Booster(model_file=str(directory / files[half]))
                booster.set_param({"nthread": 1})
            setattr(model, f"{half}_booster_", booster)
        model.n_features_in_ = len(FEATURE_NAMES)
        model.feature_names_in_ = np.asarray(FEATURE_NAMES, dtype=object)
        return model


def _jsonable(params: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        json.dumps({k: (dict(v) if isinstance(v, Mapping) else v) for k, v in params.items()})
    )
    return out
