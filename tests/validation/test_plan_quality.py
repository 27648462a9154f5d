"""Plan-quality helpers on hand-made problems and measurements: the space, ranks and rank correlation."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from srift.domain import Constraints, InstanceType, Interconnect, Market, Objective, Offer
from srift.optimize.space import BatchPolicy, Candidate, Problem
from srift.optimize.synthetic import synthetic_profile
from srift.validation.plan_quality import _rank, _spearman, enumerate_space, fleet_of


def _candidate(name: str, accelerator: str, price: float, cap: int) -> Candidate:
    inst = InstanceType(
        provider="testbed",
        name=name,
        gpu_model=accelerator,
        gpu_count=1,
        gpu_memory_gib=16,
        vcpus=4,
        memory_gib=16,
        network_gbps=1,
        network_burst=False,
        interconnect=Interconnect.NONE,
        interconnect_gbps=0,
        efa=False,
    )
    offer = Offer(inst, "local", Market.SPOT, price, "test", dt.date(2026, 1, 1))
    profile = synthetic_profile("resnet50", accelerator)
    return Candidate(offer=offer, profile=profile, cap=cap)


def test_space_is_every_split_of_the_global_batch() -> None:
    problem = Problem(
        (_candidate("a", "T4", 0.5, 2), _candidate("b", "V100", 1.0, 2)),
        Constraints(global_batch=128, iterations=10, objective=Objective.MIN_TIME),
        BatchPolicy.POW2,
    )
    space = enumerate_space(problem)
    # a T4 holds 64 per VM, a V100 128: powers of two summing to 128, at most two VMs of each type
    assert sorted(fleet_of(problem, g).label() for g in space) == sorted(
        [
            "2×a@64",
            "1×b@128",
            "2×b@64",
            "1×a@64 + 1×b@64",
            "1×a@64 + 2×b@32",
            "2×a@32 + 1×b@64",
            "2×a@32 + 2×b@32",
        ]
    )
    assert all(problem.in_space(g) for g in space)


def _row(label: str, measured: float, cost_rate: float = 1.0) -> dict[str, Any]:
    return {
        "fleet": label,
        "measured_iteration_s": measured,
        "measured_cost_usd": measured * cost_rate,
        "predicted": {"iteration_s": measured * 0.9},
    }


def test_rank_and_ratio_against_the_measured_best() -> None:
    rows = {r["fleet"]: r for r in (_row("x", 1.0), _row("y", 1.2), _row("z", 0.8), _row("w", 3.0))}
    out = _rank(
        rows,
        {"srift": "z", "cap": "w", "tap": "y"},
        value=lambda r: r["measured_iteration_s"],
        feasible=lambda r: True,
    )
    assert out["best"] == "z"
    assert out["srift"]["rank"] == 1 and out["srift"]["ratio_to_best"] == pytest.approx(1.0)
    assert out["tap"]["rank"] == 3 and out["tap"]["ratio_to_best"] == pytest.approx(1.5)
    assert out["cap"]["rank"] == 4 and out["cap"]["of"] == 4


def test_infeasible_choices_have_no_rank() -> None:
    rows = {r["fleet"]: r for r in (_row("fast", 1.0, 3.0), _row("cheap", 2.0, 1.0), _row("slow", 5.0, 0.1))}
    out = _rank(
        rows,
        {"srift": "cheap", "cap": "slow", "tap": None},
        value=lambda r: r["measured_cost_usd"],
        feasible=lambda r: r["measured_iteration_s"] <= 2.5,
    )
    assert out["best"] == "cheap" and out["feasible_configurations"] == 2
    assert out["srift"]["rank"] == 1
    assert out["cap"]["feasible"] is False and out["cap"]["rank"] is None
    assert out["tap"]["rank"] is None


def test_spearman_of_perfect_and_reversed_orders() -> None:
    assert _spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert _spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert _spearman([1, 2], [1, 2]) is None


def test_a_deadline_is_met_only_when_every_repeat_meets_it() -> None:
    from srift.validation.plan_quality import ITERATIONS, meets_in_every_repeat

    deadline = 2.0 * ITERATIONS
    runs = [{"ok": True, "mean_iter_s": 1.9}, {"ok": True, "mean_iter_s": 2.0}]
    assert meets_in_every_repeat({"runs": runs}, deadline)
    # The mean of the repeats (1.975 s) meets the deadline, one repeat (2.05 s) does not.
    assert not meets_in_every_repeat({"runs": [runs[0], {"ok": True, "mean_iter_s": 2.05}]}, deadline)
    assert not meets_in_every_repeat({"runs": [runs[0], {"ok": False}]}, deadline)
    assert not meets_in_every_repeat({"runs": []}, deadline)


def test_plan_acceptance_needs_every_repeat_and_a_cost_within_ten_percent() -> None:
    from srift.validation.report import acceptance

    summary = {
        "overall": {"mape": 0.05, "underestimate_share": 0.5, "underestimate_p90": 0.1},
        "coverage": {"overall": {"below_p90_share": 0.9}},
    }

    def plan(feasible: bool | None, ratio: float | None) -> dict[str, Any]:
        return {
            "primary": {"srift": {"ratio_to_best": 1.0}},
            "secondary": {"srift": {"feasible": feasible, "ratio_to_best": ratio}},
        }

    ok = acceptance(summary, plan(True, 1.08), duration_s=600, full=False)
    assert ok["plan_meets_deadline_in_every_repeat"]["ok"] and ok["plan_cost_within_10pct_of_cheapest"]["ok"]
    assert ok["p90_coverage_80_to_97pct"]["ok"] and ok["mape_le_7pct"]["ok"]
    dear = acceptance(summary, plan(True, 1.12), duration_s=600, full=False)
    assert not dear["plan_cost_within_10pct_of_cheapest"]["ok"]
    late = acceptance(summary, plan(False, None), duration_s=600, full=False)
    assert not late["plan_meets_deadline_in_every_repeat"]["ok"]
    wide = acceptance(
        {**summary, "coverage": {"overall": {"below_p90_share": 1.0}}}, None, duration_s=600, full=False
    )
    assert not wide["p90_coverage_80_to_97pct"]["ok"]
