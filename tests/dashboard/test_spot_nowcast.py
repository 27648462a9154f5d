"""The Plan page's spot section in headless Chromium for a plan conditioned on a recent market: it says
which model produced the spot figures (the nowcast, what it saw and what it replaced), and the replay
beside it predicts with the same choice."""

from __future__ import annotations

from dataclasses import replace

import pytest
from dashboard_harness import Browsed
from test_browser import _api
from test_spot_replay import _replay_done, fleet_traces

from srift.services.traces import import_traces
from srift.spot.traces import TraceSource

pytestmark = pytest.mark.browser


def test_a_nowcast_plan_says_which_model_made_its_spot_figures(browsed: Browsed) -> None:
    history = fleet_traces()
    tail = [4 if i % 12 < 2 else 0 for i in range(24 * 12)]  # the last day: capacity gone 50 min an hour
    base = history[0]
    source = TraceSource("user", "stormy.csv#aws/us-east-1a/p3.2xlarge", None, "2" * 64)
    stormy = replace(base, counts=base.counts[: -len(tail)] + tuple(tail), source=source)
    import_traces(settings=browsed.server.settings, traces=[*history, stormy])
    plan = _api(
        browsed,
        "POST",
        "/plans",
        {
            "model": browsed.server.model,
            "global_batch": 512,
            "iterations": 20000,
            "time_limit_s": 24 * 3600,
            "market": "spot",
            "availability": {"p3.2xlarge": 4},
            "spot_samples": 200,
            "recent_market": {"trace": stormy.name},
        },
    )
    spot = plan["spot"]
    assert spot["spot_model"].startswith("nowcast(look-back ")
    browsed.goto(f"/?plan={plan['id']}")
    browsed.page.wait_for_selector("body[data-ready]")
    _replay_done(browsed)
    note = browsed.page.inner_text("#plan-spot-note")
    assert note.startswith(f"Spot model: {spot['spot_model']}.")
    assert f"Conditioned on {stormy.name}" in note and "Without the look-back" in note
    assert "the fitted law's Monte Carlo" in note
    status = browsed.page.inner_text("#plan-replay-status")
    assert f"(spot model: {spot['spot_model']}; the replay's own prediction conditions each window" in status
    browsed.screenshot("plan-spot-nowcast")
    browsed.assert_clean()
