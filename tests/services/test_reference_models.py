"""Reference models plan out of the box, estimates are marked, precisions are chosen, and a user's own profile
on one device yields plans on every GPU type of the catalog."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from srift.bandwidth.prior import AlphaBetaPrior
from srift.catalog.accelerators import spec_for_instance
from srift.catalog.shipped import load_shipped_catalog
from srift.catalog.store import get_offers
from srift.commands.plan import EXAMPLE, render
from srift.db.session import session_factory
from srift.domain import MarketChoice
from srift.domain.structure import Precision
from srift.profiling import testmodels
from srift.profiling.profiler import profile_model
from srift.refmodels.build import load_structure
from srift.refmodels.shipped import load_reference_profiles, measured_reference_profiles, reference_profiles
from srift.services.plans import PREPARED
from srift.settings import Settings

QUICK: dict[str, Any] = {"repeats": 2, "warmup": 1, "iterations": 6, "threads": 1, "max_batch": 8}


def _example() -> dict[str, Any]:
    body = yaml.safe_load(EXAMPLE)
    assert isinstance(body, dict)
    return body


def _open_ended_plan(
    client: TestClient, headers: dict[str, str], *, without: str | None = None, **changes: Any
) -> dict[str, Any]:
    """The example request with no time or cost limit, `changes` applied and the field `without` left
    out, planned (201)."""
    body = {k: v for k, v in _example().items() if k != without}
    body.update({"time_limit_s": None, "budget_usd": None, **changes})
    r = client.post("/v1/plans", json=body, headers=headers)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    return plan


def _gpu_types(settings: Settings) -> set[str]:
    """The shipped catalog's GPU types offered in us-east-1 that have an accelerator spec and that the
    default framework stack runs (srift.catalog.support: no K80, no retired family)."""
    from srift.catalog.support import runnable_offers
    from srift.domain.requests import FrameworkStack

    session = session_factory(settings.resolved_database_url)()
    try:
        offers = get_offers(session=session, provider="aws", region="us-east-1", market=MarketChoice.ANY)
    finally:
        session.close()
    kept = runnable_offers(offers, stack=FrameworkStack(), include_retired=False).kept
    return {o.instance.name for o in kept if spec_for_instance(o.instance) is not None}


def test_the_example_plans_a_reference_model_and_marks_its_estimates(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    assert load_reference_profiles(settings) > 0
    assert load_reference_profiles(settings) == 0  # already stored: nothing rewritten
    r = client.post("/v1/plans", json=_example(), headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert plan["precision"] == "fp16"
    chosen = sorted({c["instance_type"] for c in plan["choices"]})
    assert all(c["compute"] in ("estimate:roofline", "estimate:scaled") for c in plan["choices"])
    assert all(c["compute_spread"] > 0 for c in plan["choices"])
    assert plan["estimated"]["in_plan"] == chosen
    accelerators = {e["accelerator"] for e in plan["estimated"]["candidates"].values()}
    assert {"T4", "A10G", "L4", "V100-SXM2-16GB"} <= accelerators
    assert any("is estimated, not measured" in w for w in plan["breakdown"]["warnings"])
    p = plan["predicted"]
    assert p["iteration_p10_s"] < p["iteration_p50_s"] < p["iteration_p90_s"]
    listed = client.get("/v1/profiles", params={"model": "resnet50", "limit": 1000})
    assert listed.status_code == 200


def test_the_example_plan_is_the_same_whether_bounds_ask_the_network_in_batch_or_n_by_n(
    settings: Settings, client: TestClient, write_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search's bounds table the network stage over VM counts in one batched question per type (the
    prior's `predict_rings`); the proven-optimal example plan is the one the n-by-n path proves."""
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    body = {**_example(), "mode": "exhaustive", "solve_budget_s": 30, "fallback": False}

    def plan() -> dict[str, Any]:
        PREPARED.clear()  # a cached problem keeps its bounds' tables
        r = client.post("/v1/plans", json=body, headers=write_headers)
        assert r.status_code == 201, r.text
        found = r.json()
        assert found["proven_optimal"] and found["mode"] == "exhaustive"
        return found

    batched = plan()
    monkeypatch.setattr(AlphaBetaPrior, "predict_rings", lambda self, **_: None)
    n_by_n = plan()
    assert batched["choices"] == n_by_n["choices"] and batched["label"] == n_by_n["label"]
    assert batched["predicted"] == n_by_n["predicted"]


