"""Predictions under a strategy (POST /v1/predictions `strategy`, `checkpointing`): a fleet a plan chose,
predicted under the plan's strategy, gets the plan's iteration time, setup and memory per GPU; without a
strategy the answer is the plain DDP prediction it always was; bad combinations are 4xx naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from services.test_sharded_plans import NO_STRUCTURE
from srift.api.schemas.predictions import parse_prediction_request
from srift.catalog.shipped import load_shipped_catalog
from srift.commands.plan import example_for
from srift.documents import RULES_KEY
from srift.domain.sharding import StrategyChoice
from srift.errors import InvalidInput
from srift.refmodels.shipped import load_reference_profiles
from srift.services.predictions import check_strategy
from srift.settings import Settings
from tests.fuzz.contract import RULES, broken_rule

_SHARED = ("model", "precision", "iterations", "provider", "region")


def _plan(client: TestClient, headers: dict[str, str], model: str, **extra: Any) -> dict[str, Any]:
    body = yaml.safe_load(example_for(model))
    assert isinstance(body, dict)
    r = client.post("/v1/plans", json={**body, "solve_budget_s": 1.0, **extra}, headers=headers)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    plan["request"] = body
    return plan


def _prediction_of(plan: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A prediction request for the plan's fleet, with the plan request's model, precision and location."""
    choices = [
        {
            "instance_type": c["instance_type"],
            "market": c["market"],
            "count": c["count"],
            "batch": c["batch"],
            **({"gpus": c["gpus"]} if c["gpus"] != c["instance_gpus"] else {}),
        }
        for c in plan["choices"]
    ]
    return {**{k: plan["request"][k] for k in _SHARED}, "config": {"choices": choices}, **extra}


@pytest.fixture
def shipped(settings: Settings) -> Settings:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    return settings


def _post(client: TestClient, headers: dict[str, str], body: dict[str, Any]) -> Any:
    return client.post("/v1/predictions", json=body, headers=headers)


def _without_setup(answer: dict[str, Any]) -> dict[str, Any]:
    """A prediction document without its choices' setup fields (strategy, checkpointing, wrap, precision)."""
    for choice in answer["choices"]:
        for key in ("strategy", "checkpointing", "wrap", "precision"):
            choice.pop(key)
    return answer


def _fleet(model: str, instance_type: str, count: int, batch: int) -> dict[str, Any]:
    """A prediction request of `count` VMs of `instance_type` at `batch` per VM, 10 iterations in us-east-1
    (the reference models in bf16)."""
    return {
        "model": model,
        **({"precision": "bf16"} if model.startswith("llama") else {}),
        "iterations": 10,
        "region": "us-east-1",
        "config": {"choices": [{"instance_type": instance_type, "count": count, "batch": batch}]},
    }


