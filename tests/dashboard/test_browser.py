"""The dashboard in headless Chromium against a live server on the embedded default (see conftest.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from dashboard_harness import SAMPLE_BUFFERS, SAMPLE_TYPE, SAMPLE_WORLD_SIZES, Browsed, profile_document

from srift.db.session import transaction
from srift.domain.states import JobState
from srift.jobs import store as job_store

pytestmark = pytest.mark.browser

PAGES_READY = {
    "/": "#plan-model option[value]",
    "/predict": "#predict-fleet tr",
    "/bandwidth": "#bw-chart .main-svg",
    "/jobs": "#runs-table > *",
    "/catalog": "#catalog-types tbody tr",
}
UNPROCESSABLE = "status of 422"
CONFLICT = "status of 409"


def _ready(b: Browsed, path: str) -> None:
    b.goto(path)
    b.page.wait_for_selector("body[data-ready]")
    b.page.wait_for_selector(PAGES_READY[path], state="attached")


def test_every_page_renders_with_the_shipped_data(browsed: Browsed) -> None:
    for path in PAGES_READY:
        _ready(browsed, path)
        assert browsed.page.locator(".form-error:visible, .field-error:visible").count() == 0, path
        nav = browsed.page.locator("nav a.active")
        assert nav.count() == 1 and nav.get_attribute("href") == path
        browsed.screenshot(f"page-{path.strip('/') or 'plan'}")
    browsed.assert_clean()


def test_plan_and_predict_pages_offer_the_reference_models_after_the_users_own(browsed: Browsed) -> None:
    for path, select in (("/", "#plan-model"), ("/predict", "#predict-model")):
        _ready(browsed, path)
        browsed.page.wait_for_selector(f"{select} option[value='resnet50']", state="attached")
        values = browsed.page.eval_on_selector_all(f"{select} option", "os => os.map((o) => o.value)")
        assert values[0] == browsed.server.model, path
        assert {"resnet50", "bert-base", "gpt2-small", "vit-b16"} <= set(values), path
        label = browsed.page.inner_text(f"{select} option[value='resnet50']")
        assert "reference model" in label, label
    browsed.assert_clean()


def test_catalog_filters_by_gpu_and_name(browsed: Browsed) -> None:
    _ready(browsed, "/catalog")
    rows = browsed.page.locator("#catalog-types tbody tr")
    everything = rows.count()
    assert everything > 10
    browsed.page.select_option("#catalog-gpu", "V100")
    assert 0 < rows.count() < everything
    assert all("V100" in text for text in rows.all_inner_texts())
    browsed.page.fill("#catalog-search", "p3.2x")
    assert rows.count() == 1 and "p3.2xlarge" in rows.first.inner_text()
    assert "$" in rows.first.inner_text()
    browsed.screenshot("catalog-filtered")
    browsed.assert_clean()


def _bandwidth_traces(b: Browsed) -> dict[str, dict[str, Any]]:
    return {t["uid"]: t for t in b.chart("bw-chart")["data"]}


def _wait_for_traces(b: Browsed, uids: set[str]) -> dict[str, dict[str, Any]]:
    b.page.wait_for_function(
        "(want) => { const d = document.getElementById('bw-chart').data || [];"
        " return want.every(u => d.some(t => t.uid === u)); }",
        arg=sorted(uids),
    )
    return _bandwidth_traces(b)


def test_bandwidth_page_draws_curves_with_samples_activates_and_rolls_back(browsed: Browsed) -> None:
    shipped = _api(browsed, "GET", "/bandwidth-models")["active"]
    trained = _api(browsed, "POST", "/bandwidth-models", {"instance_types": [SAMPLE_TYPE]})
    assert shipped and not trained["is_active"]
    _ready(browsed, "/bandwidth")
    page = browsed.page
    # A cloud user's page: the catalog's GPU type with samples, drawn by the prior with its samples (the
    # shipped model covers the testbed types only), at the probed world sizes.
    assert page.input_value("#bw-provider") == "aws"
    assert page.input_value("#bw-instance") == SAMPLE_TYPE
    assert page.input_value("#bw-world-sizes") == ", ".join(str(w) for w in SAMPLE_WORLD_SIZES)
    traces = _wait_for_traces(
        browsed, {f"model-{w}" for w in SAMPLE_WORLD_SIZES} | {f"samples-{w}" for w in SAMPLE_WORLD_SIZES}
    )
    for w in SAMPLE_WORLD_SIZES:
        line, points = traces[f"model-{w}"], traces[f"samples-{w}"]
        assert len(line["x"]) == 41 and all(y > 0 for y in line["y"])
        assert line["y"][-1] > line["y"][0]
        assert len(points["x"]) == 2 * len(SAMPLE_BUFFERS)
        assert sorted(set(points["x"])) == list(SAMPLE_BUFFERS)
    assert page.locator("#bw-chart .scatterlayer .trace .lines path").count() >= len(SAMPLE_WORLD_SIZES)
    assert page.locator("#bw-chart .scatterlayer .trace .points path").count() >= 2 * len(SAMPLE_BUFFERS)
    assert "prior:alpha-beta" in page.inner_text("#bw-sources"), "the shipped model does not cover this type"
    # Training on these 60 samples warns: fewer than 100 on each side of the MTU.
    row = page.locator("#bw-versions tbody tr", has_text=trained["version"])
    assert "too few" in row.inner_text()
    warnings = page.inner_text("#bw-warnings")
    assert (
        trained["version"] in warnings and "below the MTU" in warnings and "at or above the MTU" in warnings
    )
    assert len(trained["metrics"]["warnings"]) == 2

    page.select_option("#bw-provider", "testbed")
    page.wait_for_function(f"document.getElementById('bw-sources').textContent.includes('xgb:{shipped}')")
    page.select_option("#bw-provider", "aws")
    page.wait_for_function(f"document.getElementById('bw-instance').value === '{SAMPLE_TYPE}'")
    page.wait_for_function("document.getElementById('bw-sources').textContent.includes('prior:alpha-beta')")
    browsed.screenshot("bandwidth-curves")

    page.click(f"#bw-versions button[data-version='{trained['version']}']")
    page.wait_for_function(
        f"document.getElementById('bw-sources').textContent.includes('{trained['source']}')"
    )
    assert _api(browsed, "GET", "/bandwidth-models")["active"] == trained["version"]
    assert trained["version"] in page.locator("#bw-versions tr.chosen").inner_text()
    browsed.screenshot("bandwidth-activated")
    rollback = page.locator("#bw-rollback")
    assert shipped in rollback.inner_text()
    rollback.click()
    page.wait_for_function("document.getElementById('bw-sources').textContent.includes('prior:alpha-beta')")
    assert _api(browsed, "GET", "/bandwidth-models")["active"] == shipped

    page.fill("#bw-world-sizes", "1, 4")
    with page.expect_response(lambda r: "/curves" in r.url and r.status == 422) as info:
        page.click("#bw-draw")
    detail = info.value.json()["detail"]
    message = page.locator("#bw-world-sizes ~ .field-error")
    message.wait_for()
    assert detail in message.inner_text()
    assert "invalid" in (page.get_attribute("#bw-world-sizes", "class") or "")
    browsed.screenshot("bandwidth-bad-world-size")
    browsed.assert_clean(allowed=(UNPROCESSABLE,))


def test_a_chart_says_it_is_loading_and_why_it_cannot_be_drawn_when_the_chart_library_fails(
    browsed: Browsed,
) -> None:
    """The chart's place was blank while the 4.8 MB chart library loaded, and stayed blank if it failed: now
    it says "Loading the chart…" until the library arrives, then in words why there is no chart and what to
    do. The library's request is held (not timed) and then refused."""
    page = browsed.page
    held: list[Any] = []
    refuse = {"now": False}

    def hold(route: Any) -> None:
        if refuse["now"]:
            route.abort()
        else:
            held.append(route)

    page.route("**/static/vendor/plotly.min.js", hold)
    try:
        page.goto(browsed.server.url + "/bandwidth", wait_until="commit")
        loading = page.locator("#bw-chart > .chart-note")
        loading.wait_for(timeout=15_000)
        assert loading.inner_text() == "Loading the chart…" and loading.get_attribute("role") == "status"
        assert held, "the chart library was asked for"
        refuse["now"] = True
        while held:
            held.pop().abort()
        failed = page.locator("#bw-chart > .chart-note[role=alert]")
        failed.wait_for()
        message = failed.inner_text()
        assert (
            message.startswith("The chart could not be drawn: the chart library")
            and "To fix: reload" in message
        )
        assert page.locator("#bw-chart .main-svg").count() == 0
    finally:
        refuse["now"] = True
        while held:  # a request still held when an assertion failed
            held.pop().abort()
        page.unroute("**/static/vendor/plotly.min.js")
    browsed.screenshot("chart-library-failed")
    browsed.assert_clean(allowed=("net::ERR_FAILED",))


