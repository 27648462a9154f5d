"""BusBandwidthRegressor on real testbed samples: scikit-learn conventions, MTU split, positivity, tuning."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from srift.bandwidth.learner import MIN_BUSBW_GBPS, BusBandwidthRegressor
from srift.bandwidth.records import ProbeRecord
from srift.bandwidth.tuning import mape, noise_floor, stratified_split, tune_and_fit
from srift.errors import InvalidInput

FAST = {"n_estimators": 60, "max_depth": 4}


def _fast(**kwargs: object) -> BusBandwidthRegressor:
    return BusBandwidthRegressor(small_params=FAST, large_params=FAST, **kwargs)  # type: ignore[arg-type]


def test_scikit_learn_conventions(testbed_records: list[ProbeRecord]) -> None:
    model = _fast(random_state=3)
    params = model.get_params()
    assert params["random_state"] == 3 and params["small_objective"] == "reg:pseudohubererror"
    assert params["large_objective"] == "reg:squarederror"
    assert clone(model).get_params() == params
    assert not any(name.endswith("_") and not name.startswith("_") for name in vars(model))
    with pytest.raises(NotFittedError):
        model.predict(testbed_records[:3])
    assert model.fit(testbed_records) is model
    learned = {name for name in vars(model) if name.endswith("_") and not name.startswith("_")}
    assert {"vocabulary_", "hosts_", "small_booster_", "large_booster_", "n_features_in_"} <= learned
    assert model.get_params() == params  # fit never rewrites parameters
    model.set_params(random_state=4)
    assert model.random_state == 4


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"small_objective": "reg:linear-ish"}, "small_objective"),
        ({"large_params": {"max_depth": 0}}, "large_params.max_depth"),
        ({"small_params": {"trees": 5}}, "small_params"),
        ({"mtu_bytes": {"aws": 12}}, "mtu_bytes"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_parameters_are_validated_at_fit(
    testbed_records: list[ProbeRecord], kwargs: dict[str, object], field: str
) -> None:
    model = BusBandwidthRegressor(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as caught:
        model.fit(testbed_records[:50])
    assert caught.value.field == field
    assert not hasattr(model, "vocabulary_")


@pytest.mark.parametrize("log_target", [True, False])
def test_predictions_are_never_negative(testbed_records: list[ProbeRecord], log_target: bool) -> None:
    model = _fast(log_target=log_target).fit(testbed_records)
    profile = next(iter(model.hosts_.values()))
    sizes = np.array([1, 4, 64, 1500, 9000, 9001, 1 << 20, 1 << 34], dtype=float)
    for world in (2, 3, 4, 64):
        busbw = model.predict_host(profile, sizes=sizes, world_size=world, nodes=world, async_count=1)
        assert np.all(busbw >= MIN_BUSBW_GBPS) and np.all(np.isfinite(busbw))
    tiny = [dataclasses.replace(r, buffer_bytes=4) for r in testbed_records[:20]]
    assert np.all(model.predict(tiny) > 0)


def test_the_two_halves_split_at_the_providers_mtu(testbed_records: list[ProbeRecord]) -> None:
    from srift.bandwidth.features import host_rows

    model = _fast(mtu_bytes={"testbed": 9001}).fit(testbed_records)
    assert model.mtu_bytes_ == {"testbed": 9001}
    profile = next(iter(model.hosts_.values()))
    sizes = np.array([8192.0, 9001.0])
    rows = host_rows(profile, model.vocabulary_, sizes=sizes, world_size=2, nodes=2, async_count=1)
    small = np.exp(model.small_booster_.inplace_predict(rows))
    large = np.exp(model.large_booster_.inplace_predict(rows))
    both = model.predict_host(profile, sizes=sizes, world_size=2, nodes=2, async_count=1)
    assert both[0] == pytest.approx(small[0]) and both[1] == pytest.approx(large[1])
    assert small[1] != pytest.approx(large[1])


def test_save_and_load_give_the_same_predictions(testbed_records: list[ProbeRecord], tmp_path: Path) -> None:
    model = _fast().fit(testbed_records)
    meta = model.save(tmp_path / "m")
    again = BusBandwidthRegressor.load(tmp_path / "m", meta)
    sample = testbed_records[::7]
    np.testing.assert_allclose(again.predict(sample), model.predict(sample), rtol=1e-6)
    assert again.get_params() == model.get_params()


def test_noise_floor_is_the_error_of_the_configuration_mean(testbed_records: list[ProbeRecord]) -> None:
    base = testbed_records[0]
    twins = [dataclasses.replace(base, busbw_gbps=v, repeat=i) for i, v in enumerate([1.0, 3.0])]
    alone = dataclasses.replace(base, buffer_bytes=base.buffer_bytes * 2, busbw_gbps=5.0)
    # mean 2: |1-2|/1 and |3-2|/3; the configuration seen once says nothing about noise
    assert noise_floor([*twins, alone]) == pytest.approx((1 + 1 / 3) / 2)
    assert noise_floor([alone]) is None
    floor = noise_floor(testbed_records)
    assert floor is not None and 0 < floor < 0.5


def test_stratified_split_tests_every_part_of_the_grid(testbed_records: list[ProbeRecord]) -> None:
    train, test = stratified_split(testbed_records, test_fraction=0.1, seed=0)
    assert len(set(train) | set(test)) == len(testbed_records) and not set(train) & set(test)
    assert 0.07 <= len(test) / len(testbed_records) <= 0.13
    strata = {(r.buffer_bytes.bit_length(), r.world_size) for r in testbed_records}
    tested = {(testbed_records[i].buffer_bytes.bit_length(), testbed_records[i].world_size) for i in test}
    assert tested == strata
    again, _ = stratified_split(testbed_records, test_fraction=0.1, seed=0)
    assert list(again) == list(train)


def test_tuned_model_beats_the_acceptance_bounds_on_held_out_samples(
    testbed_records: list[ProbeRecord],
) -> None:
    model, report = tune_and_fit(testbed_records, seed=0, grid=[FAST, {"n_estimators": 150, "max_depth": 6}])
    metrics = report.metrics()
    assert metrics["n_train"] + metrics["n_test"] == len(testbed_records)
    assert metrics["test_mape_large"] <= 0.12 and metrics["test_mape_small"] <= 0.25
    for half in ("small", "large"):
        assert metrics[f"noise_floor_{half}"] is not None and metrics[f"cv_mape_{half}"] is not None
        # a model sees only what the configuration mean sees: it cannot be far below the floor
        assert metrics[f"test_mape_{half}"] >= 0.5 * metrics[f"noise_floor_{half}"]
    actual = np.array([r.busbw_gbps for r in testbed_records])
    assert mape(model.predict(testbed_records), actual) < 0.25
