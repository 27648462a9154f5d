"""The Predict form's precision, in headless Chromium: the form offers the arithmetic a prediction request
trains in, as the Plan form does, starting at the API's default (the profiles' own: the body leaves
`precision` out). Picking bf16 for a reference model sends it, and the answer rests on the model's bf16
profiles (the page said fp32 for every prediction: the form had no precision)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dashboard_harness import Browsed
from test_browser import _ready

pytestmark = pytest.mark.browser


def _send(b: Browsed) -> tuple[dict[str, Any], dict[str, Any]]:
    """Press Predict: the body the page sent and the answer (a 200)."""
    page = b.page
    with page.expect_response(lambda r: r.url.endswith("/v1/predictions")) as info:
        page.click("#predict-submit")
    assert info.value.status == 200, info.value.text()
    sent: dict[str, Any] = json.loads(info.value.request.post_data or "{}")
    return sent, info.value.json()


def _profile_sources(answer: dict[str, Any]) -> list[str]:
    return [s for s in answer["sources"] if s.startswith("profile:")]


def test_a_prediction_in_bf16_sends_the_precision_and_rests_on_the_bf16_profiles(browsed: Browsed) -> None:
    _ready(browsed, "/predict")
    page = browsed.page
    schema = page.request.get(browsed.server.url + "/openapi.json").json()
    default = schema["components"]["schemas"]["PredictionRequest"]["properties"]["precision"].get("default")
    assert default is None  # the API's default: the profiles' own arithmetic
    options = page.locator("#predict-precision option")
    assert options.evaluate_all("os => os.map((o) => o.value)") == ["", "fp32", "tf32", "fp16", "bf16"]
    assert page.input_value("#predict-precision") == ""
    assert page.locator("#predict-precision").get_attribute("data-field") == "precision"

    page.select_option("#predict-model", "llama-1b")
    row = page.locator("#predict-fleet tr").nth(0)
    row.locator("[data-name=instance_type]").select_option("p4d.24xlarge")
    row.locator("[data-name=count]").fill("2")
    row.locator("[data-name=batch]").fill("8")
    page.fill("#predict-mc", "0")
    sent, fp32 = _send(browsed)
    assert "precision" not in sent, sent  # the default is left to the API
    assert fp32["precision"] == "fp32", fp32["precision"]  # a model stored in several precisions: fp32
    page.wait_for_function("document.querySelectorAll('#predict-history tbody tr').length === 1")

    page.select_option("#predict-precision", "bf16")
    sent, bf16 = _send(browsed)
    assert sent["precision"] == "bf16", sent
    assert bf16["precision"] == "bf16", bf16["precision"]
    # the answer rests on other profiles (the model's bf16 ones), and autocast computes faster
    assert set(_profile_sources(bf16)).isdisjoint(_profile_sources(fp32)), bf16["sources"]
    assert all("llama-1b@" in s for s in _profile_sources(bf16))
    assert bf16["predicted"]["iteration_s"] < fp32["predicted"]["iteration_s"]
    page.wait_for_function("document.querySelectorAll('#predict-history tbody tr').length === 2")
    assert page.inner_text("#predict-title").endswith("· bf16"), page.inner_text("#predict-title")
    latest, earlier = page.locator("#predict-history tbody tr").all_inner_texts()
    assert "bf16" in latest and "fp32" in earlier, (latest, earlier)
    browsed.screenshot("predict-bf16")
    browsed.assert_clean()
