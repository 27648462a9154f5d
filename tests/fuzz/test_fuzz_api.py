"""Schemathesis against the app's own OpenAPI schema, in process: every operation, bounded examples, with a
token and the shipped catalog, so authenticated paths and real data are exercised. Zero 5xx, and every
response (status, content type, headers, body) must match the schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from srift.api.app import create_app
from srift.api.auth import Scope, create_token
from srift.api.limits import ERROR_RESPONSES
from srift.bootstrap import bootstrap
from srift.db.session import session_factory
from srift.settings import Settings

MAX_EXAMPLES = 25
# Schema-valid requests may still be refused with a documented 422 for what a schema cannot say (an unknown
# provider, no stored samples, an infeasible plan); every other check stays on.
EXCLUDED_CHECKS = [positive_data_acceptance]


def _operations() -> list[tuple[str, str]]:
    """Every (method, path) of the schema; building the app touches no database."""
    paths = create_app(Settings(database_url="sqlite://")).openapi()["paths"]
    return sorted((method.upper(), path) for path, item in paths.items() for method in item)


@pytest.fixture
def fuzz_setup(db_url: str, tmp_path: Path) -> Iterator[tuple[FastAPI, dict[str, str]]]:
    app_settings = Settings(database_url=db_url, data_dir=tmp_path / "data", max_solve_budget_s=2.0)
    bootstrap(app_settings)
    with session_factory(db_url)() as s:
        _, plain = create_token(session=s, name="fuzz", scope=Scope.ADMIN)
        s.commit()
    yield create_app(app_settings), {"Authorization": f"Bearer {plain}"}


def fuzz_operation(
    app: FastAPI, method: str, path: str, headers: dict[str, str], *, shrink: bool = True
) -> list[int]:
    """Run positive and negative schemathesis cases against one operation; return the status codes seen."""
    operation = schemathesis.openapi.from_asgi("/openapi.json", app)[path][method]
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
    )
    seen: list[int] = []

    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])],
    )
    def run(case: Any) -> None:
        response = case.call_and_validate(headers=headers, excluded_checks=EXCLUDED_CHECKS)
        seen.append(response.status_code)

    run()
    return seen


@pytest.mark.parametrize(("method", "path"), _operations(), ids=lambda x: str(x))
def test_operation_conforms_to_its_schema(
    method: str, path: str, fuzz_setup: tuple[FastAPI, dict[str, str]]
) -> None:
    app, auth = fuzz_setup
    seen = fuzz_operation(app, method, path, auth)
    assert seen and all(code < 500 for code in seen)


class Echo(BaseModel):
    n: int = Field(ge=0, le=10)


def test_the_harness_catches_crashes_and_schema_violations(
    fuzz_setup: tuple[FastAPI, dict[str, str]],
) -> None:
    app, auth = fuzz_setup
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
    expected = {"/selftest/crash": "bug", "/selftest/lies": "not a number"}
    for path, evidence in expected.items():
        with pytest.raises(BaseException) as caught:
            fuzz_operation(app, "POST", path, auth, shrink=False)
        assert evidence in _describe(caught.value), (path, _describe(caught.value))


def _describe(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()):
        parts.append(_describe(inner))
    return "\n".join(parts)
