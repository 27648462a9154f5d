"""Schemathesis against the app's own OpenAPI schema, in process: every operation, bounded examples, with a
token and the shipped catalog, so authenticated paths and real data are exercised. Zero 5xx, and every
response (status, content type, headers, body) must match the schema.

Each generated case is sent to the app on every database of the run (SQLite, and PostgreSQL when `make test`
provides one), one after the other: the examples are derandomized, so both databases always saw the same
requests in the same order; generating them once instead of once per database halves the generation, which
is most of this module's time."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import pytest
import schemathesis
from fastapi import APIRouter, FastAPI, Query
from fastapi import Path as PathParameter
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from schemathesis import GenerationMode
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance
from sqlalchemy import text

from srift.api.app import create_app
from srift.api.limits import ERROR_RESPONSES
from srift.bootstrap import bootstrap
from srift.db.session import get_engine, session_factory
from srift.db.tables import Base
from srift.db.tokens import Scope, create_token
from srift.errors import InvalidInput
from srift.settings import Settings
from tests.fuzz.contract import broken_rule, published_rules
from tests.fuzz.parameters import (
    PARAMETER_RULES,
    TRICKY_TEXTS,
    Parameter,
    operation_parameters,
    refusal_error,
    schema_accepts,
)

REQUEST_TIMEOUT_S = 120.0
MAX_EXAMPLES = 25
# Every check is on, positive_data_acceptance included: a schema-valid request is answered 2xx, or 404/409
# when the data it names is missing or cannot answer it (an unknown provider, plan or model; no stored
# samples; no fleet meets the limits). The rules across fields JSON Schema cannot state are published under
# x-srift-rules (tests/fuzz/contract.py): a generated "valid" body that breaks one is not valid, and must be
# refused instead.


def _kept_rules(case: Any, response: Any, rules: set[str]) -> bool:
    """Whether a positive case keeps to the published rules (its body's, and its query parameters': the
    curves query's instance_type); one that breaks a rule must have been refused."""
    meta = case.meta
    if meta is not None and not meta.generation.mode.is_positive:
        return True
    broken = broken_rule([case.body, case.query], rules)
    assert broken is None or response.status_code >= 400, (
        f"accepted, breaking {broken}: {case.body!r} {case.query!r}"
    )
    return broken is None


def _too_large(response: Any) -> bool:
    """A 413 for a body over SRIFT_MAX_BODY_BYTES: a refusal before parsing, which schemathesis does not
    count among its rejection codes (a byte limit is not expressible in JSON Schema)."""
    return response.status_code == 413 and '"payload_too_large"' in response.text


def _operations() -> list[tuple[str, str]]:
    """Every (method, path) of the schema; building the app touches no database."""
    paths = create_app(Settings(database_url="sqlite://")).openapi()["paths"]
    return sorted((method.upper(), path) for path, item in paths.items() for method in item)


def _profile(accelerator: str, scale: float) -> dict[str, Any]:
    return {
        "model": "fuzz-mlp",
        "accelerator": accelerator,
        "max_batch": 256,
        "forward": {"batches": [1, 128, 256], "times_s": [0.004 * scale, 0.04 * scale, 0.08 * scale]},
        "backward": {"batches": [1, 128, 256], "times_s": [0.008 * scale, 0.08 * scale, 0.16 * scale]},
        "layers": [{"name": f"fc{i}", "grad_bytes": 1_000_000, "ready_frac": (i + 1) / 4} for i in range(4)],
        "straggler_cv": 0.05,
    }


def _seed(app: FastAPI, headers: dict[str, str]) -> None:
    """Give ids 1 something to find: two profiles, a plan, a training job on it, a profile job (id 1: its
    results are exercised, a profile for a type it did not ask for is a 409), then a probe job."""
    with TestClient(app) as c:
        ids = []
        for accelerator, scale in (("NVIDIA T4", 1.0), ("NVIDIA V100", 0.5)):
            r = c.post("/v1/profiles", json=_profile(accelerator, scale), headers=headers)
            assert r.status_code in (200, 201), r.text
            ids.append(r.json()["id"])
        plan = {
            "profile_ids": ids,
            "global_batch": 256,
            "iterations": 1000,
            "availability": {"g4dn.xlarge": 4, "p3.2xlarge": 2},
            "solve_budget_s": 1.0,
        }
        r = c.post("/v1/plans", json=plan, headers=headers)
        assert r.status_code in (200, 201), r.text
        r = c.post("/v1/jobs", json={"plan_id": r.json()["id"]}, headers=headers)
        assert r.status_code in (200, 201), r.text
        profiling = {
            "provider": "local",
            "model": "srift.profiling.testmodels:cnn",
            "input": "srift.profiling.testmodels:cnn_input",
        }
        r = c.post("/v1/profile-jobs", json=profiling, headers=headers)
        assert r.status_code == 201 and r.json()["id"] == 1, r.text
        probe = {"provider": "local", "instance_type": "local", "node_counts": [2], "sizes": [4096]}
        r = c.post("/v1/probe-jobs", json=probe, headers=headers)
        assert r.status_code in (200, 201, 202), r.text


@dataclass(frozen=True)
class FuzzedApp:
    """The app on one database, bootstrapped and seeded, with an admin token's headers for it."""

    database: str
    app: FastAPI
    headers: dict[str, str]


def _fuzzed_app(database: str, url: str, data_dir: Path) -> FuzzedApp:
    app_settings = Settings(database_url=url, data_dir=data_dir, max_solve_budget_s=2.0)
    bootstrap(app_settings)
    with session_factory(url)() as s:
        _, plain = create_token(session=s, name="fuzz", scope=Scope.ADMIN)
        s.commit()
    headers = {"Authorization": f"Bearer {plain}"}
    _seed(create_app(app_settings), headers)
    return FuzzedApp(database, create_app(app_settings), headers)


@pytest.fixture(scope="module")
def fuzzed_apps(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, FuzzedApp]]:
    """The app on SQLite and, when configured, on the session's PostgreSQL database (truncated afterwards):
    one database each per module (not per operation), seeding and the shipped catalog loaded once."""
    sqlite_url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'srift.db'}"
    apps = {"sqlite": _fuzzed_app("sqlite", sqlite_url, tmp_path_factory.mktemp("fuzz-data"))}
    postgres_url = request.getfixturevalue("_postgres_db")
    if postgres_url is not None:
        apps["postgres"] = _fuzzed_app("postgres", postgres_url, tmp_path_factory.mktemp("fuzz-data-pg"))
    yield apps
    get_engine(sqlite_url).dispose()
    if postgres_url is not None:
        names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
        with get_engine(postgres_url).begin() as conn:
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture(scope="module")
def app_schema(fuzzed_apps: dict[str, FuzzedApp]) -> Any:
    """The schemathesis schema of the app (the same document on every database), loaded once per module."""
    return _load_schema(fuzzed_apps["sqlite"].app)


