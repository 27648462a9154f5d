"""POST /v1/plans with a `recent_market` on the real app and database: the spot figures come from the
nowcast (the fitted law conditioned on the market's recent past, srift.spot.replay.now_outcomes) and the
plan says so; a stormy recent log raises the expected cost against the same law without it (and never
raises P(meets the time limit)), a calm one does the reverse; without the option every figure is the
fitted law's; bad input is a 422 naming the field with a "To fix:" hint; the replay endpoint predicts with
the nowcast too; and the OpenAPI document states every rule."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_replay_endpoint import _profile, fleet_history, spot_body

from srift.api.schemas.plans import SpotOut
from srift.catalog.shipped import load_shipped_catalog
from srift.services.replays import NOWCAST_REPLACES
from srift.services.traces import import_traces
from srift.settings import Settings
from srift.spot.traces import SpotTrace, TraceSource

HEADER = "time,zone,instance_type,event,count"
TICK_S = 300.0
TAIL_TICKS = 64 * 3600 // 300
"""The recent past the tests rewrite: the last 64 h, the longest look-back the nowcast may choose."""


def _recent(base: SpotTrace, name: str, tail: list[int]) -> SpotTrace:
    """`base` (a drawn trace) with its last ticks replaced by `tail`, as a user's log named `name`."""
    counts = base.counts[: len(base.counts) - len(tail)] + tuple(tail)
    source = TraceSource("user", f"{name}.csv#aws/{base.zone}/{base.instance_type}", None, "1" * 64)
    return replace(base, counts=counts, source=source)


def _market(settings: Settings, db_url: str, *, zones: int | None = None) -> dict[str, Any]:
    """The shipped catalog, a stored V100 profile, eight days of drawn traces for 4 × p3.2xlarge in each
    us-east-1 zone (the first `zones` of them; None: all), and two recent logs of the first zone, its eight
    days with the last 64 h rewritten: stormy (capacity gone for 50 min of every hour, and gone at the end)
    and calm (there throughout)."""
    load_shipped_catalog(settings)
    profile_id = _profile(db_url)
    history = fleet_history(TICK_S)
    stormy = _recent(history[0], "stormy", [4 if i % 12 < 2 else 0 for i in range(TAIL_TICKS)])
    calm = _recent(history[0], "calm", [4] * TAIL_TICKS)
    import_traces(settings=settings, traces=[*history[:zones], stormy, calm])
    return {"profile_id": profile_id, "stormy": stormy, "calm": calm}


@pytest.fixture
def market(client: TestClient, settings: Settings, db_url: str) -> dict[str, Any]:
    """Every us-east-1 zone's history and the two recent logs (`_market`): what the spot figures are
    compared on."""
    return _market(settings, db_url)


@pytest.fixture
def logs_market(client: TestClient, settings: Settings, db_url: str) -> dict[str, Any]:
    """The two recent logs alone (`_market` without the zones' history; each log is eight days of trace):
    for the tests that ask which model made a plan's or a replay's figures, not what the figures are. Each
    covering trace costs a nowcast plan's fit and a replay's programme (about a second a trace per replay:
    the replay test took 14 s through all four zones and the two logs, 5 s through the logs)."""
    return _market(settings, db_url, zones=0)


