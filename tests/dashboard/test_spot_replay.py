"""The Plan page's spot section in headless Chromium: a spot plan whose fleet the imported traces cover
shows its replay (finish-time and cost distribution, deadline misses, windows and traces) beside the
plan's prediction; a plan without spot VMs, or of a type no trace covers, says so and what the prediction
rests on."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from dashboard_harness import Browsed
from test_browser import _api, _ready, _submit_plan

from srift.services.traces import import_traces
from srift.spot.traces import SpotTrace
from srift.testing.spot import p3_fleet_traces

pytestmark = pytest.mark.browser
TIME_LIMIT_S = 24 * 3600


def to_fixed(v: float, digits: int) -> str:
    """JavaScript's Number.prototype.toFixed: the float's exact value rounded half away from zero, where
    Python's format rounds a tie to even (98.25 is "98.3" on the page and "98.2" from f"{98.25:.1f}")."""
    return str(Decimal(v).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def fmt_seconds(s: float) -> str:
    """common.js fmtSeconds, for the lengths a replay shows (minutes to days)."""
    if s < 7200:
        return f"{to_fixed(s / 60, 1)} min"
    if s < 172800:
        return f"{to_fixed(s / 3600, 2)} h"
    return f"{to_fixed(s / 86400, 1)} d"


def fmt_usd(v: float) -> str:
    """common.js fmtUsd."""
    return f"${to_fixed(v, 3)}" if abs(v) < 10 else f"${v:,.2f}"


def fmt_percent(v: float) -> str:
    """common.js fmtPercent."""
    return f"{to_fixed(v * 100, 1)}%"


def fleet_traces() -> list[SpotTrace]:
    """The seed-3 history of 4 × p3.2xlarge in us-east-1 (`p3_fleet_traces`) the Plan page's spot plans here
    are replayed through."""
    return p3_fleet_traces(seed=3)


def spot_fleet_form(page: Any) -> None:
    """The Plan form set to spot VMs, 4 × p3.2xlarge available: the fleet `fleet_traces` covers."""
    page.select_option("#plan-market", "spot")
    page.select_option("#plan-availability-type", "p3.2xlarge")
    page.fill("#plan-availability-count", "4")
    page.click("#plan-availability-add")


def _replay_done(b: Browsed) -> None:
    b.page.wait_for_selector("#plan-replay[data-state=done]", timeout=60_000)


def test_a_covered_spot_plan_shows_its_replay_beside_the_prediction(browsed: Browsed) -> None:
    # Two zones' history (of four): a replay through several traces, each of which costs it a programme of
    # its own (about a second); what the page shows is stated per replay, whatever the count.
    traces = fleet_traces()[:2]
    import_traces(settings=browsed.server.settings, traces=traces)
    _ready(browsed, "/")
    page = browsed.page
    spot_fleet_form(page)
    plan = _submit_plan(
        browsed, **{"global-batch": "512", "iterations": "20000", "time-limit": str(TIME_LIMIT_S)}
    )
    assert {(c["instance_type"], c["market"]) for c in plan["choices"]} == {("p3.2xlarge", "spot")}
    assert plan["spot"] is not None and plan["fallback"] is not None
    _replay_done(browsed)
    answer = _api(browsed, "GET", f"/plans/{plan['id']}/replay")
    assert answer["status"] == "replayed", answer["reason"]
    rep, spot = answer["replay"], plan["spot"]
    srift = next(p for p in rep["policies"] if p["policy"] == "srift")["replayed"]

    status = page.inner_text("#plan-replay-status")
    nodes = sum(c["count"] for c in plan["choices"])
    # The browser tests share one server: another test's traces of this fleet may be replayed too.
    assert rep["traces"] >= len(traces)
    assert f"{rep['windows']:,} windows of {rep['traces']} traces" in status
    assert f"{nodes} × p3.2xlarge in aws/us-east-1" in status and "the plan's time limit" in status
    cards = page.inner_text("#plan-replay-cards")
    assert f"{srift['deadline_misses']} of {srift['runs']:,} windows" in cards
    assert f"predicted {fmt_seconds(spot['expected_time_s'])}" in cards
    assert f"predicted {fmt_usd(spot['expected_cost_usd'])}" in cards

    rows = {
        r.split("\t")[0]: r.split("\t")[1:]
        for r in page.locator("#plan-replay-figures tbody tr").all_inner_texts()
    }
    assert rows["Finish time p10"] == [fmt_seconds(srift["finish_p10_s"]), fmt_seconds(spot["time_p10_s"])]
    assert rows["Finish time p50"] == [fmt_seconds(srift["finish_p50_s"]), fmt_seconds(spot["time_p50_s"])]
    assert rows["Finish time p90"] == [fmt_seconds(srift["finish_p90_s"]), fmt_seconds(spot["time_p90_s"])]
    assert rows["Cost, mean"] == [fmt_usd(srift["mean_cost_usd"]), fmt_usd(spot["expected_cost_usd"])]
    assert rows["Cost p90"] == [fmt_usd(srift["cost_p90_usd"]), fmt_usd(spot["cost_p90_usd"])]
    assert rows["Deadline misses"][0].startswith(f"{srift['deadline_misses']} of {srift['runs']:,} windows")

    finish, cost = browsed.chart("plan-replay-finish"), browsed.chart("plan-replay-cost")
    for figure, hist in ((finish, rep["distribution"]["finish_s"]), (cost, rep["distribution"]["cost_usd"])):
        (bars,) = figure["data"]
        assert bars["uid"] == "replayed" and bars["type"] == "bar" and len(bars["x"]) == 20
        assert bars["y"] == pytest.approx([100 * s for s in hist["shares"]])
        assert sum(bars["y"]) == pytest.approx(100.0)
    assert {s["name"] for s in finish["shapes"]} == {"predicted", "deadline"}
    marks = {s["name"]: s["x0"] for s in cost["shapes"]}
    assert marks == {
        "predicted": pytest.approx(spot["expected_cost_usd"]),
        "on-demand": pytest.approx(rep["on_demand_cost_usd"]),
    }
    assert cost["axes"]["x"] == "cost (USD)" and finish["axes"]["y"] == "% of windows"

    policies = page.locator("#plan-replay-policies-table tbody tr")
    assert policies.count() == 5
    assert "Srift" in page.inner_text("#plan-replay-policies-table tr.chosen")
    browsed.screenshot("plan-spot-replay")
    browsed.assert_clean()


def test_a_plan_without_spot_or_without_a_covering_trace_says_so(browsed: Browsed) -> None:
    base: dict[str, Any] = {"model": browsed.server.model, "global_batch": 256, "iterations": 2000}
    on_demand = _api(browsed, "POST", "/plans", {**base, "market": "on_demand"})
    browsed.goto(f"/?plan={on_demand['id']}")
    browsed.page.wait_for_selector("body[data-ready]")
    _replay_done(browsed)
    text = browsed.page.inner_text("#plan-spot-panel")
    assert "This plan runs no spot VMs" in text
    assert "Not replayed: the plan runs no spot VMs, so there is nothing to replay." in text

    # No shipped or imported trace covers g4dn.xlarge: the prediction rests on a widened fallback band.
    uncovered = _api(
        browsed,
        "POST",
        "/plans",
        {**base, "market": "spot", "availability": {"g4dn.xlarge": 4}, "spot_samples": 200},
    )
    assert uncovered["spot"] is not None
    browsed.goto(f"/?plan={uncovered['id']}")
    browsed.page.wait_for_selector("body[data-ready]")
    _replay_done(browsed)
    status = browsed.page.inner_text("#plan-replay-status")
    nodes = sum(c["count"] for c in uncovered["choices"])
    assert f"Not replayed: no trace covers {nodes} × g4dn.xlarge in aws/us-east-1" in status
    assert "srift traces import PATH" in status
    assert "The spot figures above rest on: g4dn.xlarge" in status and "fallback band" in status
    assert browsed.page.locator("#plan-replay-charts").is_hidden()
    browsed.assert_clean()
