"""Re-predicting a stored validation run from its work folder gives the run's own predictions back, and
follows the current code: the protocol's before/after comparison."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from srift.db import migrate
from srift.db.session import transaction
from srift.domain import ModelProfile
from srift.errors import EnvironmentProblem
from srift.profiling.store import save_profile
from srift.settings import get_settings
from srift.testbed import load_spec
from srift.testbed.catalog import register_types
from srift.validation import stats
from srift.validation.colocation import ColocationFactors
from srift.validation.context import DEFAULT_SPEC, BandwidthSource, Effort
from srift.validation.matrix import Fleet, Group
from srift.validation.rescore import case_colocation, case_fleet, rescore
from srift.validation.steps import CaseInputs, predict_case
from tests.sim.kit import profile


def test_fleet_labels_parse_back_to_their_fleet() -> None:
    fleet = Fleet((Group("tbv.small", 2, 16), Group("tbv.large", 2, 48)))
    assert case_fleet(fleet.label()) == fleet
    across = Fleet((Group("tbv.small", 1, 32, "east"), Group("tbv.large", 1, 32, "west")))
    assert case_fleet(across.label()) == across
    with pytest.raises(ValueError, match="not a fleet label"):
        case_fleet("two small hosts")


def _profile(accelerator: str, scale: float) -> ModelProfile:
    base = profile(
        accelerator=accelerator,
        fw_s=0.02 * scale,
        bw_s=0.04 * scale,
        layers=[(300_000, (i + 1) / 8) for i in range(8)],
        cv=0.05,
    )
    return dataclasses.replace(base, model="toy")


def test_a_stored_run_rescores_to_its_own_predictions(tmp_path: Path) -> None:
    spec = load_spec(DEFAULT_SPEC)
    url = f"sqlite:///{tmp_path / 'validate.db'}"
    migrate.upgrade(url)
    with transaction(url) as session:
        register_types(session=session, spec=spec)
        ids = {
            ("toy", "tbv.small"): save_profile(session=session, profile=_profile("tbv.small", 2.0)),
            ("toy", "tbv.large"): save_profile(session=session, profile=_profile("tbv.large", 1.0)),
        }
    inputs = CaseInputs(
        url=url,
        settings=get_settings().model_copy(update={"database_url": url, "models_dir": tmp_path / "models"}),
        spec=spec,
        profile_ids=ids,
        effort=Effort.quick(),
        seed=0,
        bandwidth=BandwidthSource.PRIOR,
    )
    mixed = Fleet((Group("tbv.small", 1, 16), Group("tbv.large", 1, 48)))
    factors = ColocationFactors(factors=(3.0, 3.0), ratios=((3.0,), (3.0,)), straggler_cv=(None, None))
    cases: list[dict[str, Any]] = []
    for fleet, colocation in ((mixed, factors), (Fleet((Group("tbv.small", 2, 32),)), None)):
        predicted = predict_case(inputs, "toy", fleet, colocation)
        measured = predicted["iteration_s"] * 1.05
        cases.append(
            {
                "model": "toy",
                "fleet": fleet.label(),
                "predicted": predicted,
                "measured_iteration_s": measured,
                "error": stats.relative_error(predicted["iteration_s"], measured),
                **({"colocation": colocation.to_dict()} if colocation else {}),
            }
        )
    report = {
        "level": "quick",
        "workdir": str(tmp_path),
        "testbed": {"spec": spec.to_dict()},
        "profiles": [{"model": m, "instance_type": t, "profile_id": i} for (m, t), i in ids.items()],
        "bandwidth_source": "prior",
        "seed": 0,
        "cases": cases,
    }
    assert case_colocation(cases[0]) == factors
    again = rescore(report)
    for before, after in zip(cases, again["cases"], strict=True):
        assert after["predicted"]["iteration_s"] == pytest.approx(
            before["predicted"]["iteration_s"], rel=1e-12
        )
        assert after["error"] == pytest.approx(-0.05 / 1.05, rel=1e-9)
    # the co-location factor is part of the stored run: without it the mixed case is faster
    assert cases[0]["predicted"]["unadapted_iteration_s"] < cases[0]["predicted"]["iteration_s"]


def test_a_run_whose_work_folder_is_gone_says_how_to_keep_it(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as err:
        rescore({"workdir": str(tmp_path / "gone"), "cases": []})
    assert "--workdir" in str(err.value)
