"""POST/GET /v1/profiles: validation naming the field, idempotent storage, grouping by model, auth."""

from __future__ import annotations

import copy
import re
import sys
from typing import Any

import pytest
from fastapi.testclient import TestClient

from srift.db.session import transaction
from srift.domain.profile_document import read_profile
from srift.profiling import store
from srift.services import profiles as service
from srift.settings import Settings


def test_post_then_get_round_trips(
    client: TestClient, write_headers: dict[str, str], profile_doc: dict[str, Any]
) -> None:
    posted = client.post("/v1/profiles", json=profile_doc, headers=write_headers)
    assert posted.status_code == 201, posted.text
    body = posted.json()
    assert body["created"] is True and body["model"] == "resnet-ish"
    again = client.post("/v1/profiles", json=profile_doc, headers=write_headers)
    assert again.status_code == 201 and again.json() == {**body, "created": False}
    got = client.get(f"/v1/profiles/{body['id']}", headers=write_headers)
    assert client.get(f"/v1/profiles/{body['id']}").status_code == 404  # the token's, not everyone's
    assert got.status_code == 200
    document = got.json()
    assert document.pop("id") == body["id"]
    # A document written before precision, source, estimate and structure existed reads back with them.
    defaults = {"precision": "fp32", "source": "measured", "estimate": None, "structure": None}
    assert document == {**defaults, **profile_doc}


def test_listing_groups_profiles_by_model(
    client: TestClient, write_headers: dict[str, str], profile_doc: dict[str, Any]
) -> None:
    for accelerator in ("Tesla V100-SXM2-16GB", "Tesla T4"):
        assert (
            client.post(
                "/v1/profiles", json={**profile_doc, "accelerator": accelerator}, headers=write_headers
            ).status_code
            == 201
        )
    assert (
        client.post("/v1/profiles", json={**profile_doc, "model": "bert"}, headers=write_headers).status_code
        == 201
    )
    listing = client.get("/v1/profiles", headers=write_headers).json()
    assert client.get("/v1/profiles").json()["count"] == 0
    assert listing["count"] == 3
    groups = {g["model"]: g for g in listing["models"]}
    assert groups["resnet-ish"]["accelerators"] == ["Tesla T4", "Tesla V100-SXM2-16GB"]
    assert len(groups["resnet-ish"]["profiles"]) == 2 and len(groups["bert"]["profiles"]) == 1
    only = client.get("/v1/profiles", params={"model": "bert"}, headers=write_headers).json()
    assert [g["model"] for g in only["models"]] == ["bert"]
    summary = only["models"][0]["profiles"][0]
    assert summary["max_batch"] == 96 and summary["layers"] == 3
    assert client.get("/v1/profiles", params={"model": "none"}).json() == {
        "models": [],
        "count": 0,
        "total": 0,
    }
    # A page says how many there are over all pages (same filters, same owner), so a client knows to go on.
    first = client.get("/v1/profiles", params={"limit": 2}, headers=write_headers).json()
    rest = client.get("/v1/profiles", params={"limit": 2, "offset": 2}, headers=write_headers).json()
    assert (first["count"], first["total"], rest["count"], rest["total"]) == (2, 3, 1, 3)
    assert only["total"] == 1 and client.get("/v1/profiles").json()["total"] == 0


