"""The Predict form's strategy, in headless Chromium: a prediction under a strategy shows how the fleet runs
(setup, why, memory per GPU, the setups compared), and the form never sends a strategy with the Monte Carlo
samples or parameter servers the server refuses with it (rule strategy-as-planned): a sharded strategy holds
them at 0 and ring allreduce, auto starts at 0 samples, and leaving gives the user's samples back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dashboard_harness import Browsed
from test_browser import _ready

from tests.fuzz.contract import RULES, broken_rule

pytestmark = pytest.mark.browser

STRATEGIES = ("", "auto", "ddp", "zero1", "zero2", "full_shard", "hybrid")
CHECKPOINTING = ("", "true", "false")


def _fleet(b: Browsed, model: str, instance_type: str, count: int, batch: int) -> None:
    b.page.select_option("#predict-model", model)
    row = b.page.locator("#predict-fleet tr").nth(0)
    row.locator("[data-name=instance_type]").select_option(instance_type)
    row.locator("[data-name=count]").fill(str(count))
    row.locator("[data-name=batch]").fill(str(batch))


def _send(b: Browsed) -> tuple[dict[str, Any], Any]:
    """Press Predict: the body the page sent and the server's response."""
    page = b.page
    with page.expect_response(lambda r: r.url.endswith("/v1/predictions")) as info:
        page.click("#predict-submit")
    sent: dict[str, Any] = json.loads(info.value.request.post_data or "{}")
    return sent, info.value


def test_a_prediction_under_a_strategy_shows_how_the_fleet_runs(browsed: Browsed) -> None:
    _ready(browsed, "/predict")
    page = browsed.page
    _fleet(browsed, "llama-1b", "p4d.24xlarge", 2, 64)
    assert page.input_value("#predict-mc") == "50" and page.locator("#predict-checkpointing").is_disabled()
    page.select_option("#predict-strategy", "full_shard")
    assert page.input_value("#predict-mc") == "0" and page.locator("#predict-mc").is_disabled()
    note = page.inner_text("#predict-strategy-note")
    assert "held at 0" in note and "strategy full_shard" in note, note
    sent, response = _send(browsed)
    assert (sent["strategy"], sent["mc_samples"], sent["comm"]) == ("full_shard", 0, "allreduce"), sent
    assert "checkpointing" not in sent  # "consider both"
    answer = response.json()
    assert response.status == 200, answer
    view = answer["strategy"]
    assert view["strategy"] == "full_shard" and view["why_kind"] == "fastest_fits", view
    page.wait_for_selector("#predict-strategy-panel:not([hidden])")
    assert page.inner_text("#predict-strategy-how") == view["how"] and "fully_shard" in view["how"]
    assert view["why"] in page.inner_text("#predict-strategy-why")
    memory = page.locator("#predict-strategy-memory-table tbody tr").all_inner_texts()
    assert len(memory) == len(view["memory"]) == 1 and "p4d.24xlarge" in memory[0], memory
    compared = page.locator("#predict-strategy-compared-table tbody tr")
    assert compared.count() == len(view["compared"]) == 2  # full_shard with and without checkpointing
    chosen = view["strategy"] + ("+ckpt" if view["checkpointing"] else "")
    assert page.locator("#predict-strategy-compared-table tbody tr.chosen").inner_text().startswith(chosen)
    setup = f"· {chosen}"
    assert setup in page.inner_text("#predict-title")
    assert setup in page.locator("#predict-history tbody tr").first.inner_text()
    browsed.screenshot("predict-strategy")

    # Back to no strategy: the user's 50 samples return, and the answer has no strategy section again.
    page.select_option("#predict-strategy", "")
    assert page.input_value("#predict-mc") == "50" and page.locator("#predict-mc").is_enabled()
    assert page.locator("#predict-strategy-note").is_hidden()
    page.locator("#predict-fleet tr [data-name=batch]").fill("8")  # what plain DDP holds on this fleet
    sent, response = _send(browsed)
    assert "strategy" not in sent and sent["mc_samples"] == 50 and response.status == 200
    page.wait_for_function("document.querySelectorAll('#predict-history tbody tr').length === 2")
    assert page.locator("#predict-strategy-panel").is_hidden()
    browsed.assert_clean()


def _form_body(b: Browsed) -> dict[str, Any]:
    """The strategy fields as the form holds them, in the request's words (what the rule reads)."""
    page = b.page
    body: dict[str, Any] = {"model": "x", "config": {"choices": []}}
    body["comm"] = page.input_value("#predict-comm")
    body["mc_samples"] = int(page.input_value("#predict-mc") or 0)
    if page.input_value("#predict-strategy"):
        body["strategy"] = page.input_value("#predict-strategy")
        if page.input_value("#predict-checkpointing"):
            body["checkpointing"] = page.input_value("#predict-checkpointing") == "true"
    return body


def test_the_predict_form_never_sends_a_strategy_the_server_refuses(browsed: Browsed) -> None:
    """From Monte Carlo samples 50 and two parameter servers, every strategy and checkpointing choice leaves
    the form in a state the published rules accept; the ones sent are accepted (no 422), auto with samples
    the user put back predicts plain DDP and says why, and a sharded choice never sends samples or servers."""
    _ready(browsed, "/predict")
    page = browsed.page
    _fleet(browsed, "llama-1b", "p4d.24xlarge", 2, 8)
    for strategy in STRATEGIES:
        for checkpointing in CHECKPOINTING:
            page.select_option("#predict-strategy", "")
            page.select_option("#predict-comm", "parameter_server")
            page.fill("#predict-ps", "2")
            page.fill("#predict-mc", "50")
            page.select_option("#predict-strategy", strategy)
            if strategy:
                page.select_option("#predict-checkpointing", checkpointing)
            state = _form_body(browsed)
            assert broken_rule(state, set(RULES)) is None, (strategy, checkpointing, state)
    # auto starts at 0 samples (every setup compared) and says what samples above 0 mean
    page.select_option("#predict-strategy", "")
    page.select_option("#predict-comm", "allreduce")
    page.select_option("#predict-strategy", "auto")
    assert page.input_value("#predict-mc") == "0" and page.locator("#predict-mc").is_enabled()
    assert "above 0" in page.inner_text("#predict-strategy-note")
    page.fill("#predict-mc", "20")
    sent, response = _send(browsed)
    assert (sent["strategy"], sent["mc_samples"]) == ("auto", 20) and response.status == 200, response.text()
    page.wait_for_selector("#predict-strategy-panel:not([hidden])")
    why = page.inner_text("#predict-strategy-why")
    assert "only DDP without checkpointing was compared: mc_samples 20" in why, why
    # checkpointing every block is never plain DDP: the samples are held at 0 and servers are not offered
    page.select_option("#predict-checkpointing", "true")
    assert page.input_value("#predict-mc") == "0" and page.locator("#predict-mc").is_disabled()
    assert page.locator("#predict-comm option[value=parameter_server]").is_disabled()
    sent, response = _send(browsed)
    assert broken_rule(sent, set(RULES)) is None and sent["mc_samples"] == 0 and "ps_servers" not in sent
    assert response.status == 200, response.text()
    browsed.assert_clean()
