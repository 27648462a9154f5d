"""What a newcomer types into the dashboard's forms, in headless Chromium: an infeasible limit's 409 offers
the relaxed limit as a button that fills it in; a number field holding unreadable text is refused, not sent
as none; a new Predict row is not a duplicate; a failed plan request marks the plan still shown as an
earlier one; a bad world size is named as typed."""

from __future__ import annotations

import math

import pytest
from dashboard_harness import Browsed
from test_browser import CONFLICT, UNPROCESSABLE, _ready, _submit_plan

pytestmark = pytest.mark.browser


def test_an_infeasible_deadline_offers_the_fastest_time_as_a_button_that_fills_the_time_limit(
    browsed: Browsed,
) -> None:
    """The 409's relaxations read "Relaxations: fastest_time_s = 27.12" (the API's key, no unit, more digits
    than the hint's "at least 28 s"); now they are a button naming the time limit the hint names."""
    _ready(browsed, "/")
    page = browsed.page
    page.fill("#plan-time-limit", "1")
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    error = info.value.json()
    assert info.value.status == 409 and error["field"] == "time_limit_s"
    relaxed = math.ceil(error["relaxations"]["fastest_time_s"])
    message = page.locator("#plan-time-limit ~ .field-error")
    message.wait_for()
    assert "fastest_time_s" not in message.inner_text() and f"at least {relaxed} s" in message.inner_text()
    button = message.locator("button.relax")
    # The button groups digits as the page formats times (toLocaleString("en-US"): "1,041 s").
    assert button.inner_text() == f"Set the time limit to {relaxed:,} s"
    button.click()
    assert page.input_value("#plan-time-limit") == str(relaxed)
    assert page.inner_text("#plan-time-limit-help").startswith("=")
    plan = _submit_plan(browsed)
    assert plan["request"]["time_limit_s"] == relaxed
    browsed.assert_clean(allowed=(CONFLICT,))


def test_a_number_field_holding_text_is_refused_next_to_it_not_sent_as_none(browsed: Browsed) -> None:
    """Text Chromium cannot read as a number ("1e", a half-typed 1e4) left the input's value empty: the page
    planned with no deadline and said nothing. Now the form is not sent, and the field says it is not a number
    (the user's text stays for them to correct). Chromium drops letters such as "NaN" as they are typed."""
    _ready(browsed, "/")
    page = browsed.page
    page.type("#plan-time-limit", "1e")
    assert page.inner_text("#plan-time-limit-help") == "not a number"
    page.click("#plan-submit")
    message = page.locator("#plan-time-limit ~ .field-error")
    message.wait_for()
    assert "not a number" in message.inner_text() and "To fix:" in message.inner_text()
    assert page.get_attribute("#plan-time-limit", "aria-invalid") == "true"
    posts = [r for r in browsed.requests if r.startswith("POST ") and r.endswith("/v1/plans")]
    assert posts == [] and page.is_enabled("#plan-submit")
    assert page.evaluate("document.getElementById('plan-time-limit').validity.badInput")
    browsed.assert_clean()


def test_adding_a_type_to_the_predict_fleet_picks_one_the_fleet_lacks(browsed: Browsed) -> None:
    """The "Add a type" button gave the new row the first row's type and market, so pressing Predict next
    answered 422 "g4dn.xlarge (spot) is listed twice"; now each new row starts on a type no row has."""
    _ready(browsed, "/predict")
    page = browsed.page
    page.click("#predict-add-row")
    page.click("#predict-add-row")
    types = page.eval_on_selector_all(
        "#predict-fleet [data-name=instance_type]", "ss => ss.map((s) => s.value)"
    )
    assert len(types) == 3 and len(set(types)) == 3, types
    with page.expect_response(lambda r: r.url.endswith("/v1/predictions")) as info:
        page.click("#predict-submit")
    assert info.value.status == 200, info.value.text()
    assert page.locator(".field-error:visible, .form-error:visible").count() == 0
    browsed.assert_clean()


def test_a_failed_plan_request_marks_the_plan_still_shown_as_the_earlier_ones(browsed: Browsed) -> None:
    """After a plan, a request answered 409 left the earlier plan shown as it was, beside the error, as if it
    answered the form; now it is dimmed under a note naming it, until the next plan replaces it."""
    _ready(browsed, "/")
    page = browsed.page
    first = _submit_plan(browsed, iterations="2000")
    assert page.is_hidden("#plan-stale")
    page.fill("#plan-budget", "0.001")
    with page.expect_response(lambda r: r.url.endswith("/v1/plans")) as info:
        page.click("#plan-submit")
    assert info.value.status == 409
    note = page.locator("#plan-stale")
    note.wait_for()
    assert f"plan #{first['id']}" in note.inner_text() and "was not planned" in note.inner_text()
    assert "stale" in (page.get_attribute("#plan-results", "class") or "")
    page.fill("#plan-budget", "")
    _submit_plan(browsed)
    assert page.is_hidden("#plan-stale") and "stale" not in (
        page.get_attribute("#plan-results", "class") or ""
    )
    browsed.assert_clean(allowed=(CONFLICT,))


def test_a_bad_world_size_is_named_as_typed_with_what_the_box_takes(browsed: Browsed) -> None:
    """Typing "2, 4, -4" as the Bandwidth page's world sizes read "world_size[2]: Input should be greater
    than or equal to 2. To fix: correct the named field; see /docs for the schema" (the API's index into a
    list the box does not show); now the entry is quoted as typed and the hint says what the box takes."""
    _ready(browsed, "/bandwidth")
    page = browsed.page
    page.fill("#bw-world-sizes", "2, 4, -4")
    page.click("#bw-draw")
    message = page.locator("#bw-world-sizes ~ .field-error")
    message.wait_for()
    text = message.inner_text()
    assert text.startswith("“-4”: ") and "world_size[" not in text and "/docs" not in text, text
    assert "whole numbers of ranks" in text
    assert page.input_value("#bw-world-sizes") == "2, 4, -4"
    browsed.assert_clean(allowed=(UNPROCESSABLE,))
