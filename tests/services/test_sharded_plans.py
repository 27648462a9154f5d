"""Plans for models that need sharding: the 8 B reference model at a deadline, the 1 B model's comparison of
strategies, the 422 when no fleet holds the model, and `srift plan --example-model`."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, get_args

import yaml
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.commands.plan import example_for
from srift.domain import FleetMember, InstanceType
from srift.domain.sharding import StrategyChoice
from srift.optimize.evaluate import SimEvaluator
from srift.optimize.strategies import StrategyEvaluator, setups_for
from srift.refmodels.shipped import load_reference_profiles, reference_profiles
from srift.services.sharding import OfferedTypes, memory_hint
from srift.settings import Settings
from tests.sim.kit import P3_2XL, flat

NO_STRUCTURE = {
    "model": "no-structure",
    "accelerator": "NVIDIA T4",
    "max_batch": 256,
    "forward": {"batches": [1, 128, 256], "times_s": [0.004, 0.04, 0.08]},
    "backward": {"batches": [1, 128, 256], "times_s": [0.008, 0.08, 0.16]},
    "layers": [{"name": f"fc{i}", "grad_bytes": 1_000_000, "ready_frac": (i + 1) / 4} for i in range(4)],
    "straggler_cv": 0.05,
}
"""A T4 profile without the model's structure: no memory facts, so no sharded setup can be checked."""


def _body(model: str, **extra: Any) -> dict[str, Any]:
    body = yaml.safe_load(example_for(model))
    assert isinstance(body, dict)
    return {**body, "solve_budget_s": 1.0, **extra}


