"""The Plan page's recent market in headless Chromium: the form offers the imported traces by name (GET
/v1/traces) and an as-of time, a 422 on them shows next to the field, and a plan conditioned on the chosen
trace says which model produced its spot figures (the nowcast, what it saw and what it replaced), shows
the nowcast's P(any interruption), and the replay beside it predicts with the same choice."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from dashboard_harness import Browsed
from test_browser import UNPROCESSABLE, _ready, _submit_plan
from test_spot_replay import TIME_LIMIT_S, _replay_done, fleet_traces, fmt_percent, spot_fleet_form

from srift.services.traces import import_traces
from srift.spot.traces import TraceSource

pytestmark = pytest.mark.browser


def test_a_nowcast_plan_from_the_form_says_which_model_made_its_spot_figures(browsed: Browsed) -> None:
    # The first zone's history (of four) beside the stormy log: which model made the figures does not hang on
    # how many traces cover the fleet, and each covering trace costs the replay a programme of its own (about
    # a second) and the nowcast a fit.
    history = fleet_traces()[:1]
    tail = [4 if i % 12 < 2 else 0 for i in range(24 * 12)]  # the last day: capacity gone 50 min an hour
    base = history[0]
    source = TraceSource("user", "stormy.csv#aws/us-east-1a/p3.2xlarge", None, "2" * 64)
    stormy = replace(base, counts=base.counts[: -len(tail)] + tuple(tail), source=source)
    import_traces(settings=browsed.server.settings, traces=[*history, stormy])
    _ready(browsed, "/")
    page = browsed.page
    spot_fleet_form(page)
    page.click("#plan-geo summary")
    offered = page.locator("#plan-recent-trace option").evaluate_all("os => os.map((o) => o.value)")
    assert offered[0] == "" and stormy.name in offered and base.name in offered
    page.select_option("#plan-recent-trace", stormy.name)
    # An as-of time past the log's end: the API's 422 shows under the as-of field.
    page.fill("#plan-recent-as-of", str(2 * stormy.duration_s))
    page.fill("#plan-global-batch", "512")
    page.fill("#plan-iterations", "20000")
    page.fill("#plan-time-limit", str(TIME_LIMIT_S))
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    assert info.value.status == 422
    sent = json.loads(info.value.request.post_data or "{}")
    assert sent["recent_market"] == {"trace": stormy.name, "as_of_s": 2 * stormy.duration_s}
    error = info.value.json()
    assert error["field"] == "recent_market.as_of_s" and "outside the log" in error["detail"]
    message = page.locator("#plan-recent-as-of ~ .field-error")
    message.wait_for()
    assert error["detail"] in message.inner_text()
    assert page.get_attribute("#plan-recent-as-of", "aria-invalid") == "true"
    assert page.locator(".field-error:visible").count() == 1
    browsed.screenshot("plan-recent-market-bad-as-of")

    # The log's end (as-of left out): the plan's spot figures are the nowcast's.
    page.fill("#plan-recent-as-of", "")
    plan = _submit_plan(browsed)
    sent = plan["request"]["recent_market"]
    assert sent["trace"] == stormy.name and sent["as_of_s"] is None
    spot = plan["spot"]
    assert spot["spot_model"].startswith("nowcast(look-back ")
    assert spot["closed_form_time_s"] is None
    assert spot["nowcast"]["fitted_law"]["closed_form_time_s"] is not None
    _replay_done(browsed)
    note = page.inner_text("#plan-spot-note")
    assert note.startswith("The plan's total time and cost above restart the fleet in place after each")
    assert "these figures follow Srift's deadline policy." in note
    assert f"Spot model: {spot['spot_model']}." in note
    assert f"Conditioned on {stormy.name}" in note and "Without the look-back" in note
    assert "the fitted law's Monte Carlo" in note
    cards = page.inner_text("#plan-spot-cards")
    assert f"P(any) {fmt_percent(spot['p_interrupted'])}" in cards
    status = page.inner_text("#plan-replay-status")
    assert f"(spot model: {spot['spot_model']}; the replay's own prediction conditions each window" in status
    # A stored plan puts its recent market back into the form.
    browsed.goto(f"/?plan={plan['id']}")
    page.wait_for_selector("body[data-ready]")
    assert page.is_visible("#plan-recent-trace") and page.input_value("#plan-recent-trace") == stormy.name
    assert page.input_value("#plan-recent-as-of") == ""
    browsed.screenshot("plan-spot-nowcast")
    browsed.assert_clean(allowed=(UNPROCESSABLE,))
