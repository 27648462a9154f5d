"""Nothing stored breaks plans: every degenerate profile a fuzzer produced is refused at the door (422 naming
the field), and one stored before today's rules (a legacy row) makes plans and predictions answer a 4xx
that names the stored profile and how to replace it, never a 500."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory
from srift.db.tables import ModelProfileRow
from srift.settings import Settings

BASE: dict[str, Any] = {
    "model": "degenerate",
    "accelerator": "T4",
    "max_batch": 64,
    "forward": {"batches": [1, 64], "times_s": [0.004, 0.06]},
    "backward": {"batches": [1, 64], "times_s": [0.008, 0.12]},
    "layers": [{"name": "fc", "grad_bytes": 4_000_000, "ready_frac": 1.0}],
    "straggler_cv": 0.05,
}


def _with(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc.update(changes)
    return doc


def _pass(flops_per_sample: int, *, kernels: int) -> dict[str, Any]:
    """One layer's pass: `flops_per_sample` FLOPs and bytes of matrix products per sample."""
    per_sample = [0, flops_per_sample]
    return {"matmul_flops": per_sample, "matmul_bytes": per_sample, "other_bytes": [0, 0], "kernels": kernels}


def _structure(*, parameter_bytes: int, forward: dict[str, Any], backward: dict[str, Any]) -> dict[str, Any]:
    """A one-layer structure (fp32, no optimizer state) of `parameter_bytes` parameters and gradients."""
    return {
        "memory": {
            "parameter_bytes": parameter_bytes,
            "gradient_bytes": parameter_bytes,
            "optimizer_state_bytes": 0,
            "activation_bytes": [0, 0],
            "saved_bytes": [0, 0],
        },
        "update_bytes": 0,
        "update_kernels": 0,
        "layers": [{"name": "fc", "forward": forward, "backward": backward, "backward_order": 0}],
    }


DEGENERATE = {
    # The profile: one sample, times at the smallest subnormal double (OverflowError in spot pricing).
    "subnormal times": _with(
        max_batch=1,
        forward={"batches": [1], "times_s": [5e-324]},
        backward={"batches": [1], "times_s": [5e-324]},
    ),
    "times near the largest double": _with(
        forward={"batches": [1, 64], "times_s": [1e308, 1.7976931348623157e308]},
        backward={"batches": [1, 64], "times_s": [1e307, 1.0977312280887567e308]},
    ),
    "a nanosecond pass": _with(forward={"batches": [1, 64], "times_s": [1e-9, 1e-9]}),
    "breakpoints above max_batch": _with(max_batch=1),
    "a breakpoint twice": _with(forward={"batches": [1, 1], "times_s": [0.004, 0.004]}),
    "unequal curve lengths": _with(forward={"batches": [122, 566487, 334], "times_s": [0.5]}),
    "a subnormal CPU quota": _with(extra={"cpu_quota": {"cores": 5e-324, "period_s": 5e-324}}),
    "gradients larger than the parameters": _with(
        structure=_structure(parameter_bytes=1000, forward=_pass(1, kernels=1), backward=_pass(2, kernels=2))
    ),
}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_a_degenerate_profile_is_refused_naming_its_field(
    client: TestClient, write_headers: dict[str, str], name: str
) -> None:
    r = client.post("/v1/profiles", json=DEGENERATE[name], headers=write_headers)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] and body["hint"]


@pytest.fixture
def catalog(settings: Settings) -> None:
    load_shipped_catalog(settings)


