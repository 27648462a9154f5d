"""The FastAPI application factory and the one error handler that maps SriftError to 4xx JSON."""

from __future__ import annotations

import copy
import importlib
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from srift import __version__
from srift.api.caching import ConditionalGet, cache_control
from srift.api.limits import ERROR_RESPONSES, BodySizeLimit, document_errors, http_exception_handler
from srift.api.schemas.types import error_field
from srift.db.session import dispose_async_readers
from srift.documents import error_hint, pattern_words
from srift.errors import SriftError
from srift.redaction import install_log_redaction
from srift.settings import Settings, get_settings

log = logging.getLogger("srift.api")

ROUTE_MODULES = (
    "health",
    "catalog",
    "profiles",
    "predictions",
    "plans",
    "training_jobs",
    "probe_jobs",
    "bandwidth_models",
    "launch",
    "traces",
)


GENERIC_HINT = "correct the named field; see /docs for the schema"
WHOLE_BODY = "body"
"""The `field` of an error about the request body as a whole (not a JSON object, or none sent)."""
_BODY_HINT = (
    "send one JSON object ({...}) as the body, with Content-Type: application/json; see /docs for the schema"
)
_NOT_AN_OBJECT = ("model_attributes_type", "model_type", "dict_type")
_SENT_IN = (("body",), ("query",), ("path",))
"""The first part of a request-validation error's location, which says where a field was sent, not which."""


def _body_kind(value: Any) -> str:
    """What a request body that should have been a JSON object was instead, in words."""
    if value is None:
        return "null"
    if isinstance(value, bytes | bytearray):
        return "not JSON (form or raw data; is Content-Type application/json?)"
    if isinstance(value, bool):
        return "a JSON boolean"
    words = {list: "a JSON array", str: "a JSON string", int: "a JSON number", float: "a JSON number"}
    return words.get(type(value), "not a JSON object")


def _whole_body_error(error: Mapping[str, Any]) -> tuple[str, str] | None:
    """The message and hint of an error about the request body as a whole: a body that is a JSON array,
    string, number or null, form data, or none at all, where the operation takes a JSON object. pydantic
    says "Input should be a valid dictionary..." or "Field required" there, naming no field."""
    if tuple(error.get("loc", ())) != ("body",):
        return None
    if error.get("type") == "missing":
        return "the request body must be a JSON object; none was sent", _BODY_HINT
    if error.get("type") in _NOT_AN_OBJECT:
        return f"the request body must be a JSON object; it is {_body_kind(error.get('input'))}", _BODY_HINT
    return None


def _body_model(request: Request) -> Any:
    """The operation's body model, whose FIELD_HINTS (and those of the models inside it) give a body
    field's hint (srift.documents.field_hint), as a CLI file of that model gets; None without a body."""
    route = request.scope.get("route")
    params = list(getattr(getattr(route, "dependant", None), "body_params", ()))
    return params[0].field_info.annotation if params else None


def _worded(error: Mapping[str, Any], model: Any = None) -> tuple[str, str]:
    """One request-validation error's message and hint: pydantic's message, except that a mismatch of the
    project's text patterns (blank, NUL, URL) is said in words (srift.documents.pattern_words), not as the
    regex, and so is a body that is not a JSON object (_whole_body_error); the hint is srift.documents.
    error_hint's, as a CLI file of the body's model (`model`) gets: the error's own, else the field's,
    else the fix the error's type says, else the generic one."""
    whole = _whole_body_error(error)
    if whole is not None:
        return whole
    ctx = error.get("ctx")
    ctx = ctx if isinstance(ctx, dict) else {}
    loc = tuple(error.get("loc", ()))
    sent = {**error, "loc": loc[1:]} if loc[:1] in _SENT_IN else error
    hint = error_hint(sent, default=GENERIC_HINT, model=_in_body(error, model))
    if error.get("type") == "string_pattern_mismatch" and not ctx.get("hint"):
        name = error_field(error) or "the value"
        words = pattern_words(str(ctx.get("pattern", "")), error.get("input"), name)
        if words is not None:
            return words[0], hint
    return str(error.get("msg", "invalid request")), hint


