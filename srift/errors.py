"""One error hierarchy for Srift; every message ends with a "To fix: ..." hint."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

Choice = TypeVar("Choice", bound=StrEnum)


class SriftError(Exception):
    """Base of every error Srift reports to a user.

    `field` names the input at fault (dotted path, e.g. ``availability.p3.2xlarge``) when there is one;
    `hint` says how to fix it. The API maps `status_code` onto the response; the CLI maps `exit_code`.
    """

    status_code: int = 400
    exit_code: int = 2
    error: str = "srift_error"

    def __init_subclass__(
        cls, *, status_code: int | None = None, error: str | None = None, exit_code: int | None = None
    ) -> None:
        """A subclass states its status code, error name and exit code in its class line (those it leaves
        out it inherits): `class NotFound(SriftError, status_code=404, error="not_found")`."""
        super().__init_subclass__()
        if status_code is not None:
            cls.status_code = status_code
        if error is not None:
            cls.error = error
        if exit_code is not None:
            cls.exit_code = exit_code

    def __init__(self, detail: str, *, hint: str, field: str | None = None) -> None:
        self.detail = detail.rstrip(".")
        self.hint = hint.rstrip(".")
        self.field = field
        where = f"{field}: " if field else ""
        stop = "" if self.hint.endswith(("?", "!")) else "."
        super().__init__(f"{where}{self.detail}. To fix: {self.hint}{stop}")

    def restate(self, *, hint: str, field: str | None, detail: str | None = None) -> None:
        """Say the same error in a caller's own words (the CLI names its option where the API names the
        request's field): the kind and any subclass state stay, the hint and field change (and the detail,
        where given)."""
        SriftError.__init__(self, self.detail if detail is None else detail, hint=hint, field=field)

    def to_dict(self) -> dict[str, str | None]:
        return {"error": self.error, "detail": self.detail, "hint": self.hint, "field": self.field}


class InvalidInput(SriftError, status_code=422, error="invalid_input"):
    """The user's input is malformed or out of range."""


class NotFound(SriftError, status_code=404, error="not_found"):
    """A referenced object (profile, plan, model version, instance type) does not exist."""


class Conflict(SriftError, status_code=409, error="conflict"):
    """The request conflicts with the current state (e.g. a job already running)."""


class Infeasible(SriftError, status_code=409, error="infeasible"):
    """No configuration meets the limits; the hint names the nearest relaxation. A 409: the request is valid,
    but the stored catalog, profiles and models hold no answer to it (another catalog or profile may)."""


class Unauthorized(SriftError, status_code=401, error="unauthorized"):
    """No valid credentials were given."""


class Forbidden(SriftError, status_code=403, error="forbidden"):
    """Credentials are valid but do not allow this action."""


class PayloadTooLarge(SriftError, status_code=413, error="payload_too_large"):
    """A request exceeds a documented size limit."""


class EnvironmentProblem(SriftError, status_code=503, error="environment", exit_code=3):
    """The machine lacks something Srift needs (root, namespaces, tc, cgroups, a database)."""


class ExternalServiceError(SriftError, status_code=502, error="external_service", exit_code=4):
    """A cloud API or remote host failed after retries."""


class ConfigurationError(SriftError, status_code=500, error="configuration"):
    """Settings (SRIFT_* variables) or shipped data (the measurement registry and the files it pins) are
    invalid."""


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """A Srift server's error answer as a client reads it: the body `SriftError.to_dict` writes (`error`,
    `detail`, `hint`, `field`)."""

    error: str | None
    detail: str
    hint: str
    field: str | None

    @classmethod
    def read(cls, response: Any, *, detail: str, hint: str) -> ErrorAnswer:
        """The answer in `response` (an httpx response); where its body is no JSON object or lacks a part,
        the detail falls back to the first 300 characters of the body, then to `detail`, and the hint to
        `hint`."""
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        error, field = body.get("error"), body.get("field")
        return cls(
            error=error if isinstance(error, str) else None,
            detail=str(body.get("detail") or response.text[:300] or detail),
            hint=str(body.get("hint") or hint),
            field=field if isinstance(field, str) else None,
        )


def server_root(url: str) -> str:
    """A Srift server's URL as a user gives it (`--url`), as clients join paths to it: http when it has no
    scheme (`127.0.0.1:8000`), without a trailing "/" or "/v1" (the API's prefix, which the paths carry, so
    `http://host:8000/v1` names the same server as `http://host:8000`)."""
    root = url if "://" in url else f"http://{url}"
    root = root.rstrip("/")
    return root.removesuffix("/v1") if root.endswith("/v1") else root


def foreign_answer(response: Any, *, url: str, hint: str) -> ExternalServiceError | None:
    """ExternalServiceError when `response` (an httpx response from `url`) holds no JSON, as no Srift server
    answers (another web server, a proxy's page), naming its status and content type instead of printing
    the page; None for a JSON answer, or one with no body at all (a 204 has none)."""
    if not response.content:
        return None
    try:
        response.json()
    except ValueError:
        kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
        return ExternalServiceError(
            f"{url} answered {response.status_code} {response.reason_phrase} with {kind}, not JSON as a "
            "Srift server answers (another web server, or a proxy in front of one, answered)",
            hint=hint,
        )
    return None


def parse_choice(kind: type[Choice], value: str, *, what: str, field: str) -> Choice:
    """`value` as a member of `kind`, else InvalidInput naming `what` and listing the choices."""
    try:
        return kind(value)
    except ValueError:
        names = [member.value for member in kind]
        listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        raise InvalidInput(f"unknown {what} {value!r}", hint=f"use {listed}", field=field) from None


def require_number(value: float, *, field: str, hint: str, positive: bool = False, what: str = "") -> float:
    """`value` when it is a finite number ≥ 0 (> 0 when `positive`), else InvalidInput naming `field`:
    "`what` `value` is not a number ≥ 0" (or "... is not a positive number")."""
    if math.isfinite(value) and (value > 0 if positive else value >= 0):
        return value
    kind = "a positive number" if positive else "a number ≥ 0"
    raise InvalidInput(f"{what} {value} is not {kind}".lstrip(), hint=hint, field=field)


def require_within(value: int, low: int, high: int, *, field: str, hint: str, what: str = "") -> int:
    """`value` when `low` ≤ `value` ≤ `high`, else InvalidInput naming `field`: "`what` `value` is outside
    `low`..`high`"."""
    if low <= value <= high:
        return value
    raise InvalidInput(f"{what} {value} is outside {low}..{high}".lstrip(), hint=hint, field=field)
