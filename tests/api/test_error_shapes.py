"""Every error the API answers has one shape, {error, detail, hint, field}, including the framework's own
(unreadable body, unknown path, wrong method), and /v1 operations document it."""

from __future__ import annotations

from typing import Any

import pytest
from api.test_degenerate_profiles import BASE
from fastapi import APIRouter
from fastapi.testclient import TestClient
from pydantic import BaseModel

from srift.api.app import create_app
from srift.api.limits import ERROR_RESPONSES
from srift.api.schemas.jobs import ProbeJobIn, ProbeResultsIn, ProfileResultIn
from srift.api.schemas.plans import PlanRequest
from srift.api.schemas.predictions import FleetChoiceIn, PredictionRequest
from srift.api.schemas.types import parse_request
from srift.bandwidth.records import ProbeSampleDocument
from srift.domain.profile_document import ProfileIn, read_profile
from srift.errors import InvalidInput
from srift.jobs.spec import ProbeJobDocument
from srift.settings import Settings

KEYS = {"error", "detail", "hint", "field"}


def test_framework_errors_use_our_shape(settings: Settings) -> None:
    app = create_app(settings)
    router = APIRouter()

    @router.post("/v1/__echo")
    def echo(body: dict[str, Any]) -> dict[str, Any]:
        return body

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as c:
        bad_utf8 = c.post("/v1/__echo", content=b"\xff\xfe{", headers={"content-type": "application/json"})
        assert bad_utf8.status_code == 400
        assert set(bad_utf8.json()) >= KEYS and bad_utf8.json()["error"] == "bad_request"

        bad_json = c.post("/v1/__echo", content=b"{nope", headers={"content-type": "application/json"})
        assert bad_json.status_code == 422 and bad_json.json()["error"] == "invalid_input"
        assert bad_json.json()["field"] is None, "a character offset is not a field"
        assert "not valid JSON" in bad_json.json()["detail"] and "at character" in bad_json.json()["detail"]

        missing = c.get("/v1/no-such-thing")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        assert set(missing.json()) >= KEYS

        wrong = c.put("/v1/health")
        assert wrong.status_code == 405 and wrong.json()["error"] == "method_not_allowed"
        assert "allow" in {k.lower() for k in wrong.headers}