def _field_of(error: Mapping[str, Any]) -> str | None:
    """The `field` an error answer names: `body` for the request body as a whole (_whole_body_error), else
    the error's own field path."""
    return WHOLE_BODY if _whole_body_error(error) else error_field(error)


def _in_body(error: Mapping[str, Any], model: Any) -> Any:
    """`model` where `error` is about a body field (its hints name body fields, not query or path ones)."""
    loc = tuple(error.get("loc", ()))
    return model if loc[:1] == ("body",) else None


@asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """Close this event loop's asyncio database connections when the app stops (they die with the loop)."""
    yield
    await dispose_async_readers()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; nothing touches the database until a request (or `serve`) needs it."""
    settings = settings or get_settings()
    app = FastAPI(
        lifespan=_lifespan,
        title="Srift",
        version=__version__,
        summary="Which cloud VMs to rent for data-parallel training, and how to split the batch.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    install_log_redaction()
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(ConditionalGet, cache_control=cache_control(settings))
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["*"], allow_headers=["*"]
        )

    app.add_exception_handler(StarletteHTTPException, http_exception_handler)

    @app.exception_handler(SriftError)
    async def _srift_error(request: Request, exc: SriftError) -> JSONResponse:
        return JSONResponse(status_code=exc.status_code, content=exc.to_dict())

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field_of(first)
        detail, hint = _worded(first, _body_model(request))
        if first.get("type") == "json_invalid":
            loc = list(first.get("loc", ()))
            ctx = first.get("ctx")
            reason = ctx.get("error", "malformed") if isinstance(ctx, dict) else "malformed"
            detail = f"the request body is not valid JSON ({reason} at character {loc[-1] if loc else '?'})"
            hint = "send one JSON document with Content-Type: application/json; see /docs for the schema"
        return JSONResponse(
            status_code=422,
            content={
                "error": "invalid_input",
                "detail": detail,
                "hint": hint,
                "field": field,
                "errors": [
                    {
                        "field": _field_of(e) or "",
                        "msg": _worded(e)[0],
                    }
                    for e in errors[:20]
                ],
            },
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        request_id = uuid.uuid4().hex[:12]
        log.exception("unhandled error (request %s) on %s %s", request_id, request.method, request.url.path)
        return JSONResponse(
            status_code=500,
            content={
                "error": "internal",
                "detail": f"internal error (request id {request_id})",
                "hint": "retry; if it persists, report the request id",
                "field": None,
            },
        )

    for name in ROUTE_MODULES:
        module = importlib.import_module(f"srift.api.routes.{name}")
        document_errors(module.router)
        app.include_router(module.router, prefix="/v1", responses=ERROR_RESPONSES)
    from srift.api import dashboard, docs

    docs.mount(app)
    dashboard.mount(app)
    generated = app.openapi
    routes_built = tuple(app.router.routes)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            as_built = len(app.router.routes) == len(routes_built) and all(
                now is then for now, then in zip(app.router.routes, routes_built, strict=True)
            )
            # A route added after create_app (a test's, a plugin's) makes the document this app's own.
            app.openapi_schema = shared_document(app, generated) if as_built else generated()
            state_settings_bounds(app.openapi_schema, settings)
            add_links(app.openapi_schema)
        return app.openapi_schema or generated()

    app.openapi = openapi  # type: ignore[method-assign]
    return app


_DOCUMENTS: dict[tuple[Any, ...], dict[str, Any]] = {}
"""FastAPI's generated OpenAPI document of an app as create_app built it, by its documented attributes."""
_documents_lock = threading.Lock()