def _load_schema(app: FastAPI) -> Any:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    # The limit only catches a hang: a request that fits an XGBoost model passed schemathesis' 10 s default
    # on a loaded 2-core host.
    schema.config.request_timeout = REQUEST_TIMEOUT_S
    return schema


def fuzz_operation(
    schema: Any, targets: Sequence[FuzzedApp], method: str, path: str, *, shrink: bool = True
) -> dict[str, list[int]]:
    """Run positive and negative schemathesis cases against one operation, each case on every target app in
    turn; return the status codes each database's app answered."""
    operation = schema[path][method]
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
    )
    seen: dict[str, list[int]] = {target.database: [] for target in targets}
    rules = published_rules(schema.raw_schema)

    @given(case=strategy)
    @_fuzz_settings(MAX_EXAMPLES, shrink=shrink)
    def run(case: Any) -> None:
        for target in targets:
            try:
                response = case.call(app=target.app, headers=target.headers)
                excluded = [] if _kept_rules(case, response, rules) else [positive_data_acceptance]
                if _too_large(response):
                    excluded.append(negative_data_rejection)
                case.validate_response(response, headers=target.headers, excluded_checks=excluded)
            except BaseException as exc:
                exc.add_note(f"(on {target.database})")
                raise
            seen[target.database].append(response.status_code)

    run()
    return seen