def _post(client: TestClient, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/v1/plans", json=body, headers=headers)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    return plan


def test_the_spot_figures_follow_the_recent_market_and_say_which_model_made_them(
    client: TestClient, write_headers: dict[str, str], market: dict[str, Any]
) -> None:
    pid = market["profile_id"]
    fitted = _post(client, write_headers, spot_body(pid))
    assert fitted["spot"]["spot_model"] == "fitted law" and fitted["spot"]["nowcast"] is None
    plans = {
        name: _post(client, write_headers, spot_body(pid, recent_market={"trace": market[name].name}))
        for name in ("stormy", "calm")
    }
    for name, plan in plans.items():
        spot, seen = plan["spot"], plan["spot"]["nowcast"]
        assert spot["spot_model"].startswith("nowcast(look-back "), spot["spot_model"]
        assert seen["trace"] == market[name].name and seen["source"] == "recent_market.trace"
        assert seen["as_of_s"] == market[name].duration_s
        # The figures it replaced are exactly the fitted law's plan's, its P(interrupted), P(within budget)
        # and closed form among them: the closed form, which the nowcast has none of, is not shown beside
        # the nowcast's figures.
        assert seen["fitted_law"] == {key: fitted["spot"][key] for key in NOWCAST_REPLACES}
        assert seen["fitted_law"]["closed_form_time_s"] == fitted["spot"]["closed_form_time_s"] > 0
        assert spot["closed_form_time_s"] is None and "no closed form" in seen["closed_form"]
        assert 0.0 <= spot["p_interrupted"] <= 1.0 and spot["p_within_budget"] is None  # no budget asked
        # A nowcast plan stored before these were the nowcast's still reads back.
        older = {**spot, "closed_form_time_s": seen["fitted_law"]["closed_form_time_s"]}
        kept = {"p_interrupted", "p_within_budget", "closed_form_time_s", "closed_form"}
        older["nowcast"] = {k: v for k, v in seen.items() if k not in kept}
        older["nowcast"]["fitted_law"] = {k: v for k, v in seen["fitted_law"].items() if k not in kept}
        assert SpotOut.model_validate(older).nowcast.closed_form is None  # type: ignore[union-attr]
        # Nothing but the spot section changes: same fleet, same uninterrupted prediction, same fallback.
        for key in ("choices", "predicted", "fallback", "probability", "baselines"):
            assert plan[key] == fitted[key], key
        assert spot["time_p10_s"] <= spot["time_p50_s"] <= spot["time_p90_s"]
    stormy, calm = plans["stormy"]["spot"], plans["calm"]["spot"]
    assert stormy["nowcast"]["interruptions"] > calm["nowcast"]["interruptions"] == 0
    assert stormy["p_interrupted"] > calm["p_interrupted"]
    assert not stormy["nowcast"]["up_at_start"] and calm["nowcast"]["up_at_start"]
    # Each against the same law without the look-back (the fitted law alone, started in its stationary
    # state, through the same policy): the stormy past makes the run dearer and later, the calm one cheaper
    # and sooner.
    for spot, worse in ((stormy, True), (calm, False)):
        alone = spot["nowcast"]["without_recent"]
        if worse:
            assert spot["expected_cost_usd"] > alone["expected_cost_usd"]
            assert spot["p_meets_time_limit"] <= alone["p_meets_time_limit"]
            assert spot["expected_time_s"] > alone["expected_time_s"]
        else:
            assert spot["expected_cost_usd"] < alone["expected_cost_usd"]
            assert spot["expected_time_s"] < alone["expected_time_s"]
    # The two recent markets against each other: the stormy one dearer and later.
    assert stormy["expected_cost_usd"] > calm["expected_cost_usd"]
    assert stormy["expected_time_s"] > calm["expected_time_s"]
    # Srift's policy falls back to on-demand in time wherever the limit allows it (srift.spot.policy's
    # safety net): a day for 4 h of work is met either way, so the chance can only be lower, not higher.
    assert stormy["p_meets_time_limit"] <= calm["p_meets_time_limit"]
    # And against the fitted law's plan (its Monte Carlo, which the nowcast's figures replace): a stormy
    # recent market costs more than it says, a calm one less.
    assert stormy["expected_cost_usd"] > fitted["spot"]["expected_cost_usd"] > calm["expected_cost_usd"]


def test_the_imported_traces_are_listed_by_the_names_a_recent_market_gives(
    client: TestClient, write_headers: dict[str, str], market: dict[str, Any]
) -> None:
    r = client.get("/v1/traces", headers=write_headers)
    assert r.status_code == 200, r.text
    rows = {row["name"]: row for row in r.json()}
    stormy = market["stormy"]
    assert {market["calm"].name, stormy.name} <= set(rows)
    row = rows[stormy.name]
    assert (row["instance_type"], row["node_count"], row["region"]) == ("p3.2xlarge", 4, "us-east-1")
    assert row["ticks"] == stormy.ticks and row["gap_s"] == TICK_S


def test_an_inline_log_conditions_the_plan_as_an_imported_one_does(
    client: TestClient, write_headers: dict[str, str], logs_market: dict[str, Any]
) -> None:
    rows = ["time,zone,instance_type,event,count", "2024-05-01T00:00:00Z,us-east-1a,p3.2xlarge,launched,4"]
    for h in range(1, 13):
        rows.append(f"2024-05-01T{h:02d}:00:00Z,us-east-1a,p3.2xlarge,interrupted,4")
        rows.append(f"2024-05-01T{h:02d}:40:00Z,us-east-1a,p3.2xlarge,launched,4")
    rows.append("2024-05-01T13:00:00Z,us-east-1a,p3.2xlarge,interrupted,4")
    log = "\n".join(rows) + "\n"
    body = spot_body(logs_market["profile_id"], recent_market={"log_csv": log, "tick_s": 300})
    plan = _post(client, write_headers, body)
    seen = plan["spot"]["nowcast"]
    assert seen["source"] == "recent_market.log_csv" and seen["trace"].startswith(
        "user:recent_market.log_csv#"
    )
    assert seen["as_of_s"] == 13 * 3600 + 300 and not seen["up_at_start"] and seen["interruptions"] >= 1
    earlier = _post(
        client, write_headers, {**body, "recent_market": {**body["recent_market"], "as_of_s": 7200}}
    )
    assert earlier["spot"]["nowcast"]["as_of_s"] == 7200


def _refused(client: TestClient, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/v1/plans", json=body, headers=headers)
    assert r.status_code == 422, r.text
    got: dict[str, Any] = r.json()
    assert got["hint"], got
    return got


def test_bad_recent_markets_are_refused_naming_the_field(
    client: TestClient, write_headers: dict[str, str], logs_market: dict[str, Any]
) -> None:
    pid, name = logs_market["profile_id"], logs_market["stormy"].name
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"recent_market": {"trace": ""}}, "recent_market.trace", "at least 1 character"),
        ({"recent_market": {"trace": "a\x00b"}}, "recent_market.trace", "holds a NUL character"),
        ({"recent_market": {"trace": name, "as_of_s": 1e8}}, "recent_market.as_of_s", "outside the log"),
        ({"recent_market": {"trace": name, "as_of_s": 10}}, "recent_market.as_of_s", "outside the log"),
        ({"recent_market": {"trace": name, "log_csv": "x"}}, "recent_market.trace", "exactly one"),
        ({"recent_market": {}}, "recent_market.trace", "exactly one"),
        ({"recent_market": {"trace": name}, "fallback": False}, "recent_market", "fallback is false"),
        ({"recent_market": {"trace": name}, "market": "on_demand"}, "recent_market", "market is on_demand"),
        (
            {"recent_market": {"trace": name}, "price_interruptions": False},
            "recent_market",
            "price_interruptions is false",
        ),
        (
            {
                "recent_market": {
                    "log_csv": "time,zone,instance_type,event,count\nyesterday,us-east-1a,p3,x,1\n"
                }
            },
            "recent_market.log_csv.rows[0].time",
            "is not an ISO 8601 time",
        ),
    ]
    for over, field, words in cases:
        got = _refused(client, write_headers, spot_body(pid, **over))
        assert got["field"] == field and words in got["detail"], (over, got)
    # A log of another type or region does not cover the plan's spot fleet.
    other = "time,zone,instance_type,event,count\n2024-05-01T00:00:00Z,us-west-2a,p3.2xlarge,launched,4\n"
    other += "2024-05-01T05:00:00Z,us-west-2a,p3.2xlarge,interrupted,4\n"
    got = _refused(client, write_headers, spot_body(pid, recent_market={"log_csv": other}))
    assert got["field"] == "recent_market.log_csv"
    assert "not the plan's spot fleet of 4 × p3.2xlarge in aws/us-east-1" in got["detail"]
    assert "p3.2xlarge in aws/us-east-1" in got["hint"]