def _submit_plan(b: Browsed, **fields: str) -> dict[str, Any]:
    """Fill the plan form (element id suffix → value), submit, and return the API's answer."""
    page = b.page
    for name, value in fields.items():
        page.fill(f"#plan-{name}", value)
    with page.expect_response(lambda r: r.url.endswith("/v1/plans") and r.request.method == "POST") as info:
        page.click("#plan-submit")
    response = info.value
    body: dict[str, Any] = response.json()
    assert response.status == 201, body
    page.wait_for_selector("#plan-choices")
    page.wait_for_function("document.querySelectorAll('#plan-breakdown .barlayer .trace').length > 0")
    return body


def test_plan_page_shows_the_plan_every_evaluated_config_and_the_breakdown(browsed: Browsed) -> None:
    _ready(browsed, "/")
    page = browsed.page
    page.select_option("#plan-objective", "min_time")
    page.click("details summary")
    page.select_option("#plan-mode", "exhaustive")
    for name, count in (("g4dn.xlarge", "8"), ("p3.2xlarge", "4"), ("g5.xlarge", "4")):
        page.select_option("#plan-availability-type", name)
        page.fill("#plan-availability-count", count)
        page.click("#plan-availability-add")
    assert page.locator("#plan-availability-chips li").count() == 3
    plan = _submit_plan(
        browsed, **{"global-batch": "512", "iterations": "20000", "time-limit": "14400", "budget": "6"}
    )

    rows = page.locator("#plan-choices tbody tr")
    assert rows.count() == len(plan["choices"]) >= 1
    for row, choice in zip(rows.all_inner_texts(), plan["choices"], strict=True):
        assert choice["instance_type"] in row and str(choice["count"]) in row
    assert "CAP" in page.inner_text("#plan-baselines") and "TAP" in page.inner_text("#plan-baselines")
    # The band and the chance of meeting each limit, at the default confidence 0.9.
    assert plan["confidence"] == 0.9 and plan["request"]["confidence"] == 0.9
    cards = page.inner_text("#plan-cards")
    assert "p90" in cards and "P(deadline)" in cards and "limits checked at" in cards.lower()
    # One P(deadline) per plan: the band's, or the lower of it and the spot runs' (as the CLI prints it).
    chance = min(
        p
        for p in (plan["probability"]["meets_time_limit"], (plan.get("spot") or {}).get("p_meets_time_limit"))
        if p is not None
    )
    shown = ">99 %" if 0.99 < chance < 1 else f"{round(100 * chance)} %"
    assert cards.count("P(deadline)") == 1 and f"P(deadline) {shown}" in cards
    assert f"P(deadline) {shown}" in page.inner_text("#plan-baselines")
    assert "P(meets time limit)" not in page.inner_text("#plan-results")

    figure = browsed.chart("plan-scatter")
    traces = {t["uid"]: t for t in figure["data"]}
    feasible, infeasible = traces["evaluated-feasible"], traces["evaluated-infeasible"]
    evaluated = len(feasible["x"]) + len(infeasible["x"])
    assert evaluated == len(plan["pareto"]) == plan["pareto_total"] == plan["configs_evaluated"] >= 2
    assert len(infeasible["x"]) == sum(not p["feasible"] for p in plan["pareto"])
    assert len(traces["front"]["x"]) == sum(p["on_front"] for p in plan["pareto"])
    chosen = traces["chosen"]
    assert chosen["marker"]["symbol"] == "star" and len(chosen["x"]) == 1
    # The 4-hour time limit is the largest time the chart shows, so the axis is in hours.
    assert figure["axes"]["x"] == "total time (hours, log scale)"
    assert chosen["x"][0] == pytest.approx(plan["predicted"]["total_time_s"] / 3600)
    assert chosen["y"][0] == pytest.approx(plan["predicted"]["cost_usd"])
    assert [p for p in plan["pareto"] if p["chosen"]], "the API marks the chosen point too"
    assert sorted(s["name"] for s in figure["shapes"]) == ["budget", "time limit"]
    assert page.locator("#plan-scatter .scatterlayer .trace .points path").count() >= evaluated

    bars = {t["uid"]: t for t in browsed.chart("plan-breakdown")["data"]}
    assert set(bars) == {
        "compute_s",
        "straggler_wait_s",
        "exposed_intra_s",
        "exposed_network_s",
        "data_stall_s",
    }
    assert bars["compute_s"]["y"][0] == "Srift plan"
    stacked = sum(bars[k]["x"][0] for k in bars)
    assert stacked == pytest.approx(plan["predicted"]["iteration_s"], rel=0.05)
    browsed.screenshot("plan")
    browsed.assert_clean()