def _fuzz_settings(max_examples: int, *, shrink: bool) -> settings:
    """The harnesses' Hypothesis settings: bounded, derandomized (the same examples every run), no deadline
    (a request may fit a model) and no example database."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])],
    )


@pytest.mark.parametrize(("method", "path"), _operations(), ids=lambda x: str(x))
def test_operation_conforms_to_its_schema(
    method: str, path: str, fuzzed_apps: dict[str, FuzzedApp], app_schema: Any
) -> None:
    seen = fuzz_operation(app_schema, list(fuzzed_apps.values()), method, path)
    for database, codes in seen.items():
        assert codes and all(code < 500 for code in codes), (database, codes)


class Echo(BaseModel):
    n: int = Field(ge=0, le=10)


def test_the_harness_catches_crashes_and_schema_violations(fuzzed_apps: dict[str, FuzzedApp]) -> None:
    shared = fuzzed_apps["sqlite"]
    app = create_app(shared.app.state.settings)
    router = APIRouter()

    @router.post("/selftest/crash")
    def crash(body: Echo) -> Echo:
        if body.n > 3:
            raise RuntimeError("bug")
        return body

    @router.post("/selftest/lies", response_model=Echo)
    def lies(body: Echo) -> JSONResponse:
        return JSONResponse({"n": "not a number"})

    app.include_router(router, responses=ERROR_RESPONSES)
    target = FuzzedApp("sqlite", app, shared.headers)
    schema = _load_schema(app)
    expected = {"/selftest/crash": "bug", "/selftest/lies": "not a number"}
    for path, evidence in expected.items():
        with pytest.raises(BaseException) as caught:
            fuzz_operation(schema, [target], "POST", path, shrink=False)
        assert evidence in _describe(caught.value), (path, _describe(caught.value))


def _describe(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()):
        parts.append(_describe(inner))
    return "\n".join(parts)


PARAMETER_EXAMPLES = 25
"""Generated cases per operation in the parameter fuzz, besides schemathesis' coverage cases (each boundary
and each plainly invalid value of every query and path parameter) and the awkward texts (TRICKY_TEXTS)."""
SEEDED_PATH = {"profile_id": 1, "plan_id": 1, "job_id": 1, "version": "active"}
"""Path values _seed gave something to find, so that query values reach the operation itself."""
PARAMETER_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/profiles"): _profile("NVIDIA T4", 1.0),
    ("POST", "/v1/jobs/{job_id}/progress"): {"iterations_done": 10, "elapsed_s": 60.0, "spent_usd": 0.5},
    ("POST", "/v1/jobs/{job_id}/interruptions"): {"instance_type": "g4dn.xlarge", "count": 1},
    ("POST", "/v1/jobs/{job_id}/amendments"): {"budget_usd": 1000.0},
    ("POST", "/v1/jobs/{job_id}/iterations"): {"steps": [{"step": 1, "iteration_s": 0.5}]},
    ("POST", "/v1/profile-jobs/{job_id}/results"): {"error": "fuzz: the profiler could not start"},
}
"""A valid body for each operation that takes one beside query or path parameters: the parameter fuzz
varies the parameters only (the body fuzz above varies bodies)."""
_COVERED = (ParameterLocation.QUERY, ParameterLocation.PATH)


def _spec_parameters() -> dict[tuple[str, str], dict[str, Parameter]]:
    return operation_parameters(create_app(Settings(database_url="sqlite://")).openapi())


def _classified(case: Any) -> tuple[dict[str, Any], str | None]:
    """A generated case's query and path values as generated (typed; coverage cases send them as text),
    and the parameter a negative coverage case made invalid (None: every value is valid)."""
    meta = case.meta
    raw = meta.raw_containers if meta is not None else {}
    values: dict[str, Any] = {}
    for location in _COVERED:
        container = raw.get(location, getattr(case, location.container_name)) or {}
        values.update({name: value for name, value in container.items() if value is not None})
    if meta is None or meta.generation.mode.is_positive:
        return values, None
    return values, str(meta.phase.data.parameter)


@dataclass(frozen=True)
class ParameterCase:
    """Query and path values to send (as text), the values as meant (typed), and the parameter whose schema
    refuses its value (None: every value is valid)."""

    query: dict[str, Any]
    path: dict[str, Any]
    values: dict[str, Any]
    invalid: str | None


def _without_bodies(spec: dict[str, Any]) -> Any:
    """A schemathesis schema of `spec` with no request bodies: the parameter fuzz sends a fixed body, and
    covering a body's schema (a profile's) was most of its generation time."""
    bare = copy.deepcopy(spec)
    for item in bare["paths"].values():
        for operation in item.values():
            operation.pop("requestBody", None)
    return schemathesis.openapi.from_dict(bare)


def _coverage_cases(bare: Any, method: str, path: str) -> Iterator[ParameterCase]:
    """schemathesis' coverage cases of an operation (from a schema `_without_bodies`) that vary its query
    and path parameters: each boundary value the schema accepts, and each plainly invalid value (below a
    minimum, past a maximum length, off the pattern or the enum, the wrong type), one parameter at a time;
    a case varying a query parameter is sent on the seeded resources' path, so that it reaches the
    operation."""
    operation = bare[path][method]
    generation = bare.config.generation_for(operation=operation, phase="coverage")
    for case in bare.iter_coverage_cases(
        operation, generation_modes=list(GenerationMode), generation_config=generation
    ):
        data = case.meta.phase.data
        if data.parameter_location not in _COVERED or not (
            case.meta.generation.mode.is_positive or data.parameter
        ):
            continue
        values, invalid = _classified(case)
        sent = dict(case.path_parameters or {})
        if data.parameter_location is ParameterLocation.QUERY:
            seeded = {name: SEEDED_PATH[name] for name in sent}
            values.update(seeded)
            sent = {name: quote(str(value), safe="") for name, value in seeded.items()}
        yield ParameterCase(dict(case.query or {}), sent, values, invalid)


def _tricky_cases(
    parameters: dict[str, Parameter], seeded: dict[str, Any], spec: dict[str, Any]
) -> Iterator[ParameterCase]:
    """Each awkward text (TRICKY_TEXTS) in each text parameter, the others at the seeded path values."""
    for parameter in parameters.values():
        if not schema_accepts(spec, parameter, "text"):
            continue
        for value in TRICKY_TEXTS:
            values = {**seeded, parameter.name: value}
            path = {name: quote(str(values[name]), safe="") for name in seeded}
            query = {parameter.name: value} if parameter.location == "query" else {}
            invalid = None if schema_accepts(spec, parameter, value) else parameter.name
            yield ParameterCase(query, path, values, invalid)


def _answer_field(response: Any) -> Any:
    """The `field` an error answer names (None for another answer)."""
    try:
        answer = response.json()
    except ValueError:
        return None
    return answer.get("field") if isinstance(answer, dict) else None


def fuzz_parameters(
    schema: Any, bare: Any, targets: Sequence[FuzzedApp], method: str, path: str, *, shrink: bool = True
) -> dict[str, list[int]]:
    """Send an operation's coverage cases (from `bare`, the schema _without_bodies), awkward texts and
    generated valid query and path values (on any path, and on the seeded resources' paths) to every target
    app, judging each answer (tests/fuzz/parameters.py); return the status codes each database's app
    answered."""
    operation = schema[path][method]
    parameters = operation_parameters(schema.raw_schema)[(method, path)]
    body = PARAMETER_BODIES.get((method, path))
    fixed = {} if body is None else {"body": body, "media_type": "application/json"}
    seeded = {name: SEEDED_PATH[name] for name, p in parameters.items() if p.location == "path"}
    seen: dict[str, list[int]] = {target.database: [] for target in targets}

    def check(case: Any, values: dict[str, Any], invalid: str | None) -> None:
        for target in targets:
            response = case.call(app=target.app, headers=target.headers)
            error = refusal_error(
                parameters,
                values,
                invalid=invalid,
                status=response.status_code,
                field=_answer_field(response),
                with_body=body is not None,
            )
            assert error is None, f"{error}: {method} {path} {values!r} on {target.database}: {response.text}"
            seen[target.database].append(response.status_code)

    explicit = [*_coverage_cases(bare, method, path), *_tricky_cases(parameters, seeded, schema.raw_schema)]
    for sent in explicit:
        case = operation.Case(path_parameters=sent.path, query=sent.query, **copy.deepcopy(fixed))
        check(case, sent.values, sent.invalid)

    @given(
        case=st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE, **fixed),
            operation.as_strategy(GenerationMode.POSITIVE, path_parameters=seeded, **fixed),
        )
    )
    @_fuzz_settings(PARAMETER_EXAMPLES, shrink=shrink)
    def run(case: Any) -> None:
        check(case, *_classified(case))

    run()
    return seen


@pytest.fixture(scope="module")
def bare_schema(app_schema: Any) -> Any:
    """The app's schema _without_bodies, for the parameter fuzz's coverage cases."""
    return _without_bodies(app_schema.raw_schema)


@pytest.mark.parametrize(("method", "path"), sorted(_spec_parameters()), ids=lambda x: str(x))
def test_query_and_path_values_are_served_or_refused_naming_the_parameter(
    method: str, path: str, fuzzed_apps: dict[str, FuzzedApp], app_schema: Any, bare_schema: Any
) -> None:
    """Every query and path parameter: a value its schema accepts is served, or refused naming it and a rule
    it publishes; a value its schema refuses is answered 422 naming it; never a 5xx."""
    if "requestBody" in app_schema.raw_schema["paths"][path][method.lower()]:
        assert (method, path) in PARAMETER_BODIES, "give the operation a valid body in PARAMETER_BODIES"
    seen = fuzz_parameters(app_schema, bare_schema, list(fuzzed_apps.values()), method, path)
    for database, codes in seen.items():
        assert codes, database


def test_the_parameter_harness_catches_what_the_schema_does_not_state(
    fuzzed_apps: dict[str, FuzzedApp],
) -> None:
    """A server error on a valid query value, a refusal by an unstated rule, and a value past a stated bound
    served: each fails the parameter fuzz, naming the value."""
    shared = fuzzed_apps["sqlite"]
    app = create_app(shared.app.state.settings)
    router = APIRouter()

    @router.get("/selftest/crash")
    def crash(name: Annotated[str, Query(max_length=8)] = "x") -> dict[str, str]:
        if "\x00" in name:
            raise RuntimeError("bug")
        return {"name": name}

    @router.get("/selftest/unstated")
    def unstated(name: Annotated[str, Query(max_length=8)] = "x") -> dict[str, str]:
        if not name.strip():
            raise InvalidInput("name is blank", hint="give a name", field="name")
        return {"name": name}

    @router.get("/selftest/unbounded/{job_id}")
    def unbounded(job_id: Annotated[int, PathParameter(json_schema_extra={"maximum": 5})]) -> dict[str, int]:
        return {"job_id": job_id}

    app.include_router(router, responses=ERROR_RESPONSES)
    target = FuzzedApp("sqlite", app, shared.headers)
    schema = _load_schema(app)
    expected = {
        "/selftest/crash": "bug",
        "/selftest/unstated": "name=' ' is valid by its schema and published rules, refused 422",
        "/selftest/unbounded/{job_id}": "job_id is invalid by its schema, answered 200",
    }
    for path, evidence in expected.items():
        with pytest.raises(BaseException) as caught:
            fuzz_parameters(schema, _without_bodies(schema.raw_schema), [target], "GET", path, shrink=False)
        assert evidence in _describe(caught.value), (path, _describe(caught.value))


def test_no_text_parameter_takes_a_nul() -> None:
    """A query or path text holding NUL is refused by its schema (422): PostgreSQL cannot compare text with
    one (a 500 on GET /v1/corrections?model=, on a model version's path), and SQLite runs never show it."""
    spec = create_app(Settings(database_url="sqlite://")).openapi()
    for (method, path), params in operation_parameters(spec).items():
        for p in params.values():
            if schema_accepts(spec, p, "text"):
                assert not schema_accepts(spec, p, "a\x00b"), f"{method} {path}: {p.name} takes a NUL"


def test_every_rule_a_parameter_publishes_has_a_predicate() -> None:
    published = {rule for params in _spec_parameters().values() for p in params.values() for rule in p.rules}
    assert published <= set(PARAMETER_RULES)


@pytest.mark.parametrize("value", ["tb.large+tb.large", " "])
def test_the_curves_query_answers_a_twice_named_ring_and_a_blank_type_as_its_schema_says(
    value: str, fuzzed_apps: dict[str, FuzzedApp], app_schema: Any
) -> None:
    """Two gaps the parameter fuzz found (session 23): a ring naming a type twice was refused under a rule
    the parameter did not publish, and a blank name, off the published pattern, was answered 404."""
    method, path, name = "GET", "/v1/bandwidth-models/{version}/curves", "instance_type"
    spec = app_schema.raw_schema
    parameter = operation_parameters(spec)[(method, path)][name]
    target = fuzzed_apps["sqlite"]
    case = app_schema[path][method].Case(path_parameters={"version": "active"}, query={name: value})
    response = case.call(app=target.app, headers=target.headers)
    error = refusal_error(
        {name: parameter},
        {"version": "active", name: value},
        invalid=None if schema_accepts(spec, parameter, value) else name,
        status=response.status_code,
        field=_answer_field(response),
        with_body=False,
    )
    assert error is None, error


STATEFUL_STEPS = 8
STATEFUL_EXAMPLES = 6


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_links_chain_operations_without_server_errors(
    database: str, fuzzed_apps: dict[str, FuzzedApp]
) -> None:
    """Stateful: schemathesis follows the schema's links (create a profile, then read and delete it; create a
    plan, read it, start a run of it, report its progress), every check on, as in `st run` with stateful
    tests; a small count here (the 30-example run is in docs/BENCHMARKS.md's note). One run per database:
    the ids a step creates, which later steps follow, may differ between them."""
    if database not in fuzzed_apps:
        pytest.skip("PostgreSQL not configured (SRIFT_TEST_POSTGRES_URL unset; `make test` sets it)")
    app, headers = fuzzed_apps[database].app, fuzzed_apps[database].headers
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    machine = schema.as_state_machine()
    seen: list[int] = []
    calls: list[tuple[str, int]] = []
    rules = published_rules(app.openapi())

    class Linked(machine):  # type: ignore[misc,valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": headers}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            seen.append(response.status_code)
            calls.append((case.operation.label, response.status_code))
            excluded = [] if _kept_rules(case, response, rules) else [positive_data_acceptance]
            if _too_large(response):
                excluded.append(negative_data_rejection)
            case.validate_response(response, headers=headers, excluded_checks=excluded)

    Linked.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_STEPS,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
    )
    assert seen and all(code < 500 for code in seen)
    assert any("{" in label for label, _ in calls), calls  # some step followed a link


def test_every_link_names_an_operation_and_its_parameters() -> None:
    """The links stateful clients follow resolve: each target operation exists and takes the parameters
    (or body fields) the link fills from the created resource's `id`."""
    spec = create_app(Settings(database_url="sqlite://")).openapi()
    operations = {op["operationId"]: op for item in spec["paths"].values() for op in item.values()}
    links = [
        link
        for item in spec["paths"].values()
        for op in item.values()
        for response in op["responses"].values()
        for link in response.get("links", {}).values()
    ]
    assert len(links) >= 8
    for link in links:
        target = operations[link["operationId"]]
        names = {p["name"] for p in target.get("parameters", [])}
        assert set(link.get("parameters", {})) <= names, link
        if "requestBody" in link:
            body = target["requestBody"]["content"]["application/json"]["schema"]
            ref = body["$ref"].rsplit("/", 1)[1]
            assert set(link["requestBody"]) <= set(spec["components"]["schemas"][ref]["properties"]), link