def test_v1_operations_document_the_error_shape(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    ours = {path for path in spec["paths"] if path.startswith("/v1")}
    assert "/v1/health" in ours
    for path in ours:
        for op in spec["paths"][path].values():
            for status, response in op["responses"].items():
                if status[0] not in "45" or status == "503":
                    continue
                ref = response["content"]["application/json"]["schema"]["$ref"]
                component = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
                assert set(component["properties"]) >= KEYS, (path, status, ref)
            for status in ERROR_RESPONSES:
                assert str(status) in op["responses"], (path, status)


def test_405_allow_lists_every_method_the_schema_documents_for_the_path(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        documented = sorted(m.upper() for m in item)
        concrete = path.replace("{", "").replace("}", "")
        unused = next(m for m in ("DELETE", "PATCH", "PUT") if m not in documented)
        wrong = client.request(unused, concrete)
        assert wrong.status_code == 405, (path, wrong.status_code)
        assert wrong.headers["allow"] == ", ".join(documented), path
        assert wrong.json()["error"] == "method_not_allowed"


def test_a_blank_or_nul_name_is_said_in_words_not_as_the_schema_regex(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    """A blank accelerator, a NUL in a model name or a job's instance type: the schema states each as a
    regex, and the answer used to read that regex back ("String should match pattern '^[^\\x00]*[^\\x00\\t-
    \\r\\x1c- \\x85..."); it now says what is wrong and how to fix it."""
    profile = {**BASE, "accelerator": "   "}
    blank = client.post("/v1/profiles", json=profile, headers=write_headers)
    assert blank.status_code == 422 and blank.json()["field"] == "accelerator", blank.text
    assert blank.json()["detail"] == "accelerator is blank (only whitespace)"
    assert "spaces" in blank.json()["hint"] and blank.json()["errors"][0]["msg"] == blank.json()["detail"]
    nul = client.get("/v1/profiles", params={"model": "res\x00net"})
    assert nul.status_code == 422 and nul.json()["detail"] == "model holds a NUL character (\\u0000)"
    job = {"provider": "local", "instance_type": " ", "node_counts": [2]}
    refused = client.post("/v1/probe-jobs", json=job, headers=write_headers)
    assert refused.status_code == 422 and refused.json()["field"] == "instance_type", refused.text
    assert refused.json()["detail"] == "instance_type is blank (only whitespace)"
    for answer in (blank, nul, refused):
        assert "pattern" not in answer.text and "\\\\x00" not in answer.text, answer.text


def test_a_body_that_is_not_a_json_object_is_named_as_the_body(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    """A JSON array, a string, `null`, form data or no body where an operation takes a JSON object: pydantic
    said "Input should be a valid dictionary or object to extract fields from" (or "Field required") with
    `field: null`; the answer now says the body must be a JSON object, names `body` and says how to send
    one, and nothing is stored."""
    sent = {
        "a JSON array": {"json": [BASE]},
        "a JSON string": {"json": "resnet"},
        "null": {"content": b"null", "headers": {"content-type": "application/json"}},
        "not JSON (form": {"data": {"model": "resnet"}},
        "none was sent": {},
    }
    for said, request in sent.items():
        headers = {**write_headers, **request.pop("headers", {})}
        r = client.post("/v1/profiles", headers=headers, **request)
        assert r.status_code == 422, (said, r.text)
        body = r.json()
        assert body["field"] == "body" and body["errors"][0]["field"] == "body", (said, body)
        assert body["detail"].startswith("the request body must be a JSON object"), (said, body)
        assert said in body["detail"] and "JSON object ({...})" in body["hint"], (said, body)
    assert client.get("/v1/profiles").json()["total"] == 0


def test_a_profile_field_gets_the_hint_a_profile_file_gets(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    """`srift profile import` and POST /v1/profiles read one profile model; a bad max_batch got its own
    hint from the CLI and the generic one from the API, and now gets the model's FIELD_HINTS from both."""
    r = client.post("/v1/profiles", json={**BASE, "max_batch": 0}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "max_batch", r.text
    assert r.json()["hint"] == ProfileIn.FIELD_HINTS["max_batch"]
    with pytest.raises(InvalidInput) as caught:
        read_profile({**BASE, "max_batch": 0})
    assert caught.value.hint == r.json()["hint"]


FLEET = {"choices": [{"instance_type": "p3.2xlarge", "count": 1, "batch": 16}]}
SAMPLE = {
    "provider": "testbed",
    "instance_type": "tb.small",
    "backend": "gloo",
    "buffer_bytes": 1024,
    "world_size": 2,
    "time_s": 0.001,
}
EC2 = {"image_id": "ami-12c6146b", "results_url": "http://10.0.0.5:8000", "security_group_ids": ["x"]}
NESTED = [
    # (path, its body model, body, field, the model whose FIELD_HINTS hold the field's hint, its key)
    (
        "/v1/probe-results",
        ProbeResultsIn,
        {"samples": [SAMPLE, {**SAMPLE, "backend": "ucx"}]},
        "samples[1].backend",
        ProbeSampleDocument,
        "backend",
    ),
    (
        "/v1/plans",
        PlanRequest,
        {"profiles": [BASE, {**BASE, "max_batch": 0}], "global_batch": 32, "iterations": 100},
        "profiles[1].max_batch",
        ProfileIn,
        "max_batch",
    ),
    (
        "/v1/predictions",
        PredictionRequest,
        {
            "profiles": [BASE],
            "iterations": 100,
            "configs": [FLEET, {"choices": [{**FLEET["choices"][0], "batch": 0}]}],
        },
        "configs[1].choices[0].batch",
        FleetChoiceIn,
        "batch",
    ),
    (
        "/v1/profile-jobs/1/results",
        ProfileResultIn,
        {"instance_type": "tb.small", "profile": {**BASE, "straggler_cv": 9}},
        "profile.straggler_cv",
        ProfileIn,
        "straggler_cv",
    ),
    (
        "/v1/probe-jobs",
        ProbeJobIn,
        {"provider": "ec2", "instance_type": "g4dn.xlarge", "node_counts": [2], "ec2": EC2},
        "ec2.security_group_ids[0]",
        ProbeJobDocument,
        "ec2.security_group_ids",
    ),
]


@pytest.mark.parametrize(
    ("path", "request_model", "body", "field", "model", "key"), NESTED, ids=[n[3] for n in NESTED]
)
def test_a_nested_field_gets_the_hint_of_its_own_model(
    client: TestClient,
    write_headers: dict[str, str],
    path: str,
    request_model: type[BaseModel],
    body: dict[str, Any],
    field: str,
    model: Any,
    key: str,
) -> None:
    """A 422 on a field inside a list or an inner object (a probe-results body's `samples[1].backend`, an
    inline profile's `max_batch` in a plan, `configs[1].choices[0].batch` of a sweep, a job's
    `ec2.security_group_ids[0]`) carried the generic "correct the named field; see /docs" although the
    field's model states its own hint: hints were looked up by the body's top-level field only. The
    location is now walked to the innermost model with hints, and a CLI file of the same request
    (parse_request, as `srift plan`/`srift predict` read one) gets the same hint."""
    r = client.post(path, json=body, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert r.json()["hint"] == model.FIELD_HINTS[key], r.text
    with pytest.raises(InvalidInput) as caught:
        parse_request(request_model, body)
    assert caught.value.field == field and caught.value.hint == model.FIELD_HINTS[key]
