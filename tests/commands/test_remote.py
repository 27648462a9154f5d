"""call_api against a real HTTP server on loopback: JSON back on success, Srift's 4xx shapes as SriftError."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from srift.commands.remote import call_api
from srift.errors import ExternalServiceError, Forbidden, InvalidInput, Unauthorized
from srift.optimize.solver import PlanInfeasible

ANSWERS: dict[str, tuple[int, dict[str, object] | str]] = {
    "/v1/ok": (200, {"id": 7}),
    "/v1/infeasible": (
        409,
        {
            "error": "infeasible",
            "detail": "deadline unreachable",
            "hint": "relax it",
            "field": "time_limit_s",
        },
    ),
    "/v1/infeasible-proven": (
        409,
        {
            "error": "infeasible",
            "detail": "no configuration meets both limits",
            "hint": "raise budget_usd to $12.50",
            "field": "budget_usd",
            "relaxations": {"least_budget_for_deadline_usd": 12.5, "fastest_time_within_budget_s": None},
            "proven": True,
        },
    ),
    "/v1/bad": (
        422,
        {"error": "invalid_input", "detail": "below 1", "hint": "use ≥ 1", "field": "global_batch"},
    ),
    "/v1/forbidden": (
        403,
        {"error": "forbidden", "detail": "read token", "hint": "use a write token", "field": None},
    ),
    "/v1/broken": (502, {"detail": "upstream"}),
    "/v1/page": (200, "<html><body>a login page</body></html>"),
    "/v1/gone": (404, "<html><body><h1>Error response</h1>File not found</body></html>"),
    "/v1/deleted": (204, ""),
    "/v1/unauthorized": (
        401,
        {
            "error": "unauthorized",
            "detail": "missing token",
            "hint": "send Authorization: Bearer <token>",
            "field": None,
        },
    ),
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        status, body = ANSWERS[self.path]
        if isinstance(body, str):  # another web server's page (or no body at all: a 204)
            payload, kind = body.encode(), "text/html; charset=utf-8"
        else:
            payload, kind = (
                json.dumps({**body, "auth": self.headers.get("authorization")}).encode(),
                "application/json",
            )
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    # serve_forever checks for shutdown every poll_interval: at its default of 0.5 s, each test waited out
    # the rest of one at teardown
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_409_no_plan_keeps_the_servers_relaxations_and_proof(server: str) -> None:
    """The CLI sees what a local solve raises: the nearest relaxations and whether "none" is proven; an
    answer without them (an older server) reads as unproven with no relaxations."""
    with pytest.raises(PlanInfeasible) as info:
        call_api("POST", server, "/v1/infeasible-proven", token=None, body={})
    assert info.value.relaxations == {
        "least_budget_for_deadline_usd": 12.5,
        "fastest_time_within_budget_s": None,
    }
    assert info.value.proven is True
    assert "To fix: raise budget_usd to $12.50" in str(info.value)
    with pytest.raises(PlanInfeasible) as bare:
        call_api("POST", server, "/v1/infeasible", token=None, body={})
    assert (bare.value.relaxations, bare.value.proven) == ({}, False)


def test_success_returns_json_and_sends_the_token(server: str) -> None:
    answer = call_api("POST", server, "/v1/ok", token="srift_abc", body={"x": 1})
    assert answer == {"id": 7, "auth": "Bearer srift_abc"}


@pytest.mark.parametrize(
    ("path", "kind", "field"),
    [
        ("/v1/infeasible", PlanInfeasible, "time_limit_s"),
        ("/v1/bad", InvalidInput, "global_batch"),
        ("/v1/forbidden", Forbidden, None),
        ("/v1/broken", ExternalServiceError, None),
    ],
)
def test_error_answers_become_the_matching_srift_error(
    server: str, path: str, kind: type[Exception], field: str | None
) -> None:
    with pytest.raises(kind) as info:
        call_api("POST", server, path, token=None, body={})
    assert type(info.value) is kind
    assert getattr(info.value, "field", None) == field


def test_unreachable_server_says_how_to_fix() -> None:
    with pytest.raises(ExternalServiceError) as info:
        call_api("GET", "http://127.0.0.1:9", "/v1/health", token=None, timeout_s=5)
    assert "check --url" in str(info.value)


def test_a_url_without_a_scheme_is_taken_as_http(server: str) -> None:
    bare = server.removeprefix("http://")
    assert call_api("POST", bare, "/v1/ok", token=None, body={})["id"] == 7


@pytest.mark.parametrize("token", [None, "srift_wrong"])
def test_a_401_hint_names_the_cli_option_not_the_header(server: str, token: str | None) -> None:
    with pytest.raises(Unauthorized) as info:
        call_api("POST", server, "/v1/unauthorized", token=token, body={})
    assert "--token" in info.value.hint and "SRIFT_TOKEN" in info.value.hint
    assert "Authorization" not in info.value.hint


def test_a_url_ending_in_the_api_prefix_names_the_servers_root(server: str) -> None:
    """`--url http://host:8000/v1` (the REST root as the docs write it) reaches the same paths, not /v1/v1."""
    for url in (f"{server}/v1", f"{server}/v1/", server.removeprefix("http://") + "/v1"):
        assert call_api("POST", url, "/v1/ok", token=None, body={})["id"] == 7


@pytest.mark.parametrize("path", ["/v1/page", "/v1/gone"])
def test_a_server_that_answers_no_json_is_named_not_printed(server: str, path: str) -> None:
    """Another web server at --url (a 200 login page, a 404 page) is a failing remote service (exit 4) that
    says what answered, never the page's HTML as the error nor a JSON decoding traceback."""
    with pytest.raises(ExternalServiceError) as info:
        call_api("POST", server, path, token=None, body={})
    message = str(info.value)
    assert f"{server}{path} answered " in message and "with text/html, not JSON" in message
    assert "<html" not in message and "srift serve" in info.value.hint
    assert info.value.exit_code == 4


def test_an_answer_with_no_body_is_no_answer_not_a_foreign_server(server: str) -> None:
    """A 204 (as DELETE /v1/profiles/{id} answers) has no body: nothing to return, and no sign that another
    web server answered."""
    assert call_api("POST", server, "/v1/deleted", token=None, body={}) is None