def shared_document(app: FastAPI, generate: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A copy of the OpenAPI document FastAPI generates (`generate`) for `app`, an app with the routes
    create_app gave it and no other, generated once per process: create_app includes the same routes every
    time (srift.api.routes' modules, the docs and the dashboard), generating the document takes 0.5 s (a
    JSON schema of every model), and each new app (a process that builds several, a test) would otherwise
    pay that again at its first /openapi.json or 405 answer. Each caller gets its own copy, to which it adds
    its settings' bounds and links."""
    key = (
        app.title,
        app.version,
        app.openapi_version,
        app.summary,
        app.description,
        repr((app.contact, app.license_info, app.openapi_tags, app.servers, app.terms_of_service)),
    )
    with _documents_lock:
        found = _DOCUMENTS.get(key)
    if found is None:
        found = copy.deepcopy(generate())
        with _documents_lock:
            _DOCUMENTS[key] = found
    return copy.deepcopy(found)


LINKS: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("/v1/profiles", "GetProfile", "get_profile_v1_profiles__profile_id__get", {"profile_id": "id"}),
    ("/v1/profiles", "DeleteProfile", "delete_profile_v1_profiles__profile_id__delete", {"profile_id": "id"}),
    ("/v1/plans", "GetPlan", "get_plan_v1_plans__plan_id__get", {"plan_id": "id"}),
    ("/v1/plans", "GetPlanReplay", "get_plan_replay_v1_plans__plan_id__replay_get", {"plan_id": "id"}),
    ("/v1/plans", "StartJob", "start_job_v1_jobs_post", {"body:plan_id": "id"}),
    ("/v1/jobs", "GetJob", "get_job_v1_jobs__job_id__get", {"job_id": "id"}),
    ("/v1/jobs", "ReportProgress", "report_progress_v1_jobs__job_id__progress_post", {"job_id": "id"}),
    (
        "/v1/jobs",
        "ReportInterruption",
        "report_interruption_v1_jobs__job_id__interruptions_post",
        {"job_id": "id"},
    ),
    ("/v1/jobs", "Amend", "amend_job_v1_jobs__job_id__amendments_post", {"job_id": "id"}),
    ("/v1/probe-jobs", "GetProbeJob", "get_probe_job_v1_probe_jobs__job_id__get", {"job_id": "id"}),
    ("/v1/profile-jobs", "GetProfileJob", "get_profile_job_v1_profile_jobs__job_id__get", {"job_id": "id"}),
)
"""OpenAPI links from each POST that creates a resource to the operations that take its id (stateful
clients and fuzzers follow them): (POST path, link name, target operationId, {parameter: response field});
a `body:` parameter goes into the target's request body."""


def add_links(schema: dict[str, Any]) -> None:
    """Attach LINKS to the success response of each creating POST."""
    for path, name, target, parameters in LINKS:
        responses = schema["paths"][path]["post"]["responses"]
        status = next(code for code in sorted(responses) if code.startswith("2"))
        link: dict[str, Any] = {"operationId": target}
        plain = {k: f"$response.body#/{v}" for k, v in parameters.items() if not k.startswith("body:")}
        body = {k[5:]: f"$response.body#/{v}" for k, v in parameters.items() if k.startswith("body:")}
        if plain:
            link["parameters"] = plain
        if body:
            link["requestBody"] = body
        responses[status].setdefault("links", {})[name] = link


def state_settings_bounds(schema: dict[str, Any], settings: Settings) -> None:
    """Lower each `solve_budget_s` maximum of the schema to this server's SRIFT_MAX_SOLVE_BUDGET_S, so the
    schema states the bound the server enforces."""
    for component in schema.get("components", {}).get("schemas", {}).values():
        prop = component.get("properties", {}).get("solve_budget_s")
        if prop is None:
            continue
        for bounded in [prop, *prop.get("anyOf", [])]:
            if "maximum" in bounded:
                bounded["maximum"] = min(bounded["maximum"], settings.max_solve_budget_s)
