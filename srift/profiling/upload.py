"""Send a profile to a running Srift server (POST URL/v1/profiles), mapping its errors onto SriftError."""

from __future__ import annotations

from typing import Any

import httpx

from srift.domain.profile import ModelProfile
from srift.errors import (
    ErrorAnswer,
    ExternalServiceError,
    Forbidden,
    InvalidInput,
    SriftError,
    Unauthorized,
    foreign_answer,
    server_root,
)


def upload_profile(
    profile: ModelProfile, *, url: str, token: str | None, timeout_s: float = 30.0
) -> dict[str, Any]:
    """POST the profile; returns the server's answer ({id, model, accelerator, created})."""
    endpoint = server_root(url) + "/v1/profiles"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(endpoint, json=profile.to_dict(), headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ExternalServiceError(
            f"could not reach {endpoint}: {type(exc).__name__}: {exc}",
            hint="check --upload URL and that `srift serve` runs there; the profile file was still written",
        ) from exc
    foreign = foreign_answer(
        response,
        url=endpoint,
        hint="point --upload at the root of a running `srift serve`; the profile file was still written",
    )
    if foreign is not None:
        raise foreign
    if response.status_code in (200, 201):
        body: dict[str, Any] = response.json()
        return body
    raise _error(response, endpoint)


def _error(response: httpx.Response, endpoint: str) -> SriftError:
    answer = ErrorAnswer.read(response, detail=response.reason_phrase, hint="see the server's log")
    where = f"{endpoint} answered {response.status_code}: {answer.detail}"
    if response.status_code == 401:
        return Unauthorized(where, hint="pass --token or set SRIFT_TOKEN to a write token")
    if response.status_code == 403:
        return Forbidden(where, hint="use a token created with `srift tokens create --scope write`")
    if response.status_code in (400, 413, 422):
        return InvalidInput(where, hint=answer.hint, field=answer.field)
    return ExternalServiceError(where, hint=answer.hint)
