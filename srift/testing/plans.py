"""Plan requests kept as test and benchmark cases, with the shipped catalog in a throwaway database.

`issue23_request` is issue #23's request, reconstructed: the toy CNN of the README Quick start
(srift.profiling.testmodels:cnn) profiled on this project's host and labelled T4, so its plans use the g4dn
family; min_time within $0.50, global batch 256, 40,000 iterations, us-east-1, either market. The issue
reported that exhaustive search stopped after 5 configurations in 16 s with a worse plan than eager search,
and that the plan put 26 samples on an 8-GPU VM. Used by tests/optimize/test_plan_cases.py and
benchmarks/search_scaling.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from srift.domain import Plan
from srift.optimize.space import Problem
from srift.settings import Settings

DATA = Path(__file__).resolve().parent / "data"

ISSUE_23: dict[str, Any] = {
    "global_batch": 256,
    "iterations": 40_000,
    "objective": "min_time",
    "budget_usd": 0.5,
    "provider": "aws",
    "region": "us-east-1",
    "market": "any",
    "mode": "exhaustive",
    "solve_budget_s": 20,
    "allow_cpu_profiles": True,  # the profile was measured on a CPU and labelled T4: a stand-in, as asked
}


def cnn_t4_profile() -> dict[str, Any]:
    """The toy CNN's profile (srift/testing/data/cnn_t4_profile.json; `extra.note` says how it was made)."""
    data: dict[str, Any] = json.loads((DATA / "cnn_t4_profile.json").read_text())
    return data


def issue23_request(**over: Any) -> dict[str, Any]:
    """Issue #23's plan request body (POST /v1/plans), with `over` replacing fields."""
    return {"profiles": [cnn_t4_profile()], **ISSUE_23, **over}


def shipped_settings(tmp: Path) -> Settings:
    """Settings of a fresh SQLite database in `tmp` holding the shipped catalog and bandwidth models."""
    from srift.bootstrap import bootstrap

    settings = Settings(database_url=f"sqlite:///{tmp / 'cases.db'}", data_dir=tmp)
    bootstrap(settings)
    return settings


def solve(settings: Settings, body: dict[str, Any]) -> tuple[Plan, Problem]:
    """Prepare `body` exactly as POST /v1/plans does and optimize it: (Plan, Problem)."""
    from srift.api.schemas.plans import PlanRequest
    from srift.db.session import transaction
    from srift.optimize.solver import optimize
    from srift.services.plans import prepare

    query = PlanRequest.model_validate(body).to_domain()
    with transaction(settings.resolved_database_url) as session:
        prepared = prepare(session=session, settings=settings, query=query)
    return optimize(prepared.problem, prepared.evaluator, prepared.options), prepared.problem