def _store_legacy(db_url: str, document: dict[str, Any]) -> int:
    """Store `document` as a row written before today's rules existed (no check on the way in)."""
    with session_factory(db_url)() as s:
        row = ModelProfileRow(
            model=document["model"],
            accelerator=document["accelerator"],
            fingerprint=f"legacy-{id(document)}",
            document=document,
        )
        s.add(row)
        s.commit()
        return row.id


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_a_stored_degenerate_profile_makes_plans_and_predictions_answer_4xx_naming_it(
    client: TestClient,
    write_headers: dict[str, str],
    admin_headers: dict[str, str],
    db_url: str,
    catalog: None,
    name: str,
) -> None:
    pid = _store_legacy(db_url, DEGENERATE[name])
    plan = {"model": "degenerate", "global_batch": 32, "iterations": 1000, "availability": {"g4dn.xlarge": 2}}
    fleet = {"choices": [{"instance_type": "g4dn.xlarge", "count": 2, "batch": 16}]}
    for path, body in (
        ("/v1/plans", plan),
        ("/v1/plans", {**plan, "model": None, "profile_ids": [pid]}),
        ("/v1/predictions", {"model": "degenerate", "iterations": 1000, "config": fleet}),
        ("/v1/predictions", {"profile_ids": [pid], "iterations": 1000, "config": fleet}),
    ):
        r = client.post(path, json={k: v for k, v in body.items() if v is not None}, headers=write_headers)
        assert 400 <= r.status_code < 500, (path, r.text)
        answer = r.json()
        assert f"stored profile {pid}" in answer["detail"], answer
        assert answer["field"].startswith(f"profile:{pid}") or answer["field"].startswith("profile_ids")
        assert "upload a corrected profile" in answer["hint"]
    # Everyone's row is not a write token's to delete; an admin deletes it, and the model is simply unknown.
    assert client.delete(f"/v1/profiles/{pid}", headers=write_headers).status_code == 404
    assert client.delete(f"/v1/profiles/{pid}", headers=admin_headers).status_code == 204
    r = client.post("/v1/plans", json=plan, headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "model"


WORKLESS = _with(
    model="workless",
    structure=_structure(
        parameter_bytes=4_000_000, forward=_pass(0, kernels=0), backward=_pass(0, kernels=0)
    ),
)
"""A schema-valid profile whose structure counts no work at all (the live fuzzer stored one): a roofline of
zero seconds, which the estimator once divided by (ZeroDivisionError, a 500 for every plan of the model)."""


def test_a_structure_that_counts_no_work_estimates_no_gpu_and_plans_go_on(
    client: TestClient, write_headers: dict[str, str], catalog: None
) -> None:
    assert client.post("/v1/profiles", json=WORKLESS, headers=write_headers).status_code == 201
    plan = {"model": "workless", "global_batch": 32, "iterations": 1000, "solve_budget_s": 2.0}
    r = client.post("/v1/plans", json=plan, headers=write_headers)
    assert r.status_code == 201, r.text
    assert all(c["instance_type"].startswith("g4dn.") for c in r.json()["choices"])  # the measured T4 only
    fleet = {"choices": [{"instance_type": "p3.2xlarge", "count": 1, "batch": 16}]}
    r = client.post(
        "/v1/predictions",
        json={"model": "workless", "iterations": 10, "config": fleet},
        headers=write_headers,
    )
    assert 400 <= r.status_code < 500 and "V100" in r.json()["detail"], r.text


def test_a_step_time_that_falls_with_batch_is_a_measurement_and_is_kept(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    """A larger batch timed faster than a smaller one is what a launch-bound pass measures (five of the
    twelve curves of the shipped measured profiles do it, e.g. h200-profile-gpt2-small-fp16's backward at
    batch 1 vs 2), so it is stored as measured, sorted by batch, and plans with it interpolate it; the
    curve is piecewise linear (srift.domain.profile.ComputeCurve) and assumes no monotonicity."""
    falling = _with(forward={"batches": [2, 1, 64], "times_s": [0.003, 0.004, 0.06]})
    r = client.post("/v1/profiles", json=falling, headers=write_headers)
    assert r.status_code == 201, r.text
    stored = client.get(f"/v1/profiles/{r.json()['id']}", headers=write_headers)
    assert stored.status_code == 200, stored.text
    forward = stored.json()["forward"]
    assert forward == {"batches": [1, 2, 64], "times_s": [0.004, 0.003, 0.06]}