def test_plan_page_plans_a_reference_model_in_fp16(browsed: Browsed) -> None:
    """The Plan page has a precision field: bert-base at fp16 is planned with its fp16 profiles, cheaper
    than at fp32 (issue 48: the page planned fp32 only)."""
    _ready(browsed, "/")
    page = browsed.page
    page.wait_for_selector("#plan-model option[value='bert-base']", state="attached")
    page.select_option("#plan-model", "bert-base")
    costs, ids = {}, {}
    for precision in ("fp32", "fp16"):
        page.select_option("#plan-precision", precision)
        plan = _submit_plan(browsed, **{"global-batch": "256", "iterations": "2000"})
        assert plan["request"]["precision"] == precision and plan["precision"] == precision
        assert all("bert-base@" in s for s in plan["sources"] if s.startswith("profile:"))
        costs[precision], ids[precision] = plan["predicted"]["cost_usd"], plan["id"]
        page.wait_for_function(
            f"document.getElementById('plan-title').textContent.startsWith('Plan #{plan['id']}:')"
        )
    assert costs["fp16"] < costs["fp32"]
    browsed.screenshot("plan-fp16")
    # Each plan is a history entry (the page replaced the address, so Back left the page): Back shows the
    # fp32 plan again with its request in the form, Forward the fp16 one, and Back twice the empty form.
    assert page.url.endswith(f"/?plan={ids['fp16']}")
    for move, precision in ((page.go_back, "fp32"), (page.go_forward, "fp16"), (page.go_back, "fp32")):
        move()
        shown = ids[precision]
        page.wait_for_function(
            f"document.getElementById('plan-title').textContent.startsWith('Plan #{shown}:')"
        )
        assert page.url.endswith(f"/?plan={shown}") and page.input_value("#plan-precision") == precision
    page.go_back()
    page.wait_for_selector("#plan-empty", state="visible")
    assert page.url == browsed.server.url + "/" and page.locator("#plan-results").is_hidden()
    browsed.assert_clean()


def test_bad_plan_entries_show_the_api_message_next_to_their_field_and_a_missing_token_says_what_to_do(
    browsed: Browsed,
) -> None:
    _ready(browsed, "/")
    page = browsed.page
    page.fill("#plan-global-batch", "0")
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    assert info.value.status == 422
    error = info.value.json()
    assert error["field"] == "global_batch"
    message = page.locator("#plan-global-batch ~ .field-error")
    message.wait_for()
    assert error["detail"] in message.inner_text()
    assert page.get_attribute("#plan-global-batch", "aria-invalid") == "true"
    assert page.locator(".field-error:visible").count() == 1
    browsed.screenshot("plan-bad-global-batch")

    page.fill("#plan-global-batch", "256")
    page.select_option("#plan-availability-type", "g4dn.xlarge")
    page.click("#plan-availability-add")
    page.fill("#plan-budget", "0.01")
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    assert info.value.status == 409
    error = info.value.json()
    shown = page.locator(".field-error:visible, .form-error:visible")
    shown.first.wait_for()
    assert shown.count() == 1 and error["detail"] in shown.inner_text()
    if error["field"] == "budget_usd":
        assert page.locator("#plan-budget ~ .field-error").is_visible()
    browsed.screenshot("plan-infeasible")

    page.click("#token-clear")
    assert page.inner_text("#token-state") == "not set"
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    assert info.value.status == 401
    message = page.locator("#token-error")
    message.wait_for()
    assert "srift tokens create" in message.inner_text()
    browsed.screenshot("plan-no-token")
    page.fill("#api-token", browsed.server.token)
    page.click("#token-save")
    assert message.is_hidden() and page.inner_text("#token-state").startswith("saved")

    bad = profile_document(model="uploaded", accelerator="T4", speed=1.0)
    bad["layers"][0]["grad_bytes"] = -1
    page.set_input_files("#plan-profile-file", files=[_json_file("bad.json", bad)])
    page.fill("#plan-budget", "")
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    error = info.value.json()
    assert info.value.status == 422 and error["field"] == "profiles[0].layers[0].grad_bytes"
    upload_error = page.locator("#plan-profile-file ~ .field-error")
    upload_error.wait_for()
    assert error["field"] in upload_error.inner_text() and error["detail"] in upload_error.inner_text()
    browsed.screenshot("plan-bad-upload")

    good = profile_document(model="uploaded", accelerator="T4", speed=1.0)
    page.set_input_files("#plan-profile-file", files=[_json_file("good.json", good)])
    assert page.is_disabled("#plan-model")
    plan = _submit_plan(browsed)
    assert any(s.startswith("profile:inline uploaded@T4") for s in plan["sources"])
    page.click("#plan-profile-clear")
    assert page.is_enabled("#plan-model") and page.is_hidden("#plan-profile-clear")
    assert page.locator(".field-error:visible, .form-error:visible").count() == 0
    browsed.assert_clean(allowed=(UNPROCESSABLE, CONFLICT, "status of 401"))


