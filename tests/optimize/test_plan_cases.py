"""Plans over the shipped catalog, prepared as POST /v1/plans prepares them: runnable as given, and issue
#23's request solved to proven optimality by the exhaustive search."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srift.domain import Plan, SearchMode
from srift.errors import Infeasible, InvalidInput
from srift.optimize.space import Problem
from srift.optimize.synthetic import MODELS, synthetic_profile
from srift.testing.plans import issue23_request, shipped_settings, solve

# One worker runs the module in order: the last test checks what the property test counted.
pytestmark = pytest.mark.xdist_group("plan_cases")

ACCELERATORS = ["T4", "M60", "K80", "V100", "A10G", "L4", "L40S", "A100", "H100", "H200"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return shipped_settings(Path(tmp_path_factory.mktemp("shipped")))


def assert_runnable(plan: Plan, problem: Problem) -> None:
    """Every VM's batch is a whole number of samples per GPU within the profile's max batch, the batches
    sum exactly to the global batch, and counts stay within availability and the request's caps."""
    by_key = {(c.name, c.market): c for c in problem.candidates}
    c = problem.constraints
    configs = [plan.config] + [b.config for b in plan.baselines.values() if b is not None]
    if plan.diminishing_returns is not None:
        configs.append(plan.diminishing_returns.alternative)
    for config in configs:
        gpus = 0
        for choice in config.choices:
            cand = by_key[(choice.instance_type, choice.market)]
            per_gpu, left = divmod(choice.batch, cand.devices)
            assert left == 0, f"{choice}: {choice.batch} samples on {cand.devices} GPUs"
            assert 1 <= per_gpu <= cand.profile.max_batch, choice
            assert 1 <= choice.count <= cand.cap, choice
            gpus += choice.count * cand.devices
        assert config.global_batch == c.global_batch
        assert c.max_vms is None or config.vm_count <= c.max_vms
        assert c.max_gpus is None or gpus <= c.max_gpus


def random_request(seed: int) -> dict[str, Any]:
    """A plan request drawn from `seed`: synthetic profiles of one paper model on 1–3 GPU models, any
    global batch up to 4096, either objective, limits or none, availability or not, caps or not; limits
    at the median (the property concerns the fleet's shape, not the prediction's band)."""
    rng = random.Random(seed)
    model = rng.choice(sorted(MODELS))
    accelerators = rng.sample(ACCELERATORS, rng.randint(1, 3))
    profiles = [synthetic_profile(model, a).to_dict() for a in accelerators]
    body: dict[str, Any] = {
        "profiles": profiles,
        "global_batch": rng.choice(
            [rng.randint(1, 4096), 8 * rng.randint(1, 512), rng.choice([256, 1000, 3000])]
        ),
        "iterations": rng.choice([100, 1000, 10_000]),
        "objective": rng.choice(["min_cost", "min_time"]),
        "region": rng.choice(["us-east-1", "us-west-2"]),
        "market": rng.choice(["spot", "on_demand", "any"]),
        "mode": rng.choice(["auto", "eager", "exhaustive"]),
        "batch_policy": rng.choice(["pow2_split", "pow2_split", "pow2", "any"]),
        "max_count_per_type": rng.randint(1, 16),
        "solve_budget_s": 0.1,
        "confidence": 0.5,
    }
    per_1000 = body["iterations"] / 1000
    if rng.random() < 0.4:
        body["time_limit_s"] = rng.choice([60, 600, 3600]) * per_1000
    if rng.random() < 0.4:
        body["budget_usd"] = rng.choice([1, 10, 100]) * per_1000
    if rng.random() < 0.2:
        body["max_gpus"] = rng.randint(8, 128)
    if rng.random() < 0.2:
        body["max_vms"] = rng.randint(2, 32)
    return body


COUNTS: dict[str, int] = {}
# Requests the property test draws: 120 keep the module near 27 s alone on a 2-core host (200 took 40 s, 500
# took 158 s) while the exhaustive search read its clock every 64th node only; since it reads it at every node
# (its 0.1 s budgets hold) the 120 take about 8 s. Each request draws model, GPUs, batch, objective, market,
# mode, policy and limits afresh.
EXAMPLES = 120


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.integers(0, 2**32 - 1))
def test_every_plan_over_the_shipped_catalog_runs_as_given(shipped: Any, seed: int) -> None:
    body = random_request(seed)
    try:
        plan, problem = solve(shipped, body)
    except (InvalidInput, Infeasible) as exc:  # Infeasible: no offered type runs the profiles' GPUs
        COUNTS[type(exc).__name__] = COUNTS.get(type(exc).__name__, 0) + 1
        return
    COUNTS["plan"] = COUNTS.get("plan", 0) + 1
    assert_runnable(plan, problem)


def test_the_property_test_mostly_produced_plans() -> None:
    """Run after the property test (same module): the property is not vacuous, a large share of its
    requests produced a plan (297 of 500 on a loaded 2-core host; the 0.1 s solve budgets make the exact
    count depend on the machine, so the floor, two in five, is well below it)."""
    if not COUNTS:
        pytest.skip("runs after test_every_plan_over_the_shipped_catalog_runs_as_given")
    assert sum(COUNTS.values()) == EXAMPLES
    assert COUNTS.get("plan", 0) >= EXAMPLES * 2 // 5, COUNTS


def test_issue_23_exhaustive_is_proven_optimal_and_no_worse_than_eager(shipped: Any) -> None:
    """At the median (confidence 0.5: limits checked against the prediction, as when the issue was filed)."""
    exhaustive, problem = solve(shipped, issue23_request(mode="exhaustive", confidence=0.5))
    eager, _ = solve(shipped, issue23_request(mode="eager", confidence=0.5))
    auto, _ = solve(shipped, issue23_request(mode="auto", confidence=0.5))
    assert exhaustive.mode is SearchMode.EXHAUSTIVE and exhaustive.proven_optimal
    assert exhaustive.optimality_gap == 0.0
    assert exhaustive.predicted.total_time_s <= eager.predicted.total_time_s
    assert exhaustive.predicted.cost_usd <= 0.5
    assert auto.proven_optimal and auto.config == exhaustive.config
    for plan in (exhaustive, eager, auto):
        assert_runnable(plan, problem)
    note = exhaustive.diminishing_returns
    words = [w for w in exhaustive.warnings if w.startswith("diminishing returns:")]
    assert (note is None) == (words == [])
    if note is not None:
        cheaper = note.cost_usd <= 0.75 * exhaustive.predicted.cost_usd
        assert cheaper or note.gpus <= note.plan_gpus / 2
        assert note.total_time_s <= 1.1 * exhaustive.predicted.total_time_s
        if note.extra_usd > 0:
            assert note.seconds_per_usd == pytest.approx(note.seconds_saved / note.extra_usd)