def test_a_trace_name_the_set_does_not_hold_is_not_found(
    client: TestClient, write_headers: dict[str, str], logs_market: dict[str, Any]
) -> None:
    """A well-formed `recent_market.trace` that no imported trace has names data that is not stored: 404
    (docs/limits.md; it was a 422), its hint listing the imported names."""
    pid = logs_market["profile_id"]
    r = client.post(
        "/v1/plans", json=spot_body(pid, recent_market={"trace": "no-such-trace"}), headers=write_headers
    )
    assert r.status_code == 404, r.text
    got = r.json()
    assert (
        got["field"] == "recent_market.trace"
        and "no imported trace is named 'no-such-trace'" in got["detail"]
    )
    for known in (logs_market["stormy"].name, logs_market["calm"].name):
        assert known in got["hint"]


def test_the_replay_endpoint_predicts_with_the_plans_own_choice(
    client: TestClient, write_headers: dict[str, str], logs_market: dict[str, Any]
) -> None:
    pid = logs_market["profile_id"]
    plain = _post(client, write_headers, spot_body(pid))
    recent = _post(client, write_headers, spot_body(pid, recent_market={"trace": logs_market["calm"].name}))
    fitted = client.get(f"/v1/plans/{plain['id']}/replay", headers=write_headers).json()
    nowcast = client.get(f"/v1/plans/{recent['id']}/replay", headers=write_headers).json()
    assert fitted["status"] == nowcast["status"] == "replayed"
    assert fitted["replay"]["nowcast"] is None and "look-back" in nowcast["replay"]["nowcast"]
    assert nowcast["spot_model"] == recent["spot"]["spot_model"] and fitted["spot_model"] == "fitted law"