def test_precision_picks_the_profiles_and_a_missing_one_names_the_field(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    assert _open_ended_plan(client, write_headers, model="bert-base", precision="bf16")["precision"] == "bf16"
    assert (
        _open_ended_plan(client, write_headers, model="bert-base", without="precision")["precision"] == "fp32"
    )
    r = client.post("/v1/plans", json={**_example(), "precision": "fp8"}, headers=write_headers)
    assert r.status_code == 422
    assert "precision" in r.text


def test_an_estimated_half_precision_plan_says_how_much_of_its_step_misses_the_alignment(
    settings: Settings, client: TestClient, write_headers: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """GPT-2's tied head is 50,257 wide: in bf16 its rows miss cuBLAS's 16-byte alignment, and the plan says
    how much of each estimated step that is (the structure's own share at the profile's largest batch); the
    CLI cautions about it. float32 products have no such alignment rule: no share."""
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    plan = _open_ended_plan(client, write_headers, model="gpt2-small", precision="bf16")
    structure = load_structure("gpt2-small", Precision.BF16)
    largest = {
        p.accelerator: p.max_batch
        for p in reference_profiles()
        if p.model == "gpt2-small" and p.precision is Precision.BF16
    }
    candidates = plan["estimated"]["candidates"]
    assert candidates
    for e in candidates.values():
        batch = largest[e["accelerator"]]
        assert e["unaligned_share"] == round(structure.unaligned_share(batch), 6)
        assert 0.2 < e["unaligned_share"] < 0.35
    render(plan)
    said = " ".join(capsys.readouterr().out.split())  # as the console wrapped it, lines joined
    assert "of the step's FLOPs are fp16/bf16 matrix products" in said
    fp32 = _open_ended_plan(client, write_headers, model="gpt2-small", precision="fp32")
    assert all(e["unaligned_share"] is None for e in fp32["estimated"]["candidates"].values())
    render(fp32)
    assert "fp16/bf16 matrix products" not in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow  # profiles a model, then plans over every GPU type of the catalog
def test_a_users_profile_on_one_device_yields_plans_on_every_gpu_type(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    profile = profile_model(testmodels.cnn, testmodels.cnn_input, model_name="my-cnn", **QUICK)
    assert profile.structure is not None
    body = {**_example(), "model": None, "profiles": [profile.to_dict()], "precision": "fp32"}
    body.pop("model")
    r = client.post(
        "/v1/plans", json={**body, "time_limit_s": None, "budget_usd": None}, headers=write_headers
    )
    assert r.status_code == 201, r.text
    plan = r.json()
    assert set(plan["estimated"]["candidates"]) == _gpu_types(settings)
    assert plan["estimated"]["in_plan"]
    r = client.post(
        "/v1/plans",
        json={**body, "precision": "fp16", "time_limit_s": None, "budget_usd": None},
        headers=write_headers,
    )
    assert r.status_code == 422
    assert r.json()["field"] == "profiles[0].precision"


def test_every_reference_model_has_a_profile_on_every_catalog_gpu_in_every_precision(
    settings: Settings,
) -> None:
    from srift.profiling.store import find_profiles

    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    session = session_factory(settings.resolved_database_url)()
    try:
        offers = get_offers(session=session, provider="aws", region="us-east-1", market=MarketChoice.ANY)
        gpu_types = [o.instance for o in offers if spec_for_instance(o.instance) is not None]
        for model in ("resnet50", "bert-base", "gpt2-small", "vit-b16"):
            found = [p for _, p in find_profiles(session=session, model=model)]
            assert found and all(p.extra.get("reference") for p in found)
            for p in found:  # estimates, but where a device run measured the model (data/measured/)
                anchor = measured_reference_profiles().get((p.model, p.precision))
                assert (p.estimate is None) == (anchor is not None and p.accelerator == anchor.accelerator)
            for precision in ("fp32", "tf32", "fp16", "bf16"):
                mine = [p for p in found if p.precision.value == precision]
                uncovered = {
                    t.name for t in gpu_types if not any(t.matches_accelerator(p.accelerator) for p in mine)
                }
                assert not uncovered, (model, precision, uncovered)
    finally:
        session.close()


def test_a_reference_model_measured_on_a_gpu_plans_it_as_measured_and_scales_the_other_gpus_from_it() -> None:
    """Where a device run measured a reference model in a precision, the set is what a user who uploaded that
    profile plans with: the measured profile itself on its GPU, every other GPU `estimate:scaled` from it;
    the models and precisions nobody measured keep the roofline estimate."""
    measured = measured_reference_profiles()
    assert {(m, p.value) for m, p in measured} == {
        ("bert-base", "bf16"),
        ("bert-base", "tf32"),
        ("gpt2-small", "fp16"),
        ("resnet50", "tf32"),
    }
    for profile in reference_profiles():
        anchor = measured.get((profile.model, profile.precision))
        if anchor is None:
            assert profile.estimate is not None and profile.estimate.method == "roofline"
        elif profile.accelerator == anchor.accelerator:
            assert profile.estimate is None and profile.source == "measured"
            assert (profile.forward, profile.backward, profile.layers) == (
                anchor.forward,
                anchor.backward,
                anchor.layers,
            )
            assert profile.extra["reference"] and profile.extra["title"]
        else:
            assert profile.estimate is not None and profile.estimate.method == "scaled"
            assert profile.estimate.based_on == anchor.accelerator
            assert profile.layers == anchor.layers  # readiness as measured


def test_a_plan_on_the_measured_gpu_uses_the_measured_profile(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """BERT-base in bf16 was measured on an H200: an H200 type plans with those times, an H100 type with times
    scaled from them, and the plan says which is which."""
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    body = {
        "model": "bert-base",
        "precision": "bf16",
        "global_batch": 512,
        "iterations": 1000,
        "objective": "min_time",
        "market": "on_demand",
        "availability": {"p5en.48xlarge": 1, "p5.48xlarge": 1},
    }
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    assert [(c["instance_type"], c["compute"]) for c in plan["choices"]] == [("p5en.48xlarge", "measured")]
    assert "profile:bert-base@NVIDIA H200" in plan["sources"]
    h100 = plan["estimated"]["candidates"]["p5.48xlarge"]
    assert (h100["method"], h100["based_on"]) == ("estimate:scaled", "NVIDIA H200")