def _json_file(name: str, document: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "mimeType": "application/json", "buffer": json.dumps(document).encode()}


def _api(b: Browsed, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {b.server.token}"}
    response = httpx.request(method, f"{b.server.url}/v1{path}", json=body, headers=headers, timeout=60)
    assert response.status_code < 300, response.text
    result: dict[str, Any] = response.json()
    return result


def test_plan_page_shows_locations_egress_data_loading_and_the_spot_outlook(browsed: Browsed) -> None:
    # Four T4 VMs per location at most and a global batch of 512 (batch ≤ 256 per VM): the fleet needs AWS and
    # GCP. 20 samples/s per core cannot feed a T4 on g4dn.xlarge (3 loader vCPUs).
    request = {
        "model": browsed.server.model,
        "global_batch": 2048,
        "iterations": 2000,
        "market": "any",
        "providers": ["aws", "gcp"],
        "regions": ["aws/us-east-1", "gcp/us-central1"],
        "availability": {"g4dn.xlarge": 4, "n1-standard-8-1xt4": 4},
        "input_pipeline": {"samples_per_s_per_core": 20, "bytes_per_sample": 110000},
        "interruption_rates": {"g4dn.xlarge": 0.5, "n1-standard-8-1xt4": 0.5},
        "spot_samples": 200,
    }
    plan = _api(browsed, "POST", "/plans", request)
    assert len(plan["locations"]) == 2 and plan["cost"]["egress_usd"] > 0, plan["warnings"]
    browsed.goto(f"/?plan={plan['id']}")
    page = browsed.page
    page.wait_for_selector("body[data-ready]")
    page.wait_for_selector("#plan-locations-table tbody tr")
    rows = page.locator("#plan-locations-table tbody tr").all_inner_texts()
    assert [r.split("\t")[0] for r in rows] == [loc["location"] for loc in plan["locations"]]
    cost_line = page.inner_text("#plan-cost-line").lower()
    assert "egress" in cost_line and f"{plan['cost']['egress_share'] * 100:.1f}%" in cost_line
    assert page.locator("#plan-egress-table tbody tr").count() == len(plan["egress"]) >= 2
    assert "internet" in page.inner_text("#plan-egress-table")
    loading = page.inner_text("#plan-loading-table")
    assert "g4dn.xlarge" in loading and "decode" in loading
    assert page.locator("#plan-loading-table .badge.infeasible").count() >= 1
    assert "location" in page.inner_text("#plan-choices thead").lower()
    if plan["spot"] is not None:
        cards = page.inner_text("#plan-spot-cards").lower()
        assert "expected cost" in cards and "uninterrupted" in cards and "interruptions" in cards
        # One P(deadline) per plan: the spot runs' chance is folded into the plan's, not shown again.
        note = page.inner_text("#plan-spot-note").lower()
        assert "p(meets time limit)" not in cards and "p(deadline)" in note
        # Two expectations, each saying which run it is: the headline's restarts in place, these re-plan.
        assert "above restart the fleet in place" in note and "re-plan after an interruption (§4.5)" in note
    else:
        assert plan["fallback"] is None or "On-demand fallback" in page.inner_text("#plan-fallback")
    # The stored request is back in the form, geo fields included.
    page.click("#plan-geo summary")
    assert page.input_value("#plan-providers") == "gcp"
    assert page.input_value("#plan-regions") == "gcp/us-central1"
    assert page.input_value("#plan-loader-rate") == "20"
    assert page.input_value("#plan-spot-samples") == "200"
    bars = {t["uid"] for t in browsed.chart("plan-breakdown")["data"]}
    assert "data_stall_s" in bars
    browsed.screenshot("plan-locations")
    browsed.assert_clean()


def test_a_reopened_multi_location_plan_shows_its_locations_one_strategy_line_and_grouped_batch_caps(
    browsed: Browsed,
) -> None:
    """A plan of gcp/us-central1 and aws/us-east-1, reopened (/?plan=ID): the form's top showed aws /
    us-east-1 (its provider and region were never filled) with the extra locations folded away, "How to run
    it" said "nothing to show" twice, and each type's batch cap was its own warning line (29 here). Now the
    form shows the request's provider and region and a line naming every allowed location, the strategy panel
    says once that nothing else was weighed, and the caps are one line that opens to the list."""
    request = {
        "model": "gpt2-small",
        "global_batch": 512,
        "iterations": 1000,
        "mode": "eager",
        "provider": "gcp",
        "region": "us-central1",
        "providers": ["gcp", "aws"],
        "regions": ["us-central1", "aws/us-east-1"],
    }
    plan = _api(browsed, "POST", "/plans", request)
    capped = [w for w in plan["warnings"] if "capped by memory" in w]
    assert len(capped) > 4 and not plan["strategy"]["memory"] and not plan["strategy"]["compared"]
    browsed.goto(f"/?plan={plan['id']}")
    page = browsed.page
    page.wait_for_selector("body[data-ready]")
    assert page.input_value("#plan-provider") == "gcp" and page.input_value("#plan-region") == "us-central1"
    note = page.inner_text("#plan-where-note")
    assert "regions us-central1, aws/us-east-1 of gcp, aws" in note, note
    assert page.locator("#plan-geo").get_attribute("open") is not None
    assert page.input_value("#plan-providers") == "aws"
    assert page.input_value("#plan-regions") == "aws/us-east-1"
    strategy = page.inner_text("#plan-strategy-panel")
    assert "nothing to show" not in strategy and strategy.count("no other strategy was weighed") == 1
    # `auto` planned DDP alone because of the profiles (no sharding facts), not because the request said so.
    assert plan["strategy"]["why_kind"] == "only_checkable"
    why = page.inner_text("#plan-strategy-why")
    assert "only DDP could be checked: the profiles carry no sharding facts" in why, why
    others = len(plan["warnings"]) + len(plan["breakdown"]["warnings"]) - len(capped)
    assert page.locator("#plan-warnings > li").count() == others + 1
    summary = page.locator("#plan-warnings > li.grouped summary")
    assert summary.inner_text().startswith(f"batch capped by memory on {len(capped)} types: ")
    assert not page.locator("#plan-warnings li.grouped li").first.is_visible()
    summary.click()
    assert page.locator("#plan-warnings li.grouped li").all_inner_texts() == capped
    browsed.screenshot("plan-reopened-multi-location")
    browsed.assert_clean()


def test_a_plan_link_to_no_plan_says_so_in_page_words(browsed: Browsed) -> None:
    """`/?plan=99999` showed the API's words at the foot of the form ("plan_id: no plan with id 99999 ...
    To fix: create one with POST /v1/plans"); now it says there is no such plan here and what to do on the
    page."""
    browsed.goto("/?plan=99999")
    page = browsed.page
    page.wait_for_selector("body[data-ready]")
    message = page.inner_text("#plan-form .form-error")
    assert message.startswith("No plan #99999 here (it does not exist, or belongs to another user)."), message
    assert "press Plan" in message and "POST" not in message and "plan_id" not in message, message
    assert "To fix: open a plan from the Jobs page" in message, message
    # A plan id that is not a whole number: the API's 422 named its path parameter; now the page says it.
    browsed.goto("/?plan=abc")
    page.wait_for_selector("body[data-ready]")
    message = page.inner_text("#plan-form .form-error")
    assert message.startswith("No plan “abc”: plan ids are whole numbers"), message
    assert "To fix: open a plan from the Jobs page" in message and "plan_id" not in message, message
    assert page.locator("#plan-results").is_hidden()
    browsed.assert_clean(allowed=("status of 404",))


def test_plan_form_sends_regions_providers_allreduce_the_input_pipeline_spot_strategy_and_ddp_settings(
    browsed: Browsed,
) -> None:
    _ready(browsed, "/")
    page = browsed.page
    page.click("#plan-geo summary")
    page.fill("#plan-providers", "gcp")
    page.fill("#plan-regions", "gcp/us-central1")
    page.select_option("#plan-allreduce", "hierarchical")
    page.fill("#plan-loader-rate", "500")
    page.fill("#plan-loader-bytes", "1000")
    page.uncheck("#plan-price-interruptions")
    page.fill("#plan-checkpoint-interval", "1800")
    page.fill("#plan-restart", "300")
    page.fill("#plan-spot-samples", "500")
    page.click("#plan-ddp summary")
    page.fill("#plan-bucket-cap", "10")
    page.select_option("#plan-exchange", "per_layer")
    page.select_option("#plan-strategy", "ddp")
    page.select_option("#plan-checkpointing", "false")
    with page.expect_request(lambda r: r.url.endswith("/v1/plans") and r.method == "POST") as info:
        page.click("#plan-submit")
    sent = json.loads(info.value.post_data or "{}")
    assert sent["bucket_cap_mb"] == 10 and sent["exchange"] == "per_layer"
    assert sent["strategy"] == "ddp" and sent["checkpointing"] is False
    assert sent["providers"] == [sent["provider"], "gcp"]
    assert sent["regions"] == [sent["region"], "gcp/us-central1"]
    assert sent["allreduce"] == "hierarchical"
    assert sent["input_pipeline"] == {"samples_per_s_per_core": 500, "bytes_per_sample": 1000}
    assert sent["price_interruptions"] is False
    assert (sent["checkpoint_interval_s"], sent["restart_s"], sent["spot_samples"]) == (1800, 300, 500)
    page.wait_for_selector("#plan-choices")
    # DDP without checkpointing was all the request allowed, and the strategy panel says that was why.
    why = page.inner_text("#plan-strategy-why")
    assert "only DDP was allowed by the request" in why and "or the only one" not in why, why
    browsed.assert_clean()


def test_jobs_page_shows_a_training_run_with_its_replan_history(browsed: Browsed) -> None:
    plan = _api(
        browsed,
        "POST",
        "/plans",
        {
            "model": browsed.server.model,
            "global_batch": 256,
            "iterations": 20000,
            "time_limit_s": 36000,
            "availability": {"g4dn.xlarge": 8, "p3.2xlarge": 4},
        },
    )
    job = _api(browsed, "POST", "/jobs", {"plan_id": plan["id"]})
    _api(
        browsed,
        "POST",
        f"/jobs/{job['id']}/progress",
        {"iterations_done": 5000, "elapsed_s": 1800, "spent_usd": 1.0},
    )
    steps = [{"step": 4980 + k, "iteration_s": 0.3 + 0.001 * k} for k in range(20)]
    _api(browsed, "POST", f"/jobs/{job['id']}/iterations", {"steps": steps})
    lost = plan["choices"][0]
    replanned = _api(
        browsed,
        "POST",
        f"/jobs/{job['id']}/interruptions",
        {"instance_type": lost["instance_type"], "count": 1, "iterations_done": 8000, "elapsed_s": 3000},
    )
    done = _api(
        browsed, "POST", "/probe-jobs", {"provider": "local", "instance_type": "laptop", "node_counts": [2]}
    )
    queued = _api(
        browsed, "POST", "/probe-jobs", {"provider": "local", "instance_type": "desk", "node_counts": [4]}
    )
    with transaction(browsed.server.settings.resolved_database_url) as session:
        claimed = job_store.claim_next(session=session, worker_id="browser-test")
        assert claimed is not None and claimed.id == done["id"]
        log = "rank 0: warm-up\nrank 0: 1 KiB … 64 MiB, 5 repeats\nstored 60 samples\n"
        job_store.finish(
            session=session,
            job_id=claimed.id,
            worker_id="browser-test",
            state=JobState.SUCCEEDED,
            log=log,
            result={"samples_stored": 60},
        )
    _ready(browsed, "/jobs")
    page = browsed.page
    jobs = page.locator("#jobs-list tbody tr")
    assert jobs.count() == 2
    assert "queued" in jobs.filter(has_text="desk").inner_text()
    jobs.filter(has_text="laptop").click()
    page.wait_for_selector("#jobs-log:has-text('stored 60 samples')")
    assert "succeeded" in page.inner_text("#jobs-detail-title")
    assert "node_counts=2" in page.inner_text("#jobs-request")
    assert queued["state"] == "queued"

    row = page.locator("#runs-list tbody tr", has_text=f"#{replanned['plan']['id']}")
    assert row.count() == 1
    row.click()
    page.wait_for_selector("#runs-events-table")
    plans = page.locator("#runs-plans-table tbody tr")
    assert plans.count() == 2
    assert "current" in plans.nth(1).inner_text()
    events = page.inner_text("#runs-events-table")
    for kind in ("started", "progress", "interruption"):
        assert kind in events
    assert f"{lost['instance_type']} lost" in events
    page.wait_for_function("(document.getElementById('runs-chart').data || []).length === 2")
    progress = {t["uid"]: t for t in browsed.chart("runs-chart")["data"]}
    assert progress["progress"]["y"] == [0, 5000, 8000]
    assert progress["replans"]["y"] == [8000]
    # 3000 s elapsed at most: the axis is in minutes, not 0.83 h.
    assert browsed.chart("runs-chart")["axes"]["x"] == "elapsed (minutes)"
    assert progress["progress"]["x"] == pytest.approx([0, 30, 50])
    page.wait_for_function("(document.getElementById('runs-iter-chart').data || []).length >= 2")
    timing = {t["uid"]: t for t in browsed.chart("runs-iter-chart")["data"]}
    measured = timing[f"measured-{plan['id']}"]
    assert measured["x"][0] == 4980 and measured["y"] == pytest.approx([s["iteration_s"] for s in steps])
    assert timing[f"predicted-{plan['id']}"]["y"][0] == pytest.approx(plan["predicted"]["iteration_s"])
    assert "20 steps reported" in page.inner_text("#runs-iter-note")
    browsed.screenshot("jobs-training-run")
    page.locator("#runs-plans-table a", has_text=f"#{replanned['plan']['id']}").click()
    page.wait_for_selector("#plan-choices")
    assert f"Plan #{replanned['plan']['id']}" in page.inner_text("#plan-title")
    browsed.assert_clean()


def _predict(b: Browsed) -> dict[str, Any]:
    with b.page.expect_response(lambda r: r.url.endswith("/v1/predictions")) as info:
        b.page.click("#predict-submit")
    body: dict[str, Any] = info.value.json()
    assert info.value.status == 200, body
    return body


def test_predict_page_draws_each_what_if_and_flags_a_bad_row(browsed: Browsed) -> None:
    _ready(browsed, "/predict")
    page = browsed.page
    rows = page.locator("#predict-fleet tr")
    page.click("#predict-add-row")
    for i, (name, count, batch) in enumerate((("g4dn.xlarge", "4", "64"), ("p3.2xlarge", "2", "128"))):
        rows.nth(i).locator("[data-name=instance_type]").select_option(name)
        rows.nth(i).locator("[data-name=count]").fill(count)
        rows.nth(i).locator("[data-name=batch]").fill(batch)
    assert "512 samples" in page.inner_text("#predict-global-batch")
    first = _predict(browsed)
    assert first["global_batch"] == 512 and first["label"] in page.inner_text("#predict-title")

    rows.nth(0).locator("[data-name=count]").fill("8")
    second = _predict(browsed)
    page.wait_for_function("document.querySelectorAll('#predict-history tbody tr').length === 2")
    figure = browsed.chart("predict-scatter")
    traces = {t["uid"]: t for t in figure["data"]}
    top = max(
        max(w["predicted"]["total_time_s"], w["predicted"]["iteration_p90_s"] * w["iterations"])
        for w in (first, second)
    )
    name, scale = ("hours", 3600) if top >= 7200 else ("minutes", 60) if top >= 120 else ("seconds", 1)
    assert figure["axes"]["x"] == f"total time ({name})"
    assert traces["chosen"]["x"] == [pytest.approx(second["predicted"]["total_time_s"] / scale)]
    assert traces["chosen"]["y"] == [pytest.approx(second["predicted"]["cost_usd"])]
    assert traces["earlier"]["y"] == [pytest.approx(first["predicted"]["cost_usd"])]
    bars = {t["uid"]: t for t in browsed.chart("predict-breakdown")["data"]}
    assert bars["compute_s"]["y"] == ["latest", "earlier 1"]
    stacked = sum(
        bars[k]["x"][0] for k in ("compute_s", "straggler_wait_s", "exposed_intra_s", "exposed_network_s")
    )
    assert stacked == pytest.approx(second["predicted"]["iteration_s"], rel=0.05)
    browsed.screenshot("predict")

    rows.nth(1).locator("[data-name=batch]").fill("0")
    with page.expect_response(lambda r: r.url.endswith("/v1/predictions")) as info:
        page.click("#predict-submit")
    assert info.value.status == 422
    error = info.value.json()
    batch = rows.nth(1).locator("[data-name=batch]")
    assert batch.get_attribute("aria-invalid") == "true"
    message = page.locator("#predict-fleet ~ .field-error, .fleet ~ .field-error")
    message.wait_for()
    assert error["detail"] in message.inner_text()
    browsed.screenshot("predict-bad-batch")
    browsed.assert_clean(allowed=(UNPROCESSABLE,))


def test_predict_history_tells_allreduce_from_parameter_servers_and_short_runs_plot_in_seconds(
    browsed: Browsed,
) -> None:
    """The same fleet with ring allreduce and with two parameter servers: two rows the history tells apart.
    Twenty iterations last well under two minutes, so the scatter's time axis is in seconds."""
    _ready(browsed, "/predict")
    page = browsed.page
    row = page.locator("#predict-fleet tr").nth(0)
    row.locator("[data-name=instance_type]").select_option("g4dn.xlarge")
    row.locator("[data-name=count]").fill("4")
    page.fill("#predict-iterations", "20")
    ring = _predict(browsed)
    page.select_option("#predict-comm", "parameter_server")
    page.fill("#predict-ps", "2")
    servers = _predict(browsed)
    assert ring["label"] == servers["label"] and ring["comm"] == "allreduce" != servers["comm"]
    page.wait_for_function("document.querySelectorAll('#predict-history tbody tr').length === 2")
    history = page.locator("#predict-history tbody tr").all_inner_texts()
    assert "2 parameter servers" in history[0] and "ring allreduce" in history[1]
    assert "2 parameter servers" in page.inner_text("#predict-title")
    figure = browsed.chart("predict-scatter")
    traces = {t["uid"]: t for t in figure["data"]}
    assert traces["chosen"]["text"] == [f"{servers['label']} · 2 parameter servers"]
    assert traces["earlier"]["text"] == [f"{ring['label']} · ring allreduce"]
    assert max(ring["predicted"]["total_time_s"], servers["predicted"]["total_time_s"]) < 60
    assert figure["axes"]["x"] == "total time (seconds)"
    assert traces["chosen"]["x"] == [pytest.approx(servers["predicted"]["total_time_s"])]
    browsed.screenshot("predict-comm-history")
    browsed.assert_clean()


def test_plan_scatter_of_a_short_job_is_in_seconds(browsed: Browsed) -> None:
    _ready(browsed, "/")
    page = browsed.page
    page.select_option("#plan-objective", "min_cost")
    fields = {"global-batch": "256", "iterations": "40", "time-limit": "", "budget": ""}
    plan = _submit_plan(browsed, **fields)
    assert plan["predicted"]["total_time_s"] < 120
    figure = browsed.chart("plan-scatter")
    front = [p["total_time_s"] for p in plan["pareto"] if p["on_front"]]
    assert max(front) < 120, "the front, the chosen plan and no limit: all under two minutes"
    assert figure["axes"]["x"] == "total time (seconds, log scale)"
    chosen = {t["uid"]: t for t in figure["data"]}["chosen"]
    assert chosen["x"] == [pytest.approx(plan["predicted"]["total_time_s"])]
    browsed.assert_clean()


def _run_row(b: Browsed, run_id: int) -> Any:
    rows = b.page.locator("#runs-list tbody tr")
    for i in range(rows.count()):
        if rows.nth(i).locator("td").first.inner_text().strip() == str(run_id):
            return rows.nth(i)
    raise AssertionError(f"run #{run_id} is not listed")


def test_jobs_page_amends_a_needs_input_run_and_resumes_it(browsed: Browsed) -> None:
    """A run interrupted 100 s before its deadline cannot be re-planned (needs_input). On the Jobs page, a
    limit still too short shows the API's message under the time limit; a long enough one resumes the run."""
    plan = _api(
        browsed,
        "POST",
        "/plans",
        {
            "model": browsed.server.model,
            "global_batch": 256,
            "iterations": 20000,
            "time_limit_s": 36000,
            "availability": {"g4dn.xlarge": 8, "p3.2xlarge": 4},
        },
    )
    run = _api(browsed, "POST", "/jobs", {"plan_id": plan["id"]})
    lost = plan["choices"][0]
    response = httpx.post(
        f"{browsed.server.url}/v1/jobs/{run['id']}/interruptions",
        json={
            "instance_type": lost["instance_type"],
            "count": 1,
            "iterations_done": 10000,
            "elapsed_s": 35900,
        },
        headers={"Authorization": f"Bearer {browsed.server.token}"},
        timeout=60,
    )
    assert response.status_code == 409 and response.json()["field"] == "time_limit_s", response.text
    assert _api(browsed, "GET", f"/jobs/{run['id']}")["state"] == "needs_input"

    _ready(browsed, "/jobs")
    page = browsed.page
    page.uncheck("#jobs-auto")
    _run_row(browsed, run["id"]).click()
    page.wait_for_selector("#runs-amend:not([hidden])")
    assert "needs_input" in page.inner_text("#runs-detail-title")
    assert "past" in page.inner_text("#runs-amend-why")
    assert page.inner_text("#runs-amend-submit") == "Re-plan and resume"
    assert page.input_value("#runs-amend-time") == "36000"
    assert page.input_value("#runs-amend-objective") == "min_cost"

    page.fill("#runs-amend-time", "36100")
    with page.expect_response(lambda r: r.url.endswith(f"/v1/jobs/{run['id']}/amendments")) as info:
        page.click("#runs-amend-submit")
    assert info.value.status == 409 and info.value.json()["error"] == "infeasible"
    assert info.value.request.post_data_json == {"time_limit_s": 36100}
    message = page.locator("#runs-amend-time ~ .field-error")
    message.wait_for()
    assert info.value.json()["detail"] in message.inner_text()
    assert page.locator("#runs-amend-time").get_attribute("aria-invalid") == "true"
    # A re-plan relaxes the time left, not the whole run's limit this form holds: no button fills it in.
    assert message.locator("button.relax").count() == 0
    assert _api(browsed, "GET", f"/jobs/{run['id']}")["state"] == "needs_input"

    page.fill("#runs-amend-time", "200000")
    with page.expect_response(lambda r: r.url.endswith(f"/v1/jobs/{run['id']}/amendments")) as info:
        page.click("#runs-amend-submit")
    answer = info.value.json()
    assert info.value.status == 200, answer
    assert answer["job"]["state"] == "running" and answer["plan"]["iterations"] == 10000
    page.wait_for_selector(f"#runs-amend-done:has-text('plan #{answer['plan']['id']}')")
    assert "running" in page.inner_text("#runs-detail-title")
    assert "running" in _run_row(browsed, run["id"]).inner_text()
    assert page.inner_text("#runs-amend-submit") == "Re-plan"
    assert page.input_value("#runs-amend-time") == "200000"
    assert page.locator("#runs-amend-time").get_attribute("aria-invalid") is None
    plans = page.locator("#runs-plans-table tbody tr")
    assert plans.count() == 2 and f"#{answer['plan']['id']}" in plans.nth(1).inner_text()
    assert "current" in plans.nth(1).inner_text()
    events = page.inner_text("#runs-events-table")
    assert "amended" in events and "set time limit" in events
    assert "re-planned 10,000 iterations left" in events
    stored = _api(browsed, "GET", f"/jobs/{run['id']}")
    assert stored["state"] == "running" and stored["time_limit_s"] == 200000
    assert stored["current_plan_id"] == answer["plan"]["id"]
    browsed.screenshot("jobs-amend-resume")
    browsed.assert_clean(allowed=(UNPROCESSABLE, CONFLICT))


def test_plan_page_plans_the_readme_cnn_profile_over_the_catalog_as_the_api_and_the_cli_do(
    browsed: Browsed,
) -> None:
    """Issue 56: the README's CNN, profiled on a CPU and labelled T4 (every other GPU type estimated from
    it), planned from the Plan page as a new user would (min_time within $0.50, spot, exhaustive, CPU
    profiles allowed): the page shows the proven optimum, and POST /v1/plans and the CLI's local path
    (srift.testing.plans.solve, the plan service) answer the same request with the same plan."""
    from srift.testing.plans import DATA
    from srift.testing.plans import solve as solve_here

    cnn = json.loads((DATA / "cnn_t4_structured_profile.json").read_text())
    _ready(browsed, "/")
    page = browsed.page
    page.set_input_files(
        "#plan-profile-file", files=[_json_file("cnn.json", cnn)]
    )  # as `srift profile` wrote it
    page.select_option("#plan-objective", "min_time")
    page.select_option("#plan-market", "spot")
    page.check("#plan-allow-cpu")
    page.click("details summary")
    page.select_option("#plan-mode", "exhaustive")
    plan = _submit_plan(browsed, **{"global-batch": "256", "iterations": "20000", "budget": "0.5"})
    from srift.api.schemas.plans import PlanRequest

    fields = PlanRequest.model_fields  # the request as the page sent it (the answer echoes more)
    request = {k: v for k, v in plan["request"].items() if v is not None and k in fields}
    assert request["allow_cpu_profiles"] is True and request["profiles"][0]["model"] == "cnn"
    assert plan["proven_optimal"], plan["warnings"]
    assert len({s for s in plan["sources"] if s.startswith("profile:")}) > 1, "others estimated from it"
    shown = page.inner_text("#plan-choices")
    for choice in plan["choices"]:
        assert choice["instance_type"] in shown and str(choice["count"]) in shown

    again = _api(browsed, "POST", "/plans", request)
    here, _ = solve_here(browsed.server.settings, request)
    chosen = [(c["instance_type"], c["count"], c["batch"]) for c in plan["choices"]]
    assert [(c["instance_type"], c["count"], c["batch"]) for c in again["choices"]] == chosen
    assert [(c.instance_type, c.count, c.batch) for c in here.config.choices] == chosen
    assert again["proven_optimal"] and here.proven_optimal
    assert again["predicted"]["total_time_s"] == pytest.approx(plan["predicted"]["total_time_s"])
    assert here.predicted.total_time_s == pytest.approx(plan["predicted"]["total_time_s"])
    browsed.assert_clean()
