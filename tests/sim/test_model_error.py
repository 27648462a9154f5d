"""The model-error band term: fitted by hand from cases, grouped by fleet, carried by simulate's band."""

from __future__ import annotations

import math

import pytest

from srift.sim import simulate
from srift.sim.model_error import Case, FleetGroup, ModelError, cases_from_report, shipped_model_error

from .kit import P3_2XL, flat, member, profile


def test_sigma_is_what_the_band_leaves_of_the_mean_square_by_hand() -> None:
    # one host: x = ln 1.1, ln 0.9 → mean x² = (0.09531² + 0.10536²)/2 = 0.010092; band σ 0.05 → 0.0025;
    # σ = √(0.010092 − 0.0025) = 0.08713. One type: |x| 0.02 inside a band of 0.05 → 0 (never negative).
    cases = [
        Case(FleetGroup.ONE_HOST, math.log(1.1), 0.05),
        Case(FleetGroup.ONE_HOST, math.log(0.9), 0.05),
        Case(FleetGroup.ONE_TYPE, 0.02, 0.05),
    ]
    got = ModelError.fit(cases, provenance={"runs": []})
    assert got.sigma["one_host"] == pytest.approx(
        math.sqrt((math.log(1.1) ** 2 + math.log(0.9) ** 2) / 2 - 0.0025)
    )
    assert got.sigma["one_type"] == 0.0
    assert "mixed" not in got.sigma
    assert got.sigma["all"] == pytest.approx(
        math.sqrt(max(0.0, (math.log(1.1) ** 2 + math.log(0.9) ** 2 + 0.02**2) / 3 - 0.0025))
    )
    assert got.cases == {"one_host": 2, "one_type": 1, "all": 3}
    assert ModelError.from_dict(got.to_dict()) == got


def test_a_bias_counts_as_error() -> None:
    # Every case measured 5 % slower than predicted, no spread about that: σ is the bias itself.
    got = ModelError.fit([Case(FleetGroup.MIXED, math.log(1.05), 0.0)] * 4, provenance={})
    assert got.sigma["mixed"] == pytest.approx(math.log(1.05))


def test_cases_from_a_report_leave_the_model_term_out_of_the_band() -> None:
    row = {
        "hosts": 2,
        "type_group": "mixed",
        "measured_iteration_s": 1.1,
        "predicted": {
            "iteration_s": 1.0,
            "band": {"terms": [{"source": "compute", "sigma": 0.03}, {"source": "model", "sigma": 0.5}]},
        },
    }
    (case,) = cases_from_report({"cases": [row, {**row, "measured_iteration_s": None}]})
    assert case == Case(FleetGroup.MIXED, math.log(1.1), pytest.approx(0.03))


def test_simulate_carries_the_term_of_the_fleets_group() -> None:
    error = ModelError(sigma={"one_host": 0.1, "one_type": 0.04, "all": 0.07}, cases={}, provenance={})
    one = simulate([member(P3_2XL, 1, 64, profile())], bandwidth=flat(8.0), model_error=error)
    two = simulate([member(P3_2XL, 2, 64, profile())], bandwidth=flat(8.0), model_error=error)
    assert one.band is not None and two.band is not None
    assert [(t.source, t.sigma) for t in one.band.terms] == [("model", 0.1)]
    assert ("model", 0.04) in [(t.source, t.sigma) for t in two.band.terms]
    assert one.iteration_p90_s == pytest.approx(0.3 * math.exp(1.2815515655446004 * 0.1))
    plain = simulate([member(P3_2XL, 1, 64, profile())], bandwidth=flat(8.0))
    assert plain.band is not None and not plain.band.terms


def test_the_shipped_file_says_where_it_comes_from() -> None:
    shipped = shipped_model_error()
    assert set(shipped.sigma) >= {"one_host", "one_type", "mixed", "all"}
    assert all(0.0 <= s < 0.5 for s in shipped.sigma.values())
    assert shipped.provenance["runs"] and shipped.provenance["commit"]
