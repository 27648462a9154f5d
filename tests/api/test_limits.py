"""Limits: oversized bodies get 413 before parsing (with and without Content-Length), each limit is
documented with its maximum, and exceeding one answers 422/413 naming it. CORS is closed by default."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from srift import limits
from srift.api.app import create_app
from srift.api.auth import RequireWrite
from srift.api.deps import MAX_ID
from srift.errors import InvalidInput, PayloadTooLarge
from srift.settings import Settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "limits.md"
SMALL = 4096


def _app(settings: Settings, seen: list[int]) -> FastAPI:
    app = create_app(settings.model_copy(update={"max_body_bytes": SMALL}))
    router = APIRouter()

    @router.post("/echo")
    def echo(body: dict[str, Any]) -> dict[str, int]:
        seen.append(len(body["blob"]))
        return {"blob_chars": len(body["blob"])}

    @router.post("/guarded")
    def guarded(_: RequireWrite, body: dict[str, Any]) -> dict[str, int]:
        seen.append(1)
        return {"keys": len(body)}

    app.include_router(router)
    return app


@pytest.fixture
def seen() -> list[int]:
    return []


@pytest.fixture
def small_client(settings: Settings, seen: list[int]) -> Iterator[TestClient]:
    with TestClient(_app(settings, seen), raise_server_exceptions=False) as c:
        yield c


def _json_blob(chars: int) -> bytes:
    return b'{"blob": "' + b"x" * chars + b'"}'


def test_oversized_body_with_content_length_is_413(small_client: TestClient, seen: list[int]) -> None:
    r = small_client.post(
        "/echo", content=_json_blob(SMALL + 10), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    body = r.json()
    assert body["error"] == "payload_too_large"
    assert str(SMALL) in body["detail"] and "request body size" in body["detail"]
    assert "SRIFT_MAX_BODY_BYTES" in body["hint"]
    assert seen == []


def test_oversized_chunked_body_is_413(small_client: TestClient, seen: list[int]) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"blob": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    r = small_client.post("/echo", content=chunks(), headers={"content-type": "application/json"})
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in r.request.headers
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert seen == []


def test_chunked_body_under_the_limit_arrives_whole(small_client: TestClient, seen: list[int]) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"blob": "'
        for _ in range(3):
            yield b"y" * 1000
        yield b'"}'

    r = small_client.post("/echo", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json() == {"blob_chars": 3000}
    assert seen == [3000]


def test_body_at_the_limit_passes(small_client: TestClient) -> None:
    content = _json_blob(SMALL - len(_json_blob(0)))
    assert len(content) == SMALL
    r = small_client.post("/echo", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 200


def test_size_is_checked_before_auth(small_client: TestClient, seen: list[int]) -> None:
    r = small_client.post(
        "/guarded", content=_json_blob(SMALL * 2), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert small_client.post("/guarded", json={"a": 1}).status_code == 401
    assert seen == []


def test_default_limit_comes_from_settings(client: TestClient, settings: Settings) -> None:
    assert settings.max_body_bytes == limits.DEFAULT_MAX_BODY_BYTES == limits.BODY_SIZE.maximum
    big = b"[" + b"0," * (settings.max_body_bytes // 2) + b"0]"
    r = client.post("/v1/profiles", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("limit", limits.LIMITS, ids=lambda x: x.name)
def test_limit_check_names_the_limit(limit: limits.Limit) -> None:
    limit.check(limit.maximum, field="f")
    with pytest.raises((InvalidInput, PayloadTooLarge)) as err:
        limit.check(limit.maximum * 2 + 1, field="some.field")
    assert err.value.status_code == limit.status_code
    assert limit.name in err.value.detail and err.value.field == "some.field"
    assert limits._fmt(limit.maximum) in err.value.detail


def test_solve_budget_respects_the_server_setting() -> None:
    limits.check_solve_budget(5.0, max_solve_budget_s=10.0)
    with pytest.raises(InvalidInput) as err:
        limits.check_solve_budget(11.0, max_solve_budget_s=10.0)
    assert "solve budget" in err.value.detail and err.value.field == "solve_budget_s"
    with pytest.raises(InvalidInput):
        limits.check_solve_budget(limits.MAX_SOLVE_BUDGET_S + 1, max_solve_budget_s=1e9)


def test_probe_grid_limit() -> None:
    limits.check_probe_grid(buffer_sizes=32, world_sizes=32)
    with pytest.raises(InvalidInput) as err:
        limits.check_probe_grid(buffer_sizes=32, world_sizes=32, instance_types=2)
    assert "probe grid size" in err.value.detail


def test_every_limit_is_documented_with_its_maximum() -> None:
    text = DOCS.read_text()
    for limit in limits.LIMITS:
        row = next((line for line in text.splitlines() if line.startswith(f"| {limit.name} |")), None)
        assert row is not None, f"docs/limits.md lacks a row for {limit.name!r}"
        numbers = {n.replace("_", "").replace(",", "") for n in re.findall(r"[\d][\d_,.]*", row)}
        assert limits._fmt(limit.maximum).replace("_", "") in numbers, row
        assert str(limit.status_code) in row


def test_every_constant_the_doc_cites_by_name_has_the_number_it_states() -> None:
    """docs/limits.md said "at most 64 VMs" of a parameter-server fleet without naming MAX_PS_VMS, so a change
    of the constant would leave the doc behind unnoticed. Each `MAX_...` constant of srift/limits.py the doc
    names must be written after the number it states (in the same clause), and MAX_PS_VMS is named."""
    text = " ".join(DOCS.read_text().split())
    cited = {m.group(1): m.start() for m in re.finditer(r"`(MAX_[A-Z_]+)`", text)}
    assert "MAX_PS_VMS" in cited
    for name, at in cited.items():
        value = getattr(limits, name)
        before = text[max(0, at - 80) : at]
        numbers = [n.replace("_", "") for n in re.findall(r"\d[\d_]*", before)]
        assert numbers and numbers[-1] == f"{value:.0f}", f"{name} = {value}, the doc: ...{before}"


def test_cors_closed_by_default_and_opened_by_setting(settings: Settings) -> None:
    preflight = {
        "Origin": "https://evil.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    with TestClient(create_app(settings)) as c:
        r = c.options("/v1/health", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = c.get("/v1/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers
    allowed = settings.model_copy(update={"cors_origins": ["https://ok.example"]})
    with TestClient(create_app(allowed)) as c:
        r = c.options("/v1/health", headers={**preflight, "Origin": "https://ok.example"})
        assert r.headers.get("access-control-allow-origin") == "https://ok.example"
        r = c.options("/v1/health", headers=preflight)
        assert r.headers.get("access-control-allow-origin") != "https://evil.example"


def test_absurdly_nested_json_is_a_400_not_a_crash(client: TestClient, write_headers: dict[str, str]) -> None:
    headers = {**write_headers, "content-type": "application/json"}
    for body in (b"[" * 200_000 + b"]" * 200_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000):
        r = client.post("/v1/profiles", content=body, headers=headers)
        assert r.status_code == 400 and r.json()["error"] == "bad_request"


def test_every_list_takes_the_same_largest_offset(client: TestClient) -> None:
    """`offset` stopped at 1e9 on /v1/profiles and /v1/jobs but at 2³¹−1 on /v1/probe-jobs and
    /v1/profile-jobs; every list now states and enforces the one bound (srift.api.deps.Offset)."""
    spec = client.get("/openapi.json").json()
    lists = {
        path: param["schema"]
        for path, item in spec["paths"].items()
        for param in item.get("get", {}).get("parameters", [])
        if param["name"] == "offset"
    }
    assert {"/v1/profiles", "/v1/jobs", "/v1/probe-jobs", "/v1/profile-jobs"} <= set(lists), lists
    assert {(s["minimum"], s["maximum"]) for s in lists.values()} == {(0, MAX_ID)}, lists
    for path in lists:
        assert client.get(path, params={"offset": MAX_ID}).status_code == 200, path
        over = client.get(path, params={"offset": MAX_ID + 1})
        assert over.status_code == 422 and over.json()["field"] == "offset", path
