"""Request-size guard (ASGI middleware) and the documented error responses every route shares.

`BodySizeLimit` answers 413 before any parsing when a body exceeds SRIFT_MAX_BODY_BYTES: at once when
Content-Length says so, and while reading when the body is chunked (no Content-Length), never buffering
more than the limit.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from srift.limits import BODY_SIZE


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx answer: what is wrong, how to fix it, and the field at fault."""

    error: str = Field(
        description="machine-readable kind, e.g. invalid_input, unauthorized, payload_too_large"
    )
    detail: str = Field(description="what is wrong")
    hint: str = Field(description="how to fix it")
    field: str | None = Field(
        default=None,
        description="dotted path of the input at fault, when there is one ('body': the request body as a "
        "whole, e.g. not a JSON object)",
    )
    errors: list[dict[str, Any]] | None = Field(default=None, description="every validation error (422 only)")


def error_response(description: str) -> dict[str, Any]:
    """A route's documented 4xx/5xx entry: `description`, answered with an ErrorBody."""
    return {"model": ErrorBody, "description": description}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: error_response("the body could not be read (not UTF-8 or not JSON)"),
    401: error_response("no token, or an unknown or revoked one"),
    403: error_response("the token's scope (or job) does not allow this"),
    413: error_response("the request body exceeds SRIFT_MAX_BODY_BYTES"),
    422: error_response("invalid input or a documented limit exceeded; `field` names it"),
}
"""Merged into every /v1 route's OpenAPI `responses`, so clients and fuzzers know the error shape."""


def document_errors(router: APIRouter) -> None:
    """Give each route's own 4xx entries (often a bare description) the ErrorBody schema, before inclusion."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            continue
        for status, entry in route.responses.items():
            if str(status)[:1] in "45" and isinstance(entry, dict) and "model" not in entry:
                entry["model"] = ErrorBody


_HTTP_ERRORS = {
    400: ("bad_request", "send a UTF-8 JSON body matching the schema at /docs"),
    404: ("not_found", "check the path against /docs"),
    405: ("method_not_allowed", "use a method the path lists in /docs"),
}


async def http_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    """Give framework errors (unreadable body, unknown path, wrong method) the same shape as ours."""
    assert isinstance(exc, StarletteHTTPException)
    error, hint = _HTTP_ERRORS.get(exc.status_code, ("http_error", "see /docs"))
    detail = exc.detail if isinstance(exc.detail, str) else "request refused"
    body = {"error": error, "detail": detail, "hint": hint, "field": None}
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allowed = allowed_methods(request)
        if allowed:
            headers["Allow"] = ", ".join(allowed)
            body["hint"] = f"use {' or '.join(allowed)} on this path (see /docs)"
    return JSONResponse(status_code=exc.status_code, content=body, headers=headers or None)


def allowed_methods(request: Request) -> list[str]:
    """Every method the OpenAPI schema lists for the request's path (Starlette's 405 names only the first
    route's when several routes share a path)."""
    table: list[tuple[re.Pattern[str], list[str]]] | None = getattr(
        request.app.state, "allowed_methods", None
    )
    if table is None:
        table = [
            (
                re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$"),
                sorted(m.upper() for m in item),
            )
            for path, item in request.app.openapi()["paths"].items()
        ]
        request.app.state.allowed_methods = table
    path = request.url.path
    return sorted({m for pattern, methods in table if pattern.match(path) for m in methods})


def payload_too_large_body(max_body_bytes: int) -> dict[str, str | None]:
    return {
        "error": "payload_too_large",
        "detail": f"the request body exceeds the limit of {max_body_bytes} bytes ({BODY_SIZE.name})",
        "hint": "send less per request (split batches of samples or layers), or raise SRIFT_MAX_BODY_BYTES",
        "field": None,
    }


class _TooLarge(Exception):
    pass


class BodySizeLimit:
    """Reject HTTP request bodies larger than `max_body_bytes` with 413, before the app reads them."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._reject(send)
            return
        if declared is not None:
            await self.app(scope, self._counting(receive), send)
            return
        try:
            messages = await self._buffer(receive)
        except _TooLarge:
            await self._reject(send)
            return
        await self.app(scope, self._replay(messages, receive), send)

    async def _buffer(self, receive: Receive) -> list[Message]:
        messages: list[Message] = []
        total = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            total += len(message.get("body", b""))
            if total > self.max_body_bytes:
                raise _TooLarge
            if not message.get("more_body", False):
                return messages

    @staticmethod
    def _replay(messages: list[Message], receive: Receive) -> Receive:
        pending = list(messages)

        async def replay() -> Message:
            if pending:
                return pending.pop(0)
            return await receive()

        return replay

    def _counting(self, receive: Receive) -> Receive:
        total = 0

        async def counting() -> Message:
            nonlocal total
            message = await receive()
            if message["type"] == "http.request":
                total += len(message.get("body", b""))
                if total > self.max_body_bytes:
                    raise ValueError("request body longer than its Content-Length limit")
            return message

        return counting

    async def _reject(self, send: Send) -> None:
        body = json.dumps(payload_too_large_body(self.max_body_bytes)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