def test_the_8b_model_gets_a_sharded_plan_whose_memory_fits_its_gpus(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    r = client.post("/v1/plans", json=_body("llama-8b"), headers=write_headers)
    assert r.status_code == 201, r.text
    plan = r.json()
    view = plan["strategy"]
    assert view["strategy"] in ("zero2", "full_shard", "hybrid")
    assert view["precision"].startswith("mixed")
    assert "fully_shard" in view["how"]
    compared = {c["setup"]: c for c in view["compared"]}
    assert compared["ddp"]["fits"] is False and "GiB per GPU" in compared["ddp"]["reason"]
    for choice in plan["choices"]:
        assert choice["strategy"] == view["strategy"] and choice["wrap"] == "blocks"
        memory = next(m for m in view["memory"] if m["instance_type"] == choice["instance_type"])
        assert memory["peak_bytes"] <= 0.9 * memory["capacity_gib"] * 2**30
        assert choice["memory_per_gpu_bytes"] == memory["peak_bytes"] < choice["gpu_memory_bytes"]
        parts = memory["parts"]
        assert (
            sum(parts.values()) == memory["peak_bytes"] or abs(sum(parts.values()) - memory["peak_bytes"]) < 8
        )
    assert plan["limits"]["time_limit_s"] == 28800 and plan["predicted"]["total_time_s"] < 28800
    assert any(s.startswith("strategy:") for s in plan["sources"])


def test_the_1b_model_compares_ddp_zero2_and_full_sharding_and_says_why(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    r = client.post("/v1/plans", json=_body("llama-1b"), headers=write_headers)
    assert r.status_code == 201, r.text
    view = r.json()["strategy"]
    compared = {c["setup"]: c for c in view["compared"]}
    assert {"ddp", "zero2", "full_shard"} <= set(compared)
    chosen = view["strategy"] + ("+ckpt" if view["checkpointing"] else "")
    assert view["why"].startswith(f"{chosen} is the fastest setup that fits")
    assert view["why_kind"] == "fastest_fits"
    fitting = [c for c in compared.values() if c["fits"]]
    assert compared[chosen]["iteration_s"] <= min(c["iteration_s"] for c in fitting) * (1 + 1e-6)


def test_a_model_no_fleet_can_hold_is_a_409_that_says_what_each_needs(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    body = _body("llama-8b", availability={"g4dn.xlarge": 8}, global_batch=8, strategy="full_shard")
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 409, r.text
    error = r.json()
    assert error["field"] == "strategy"
    assert "no fleet can hold llama-8b" in error["detail"] and "g4dn.xlarge needs" in error["detail"]


def test_the_no_fleet_holds_409_hint_names_only_changes_that_can_help(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """The plan 409 when no fleet holds the model said "raise max_count_per_type or availability so sharding
    spreads the model", "use checkpointing (null or true)" and "strategy auto" whatever the request. Now it
    names, as a prediction's 409 does, only what can help: more VMs when an allowed setup that shards fits
    some number of them (zero2 keeps every parameter on each GPU, DDP the whole model), checkpointing when
    the request rules it out, full sharding when the request's strategy does not shard fully."""
    load_shipped_catalog(settings)
    load_reference_profiles(settings)

    def hint(n: int, **extra: Any) -> str:
        body = _body("llama-8b", availability={"g4dn.xlarge": n}, global_batch=n, **extra)
        r = client.post(
            "/v1/plans", json={**body, "time_limit_s": None, "iterations": 10}, headers=write_headers
        )
        assert r.status_code == 409 and r.json()["field"] == "strategy", r.text
        assert "no fleet can hold llama-8b" in r.json()["detail"], r.text
        return str(r.json()["hint"])

    larger = r"types with more GPU memory \(e\.g\. [^)]+\)"  # the types named: the test below
    assert re.fullmatch(f"use {larger}, or strategy full_shard \\(or auto\\)", hint(8, strategy="zero2"))
    more = "use more VMs (max_count_per_type or availability) so sharding spreads the model over more GPUs"
    assert hint(8, strategy="ddp") == "use a sharded strategy (strategy full_shard, or auto)"
    assert re.fullmatch(f"{re.escape(more)}, or {larger}", hint(16, strategy="full_shard"))
    assert re.fullmatch(f"{re.escape(more)}, or {larger}", hint(16, strategy="auto"))
    assert re.fullmatch(
        f"use {larger}, or checkpointing true \\(or null\\)",
        hint(8, strategy="full_shard", checkpointing=False),
    )
    # The changes named do help: fully sharded over 32 T4s (one sample each) it fits.
    body = _body("llama-8b", availability={"g4dn.xlarge": 32}, global_batch=32, strategy="full_shard")
    r = client.post("/v1/plans", json={**body, "time_limit_s": None, "iterations": 10}, headers=write_headers)
    assert r.status_code == 201, r.text


def test_the_no_fleet_holds_409_names_the_offered_types_whose_gpu_memory_holds_the_model(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """The plan 409 when no fleet holds the model said "use types with more GPU memory" even when no type
    the region offers has enough (llama-8b under strategy ddp needs about 180 GiB per GPU). It names the
    offered types whose GPU memory lets an allowed setup fit at one sample per GPU over as many GPUs, each of
    which does get a plan, and leaves the suggestion out when there is none."""
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    gpus = {
        row["name"]: row["gpu_count"]
        for row in client.get("/v1/instance-types", params={"provider": "aws", "region": "us-east-1"}).json()
    }

    def answer(availability: dict[str, int], strategy: str) -> Any:
        batch = sum(n * gpus[name] for name, n in availability.items())
        body = _body("llama-8b", availability=availability, global_batch=batch, strategy=strategy)
        return client.post(
            "/v1/plans", json={**body, "time_limit_s": None, "iterations": 10}, headers=write_headers
        )

    r = answer({"g4dn.xlarge": 8}, "zero2")
    assert r.status_code == 409, r.text
    found = re.search(r"types with more GPU memory \(e\.g\. ([^)]+)\)", r.json()["hint"])
    assert found is not None, r.text
    named = found.group(1).split(", ")
    assert named and "g4dn.xlarge" not in named
    for name in named:  # each holds the model under zero2 over at least the 8 GPUs of the 8 T4s
        held = answer({name: math.ceil(8 / gpus[name])}, "zero2")
        assert held.status_code == 201, (name, held.text)
    r = answer({"g4dn.xlarge": 8}, "ddp")
    assert r.status_code == 409, r.text
    assert "no fleet can hold llama-8b" in r.json()["detail"] and "180" in r.json()["detail"], r.text
    assert "GPU memory" not in r.json()["hint"], r.text
    assert r.json()["hint"] == "use a sharded strategy (strategy full_shard, or auto)"


def test_a_sharded_strategy_for_a_model_of_unknown_memory_says_so(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    assert client.post("/v1/profiles", json=NO_STRUCTURE, headers=write_headers).status_code == 201
    body = {"model": "no-structure", "global_batch": 256, "iterations": 1000, "solve_budget_s": 1.0}
    r = client.post("/v1/plans", json={**body, "strategy": "zero2"}, headers=write_headers)
    assert r.status_code == 409, r.text
    error = r.json()
    assert error["field"] == "strategy" and "memory of no-structure is not known" in error["detail"]
    assert "strategy ddp or auto" in error["hint"]
    r = client.post("/v1/plans", json={**body, "strategy": "ddp"}, headers=write_headers)
    assert r.status_code == 201, r.text
    # `auto` for a model without sharding facts, which DDP holds everywhere: DDP alone, and the plan says that
    # the profiles (not the request) left it alone.
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 201, r.text
    view = r.json()["strategy"]
    assert view["strategy"] == "ddp" and view["why_kind"] == "only_checkable"
    assert view["why"].startswith("only DDP could be checked: the profiles carry no sharding facts"), view


def test_fixing_ddp_keeps_the_served_plan(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    r = client.post(
        "/v1/plans", json=_body("llama-1b", strategy="ddp", checkpointing=False), headers=write_headers
    )
    assert r.status_code == 201, r.text
    plan = r.json()
    assert plan["strategy"]["strategy"] == "ddp" and plan["strategy"]["compared"] == []
    assert plan["strategy"]["why_kind"] == "only_allowed"
    assert plan["strategy"]["why"].startswith("only DDP was allowed by the request")
    assert not any(s.startswith("strategy:") for s in plan["sources"])
    # DDP alone: each type's batch within what DDP holds (srift.services.memory), memory shown per choice
    assert all(c["memory_per_gpu_bytes"] < c["gpu_memory_bytes"] for c in plan["choices"])


def test_bad_strategy_fields_name_themselves() -> None:
    from srift.api.schemas.plans import parse_plan_request
    from srift.errors import InvalidInput

    base = {"model": "llama-8b", "global_batch": 8, "iterations": 10}
    for field, value in (("strategy", "zero4"), ("checkpointing", "maybe")):
        try:
            parse_plan_request({**base, field: value})
        except InvalidInput as exc:
            assert exc.field == field
        else:
            raise AssertionError(f"{field}={value!r} was accepted")
    assert parse_plan_request({**base, "strategy": "hybrid"}).to_domain().strategy.value == "hybrid"


def test_the_plan_schema_names_every_why_kind_the_strategy_phase_writes() -> None:
    from srift.api.schemas.plans import StrategyOut
    from srift.services.sharding import WHY_KINDS

    literal, none = get_args(StrategyOut.model_fields["why_kind"].annotation)
    assert none is type(None) and set(get_args(literal)) == set(WHY_KINDS)


def test_the_no_fleet_holds_hint_says_plainly_when_no_change_alone_helps() -> None:
    """When no change alone lets a fleet hold the model (no offered type has GPUs large enough, and more VMs,
    checkpointing or full sharding do not fit the types given) the hint says so and names the location,
    never "use" with nothing after it: llama-8b fully sharded, checkpointed or not, over the most VMs of
    1 GiB GPUs, with a 2 GiB type the only larger one offered."""
    llama = next(
        p for p in reference_profiles() if p.model == "llama-8b" and p.accelerator.startswith("V100")
    )
    tiny = dataclasses.replace(P3_2XL, name="tiny.xlarge", gpu_memory_gib=1.0)
    small = dataclasses.replace(P3_2XL, name="small.xlarge", gpu_memory_gib=2.0)
    chooser = StrategyEvaluator(
        SimEvaluator(bandwidth=flat(10.0)), setups_for(StrategyChoice.FULL_SHARD, None), max_update_s=1.0
    )
    fleet = [FleetMember(instance=tiny, count=4, batch=1, profile=llama)]
    assert not chooser.fits(fleet)

    def hint(*offered: InstanceType) -> str:
        return memory_hint(
            [fleet],
            chooser=chooser,
            strategy=StrategyChoice.FULL_SHARD,
            checkpointing=None,
            more_vms="more VMs",
            offered=OfferedTypes(offered, "aws/us-east-1"),
        )

    plainly = hint(tiny, small)
    assert plainly.startswith(
        "no change alone lets a fleet hold the model: no type offered in aws/us-east-1 "
    )
    assert "strategy full_shard" in plainly and "use another provider or region" in plainly
    # with a type whose GPUs do hold it offered, that type is the change named
    roomy = dataclasses.replace(P3_2XL, name="roomy.xlarge", gpu_memory_gib=80.0)
    assert hint(tiny, small, roomy) == "use types with more GPU memory (e.g. roomy.xlarge)"
