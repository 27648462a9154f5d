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
