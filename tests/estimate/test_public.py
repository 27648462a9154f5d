"""The public table's calibration reads exactly the measurement registry's entries: its fit rows, its
measured kernel time, from the file whose hash the registry pins."""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from statistics import NormalDist
from typing import Any

import pytest

from srift.domain.structure import Precision
from srift.errors import ConfigurationError
from srift.estimate import public
from srift.estimate.roofline import Efficiency
from srift.measurements import Use
from srift.refmodels.build import load_structure
from srift.sim.band import Z90
from srift.testing.measurements import move_row, registry_with

structure_of = functools.lru_cache(maxsize=None)(load_structure)

ONE_ROW = "RTX 3090/resnet50/fp32"


def test_the_fit_rows_are_the_single_gpu_rows_and_the_rest_only_check() -> None:
    table = public.read_table()
    fit = public.registered_rows(Use.FIT)
    check = public.registered_rows(Use.CHECK)
    assert len(fit) == 64 and all(r.gpus == 1 for r in fit)
    assert check and all(r.gpus > 1 for r in check)
    assert sorted(r.id for r in fit + check) == sorted(r.id for r in table)
    assert ONE_ROW in {r.id for r in fit}


def test_a_fit_row_moved_out_of_the_registry_changes_the_calibration() -> None:
    shipped = public.calibrate(structure_of).to_dict()
    fewer = registry_with(
        lambda d: move_row(d, ONE_ROW, source="lambdal-single-gpu", target="lambdal-multi-gpu")
    )
    assert ONE_ROW not in {r.id for r in public.registered_rows(Use.FIT, registry=fewer)}
    refit = public.calibrate(structure_of, registry=fewer).to_dict()
    assert refit["fitted_on"].startswith("63 single-GPU rows")
    assert (refit["efficiency"], refit["factors"]) != (shipped["efficiency"], shipped["factors"])


def test_a_fit_becomes_a_calibration_unrounded_and_the_shipped_one_rounds_it() -> None:
    """A held-out check estimates with the fit itself (Fit.calibration); the shipped calibration is the same
    fit on the same rows, rounded to 4 digits."""
    fitted = public.fit(public.registered_rows(Use.FIT), structure_of, kernel_s=public.EAGER_KERNEL_S)
    held = fitted.calibration(name="held", spreads={"model": 0.1})
    assert (held.efficiency, held.factors, held.spreads) == (
        fitted.efficiency,
        fitted.factors,
        {"model": 0.1},
    )
    assert held.factor("resnet50", Precision.FP16) == fitted.factors["resnet50/fp16"]
    shipped = public.calibrate(structure_of)
    assert shipped.efficiency.compute == round(held.efficiency.compute, 4) != held.efficiency.compute
    assert shipped.factors == {k: round(v, 4) for k, v in held.factors.items()}


def test_the_kernel_time_comes_from_the_registry() -> None:
    def slower(document: dict[str, Any]) -> None:
        for constant in document["sets"][public.KERNEL_SET]["constants"]:
            constant["value"] = 2 * constant["value"]

    registry = registry_with(slower)
    assert public.calibrate(structure_of, registry=registry).efficiency.kernel_s == 2 * public.EAGER_KERNEL_S


def test_a_multi_gpu_row_listed_as_fit_is_refused() -> None:
    multi = next(r.id for r in public.registered_rows(Use.CHECK))
    registry = registry_with(
        lambda d: move_row(d, multi, source="lambdal-multi-gpu", target="lambdal-single-gpu")
    )
    with pytest.raises(ConfigurationError, match="multi-GPU rows") as caught:
        public.calibrate(structure_of, registry=registry)
    assert caught.value.field == "rows" and "To fix:" in str(caught.value)


def test_a_row_the_registry_does_not_list_is_refused() -> None:
    def forget(document: dict[str, Any]) -> None:
        rows = document["sets"]["lambdal-single-gpu"]["rows"]
        document["sets"]["lambdal-single-gpu"]["rows"] = [r for r in rows if r != ONE_ROW]

    with pytest.raises(ConfigurationError, match=f"not in the registry: {ONE_ROW}"):
        public.registered_rows(Use.FIT, registry=registry_with(forget))


def test_band_coverage_of_errors_with_a_known_spread() -> None:
    # 1000 log-normal errors of log-σ 0.2 at the normal's evenly spaced quantiles: exactly the middle 800
    # lie between p10 and p90 of a band of the same σ; a band half as wide holds about 2Φ(0.64) − 1.
    sigma = 0.2
    z = [NormalDist().inv_cdf((i + 0.5) / 1000) for i in range(1000)]
    errors = [math.exp(sigma * x) - 1 for x in z]
    assert public.band_coverage([(e, sigma) for e in errors]) == 0.8
    assert public.band_coverage([(e, sigma / 2) for e in errors]) == pytest.approx(0.479, abs=0.005)
    edge = math.exp(Z90 * sigma)
    assert public.within_band(edge * (1 - 1e-9) - 1, sigma)
    assert not public.within_band(edge * (1 + 1e-9) - 1, sigma)
    assert not public.within_band(1 / edge * (1 - 1e-9) - 1, sigma)
    assert public.band_coverage([]) != public.band_coverage([])  # nan


def test_a_gpus_nested_spreads_rest_on_nothing_measured_on_it() -> None:
    gpus = ("A10", "RTX-3090", "RTX-A6000", "V100-SXM2-16GB")
    rows = [r for r in public.registered_rows(Use.FIT) if r.gpu in gpus]
    moved = [replace(r, samples_per_s=1.5 * r.samples_per_s) if r.gpu == "A10" else r for r in rows]
    before = public.nested_spreads(rows, structure_of, kernel_s=public.EAGER_KERNEL_S)
    after = public.nested_spreads(moved, structure_of, kernel_s=public.EAGER_KERNEL_S)
    assert sorted(before) == sorted(gpus)
    assert after["A10"] == before["A10"]
    assert all(after[g]["model"] != before[g]["model"] for g in gpus if g != "A10")


def test_a_rows_roofline_time_follows_the_row_and_the_structure_it_is_given() -> None:
    """The fits remember each (row, structure)'s arrays; a row with another batch, or another structure
    object for the same row, is priced afresh, and the same pair as a fresh _Work prices it."""
    row = next(r for r in public.registered_rows(Use.FIT) if r.id == ONE_ROW)
    structure = structure_of(row.model, row.precision)
    efficiency = Efficiency(compute=0.5, matmul_memory=0.5, other_memory=0.5, kernel_s=public.EAGER_KERNEL_S)
    once = public.predict_single(row, structure, efficiency, 1.0)
    assert once == row.per_gpu_batch / public._Work(row, structure).seconds(efficiency)
    heavier = replace(structure, update_bytes=10 * structure.update_bytes + 10**9)
    assert public.predict_single(row, heavier, efficiency, 1.0) < once
    bigger = replace(row, global_batch=2 * row.global_batch)
    assert public.predict_single(bigger, structure, efficiency, 1.0) != once
    assert public.predict_single(row, structure, efficiency, 1.0) == once
