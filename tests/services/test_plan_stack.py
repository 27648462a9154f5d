"""Plans over the shipped catalog use only hardware the request's framework stack runs: the plan, its
baselines and every Pareto point, one test per rule (srift.catalog.support)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from srift.api.schemas.plans import PlanRequest
from srift.bootstrap import bootstrap
from srift.db.session import dispose_engines, transaction
from srift.optimize.synthetic import synthetic_profile
from srift.profiling.store import save_profile
from srift.services.plans import create_plan
from srift.settings import Settings

GPUS = ["T4", "M60", "K80", "V100", "A10G", "L4", "L40S", "A100", "H100", "H200"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = Path(tmp_path_factory.mktemp("stack"))
    settings = Settings(database_url=f"sqlite:///{tmp / 'stack.db'}", data_dir=tmp)
    bootstrap(settings)
    with transaction(settings.resolved_database_url) as session:
        ids = [save_profile(session=session, profile=synthetic_profile("resnet50", g)) for g in GPUS]
    yield settings, ids
    dispose_engines()


def _plan(shipped: Any, **over: Any) -> dict[str, Any]:
    settings, ids = shipped
    body = {
        "profile_ids": ids,
        "global_batch": 256,
        "iterations": 2000,
        "objective": "min_cost",
        "provider": "aws",
        "region": "us-east-1",
        "market": "spot",
        "max_count_per_type": 4,
        "mode": "exhaustive",
        "solve_budget_s": 10,
        "price_interruptions": False,
        "fallback": False,
        **over,
    }
    query = PlanRequest.model_validate(body).to_domain()
    with transaction(settings.resolved_database_url) as session:
        record = create_plan(session=session, settings=settings, query=query)
    return {"request": record.request, **record.result}


def _types_used(plan: dict[str, Any]) -> set[str]:
    """Every instance type named by the plan, its baselines and its Pareto points."""
    names = {c["instance_type"] for c in plan["choices"]}
    for base in plan["baselines"].values():
        if base is not None:
            names |= {c["instance_type"] for c in base["choices"]}
    for point in plan["pareto"]:
        names |= {part.split("@")[0].split("×")[-1].strip() for part in point["label"].split(" + ")}
    return names


def _families(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def test_the_default_stack_leaves_out_kepler_and_retired_families(shipped: Any) -> None:
    plan = _plan(shipped)
    assert plan["request"]["stack"] == {"torch": "2.13", "cuda": "12.6"}
    assert plan["request"]["include_retired"] is False
    assert not _families(_types_used(plan)) & {"p2", "g3"}
    warning = next(w for w in plan["warnings"] if "p2.16xlarge" in w)
    assert "compute capability 3.7" in warning and "CUDA 12.6" in warning
    assert any("g3.4xlarge" in w and "retired" in w for w in plan["warnings"])


def test_a_cuda_13_stack_uses_turing_and_newer_only(shipped: Any) -> None:
    plan = _plan(shipped, stack={"torch": "2.13", "cuda": "13.0"}, include_retired=True)
    assert plan["request"]["stack"] == {"torch": "2.13", "cuda": "13.0"}
    assert not _families(_types_used(plan)) & {"p2", "g3", "p3", "p3dn"}
    assert any("V100" in w and "compute capability 7.0" in w for w in plan["warnings"])


def test_pytorch_wheels_that_drop_volta_leave_out_v100s(shipped: Any) -> None:
    plan = _plan(shipped, stack={"torch": "2.11", "cuda": "12.8"})
    assert not _families(_types_used(plan)) & {"p2", "g3", "p3", "p3dn"}
    assert any("PyTorch 2.11" in w for w in plan["warnings"])


def test_an_old_stack_may_use_kepler_when_retired_families_are_asked_for(shipped: Any) -> None:
    plan = _plan(shipped, stack={"torch": "2.0", "cuda": "11.8"}, include_retired=True)
    assert not any("p2." in w for w in plan["warnings"])


def test_naming_a_type_the_stack_cannot_run_is_an_input_error(shipped: Any) -> None:
    from srift.errors import InvalidInput

    with pytest.raises(InvalidInput) as info:
        _plan(shipped, availability={"p2.xlarge": 2, "g4dn.xlarge": 2})
    assert info.value.field == "availability.p2.xlarge"
