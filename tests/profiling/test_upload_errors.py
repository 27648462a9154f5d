"""srift.profiling.upload: a server's refusal of a profile becomes the Srift error a user can act on."""

from __future__ import annotations

import httpx
import pytest

from srift.errors import ExternalServiceError, Forbidden, InvalidInput, Unauthorized
from srift.profiling.upload import _error

ENDPOINT = "http://127.0.0.1:8000/v1/profiles"


def test_an_invalid_profile_keeps_the_servers_detail_hint_and_field() -> None:
    sent = InvalidInput("max_batch must be ≥ 1, got 0", hint="use max_batch ≥ 1", field="max_batch")
    err = _error(httpx.Response(422, json=sent.to_dict()), ENDPOINT)
    assert isinstance(err, InvalidInput)
    assert err.detail == f"{ENDPOINT} answered 422: max_batch must be ≥ 1, got 0"
    assert (err.hint, err.field) == ("use max_batch ≥ 1", "max_batch")


@pytest.mark.parametrize(("status", "kind"), [(401, Unauthorized), (403, Forbidden)])
def test_a_refused_token_says_which_token_to_give(status: int, kind: type[Exception]) -> None:
    err = _error(httpx.Response(status, json={"detail": "no"}), ENDPOINT)
    assert isinstance(err, kind)
    assert "token" in err.hint


def test_an_answer_that_is_not_srifts_names_the_status_and_the_body() -> None:
    err = _error(httpx.Response(502, content=b"bad gateway"), ENDPOINT)
    assert isinstance(err, ExternalServiceError)
    assert err.detail == f"{ENDPOINT} answered 502: bad gateway"
    assert err.hint == "see the server's log"
    empty = _error(httpx.Response(500, content=b""), ENDPOINT)
    assert empty.detail == f"{ENDPOINT} answered 500: Internal Server Error"
