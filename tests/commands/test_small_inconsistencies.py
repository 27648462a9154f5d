"""Issue #23's small inconsistencies, each pinned: a flag spelled once, "offer" never "any offer", and the
dashboard guide's token rules matching what the server enforces."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from srift.domain import MarketChoice
from srift.errors import NotFound
from srift.optimize.space import build_candidates
from srift.optimize.synthetic import synthetic_profile

ROOT = Path(__file__).resolve().parents[2]


def test_serve_has_no_bootstrap_flag_spelled_once() -> None:
    from srift.cli import build_app

    out = CliRunner().invoke(build_app(), ["serve", "--help"], terminal_width=200).output
    assert "--no-bootstrap" in out and "--no-no-bootstrap" not in out


@pytest.mark.parametrize(
    ("market", "words"), [(MarketChoice.ANY, "no offer"), (MarketChoice.SPOT, "no spot")]
)
def test_unknown_type_message_never_says_any_offer(market: MarketChoice, words: str) -> None:
    with pytest.raises(NotFound) as err:
        build_candidates(
            offers=(),
            profiles=(synthetic_profile("resnet50", "T4"),),
            market=market,
            availability={"g4dn.xlarg": 2},
            default_cap=4,
        )
    assert words in err.value.detail and "any offer" not in err.value.detail


def test_dashboard_guide_says_predicting_needs_no_token() -> None:
    """With auth on and no token, a prediction reaches validation (422) while a plan is refused (401)."""
    from fastapi.testclient import TestClient

    from srift.api.app import create_app
    from srift.settings import Settings

    guide = " ".join((ROOT / "docs" / "dashboard.md").read_text().split())
    assert "neither does predicting" in guide and "predicting and activating a model are writes" not in guide
    client = TestClient(create_app(Settings(database_url="sqlite://", auth_enabled=True)))
    assert client.post("/v1/predictions", json={}).status_code == 422
    assert client.post("/v1/plans", json={}).status_code == 401


def test_solve_budget_has_one_limit_in_the_schema_the_api_and_the_cli(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's SRIFT_MAX_SOLVE_BUDGET_S is the only rule: the schema states it as the maximum, and the
    REST API and the CLI refuse anything above it (even above the hard 60 s) with the same message."""
    import json

    from fastapi.testclient import TestClient
    from pydantic import ValidationError

    from srift.api.app import create_app
    from srift.cli import main
    from srift.limits import MAX_SOLVE_BUDGET_S
    from srift.settings import Settings, get_settings

    with pytest.raises(ValidationError):
        Settings(max_solve_budget_s=MAX_SOLVE_BUDGET_S + 1)
    request = {
        "profiles": [synthetic_profile("resnet50", "T4").to_dict()],
        "global_batch": 64,
        "iterations": 1000,
        "availability": {"g4dn.xlarge": 4},
    }
    settings = Settings(
        database_url=sqlite_url, data_dir=tmp_path, auth_enabled=False, max_solve_budget_s=12.0
    )
    client = TestClient(create_app(settings))
    schema = client.get("/openapi.json").json()["components"]["schemas"]["PlanRequest"]
    assert schema["properties"]["solve_budget_s"]["maximum"] == 12.0
    assert schema["properties"]["solve_budget_s"]["exclusiveMinimum"] == 0
    answers = {}
    for asked in (12.5, 45.0, 100.0):
        r = client.post("/v1/plans", json={**request, "solve_budget_s": asked})
        assert r.status_code == 422 and r.json()["field"] == "solve_budget_s", r.text
        answers[asked] = r.json()
    assert answers[100.0]["detail"] == "100 s is above this service's maximum of 12 s (solve budget)"
    assert {a["hint"] for a in answers.values()} == {
        "ask for at most 12 s (SRIFT_MAX_SOLVE_BUDGET_S sets the maximum, up to 60 s)"
    }

    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SRIFT_MAX_SOLVE_BUDGET_S", "12")
    get_settings.cache_clear()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(request))
    try:
        for flag in ("45", "100"):
            with pytest.raises(SystemExit) as done:
                main(["plan", str(path), "--solve-budget", flag])
            err = " ".join(capsys.readouterr().err.split())
            assert done.value.code == 2, err
            assert f"--solve-budget: {answers[float(flag)]['detail']}" in err  # the flag typed, not the field
            assert answers[float(flag)]["hint"] in err
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path), "--solve-budget", "0"])
        err = capsys.readouterr().err
        assert done.value.code == 2 and "--solve-budget" in err and "greater than 0" in err
    finally:
        get_settings.cache_clear()


def test_the_optimizer_guide_says_the_status_a_replan_that_does_not_fit_gets() -> None:
    """docs/optimizer.md said a re-plan (interruption or amendment) that fits no plan is answered 422; the
    API answers 409 `infeasible` (srift.errors.Infeasible), as its OpenAPI responses say."""
    import re

    from fastapi.testclient import TestClient

    from srift.api.app import create_app
    from srift.errors import Infeasible
    from srift.settings import Settings

    guide = " ".join((ROOT / "docs" / "optimizer.md").read_text().split())
    start = guide.index("An interruption re-plans the remaining iterations")
    paragraph = guide[start : guide.index("says by how much.", start)]
    said = re.findall(r"the (\d{3})\b[^.]*? says", paragraph + "says")
    assert said and set(said) == {str(Infeasible.status_code)}, said
    paths = TestClient(create_app(Settings(database_url="sqlite://"))).get("/openapi.json").json()["paths"]
    for verb in ("interruptions", "amendments"):
        answers = paths[f"/v1/jobs/{{job_id}}/{verb}"]["post"]["responses"]
        assert "infeasible" in answers[str(Infeasible.status_code)]["description"], verb
