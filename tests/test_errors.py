"""The error hierarchy's helpers: a choice that is not one of an enum's values names the field and every
choice; a number that must be finite and ≥ 0 (or > 0), or a count that must lie in a range, names the field
and the bound; a server's error answer is read back into its parts."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from srift.domain.catalog import MarketChoice
from srift.errors import ErrorAnswer, InvalidInput, NotFound, parse_choice, require_number, require_within


def test_a_known_choice_is_its_member() -> None:
    assert parse_choice(MarketChoice, "spot", what="market", field="market") is MarketChoice.SPOT


def test_an_unknown_choice_names_the_field_and_lists_the_choices() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_choice(MarketChoice, "reserved", what="market", field="market")
    err = caught.value
    assert err.field == "market" and err.detail == "unknown market 'reserved'"
    assert err.hint == "use spot, on_demand or any"
    assert str(err).endswith("To fix: use spot, on_demand or any.")


def test_a_number_within_its_bound_passes_and_one_outside_names_the_field_and_the_bound() -> None:
    assert require_number(0.0, field="restart_s", hint="give seconds ≥ 0") == 0.0
    assert require_number(2.5, field="latency_ms", hint="give latency_ms > 0", positive=True) == 2.5
    outside = [
        (-1.0, False, "a number ≥ 0"),
        (math.nan, False, "a number ≥ 0"),
        (0.0, True, "a positive number"),
        (math.inf, True, "a positive number"),
    ]
    for value, positive, kind in outside:
        with pytest.raises(InvalidInput) as caught:
            require_number(
                value, field="latency_ms", hint="give latency_ms ≥ 0", positive=positive, what="latency"
            )
        err = caught.value
        assert err.field == "latency_ms" and err.detail == f"latency {value} is not {kind}", err.detail
        assert str(err).endswith("To fix: give latency_ms ≥ 0.")
    with pytest.raises(InvalidInput, match=r"^egress: -0.5 is not a number ≥ 0\."):
        require_number(-0.5, field="egress", hint="egress costs are ≥ 0")


def test_a_count_within_its_range_passes_and_one_outside_names_the_field_and_the_range() -> None:
    assert require_within(1, 1, 8, field="ps_servers", hint="use 1 to a few servers") == 1
    assert require_within(8, 1, 8, field="ps_servers", hint="use 1 to a few servers") == 8
    for value in (0, 9):
        with pytest.raises(InvalidInput) as caught:
            require_within(
                value, 1, 8, field="ps_servers", hint="use 1 to a few servers", what="parameter servers"
            )
        err = caught.value
        assert err.field == "ps_servers" and err.detail == f"parameter servers {value} is outside 1..8"
        assert err.hint == "use 1 to a few servers"


def test_a_hint_that_asks_a_question_ends_with_it() -> None:
    err = InvalidInput("no such type 'p5e.48xlarge'", hint="did you mean p5en.48xlarge?", field="type")
    assert str(err) == "type: no such type 'p5e.48xlarge'. To fix: did you mean p5en.48xlarge?"


def test_each_error_states_its_status_name_and_exit_code_and_a_subclass_inherits_what_it_leaves_out() -> None:
    from srift import errors
    from srift.jobs.run import JobLost
    from srift.optimize.solver import PlanInfeasible

    stated = {
        errors.InvalidInput: (422, "invalid_input", 2),
        errors.NotFound: (404, "not_found", 2),
        errors.Conflict: (409, "conflict", 2),
        errors.Infeasible: (409, "infeasible", 2),
        errors.Unauthorized: (401, "unauthorized", 2),
        errors.Forbidden: (403, "forbidden", 2),
        errors.PayloadTooLarge: (413, "payload_too_large", 2),
        errors.EnvironmentProblem: (503, "environment", 3),
        errors.ExternalServiceError: (502, "external_service", 4),
        errors.ConfigurationError: (500, "configuration", 2),
        JobLost: (400, "job_lost", 5),
        PlanInfeasible: (409, "infeasible", 2),
    }
    for kind, (status_code, error, exit_code) in stated.items():
        assert (kind.status_code, kind.error, kind.exit_code) == (status_code, error, exit_code), kind
    err = JobLost("taken", hint="nothing was stored")
    assert err.to_dict()["error"] == "job_lost" and isinstance(err, errors.SriftError)


def test_an_error_answer_reads_back_what_to_dict_wrote() -> None:
    sent = NotFound("no plan 7", hint="list the plans", field="plan_id").to_dict()
    response = httpx.Response(404, json=sent)
    answer = ErrorAnswer.read(response, detail="request failed", hint="see the server log")
    assert answer == ErrorAnswer(
        error="not_found", detail="no plan 7", hint="list the plans", field="plan_id"
    )


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"<html>bad gateway</html>", "<html>bad gateway</html>"),
        (json.dumps([1, 2]).encode(), "[1, 2]"),
        (b"", "request failed"),
        (json.dumps({"field": 3}).encode(), '{"field": 3}'),
    ],
)
def test_an_error_answer_without_its_parts_falls_back(body: bytes, detail: str) -> None:
    answer = ErrorAnswer.read(httpx.Response(502, content=body), detail="request failed", hint="see the log")
    assert answer == ErrorAnswer(error=None, detail=detail, hint="see the log", field=None)
