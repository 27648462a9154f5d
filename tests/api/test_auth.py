"""Tokens and scopes: hashed storage, 401 without/unknown/revoked tokens, 403 for a weaker scope or another
job's token, open or protected reads, and every real write route of the app refusing anonymous callers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.api.app import create_app
from srift.api.auth import RequireAdmin, RequireJobOrWrite, RequireRead, RequireWrite, require_job_token
from srift.db.session import session_factory
from srift.db.tables import ApiToken, Job
from srift.db.tokens import Scope, create_token, issue_job_token, revoke_token
from srift.errors import Forbidden, NotFound, Unauthorized
from srift.settings import Settings


def _probe_router() -> APIRouter:
    router = APIRouter()

    @router.get("/probe/read")
    def read(_: RequireRead) -> dict[str, str]:
        return {"ok": "read"}

    @router.post("/probe/write")
    def write(_: RequireWrite, body: dict[str, Any]) -> dict[str, Any]:
        return {"ok": "write", "body": body}

    @router.post("/probe/admin")
    def admin(_: RequireAdmin) -> dict[str, str]:
        return {"ok": "admin"}

    @router.post("/probe/results/{job_id}")
    def results(job_id: int, caller: RequireJobOrWrite) -> dict[str, Any]:
        caller.authorize_job(job_id)
        return {"job": job_id, "by_job": caller.job is not None}

    return router


def _app(settings: Settings) -> FastAPI:
    app = create_app(settings)
    app.include_router(_probe_router())
    return app


@pytest.fixture
def probe_client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(_app(settings), raise_server_exceptions=False) as c:
        yield c


def _token(db_url: str, scope: Scope) -> tuple[int, str]:
    with session_factory(db_url)() as s:
        row, plain = create_token(session=s, name=f"t-{scope}", scope=scope)
        s.commit()
        return row.id, plain


def _bearer(plain: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {plain}"}


def _job(db_url: str, *, state: str = "running") -> tuple[int, str]:
    with session_factory(db_url)() as s:
        job = Job(kind="probe", provider="local", state=state, request={})
        s.add(job)
        plain = issue_job_token(job)
        s.commit()
        return job.id, plain


def test_tokens_are_stored_only_as_hashes(session: Session) -> None:
    row, plain = create_token(session=session, name="ci", scope=Scope.WRITE)
    session.commit()
    stored = session.scalars(select(ApiToken)).one()
    assert plain.startswith("srift_") and len(plain) > 40
    assert stored.token_hash != plain and plain not in stored.token_hash
    assert len(stored.token_hash) == 64
    assert stored.prefix == plain[:10] and stored.scope == "write" and stored.id == row.id


def test_write_needs_a_write_token(probe_client: TestClient, db_url: str) -> None:
    r = probe_client.post("/probe/write", json={"a": 1})
    assert r.status_code == 401
    assert r.json()["error"] == "unauthorized" and "srift tokens create" in r.json()["hint"]

    r = probe_client.post("/probe/write", json={"a": 1}, headers=_bearer("srift_not-a-real-token-000000"))
    assert r.status_code == 401

    r = probe_client.post("/probe/write", json={"a": 1}, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert r.status_code == 401

    _, read = _token(db_url, Scope.READ)
    r = probe_client.post("/probe/write", json={"a": 1}, headers=_bearer(read))
    assert r.status_code == 403 and r.json()["error"] == "forbidden"

    for scope in (Scope.WRITE, Scope.ADMIN):
        _, plain = _token(db_url, scope)
        r = probe_client.post("/probe/write", json={"a": 1}, headers=_bearer(plain))
        assert r.status_code == 200 and r.json()["body"] == {"a": 1}


def test_auth_is_checked_before_the_body(probe_client: TestClient) -> None:
    r = probe_client.post("/probe/write", json=["not", "an", "object"])
    assert r.status_code == 401


def test_admin_routes_need_admin(probe_client: TestClient, db_url: str) -> None:
    _, write = _token(db_url, Scope.WRITE)
    assert probe_client.post("/probe/admin", headers=_bearer(write)).status_code == 403
    _, admin = _token(db_url, Scope.ADMIN)
    assert probe_client.post("/probe/admin", headers=_bearer(admin)).status_code == 200


def test_revoked_token_stops_working(probe_client: TestClient, db_url: str) -> None:
    token_id, plain = _token(db_url, Scope.WRITE)
    assert probe_client.post("/probe/write", json={}, headers=_bearer(plain)).status_code == 200
    with session_factory(db_url)() as s:
        revoke_token(session=s, token_id=token_id)
        revoke_token(session=s, token_id=token_id)
        s.commit()
    assert probe_client.post("/probe/write", json={}, headers=_bearer(plain)).status_code == 401
    with session_factory(db_url)() as s, pytest.raises(NotFound) as err:
        revoke_token(session=s, token_id=token_id + 100)
    assert err.value.field == "id"


def test_reads_open_by_default_and_protected_by_setting(settings: Settings, db_url: str) -> None:
    with TestClient(_app(settings)) as c:
        assert c.get("/probe/read").status_code == 200
    locked = settings.model_copy(update={"read_requires_token": True})
    _, read = _token(db_url, Scope.READ)
    with TestClient(_app(locked), raise_server_exceptions=False) as c:
        assert c.get("/probe/read").status_code == 401
        assert c.get("/probe/read", headers=_bearer(read)).status_code == 200
    with TestClient(create_app(locked), raise_server_exceptions=False) as c:  # the asyncio read route
        assert c.get("/v1/instance-types").status_code == 401
        assert c.get("/v1/instance-types", headers=_bearer("srift_unknown")).status_code == 401
        assert c.get("/v1/instance-types", headers=_bearer(read)).status_code == 200


def test_auth_disabled_lets_everyone_write(settings: Settings) -> None:
    open_settings = settings.model_copy(update={"auth_enabled": False})
    with TestClient(_app(open_settings)) as c:
        assert c.post("/probe/write", json={}).status_code == 200


def test_job_token_works_for_its_own_job_only(probe_client: TestClient, db_url: str) -> None:
    job_a, token_a = _job(db_url)
    job_b, _ = _job(db_url)
    r = probe_client.post(f"/probe/results/{job_a}", headers=_bearer(token_a))
    assert r.status_code == 200 and r.json() == {"job": job_a, "by_job": True}

    r = probe_client.post(f"/probe/results/{job_b}", headers=_bearer(token_a))
    assert r.status_code == 403
    assert r.json()["field"] == "job_id" and f"job {job_a}" in r.json()["detail"]

    assert probe_client.post(f"/probe/results/{job_a}").status_code == 401
    assert (
        probe_client.post(f"/probe/results/{job_a}", headers=_bearer("srift_job_forged-000000")).status_code
        == 401
    )
    # a job token is no API token: it cannot do general writes
    assert probe_client.post("/probe/write", json={}, headers=_bearer(token_a)).status_code == 401

    _, write = _token(db_url, Scope.WRITE)
    r = probe_client.post(f"/probe/results/{job_b}", headers=_bearer(write))
    assert r.status_code == 200 and r.json()["by_job"] is False
    _, read = _token(db_url, Scope.READ)
    assert probe_client.post(f"/probe/results/{job_b}", headers=_bearer(read)).status_code == 403


def test_finished_job_token_is_refused(probe_client: TestClient, db_url: str) -> None:
    job_id, plain = _job(db_url, state="failed")
    r = probe_client.post(f"/probe/results/{job_id}", headers=_bearer(plain))
    assert r.status_code == 403 and "failed" in r.json()["detail"]


def test_require_job_token_helper(session: Session, db_url: str) -> None:
    job_a, token_a = _job(db_url)
    job_b, token_b = _job(db_url)
    assert require_job_token(session=session, job_id=job_a, plain=token_a).id == job_a
    with pytest.raises(Forbidden) as forbidden:
        require_job_token(session=session, job_id=job_b, plain=token_a)
    assert forbidden.value.status_code == 403
    with pytest.raises(Unauthorized) as missing:
        require_job_token(session=session, job_id=job_b, plain=None)
    assert missing.value.status_code == 401
    with pytest.raises(Unauthorized) as unknown:
        require_job_token(session=session, job_id=job_b, plain=token_b + "x")
    assert unknown.value.status_code == 401


# POSTs that only compute and store nothing: they take a read token (open unless SRIFT_READ_REQUIRES_TOKEN).
READ_SCOPE_POSTS = {"/v1/predictions"}


def _write_operations(client: TestClient) -> list[tuple[str, str]]:
    """Every non-GET operation of the app's OpenAPI schema, path parameters filled with 1."""
    spec = client.get("/openapi.json").json()
    found = []
    for path, item in spec["paths"].items():
        for method in item:
            if method.upper() in {"POST", "PUT", "PATCH", "DELETE"} and path.startswith("/v1"):
                found.append((method.upper(), re.sub(r"\{[^}]+\}", "1", path)))
    return sorted(found)


def test_every_write_route_refuses_anonymous_and_read_tokens(client: TestClient, db_url: str) -> None:
    operations = _write_operations(client)
    assert ("POST", "/v1/profiles") in operations and ("POST", "/v1/plans") in operations
    _, read = _token(db_url, Scope.READ)
    for method, path in operations:
        if path in READ_SCOPE_POSTS:
            continue
        anonymous = client.request(method, path, json={})
        assert anonymous.status_code == 401, (method, path, anonymous.text)
        weak = client.request(method, path, json={}, headers=_bearer(read))
        assert weak.status_code == 403, (method, path, weak.text)


def test_compute_only_posts_follow_the_read_setting(settings: Settings, db_url: str) -> None:
    locked = settings.model_copy(update={"read_requires_token": True})
    with TestClient(create_app(locked), raise_server_exceptions=False) as c:
        for path in READ_SCOPE_POSTS:
            assert c.post(path, json={}).status_code == 401
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        for path in READ_SCOPE_POSTS:
            assert c.post(path, json={}).status_code == 422