def test_the_openapi_document_states_the_recent_market_rules(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    plan_rules = {r["id"]: r["rule"] for r in schemas["PlanRequest"]["x-srift-rules"]}
    assert "fallback: true" in plan_rules["recent-market-needs-spot-pricing-and-fallback"]
    recent = schemas["RecentMarketIn"]
    rules = {r["id"]: r["rule"] for r in recent["x-srift-rules"]}
    assert rules["one-recent-source"] == "exactly one of trace and log_csv"
    covers = rules["recent-market-covers-the-fleet"]
    for words in ("trace set", "instance type", "VM count", "recent_market.as_of_s", "at least one tick"):
        assert words in covers
    assert [set(alt["required"]) for alt in recent["oneOf"]] == [{"trace"}, {"log_csv"}]
    props = recent["properties"]
    assert props["as_of_s"]["anyOf"][0]["exclusiveMinimum"] == 0 and props["tick_s"]["minimum"] == 1
    assert "spot_model" in schemas["SpotOut"]["properties"] and "nowcast" in schemas["SpotOut"]["properties"]
    # A nowcast plan's closed form is null (the fitted law's, kept under nowcast.fitted_law), and says so.
    closed = schemas["SpotOut"]["properties"]["closed_form_time_s"]
    assert {"type": "null"} in closed["anyOf"] and "nowcast.fitted_law" in closed["description"]
    assert "fitted law's alone" in schemas["SpotNowcastOut"]["properties"]["closed_form"]["description"]
    # The names recent_market.trace may give are listed.
    assert "get" in document["paths"]["/v1/traces"]


def test_a_replan_prices_spot_with_the_fitted_law(
    client: TestClient, write_headers: dict[str, str], logs_market: dict[str, Any]
) -> None:
    body = spot_body(logs_market["profile_id"], recent_market={"trace": logs_market["stormy"].name})
    first = _post(client, write_headers, body)
    assert first["spot"]["spot_model"].startswith("nowcast(")
    job = client.post("/v1/jobs", json={"plan_id": first["id"]}, headers=write_headers)
    assert job.status_code == 201, job.text
    path = f"/v1/jobs/{job.json()['id']}"
    progress = {"iterations_done": 10_000, "elapsed_s": 4 * 3600.0, "spent_usd": 5.0}
    assert client.post(f"{path}/progress", json=progress, headers=write_headers).status_code == 200
    r = client.post(f"{path}/amendments", json={"time_limit_s": 30 * 3600.0}, headers=write_headers)
    assert r.status_code == 200, r.text
    new = r.json()["plan"]
    # The log described the market before the run started, not the one it is in now (nor, perhaps, the
    # re-planned fleet's): the re-plan's spot figures are the fitted law's.
    assert new["spot"]["spot_model"] == "fitted law" and new["spot"]["nowcast"] is None
    stored = client.get(f"/v1/plans/{new['id']}", headers=write_headers).json()
    assert stored["request"].get("recent_market") is None
