"""What a user takes for granted of plans, checked through POST /v1/plans on the shipped catalog with the
ResNet-50 reference model: a looser limit never gives a worse plan, a plan meets its limits and costs its
VMs' rent for its time, no fleet the answer lists beats it, nor does any single type it lists planned alone,
the same request gives the same plan, eager search never claims better than a proven exhaustive plan, and
the figure an infeasible answer names is enough.

A small, proven space (four on-demand types, at most seven VMs) keeps every search exhaustive and closed
within its budget, so the properties hold exactly, not only up to a search cut short."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.commands.plan import EXAMPLE
from srift.refmodels.shipped import load_reference_profiles
from srift.settings import Settings

AVAILABILITY = {"g4dn.xlarge": 3, "g5.xlarge": 2, "g6e.xlarge": 1, "p4de.24xlarge": 1}
"""Fleets from one p4de.24xlarge (1431 s, $16.29) to mixes of small GPUs ($11.05, 16660 s)."""
TOLERANCE = 1e-9
"""Relative: figures of one request are computed by one simulator, so ties are exact up to rounding."""


def _body(**changes: Any) -> dict[str, Any]:
    body = yaml.safe_load(EXAMPLE)
    assert isinstance(body, dict)
    body.update(
        {
            "market": "on_demand",
            "availability": AVAILABILITY,
            "mode": "exhaustive",
            "solve_budget_s": 5.0,
            "time_limit_s": None,
            "budget_usd": None,
            **changes,
        }
    )
    return body


class _Planner:
    """Posts plan requests and checks what every answer must hold."""

    def __init__(self, client: TestClient, headers: dict[str, str]) -> None:
        self.client = client
        self.headers = headers

    def post(self, **changes: Any) -> tuple[int, dict[str, Any]]:
        r = self.client.post("/v1/plans", json=_body(**changes), headers=self.headers)
        assert r.status_code in (201, 409), r.text
        return r.status_code, r.json()

    def plan(self, **changes: Any) -> dict[str, Any]:
        status, plan = self.post(**changes)
        assert status == 201, plan
        self.check(plan, _body(**changes))
        return plan

    def check(self, plan: dict[str, Any], body: dict[str, Any]) -> None:
        predicted = plan["predicted"]
        rent_usd_per_hr = sum(c["count"] * c["price_usd_per_hr"] for c in plan["choices"])
        assert predicted["cost_usd"] == pytest.approx(rent_usd_per_hr * predicted["total_time_s"] / 3600)
        assert sum(c["count"] * c["batch"] for c in plan["choices"]) == body["global_batch"]
        assert all(c["count"] <= body["availability"][c["instance_type"]] for c in plan["choices"])
        if body["time_limit_s"] is not None:
            assert predicted["total_time_p90_s"] <= body["time_limit_s"]
        if body["budget_usd"] is not None:
            assert predicted["cost_p90_usd"] <= body["budget_usd"]
        assert plan["proven_optimal"]
        mine = _objective(plan)
        for point in plan["pareto"]:
            if point["feasible"]:
                assert mine <= point[_key(plan)] * (1 + TOLERANCE), (plan["label"], point)


def _key(plan: dict[str, Any]) -> str:
    return "cost_usd" if plan["objective"] == "min_cost" else "total_time_s"


def _objective(plan: dict[str, Any]) -> float:
    value: float = plan["predicted"][_key(plan)]
    return value


def _single_types(plan: dict[str, Any]) -> set[str]:
    """The instance types that alone make a feasible fleet the plan lists (its own included)."""
    found = set()
    for point in plan["pareto"]:
        names = set(re.findall(r"×([\w.\-]+)@", point["label"]))
        if point["feasible"] and len(names) == 1:
            found |= names
    return found


def _no_single_type_beats(planner: _Planner, plan: dict[str, Any], **limits: Any) -> int:
    """Plans the request on each single type `plan` lists; returns how many of them planned."""
    planned = 0
    for name in sorted(_single_types(plan)):
        status, alone = planner.post(
            availability={name: AVAILABILITY[name]}, objective=plan["objective"], **limits
        )
        if status == 201:
            planned += 1
            assert _objective(plan) <= _objective(alone) * (1 + TOLERANCE), (plan["label"], alone["label"])
    return planned


def test_looser_limits_never_give_a_worse_plan_and_every_plan_holds(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    planner = _Planner(client, write_headers)

    costs = []
    for limit_s in (1700, 12000, 24000):
        plan = planner.plan(objective="min_cost", time_limit_s=limit_s)
        costs.append(plan["predicted"]["cost_usd"])
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1], costs
    alone = _no_single_type_beats(planner, plan, time_limit_s=24000)

    times = []
    for budget_usd in (13.5, 20.0):
        plan = planner.plan(objective="min_time", budget_usd=budget_usd)
        times.append(plan["predicted"]["total_time_s"])
        status, eager = planner.post(objective="min_time", budget_usd=budget_usd, mode="eager")
        assert status == 201 and _objective(eager) >= _objective(plan) * (1 - TOLERANCE)
        alone += _no_single_type_beats(planner, plan, budget_usd=budget_usd)
    assert alone >= 2, "no single type was compared"
    assert times == sorted(times, reverse=True) and times[0] > times[-1], times

    again = planner.plan(objective="min_time", budget_usd=20.0)
    assert (again["choices"], again["predicted"]) == (plan["choices"], plan["predicted"])


@pytest.mark.parametrize(
    ("limit", "value", "relaxation"),
    [("time_limit_s", 1000, "fastest_time_s"), ("budget_usd", 12.0, "cheapest_cost_usd")],
)
def test_the_figure_an_infeasible_answer_names_is_enough(
    settings: Settings,
    client: TestClient,
    write_headers: dict[str, str],
    limit: str,
    value: float,
    relaxation: str,
) -> None:
    load_shipped_catalog(settings)
    load_reference_profiles(settings)
    planner = _Planner(client, write_headers)
    objective = "min_cost" if limit == "time_limit_s" else "min_time"
    status, error = planner.post(objective=objective, **{limit: value})
    assert status == 409 and error["field"] == limit and error["proven"], error
    figure = error["relaxations"][relaxation]
    assert figure > value
    named = re.search(r"at least \$?([\d.]+)", error["hint"])
    assert named is not None, error["hint"]
    planner.plan(objective=objective, **{limit: float(named.group(1))})