def test_a_sharded_prediction_agrees_with_the_plan_of_the_same_fleet_and_strategy(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    plan = _plan(client, write_headers, "llama-1b", strategy="full_shard", checkpointing=False)
    assert plan["strategy"]["strategy"] == "full_shard"
    r = _post(client, write_headers, _prediction_of(plan, strategy="full_shard", checkpointing=False))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["label"] == plan["label"]
    assert answer["predicted"]["iteration_s"] == pytest.approx(plan["predicted"]["iteration_s"], rel=1e-9)
    assert answer["predicted"]["cost_usd"] == pytest.approx(plan["predicted"]["cost_usd"], rel=1e-9)
    view = answer["strategy"]
    for key in ("strategy", "checkpointing", "wrap", "precision", "how", "why_kind", "memory", "compared"):
        assert view[key] == plan["strategy"][key], key
    assert view["why_kind"] == "only_allowed"
    for mine, theirs in zip(answer["choices"], plan["choices"], strict=True):
        assert mine["strategy"] == "full_shard" and mine["wrap"] == "blocks"
        assert mine["memory_per_gpu_bytes"] == theirs["memory_per_gpu_bytes"] < mine["gpu_memory_bytes"]
    assert any(s.startswith("strategy:full_shard") for s in answer["sources"])


def test_auto_compares_the_setups_a_plan_compares_on_the_same_fleet(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    plan = _plan(client, write_headers, "llama-1b")
    r = _post(client, write_headers, _prediction_of(plan, strategy="auto"))
    assert r.status_code == 200, r.text
    answer = r.json()
    view = answer["strategy"]
    assert view["why_kind"] == "fastest_fits" and view["strategy"] == plan["strategy"]["strategy"]
    assert view["compared"] == plan["strategy"]["compared"] and view["memory"] == plan["strategy"]["memory"]
    assert answer["predicted"]["iteration_s"] == pytest.approx(plan["predicted"]["iteration_s"], rel=1e-9)


def test_without_a_strategy_the_answer_is_the_plain_ddp_prediction(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    plan = _plan(client, write_headers, "llama-1b", strategy="ddp", checkpointing=False)
    plain = _post(client, write_headers, _prediction_of(plan, mc_samples=20))
    assert plain.status_code == 200, plain.text
    assert "strategy" not in plain.json() and all(c["strategy"] is None for c in plain.json()["choices"])
    named = _post(
        client, write_headers, _prediction_of(plan, strategy="ddp", checkpointing=False, mc_samples=20)
    )
    assert named.status_code == 200, named.text
    answer = named.json()
    view = answer.pop("strategy")
    assert view["strategy"] == "ddp" and view["why_kind"] == "only_allowed" and view["compared"] == []
    for choice in answer["choices"]:
        assert (choice.pop("strategy"), choice.pop("checkpointing"), choice.pop("wrap")) == (
            "ddp",
            False,
            None,
        )
        assert choice.pop("precision").startswith("mixed")
    assert answer == _without_setup(plain.json())


def test_a_fleet_no_setup_of_the_strategy_fits_is_a_409_naming_strategy(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    body = _fleet("llama-8b", "g4dn.xlarge", 2, 1)
    r = _post(client, write_headers, {**body, "strategy": "full_shard"})
    assert r.status_code == 409, r.text
    error = r.json()
    assert error["field"] == "strategy" and "g4dn.xlarge" in error["detail"]
    assert error["hint"].startswith("use more VMs")
    # without a strategy the same fleet is DDP's, and DDP's memory check refuses it: no batch fits, so the
    # instance type is at fault (test_ddp_holding_no_batch_says_what_would_fit_never_at_most_0)
    r = _post(client, write_headers, body)
    assert r.status_code == 422 and r.json()["field"] == "config.choices[0].instance_type", r.text


def test_ddp_409_hint_names_only_changes_that_can_help(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """Strategy ddp (checkpointing open) on a fleet no DDP setup fits: the hint said "more VMs or GPUs so
    sharding spreads the model" and "a smaller batch per GPU" whatever the fleet. DDP never spreads the model,
    and a smaller batch is named only when DDP fits the fleet at 1 per GPU, as the more-VMs way to get there;
    the sharded strategy and the larger GPUs it names do fit."""
    fp32 = {"precision": "fp32", "strategy": "ddp"}
    for batch in (1, 2):  # DDP holds llama-1b fp32 on a 16 GiB GPU at no batch
        r = _post(client, write_headers, {**_fleet("llama-1b", "g4dn.xlarge", 2, batch), **fp32})
        assert r.status_code == 409, r.text
        hint = r.json()["hint"]
        named = _named_types(hint)
        assert named and hint == (
            f"use types with more GPU memory (e.g. {', '.join(named)}), or a sharded strategy (strategy "
            "full_shard, or auto)"
        )
        for name in named:  # each holds it under DDP: the same two GPUs, one sample each
            one_gpu = {"instance_type": name, "count": 2, "batch": 1, "gpus": 1}
            body = {**_fleet("llama-1b", name, 2, 1), **fp32, "config": {"choices": [one_gpu]}}
            assert _post(client, write_headers, body).status_code == 200, name
        for strategy in ("full_shard", "auto"):
            body = {**_fleet("llama-1b", "g4dn.xlarge", 2, 1), **fp32, "strategy": strategy}
            assert _post(client, write_headers, body).status_code == 200, strategy
    assert _post(client, write_headers, {**_fleet("llama-1b", "g6e.xlarge", 2, 1), **fp32}).status_code == 200
    r = _post(client, write_headers, {**_fleet("llama-1b", "g6e.xlarge", 2, 8), **fp32})
    assert r.status_code == 409, r.text
    hint = r.json()["hint"]
    assert "sharding spreads" not in hint, hint
    assert "a smaller batch per GPU (the global batch over more VMs)" in hint, hint
    body = {**_fleet("llama-1b", "g6e.xlarge", 4, 4), **fp32}  # the same 16 samples over more VMs
    assert _post(client, write_headers, body).status_code == 200


def test_the_none_fits_409_leaves_out_larger_types_when_no_offered_gpu_holds_the_model(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """Strategy ddp on a fleet no DDP setup fits: the hint said "use types with more GPU memory" even when no
    type us-east-1 offers has enough (llama-8b needs about 180 GiB per GPU under DDP). It names none then,
    and says what does help: a sharded strategy."""
    r = _post(client, write_headers, {**_fleet("llama-8b", "g4dn.xlarge", 2, 1), "strategy": "ddp"})
    assert r.status_code == 409 and r.json()["field"] == "strategy", r.text
    assert "180" in r.json()["detail"], r.text
    assert r.json()["hint"] == "use a sharded strategy (strategy full_shard, or auto)"


def _named_types(hint: str) -> list[str]:
    """The instance types a no-batch-fits hint names as holding the model ("… (e.g. a, b, c) …")."""
    found = re.search(r"\(e\.g\. ([^)]+)\)", hint)
    return found.group(1).split(", ") if found else []


def test_ddp_holding_no_batch_says_what_would_fit_never_at_most_0(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """DDP's memory check on a GPU that cannot hold the model at batch 1 said "use at most 0 per GPU (0 per
    VM)". It names the instance type, the memory per GPU batch 1 needs, the region's types whose GPUs hold it
    (each of which does: predicting on one GPU of it at batch 1 is answered) or that none has, and a sharded
    strategy (test_auto_with_monte_carlo_samples_where_ddp_overfills_is_a_409_naming_mc_samples: the same
    under auto narrowed to DDP by mc_samples)."""
    for body, named in (
        (_fleet("llama-8b", "g4dn.xlarge", 2, 1), False),  # 8 B parameters: no GPU of the catalog
        ({**_fleet("llama-1b", "g4dn.xlarge", 2, 1), "precision": "fp32"}, True),
    ):
        for extra in ({}, {"strategy": "ddp", "checkpointing": False}):
            r = _post(client, write_headers, {**body, **extra})
            assert r.status_code == 422, r.text
            error = r.json()
            assert error["field"] == "config.choices[0].instance_type", error
            assert "no batch fits" in error["detail"] and "g4dn.xlarge" in error["detail"], error
            hint = error["hint"]
            assert "at most 0" not in hint and "0 per VM" not in hint, hint
            assert re.search(r"GPUs have at least \d+\.\d GiB each", hint), hint
            assert "strategy auto" in hint and "full_shard" in hint, hint
            types = _named_types(hint)
            assert bool(types) is named, hint
            if not named:
                assert "no type of this region has GPUs that large" in hint, hint
        for name in types:
            one_gpu = {"instance_type": name, "count": 2, "batch": 1, "gpus": 1}
            held = _post(client, write_headers, {**body, "config": {"choices": [one_gpu]}})
            assert held.status_code == 200, (name, held.text)


def test_a_strategy_for_a_profile_without_memory_facts_is_a_409_that_says_so(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    assert client.post("/v1/profiles", json=NO_STRUCTURE, headers=write_headers).status_code == 201
    body = _fleet("no-structure", "g4dn.xlarge", 2, 64)
    r = _post(client, write_headers, {**body, "strategy": "zero2"})
    assert r.status_code == 409, r.text
    error = r.json()
    assert error["field"] == "strategy" and "says nothing of its memory" in error["detail"]
    assert "srift profile" in error["hint"] and "strategy ddp" in error["hint"]
    # auto on profiles without sharding facts that DDP holds: DDP alone, the served prediction
    r = _post(client, write_headers, {**body, "strategy": "auto"})
    assert r.status_code == 200, r.text
    assert r.json()["strategy"]["why_kind"] == "only_checkable"
    plain = _post(client, write_headers, body).json()
    assert r.json()["predicted"] == plain["predicted"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"strategy": "zero4"}, "strategy"),
        ({"checkpointing": "maybe", "strategy": "ddp"}, "checkpointing"),
        ({"checkpointing": True}, "checkpointing"),
        ({"strategy": "full_shard", "mc_samples": 10}, "mc_samples"),
        ({"strategy": "zero2", "comm": "parameter_server"}, "comm"),
        ({"strategy": "auto", "checkpointing": True, "mc_samples": 10}, "mc_samples"),
        ({"strategy": "ddp", "checkpointing": True, "comm": "parameter_server"}, "comm"),
    ],
)
def test_bad_strategy_input_is_a_422_naming_its_field(
    shipped: Settings, client: TestClient, write_headers: dict[str, str], extra: dict[str, Any], field: str
) -> None:
    r = _post(client, write_headers, {**_fleet("llama-1b", "p4d.24xlarge", 2, 64), **extra})
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["field"] == field and error["hint"], error
    if field in ("mc_samples", "comm") and "strategy" in extra:
        # says what is not modelled and both ways out: the field back at its default, or ddp/auto
        keep = "leave mc_samples at 0" if field == "mc_samples" else "leave comm at allreduce"
        assert f"is not modelled under strategy {extra['strategy']}" in error["detail"], error
        assert error["hint"].startswith(keep) and "strategy ddp or auto" in error["hint"], error


@pytest.mark.parametrize("strategy", [None, *(s.value for s in StrategyChoice)])
@pytest.mark.parametrize("checkpointing", [None, True, False])
@pytest.mark.parametrize(
    ("comm", "mc_samples"), [("allreduce", 0), ("allreduce", 5), ("parameter_server", 0)]
)
def test_the_strategy_rules_the_schema_publishes_are_exactly_what_the_server_enforces(
    strategy: str | None, checkpointing: bool | None, comm: str, mc_samples: int
) -> None:
    """Whether a body's strategy is refused depends on the body alone, so the published rules
    (tests/fuzz/contract.py reads their sentences) say exactly which bodies the service refuses."""
    body = {
        **_fleet("llama-1b", "p4d.24xlarge", 2, 64),
        **({"strategy": strategy} if strategy is not None else {}),
        **({"checkpointing": checkpointing} if checkpointing is not None else {}),
        "comm": comm,
        "mc_samples": mc_samples,
    }
    broken = broken_rule(body, set(RULES))
    try:
        check_strategy(parse_prediction_request(body).to_domain())
    except InvalidInput as exc:
        assert broken in ("checkpointing-needs-strategy", "strategy-as-planned"), exc
        assert exc.field == (
            "checkpointing"
            if broken == "checkpointing-needs-strategy"
            else "mc_samples"
            if mc_samples
            else "comm"
        )
    else:
        assert broken is None


def test_auto_with_monte_carlo_samples_predicts_ddp_where_auto_plans_ddp_alone(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """Profiles without sharding facts that DDP holds: `auto` plans DDP alone, so Monte Carlo samples (which
    only plain DDP's simulator models) change nothing but the band; it was a 422 on mc_samples."""
    assert client.post("/v1/profiles", json=NO_STRUCTURE, headers=write_headers).status_code == 201
    body = {**_fleet("no-structure", "g4dn.xlarge", 2, 64), "mc_samples": 20}
    r = _post(client, write_headers, {**body, "strategy": "auto"})
    assert r.status_code == 200, r.text
    answer = r.json()
    view = answer.pop("strategy")
    assert view["strategy"] == "ddp" and view["why_kind"] == "only_checkable", view
    without_samples = _post(client, write_headers, {**body, "strategy": "auto", "mc_samples": 0}).json()
    assert without_samples["strategy"] == view
    plain = _post(client, write_headers, body).json()
    assert _without_setup(answer) == _without_setup(plain)


def test_auto_with_monte_carlo_samples_compares_plain_ddp_alone_and_says_why(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """A model with sharding facts, where `auto` compares every setup: with mc_samples it predicts plain DDP
    (the served simulator, with the samples), and `why` says the samples left DDP alone and how to compare
    the rest. The same fleet with mc_samples 0 compares them."""
    body = {**_fleet("llama-1b", "p4d.24xlarge", 2, 8), "strategy": "auto"}
    compared = _post(client, write_headers, body).json()["strategy"]
    assert compared["why_kind"] == "fastest_fits" and len(compared["compared"]) > 2
    r = _post(client, write_headers, {**body, "mc_samples": 20})
    assert r.status_code == 200, r.text
    answer = r.json()
    view = answer["strategy"]
    assert (view["strategy"], view["checkpointing"], view["compared"]) == ("ddp", False, [])
    assert view["why_kind"] == "only_allowed"
    assert view["why"].startswith("only DDP without checkpointing was compared: mc_samples 20"), view
    assert "give mc_samples 0 to compare every setup strategy auto allows" in view["why"], view
    plain = _post(client, write_headers, {**body, "strategy": None, "mc_samples": 20}).json()
    assert answer["predicted"] == plain["predicted"]
    # ddp with checkpointing null allows two setups; the samples leave the one without checkpointing
    both = _post(client, write_headers, {**body, "strategy": "ddp", "mc_samples": 20})
    assert both.status_code == 200, both.text
    assert both.json()["strategy"]["why"].endswith("compare every setup strategy ddp allows")
    # parameter servers likewise: modelled for plain DDP alone
    servers = _post(client, write_headers, {**body, "comm": "parameter_server", "ps_servers": 2})
    assert servers.status_code == 200, servers.text
    why = servers.json()["strategy"]["why"]
    assert why.startswith("only DDP without checkpointing was compared: comm parameter_server"), why
    assert "give comm allreduce to compare every setup strategy auto allows" in why, why


def test_auto_with_monte_carlo_samples_where_ddp_overfills_is_a_409_naming_mc_samples(
    shipped: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    body = {**_fleet("llama-8b", "g4dn.xlarge", 2, 1), "strategy": "auto", "mc_samples": 20}
    r = _post(client, write_headers, body)
    assert r.status_code == 409, r.text
    error = r.json()
    assert error["field"] == "mc_samples" and "plain DDP without checkpointing" in error["detail"], error
    assert "config.choices[0].instance_type" in error["detail"] and "no batch fits" in error["detail"], error
    hint = error["hint"]
    assert hint.startswith("give mc_samples 0 so strategy auto compares the sharded setups too"), hint
    # ... or a bigger GPU; never "use at most 0 per GPU", nor strategy auto again
    assert "GiB each" in hint and "at most 0" not in hint and "strategy auto (" not in hint, hint


def test_the_prediction_schema_states_the_strategy_rules(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    request = schema["PredictionRequest"]
    rules = {r["id"] for r in request[RULES_KEY]}
    assert {"checkpointing-needs-strategy", "strategy-as-planned"} <= rules
    assert "StrategyChoice" in str(request["properties"]["strategy"])
    assert request["properties"]["strategy"].get("default") is None
    assert "strategy" in schema["PredictionOut"]["properties"]