def test_a_listing_is_built_once_until_a_profile_is_stored_or_deleted(
    client: TestClient,
    settings: Settings,
    write_headers: dict[str, str],
    profile_doc: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Listing reads every listed document (the Plan and Predict pages ask on each load): the answer is kept
    per owner and filters, and a profile stored or deleted, through the API or not, is listed at once."""
    built: list[str | None] = []
    real = service.list_profiles_by_model

    def counted(**kwargs: Any) -> Any:
        built.append(kwargs["viewer"])
        return real(**kwargs)

    monkeypatch.setattr(service, "list_profiles_by_model", counted)
    posted = client.post("/v1/profiles", json=profile_doc, headers=write_headers).json()
    first = client.get("/v1/profiles", headers=write_headers)
    assert first.json()["count"] == 1
    assert client.get("/v1/profiles", headers=write_headers).content == first.content
    assert client.get("/v1/profiles").json()["count"] == 0  # anonymous: a listing of its own
    assert client.get("/v1/profiles").json()["count"] == 0
    assert len(built) == 2 and built[0] is not None and built[1] is None
    everyone = read_profile({**profile_doc, "accelerator": "Tesla T4"})
    with transaction(settings.resolved_database_url) as session:  # as the CLI stores one
        store.save_profile(session=session, profile=everyone)
    assert client.get("/v1/profiles", headers=write_headers).json()["count"] == 2
    assert client.get("/v1/profiles").json()["count"] == 1 and len(built) == 4
    assert client.delete(f"/v1/profiles/{posted['id']}", headers=write_headers).status_code == 204
    listing = client.get("/v1/profiles", headers=write_headers).json()
    assert listing["count"] == 1 and listing["models"][0]["accelerators"] == ["Tesla T4"]


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    target: Any = doc
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("forward.batches", [1, 64, 32, 64], "forward.batches[3]"),
        ("backward.batches", [1, 32, 32, 96], "backward.batches[2]"),
        ("forward.times_s", [0.004, 0.03, 0.058], "forward.times_s"),
        ("forward.times_s", [5e-324, 0.03, 0.058, 0.087], "forward.times_s[0]"),
        ("max_batch", 64, "forward.batches[3]"),
        ("forward.times_s", [0.004, -0.03, 0.058, 0.087], "forward.times_s[1]"),
        ("backward.times_s", [0.004, 0.0, 0.058, 0.087], "backward.times_s[1]"),
        ("layers.1.ready_frac", 1.5, "layers[1].ready_frac"),
        ("layers.0.ready_frac", -0.1, "layers[0].ready_frac"),
        ("layers.2.grad_bytes", -1, "layers[2].grad_bytes"),
        ("layers.2.exec_prob", 2, "layers[2].exec_prob"),
        ("max_batch", 0, "max_batch"),
        ("model", "  ", "model"),
        ("model", "bad\x00name", "model"),
        ("model", "\u3000\x1c\t", "model"),
        ("accelerator", "\x85", "accelerator"),
        ("layers.0.name", "fc\x00", "layers[0].name"),
        ("extra", {"raw\x00": 1}, "extra"),
        ("extra", {"raw": {"runs": [1, "x\x00"]}}, "extra"),
        ("extra", {"overlap_slowdown": 11}, "extra.overlap_slowdown"),
        ("extra", {"comm_overlap_slowdown": 0.9}, "extra.comm_overlap_slowdown"),
        ("extra", {"cpu_quota": {"cores": 0, "period_s": 0.01}}, "extra.cpu_quota"),
        ("extra", {"cpu_quota": {}}, "extra.cpu_quota"),
        ("extra", {"cpu_quota": {"cores": 0.25, "period_s": 0.01, "burst_s": 0}}, "extra.cpu_quota"),
        (
            "extra",
            {"cpu_quota": {"cores": 0.25, "period_s": 0.01, "burst_cpu_s": 0}},
            "extra.cpu_quota",
        ),
        (
            "extra",
            {"cpu_quota": {"cores": 0.25, "period_s": 0.01, "burst_cpu_s": 61}},
            "extra.cpu_quota",
        ),
        ("extra", {"loop_overhead_s": -1}, "extra.loop_overhead_s"),
        ("schema_version", 2, "schema_version"),
        ("straggler_cv", -1, "straggler_cv"),
        ("layers", [], "layers"),
    ],
)
def test_invalid_profiles_are_422_naming_the_field(
    client: TestClient,
    write_headers: dict[str, str],
    profile_doc: dict[str, Any],
    path: str,
    value: Any,
    field: str,
) -> None:
    response = client.post("/v1/profiles", json=_set(profile_doc, path, value), headers=write_headers)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    if "\x00" in repr(value):
        assert "contains a NUL character" in response.json()["detail"]
    assert client.get("/v1/profiles").json()["count"] == 0


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("yesterday", "it does not start with a date, YYYY-MM-DD"),
        ("1700000000", "it does not start with a date, YYYY-MM-DD"),
        ("2026-12-06T25:00:00Z", "hour value is outside expected range of 0-23"),
        ("2026-02-30T10:00:00Z", "day value is outside expected range"),
    ],
)
def test_a_created_at_that_is_no_iso_date_time_is_422_naming_it(
    client: TestClient, write_headers: dict[str, str], profile_doc: dict[str, Any], value: str, reason: str
) -> None:
    response = client.post("/v1/profiles", json={**profile_doc, "created_at": value}, headers=write_headers)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["field"] == "created_at"
    assert answer["detail"] == f"created_at {value!r} is not an ISO 8601 date-time ({reason})"
    assert answer["hint"].startswith("write it like 2026-12-06T14:08:45+00:00")
    inline = {"profiles": [{**profile_doc, "created_at": value}], "global_batch": 64, "iterations": 10}
    plan = client.post("/v1/plans", json=inline, headers=write_headers)
    assert plan.status_code == 422 and plan.json()["field"] == "profiles[0].created_at", plan.text
    assert client.get("/v1/profiles").json()["count"] == 0


@pytest.mark.parametrize(
    "value", ["2026-12-06T14:08:45+00:00", "2026-12-06T14:08:45.25Z", "2026-12-06 14:08:45", "2026-12-06", ""]
)
def test_an_iso_created_at_is_stored_as_written(
    client: TestClient, write_headers: dict[str, str], profile_doc: dict[str, Any], value: str
) -> None:
    posted = client.post("/v1/profiles", json={**profile_doc, "created_at": value}, headers=write_headers)
    assert posted.status_code == 201, posted.text
    got = client.get(f"/v1/profiles/{posted.json()['id']}", headers=write_headers)
    assert got.json()["created_at"] == value


def test_writes_need_a_token_and_unknown_ids_are_404(client: TestClient, profile_doc: dict[str, Any]) -> None:
    assert client.post("/v1/profiles", json=profile_doc).status_code == 401
    missing = client.get("/v1/profiles/999")
    assert missing.status_code == 404 and missing.json()["field"] == "profile_id"


def test_openapi_documents_the_profile_schema(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    layer = spec["components"]["schemas"]["LayerIn"]["properties"]
    assert layer["ready_frac"]["minimum"] == 0 and layer["ready_frac"]["maximum"] == 1
    assert layer["grad_bytes"]["minimum"] == 0
    post = spec["paths"]["/v1/profiles"]["post"]
    assert {"201", "401", "422"} <= set(post["responses"])
    assert "404" in spec["paths"]["/v1/profiles/{profile_id}"]["get"]["responses"]


def test_the_schema_states_the_text_rules_the_reader_enforces(client: TestClient) -> None:
    """No NUL anywhere (keys and nested values of `extra` too), names not blank in the sense of Python's
    `str.isspace` (what read_profile strips), and `extra`'s bounded keys."""
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    profile = schemas["ProfileIn"]["properties"]
    name = re.compile(profile["model"]["pattern"])
    assert profile["accelerator"]["pattern"] == name.pattern
    blank = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    refused = {chr(c) for c in range(sys.maxunicode + 1) if not name.fullmatch(chr(c))}
    assert refused == blank | {"\x00"}
    assert name.fullmatch(" a ") and not name.fullmatch("a\x00")
    for field in ("torch_version", "device"):
        assert profile[field]["pattern"] == "^[^\\x00]*$", field
    # created_at: a date-time (which holds no NUL) or empty
    assert profile["created_at"]["anyOf"] == [
        {"type": "string", "format": "date-time", "maxLength": 100},
        {"type": "string", "maxLength": 0},
    ]
    assert schemas["LayerIn"]["properties"]["name"]["pattern"] == "^[^\\x00]*$"
    extra = schemas[profile["extra"]["anyOf"][0]["$ref"].rsplit("/", 1)[1]]
    assert extra["propertyNames"] == {"pattern": "^[^\\x00]*$"}
    free = schemas[extra["additionalProperties"]["$ref"].rsplit("/", 1)[1]]
    text = next(branch for branch in free["anyOf"] if branch.get("type") == "string")
    nested = next(branch for branch in free["anyOf"] if branch.get("type") == "object")
    assert text["pattern"] == nested["propertyNames"]["pattern"] == "^[^\\x00]*$"
    assert extra["properties"]["overlap_slowdown"]["anyOf"][0] == {
        "type": "number",
        "minimum": 1,
        "maximum": 10,
    }
    quota = extra["properties"]["cpu_quota"]["anyOf"][0]
    assert quota["required"] == ["cores", "period_s"] and quota["additionalProperties"] is False
    assert quota["properties"]["cores"]["minimum"] == 0.001  # the kernel's 1 ms quota over its 1 s period
    assert quota["properties"]["period_s"]["maximum"] == 1
    burst = quota["properties"]["burst_cpu_s"]
    assert (burst["minimum"], burst["maximum"]) == (1e-6, 60)
    assert extra["properties"]["loop_overhead_s"]["anyOf"][0]["minimum"] == 0
    comm = extra["properties"]["comm_overlap_slowdown"]["anyOf"][0]
    assert (comm["minimum"], comm["maximum"]) == (1, 10)
