"""POST/GET /v1/probe-jobs and /v1/profile-jobs, and results posted with a job's token."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from srift.api.schemas.jobs import ProbeJobIn, ProfileJobIn
from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import transaction
from srift.db.tables import Job, ProbeSample
from srift.errors import InvalidInput
from srift.jobs.spec import SUBNET_ID, parse_probe_job
from srift.jobs.store import create_job
from srift.settings import Settings

GOOD = {
    "provider": "testbed",
    "instance_type": "tb.small",
    "node_counts": [2, 4],
    "sizes": [4, 1024],
    "repeats": 3,
}


def _sample(job: dict[str, Any] | None = None, *, size: int = 1024, repeat: int = 0) -> dict[str, Any]:
    return {
        "run_id": "manual-1",
        "provider": "testbed",
        "region": "local",
        "instance_type": "tb.small",
        "backend": "gloo",
        "buffer_bytes": size,
        "world_size": 2,
        "nodes": 2,
        "ranks_per_node": 1,
        "time_s": 0.001 * (repeat + 1),
        "repeat": repeat,
    }


def _submit(
    client: TestClient, headers: dict[str, str], body: dict[str, Any], *, path: str = "/v1/probe-jobs"
) -> dict[str, Any]:
    r = client.post(path, json=body, headers=headers)
    assert r.status_code == 201, r.text
    data: dict[str, Any] = r.json()
    return data


def _samples(session: Session, job_id: int | None = None) -> int:
    query = select(func.count()).select_from(ProbeSample)
    if job_id is not None:
        query = query.where(ProbeSample.job_id == job_id)
    return int(session.scalar(query) or 0)


@pytest.mark.usefixtures("testbed_types")
def test_submit_returns_a_queued_job_and_its_token_once(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    job = _submit(client, write_headers, GOOD)
    assert job["state"] == "queued" and job["kind"] == "probe" and job["token"].startswith("srift_job_")
    assert job["request"]["node_counts"] == [2, 4] and job["request"]["sizes"] == [4, 1024]
    shown = client.get(f"/v1/probe-jobs/{job['id']}").json()
    assert shown["state"] == "queued" and "token" not in shown
    listed = client.get("/v1/probe-jobs").json()
    assert listed["total"] == 1 and listed["jobs"][0]["id"] == job["id"]
    assert client.get("/v1/probe-jobs?kind=profile").json()["total"] == 0
    assert client.get("/v1/probe-jobs/999").status_code == 404


@pytest.mark.usefixtures("testbed_types")
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"node_counts": [1]}, "node_counts[0]"),
        ({"node_counts": [2, 0]}, "node_counts[1]"),
        ({"sizes": [4, 0]}, "sizes[1]"),
        ({"sizes": [-8]}, "sizes[0]"),
        ({"sizes": [6]}, "sizes[0]"),
        ({"repeats": 0}, "repeats"),
        ({"node_counts": [40]}, "node_counts[0]"),
        ({"node_counts": [1, 2], "ranks_per_node": 1, "sizes": [4] * 3}, "node_counts[0]"),
        ({"provider": "local", "ranks_per_node": 2}, "ranks_per_node"),
        ({"backend": "nccl"}, "backend"),
        ({"testbed_prefix": "Bad!"}, "testbed_prefix"),
        ({"provider": "local", "testbed_prefix": "tb1"}, "testbed_prefix"),
        ({"ec2": {"image_id": "ami-12c6146b", "results_url": "http://10.0.0.5:8000"}}, "ec2"),
        ({"ec2": {"image_id": "ami-12c6146b"}}, "ec2"),  # not its missing results_url: ec2 is the mistake
        ({"provider": "local", "ec2": {}}, "ec2"),
        ({"repeats": 3.5}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"instance_type": "   "}, "instance_type"),
        ({"sizes": list(range(4, 4 * 600, 4)), "node_counts": [2, 3]}, "grid"),
    ],
)
def test_bad_probe_jobs_are_refused_naming_the_field(
    client: TestClient, write_headers: dict[str, str], session: Session, change: dict[str, Any], field: str
) -> None:
    r = client.post("/v1/probe-jobs", json={**GOOD, **change}, headers=write_headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert r.json()["hint"]
    with pytest.raises(InvalidInput) as caught:
        parse_probe_job({**GOOD, **change})
    assert caught.value.field == field and caught.value.hint
    assert session.scalar(select(func.count()).select_from(Job)) == 0


@pytest.mark.usefixtures("testbed_types")
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"instance_type": "tb.huge"}, "instance_type"),
        (
            {
                "provider": "ec2",
                "instance_type": "tb.small",
                "ec2": {"image_id": "ami-12c6146b", "results_url": "http://10.0.0.5:8000"},
            },
            "instance_type",
        ),
    ],
)
def test_probe_jobs_naming_types_the_catalog_lacks_are_not_found(
    client: TestClient, write_headers: dict[str, str], session: Session, change: dict[str, Any], field: str
) -> None:
    r = client.post("/v1/probe-jobs", json={**GOOD, **change}, headers=write_headers)
    assert r.status_code == 404, r.text
    assert r.json()["field"] == field
    assert session.scalar(select(func.count()).select_from(Job)) == 0


def test_job_documents_take_whole_numbers_one_way() -> None:
    """3.0 is the integer 3 here as in every document; 3.5, "3" and true are not integers."""
    base = {"provider": "local", "instance_type": "local", "node_counts": [2.0], "sizes": [4096.0]}
    spec = parse_probe_job({**base, "repeats": 3.0})
    assert spec.repeats == 3 and spec.node_counts == (2,) and spec.sizes == (4096,)
    for bad in (3.5, "3", True):
        with pytest.raises(InvalidInput) as caught:
            parse_probe_job({**base, "repeats": bad})
        assert caught.value.field == "repeats"


@pytest.mark.usefixtures("aws_catalog")
def test_ec2_jobs_are_checked_against_instance_and_cost_caps(
    client: TestClient, write_headers: dict[str, str], ec2_options: dict[str, Any]
) -> None:
    EC2_OPTIONS = ec2_options
    base = {"provider": "ec2", "instance_type": "g4dn.xlarge", "node_counts": [2, 4], "sizes": [4]}
    too_many = client.post(
        "/v1/probe-jobs", json={**base, "ec2": {**EC2_OPTIONS, "max_instances": 3}}, headers=write_headers
    )
    assert too_many.status_code == 422 and too_many.json()["field"] == "node_counts"
    costly = client.post(
        "/v1/probe-jobs",
        json={**base, "ec2": {**EC2_OPTIONS, "max_cost_usd": 1.0, "timeout_s": 3600}},
        headers=write_headers,
    )
    assert costly.status_code == 409 and costly.json()["field"] == "ec2.max_cost_usd"
    assert "$2.10" in costly.json()["detail"]
    missing = client.post("/v1/probe-jobs", json=base, headers=write_headers)
    assert missing.status_code == 422 and missing.json()["field"] == "ec2"
    ok = client.post(
        "/v1/probe-jobs", json={**base, "ec2": {**EC2_OPTIONS, "max_cost_usd": 5.0}}, headers=write_headers
    )
    assert ok.status_code == 201, ok.text


@pytest.mark.usefixtures("testbed_types")
def test_writes_need_a_write_token(client: TestClient) -> None:
    assert client.post("/v1/probe-jobs", json=GOOD).status_code == 401
    assert client.post("/v1/probe-results", json={"samples": [_sample()]}).status_code == 401


@pytest.mark.usefixtures("testbed_types")
def test_results_need_the_jobs_own_token(
    client: TestClient, write_headers: dict[str, str], session: Session
) -> None:
    first = _submit(client, write_headers, GOOD)
    second = _submit(client, write_headers, GOOD)
    body = {"job_id": first["id"], "samples": [_sample()]}
    assert client.post("/v1/probe-results", json=body).status_code == 401
    unknown = {"Authorization": "Bearer srift_job_notarealtoken"}
    assert client.post("/v1/probe-results", json=body, headers=unknown).status_code == 401
    other = {"Authorization": f"Bearer {second['token']}"}
    forbidden = client.post("/v1/probe-results", json=body, headers=other)
    assert forbidden.status_code == 403 and forbidden.json()["field"] == "job_id"
    assert _samples(session) == 0


@pytest.mark.usefixtures("testbed_types")
def test_results_with_the_job_token_are_stored_once_and_finish_a_queued_job(
    client: TestClient, write_headers: dict[str, str], session: Session
) -> None:
    job = _submit(client, write_headers, GOOD)
    own = {"Authorization": f"Bearer {job['token']}"}
    staged = client.post(
        "/v1/probe-results",
        json={"job_id": job["id"], "samples": [_sample(repeat=0), _sample(repeat=1)], "final": False},
        headers=own,
    )
    assert staged.status_code == 200 and staged.json()["staged"] == 2
    assert _samples(session, job["id"]) == 0
    final = client.post(
        "/v1/probe-results", json={"job_id": job["id"], "samples": [_sample(repeat=2)]}, headers=own
    ).json()
    assert final == {"parsed": 3, "stored": 3, "staged": 0, "job_state": "succeeded"}
    session.expire_all()
    assert _samples(session, job["id"]) == 3
    again = client.post("/v1/probe-results", json={"job_id": job["id"], "samples": [_sample()]}, headers=own)
    assert again.status_code == 403
    shown = client.get(f"/v1/probe-jobs/{job['id']}").json()
    assert shown["state"] == "succeeded" and shown["result"]["samples_stored"] == 3


@pytest.mark.usefixtures("testbed_types", "aws_catalog")
@pytest.mark.parametrize(
    ("change", "field", "asked"),
    [
        ({"provider": "aws", "region": "us-east-1", "instance_type": "g4dn.xlarge"}, "provider", "'testbed'"),
        ({"instance_type": "tb.large"}, "instance_type", "'tb.small'"),
        ({"world_size": 3, "nodes": 3}, "nodes", "one of [2, 4]"),
        ({"world_size": 4, "nodes": 2, "ranks_per_node": 2}, "world_size", "2 nodes × 1 rank(s) per node"),
        ({"backend": "nccl"}, "backend", "'gloo'"),
        ({"collective": "all_gather"}, "collective", "'allreduce'"),
    ],
)
@pytest.mark.parametrize("final", [True, False])
def test_samples_of_another_probe_are_refused_for_the_job(
    client: TestClient,
    write_headers: dict[str, str],
    session: Session,
    change: dict[str, Any],
    field: str,
    asked: str,
    final: bool,
) -> None:
    """A job's token posting samples of another provider, type, fleet, backend or collective (an aws
    g4dn.xlarge sample for a tb.small job, an all_gather sample for an allreduce job, was stored and finished
    the job) is a 409 naming the sample's field and what the job
    asked; nothing is staged or stored and the job stays queued."""
    job = _submit(client, write_headers, GOOD)
    own = {"Authorization": f"Bearer {job['token']}"}
    samples = [_sample(), {**_sample(repeat=1), **change}]
    r = client.post(
        "/v1/probe-results", json={"job_id": job["id"], "samples": samples, "final": final}, headers=own
    )
    assert r.status_code == 409, r.text
    assert r.json()["field"] == f"samples[1].{field}"
    assert f"the probe job asked for {asked}" in r.json()["detail"]
    session.expire_all()
    assert _samples(session) == 0
    shown = client.get(f"/v1/probe-jobs/{job['id']}").json()
    assert shown["state"] == "queued" and "staged" not in (shown["result"] or {})
    ok = client.post("/v1/probe-results", json={"job_id": job["id"], "samples": [_sample()]}, headers=own)
    assert ok.json()["stored"] == 1 and ok.json()["job_state"] == "succeeded"


@pytest.mark.usefixtures("testbed_types")
def test_bad_samples_name_the_field_and_store_nothing(
    client: TestClient, write_headers: dict[str, str], session: Session
) -> None:
    bad = [_sample(), {**_sample(repeat=1), "world_size": 1}]
    r = client.post("/v1/probe-results", json={"samples": bad}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "samples[1].world_size"
    unknown = client.post(
        "/v1/probe-results",
        json={"samples": [{**_sample(), "instance_type": "tb.nope"}]},
        headers=write_headers,
    )
    assert unknown.status_code == 404 and unknown.json()["field"] == "samples[0].instance_type"
    # A provider the catalog lacks is named as the provider (it was called an unknown instance type).
    elsewhere = [_sample(), {**_sample(repeat=1), "provider": "ibm"}]
    r = client.post("/v1/probe-results", json={"samples": elsewhere}, headers=write_headers)
    assert r.status_code == 404 and r.json()["field"] == "samples[1].provider", r.text
    assert r.json()["detail"] == "samples[1]: unknown provider 'ibm'"
    assert _samples(session) == 0
    ok = client.post("/v1/probe-results", json={"samples": [_sample()]}, headers=write_headers)
    assert ok.json()["stored"] == 1
    assert (
        client.post("/v1/probe-results", json={"samples": [_sample()]}, headers=write_headers).json()[
            "stored"
        ]
        == 0
    )


RING = "tb.large+tb.small"


@pytest.mark.usefixtures("testbed_types")
def test_a_mixed_rings_samples_are_checked_by_their_member_types(
    client: TestClient, write_headers: dict[str, str], session: Session, db_url: str
) -> None:
    """A mixed ring's samples carry the ring's name ("tb.large+tb.small", srift.bandwidth.mixed), which is
    no catalog type: POST /v1/probe-results answered 404 "unknown instance type 'tb.large+tb.small'" to
    them, with a write token and for a job that asked for the ring alike (`srift probe import` stores
    them). Each member type is now looked up instead; an unknown member is a 404 naming it, nothing stored."""
    ring = [{**_sample(repeat=k), "instance_type": RING} for k in range(2)]
    unknown = [ring[0], {**ring[1], "instance_type": "tb.nope+tb.small"}]
    refused = client.post("/v1/probe-results", json={"samples": unknown}, headers=write_headers)
    assert refused.status_code == 404 and refused.json()["field"] == "samples[1].instance_type", refused.text
    assert (
        "'tb.nope'" in refused.json()["detail"]
        and "mixed ring 'tb.nope+tb.small'" in refused.json()["detail"]
    )
    assert _samples(session) == 0
    stored = client.post("/v1/probe-results", json={"samples": ring}, headers=write_headers)
    assert stored.status_code == 200 and stored.json()["stored"] == 2, stored.text
    # A job stored for the ring (the API queues none: see the next test) takes the ring's samples.
    with transaction(db_url) as tx:
        job, token = create_job(session=tx, spec=parse_probe_job({**GOOD, "instance_type": RING}))
        job_id = job.id
    own = {"Authorization": f"Bearer {token}"}
    again = [{**sample, "run_id": "by-hand-2"} for sample in ring]
    answer = client.post("/v1/probe-results", json={"job_id": job_id, "samples": again}, headers=own)
    assert answer.status_code == 200 and answer.json()["job_state"] == "succeeded", answer.text
    session.expire_all()
    assert _samples(session, job_id) == 2


@pytest.mark.usefixtures("testbed_types")
@pytest.mark.parametrize("provider", ["testbed", "local"])
def test_a_probe_job_for_a_mixed_ring_is_refused_saying_how_to_store_a_ring(
    client: TestClient, write_headers: dict[str, str], provider: str
) -> None:
    """Every backend runs a probe job on hosts of its one type: a testbed job for a ring was a 404 for an
    unknown instance type (and a local one was queued, to label this machine's samples as the ring's). It
    is a 422 on instance_type that says a job runs one type and how a ring's samples are stored."""
    r = client.post(
        "/v1/probe-jobs", json={**GOOD, "provider": provider, "instance_type": RING}, headers=write_headers
    )
    assert r.status_code == 422 and r.json()["field"] == "instance_type", r.text
    assert "mixed ring of tb.large, tb.small" in r.json()["detail"]
    assert "no job_id" in r.json()["hint"] and f"--instance-type {RING}" in r.json()["hint"]
    assert client.get("/v1/probe-jobs").json()["total"] == 0


def test_the_probe_job_schema_states_one_type() -> None:
    """The schema of a probe job's instance_type refuses what the server refuses (a ring, a blank name) and
    keeps what it takes (blanks around a type are stripped): a fuzzer's schema-valid ring was a 422."""
    pattern = ProbeJobIn.model_json_schema()["properties"]["instance_type"]["pattern"]
    for name, kept in [(RING, False), (" tb.large + tb.small", False), (" ", False), (" tb.large ", True)]:
        assert bool(re.search(pattern, name)) is kept, name


@pytest.mark.usefixtures("testbed_types")
def test_profile_jobs_validate_models_and_types(client: TestClient, write_headers: dict[str, str]) -> None:
    body = {
        "provider": "testbed",
        "instance_types": ["tb.small", "tb.large"],
        "model": "srift.profiling.testmodels:cnn",
        "input": "srift.profiling.testmodels:cnn_input",
    }
    created = client.post("/v1/profile-jobs", json=body, headers=write_headers)
    assert created.status_code == 201 and created.json()["kind"] == "profile"
    bad_type = client.post(
        "/v1/profile-jobs", json={**body, "instance_types": ["tb.small", "x"]}, headers=write_headers
    )
    assert bad_type.status_code == 404 and bad_type.json()["field"] == "instance_types[1]"
    bad_model = client.post(
        "/v1/profile-jobs", json={**body, "model": "not a factory"}, headers=write_headers
    )
    ec2_off_ec2 = client.post(
        "/v1/profile-jobs", json={**body, "ec2": {"subnet_id": "x"}}, headers=write_headers
    )
    assert ec2_off_ec2.status_code == 422 and ec2_off_ec2.json()["field"] == "ec2", ec2_off_ec2.text
    assert "provider is testbed" in ec2_off_ec2.json()["detail"]
    assert bad_model.status_code == 422 and bad_model.json()["field"] == "model"
    assert client.get(f"/v1/profile-jobs/{created.json()['id']}").json()["state"] == "queued"
    assert client.get(f"/v1/probe-jobs/{created.json()['id']}").json()["kind"] == "profile"
    _submit(client, write_headers, GOOD)  # a probe job: in the queue, not among the profile jobs
    listed = client.get("/v1/profile-jobs").json()
    assert listed["total"] == 1 and [j["id"] for j in listed["jobs"]] == [created.json()["id"]]
    assert client.get("/v1/profile-jobs?state=running").json() == {"jobs": [], "total": 0}
    assert client.get("/v1/probe-jobs").json()["total"] == 2


@pytest.mark.usefixtures("testbed_types")
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"run_id": "a\x00b"}, "samples[0].run_id"),
        ({"world_size": 2**40, "nodes": 2**40}, "samples[0].world_size"),
    ],
)
def test_samples_the_database_cannot_hold_are_refused(
    client: TestClient, write_headers: dict[str, str], change: dict[str, Any], field: str
) -> None:
    r = client.post("/v1/probe-results", json={"samples": [{**_sample(), **change}]}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == field


def _profile_document() -> dict[str, Any]:
    return {
        "model": "api-mlp",
        "accelerator": "tb.small cpu",
        "max_batch": 64,
        "forward": {"batches": [1, 32, 64], "times_s": [0.001, 0.01, 0.02]},
        "backward": {"batches": [1, 32, 64], "times_s": [0.002, 0.02, 0.04]},
        "layers": [{"name": "fc", "grad_bytes": 4096, "ready_frac": 1.0}],
        "straggler_cv": 0.05,
    }


@pytest.mark.usefixtures("testbed_types")
def test_profile_results_are_typed_and_a_type_the_job_did_not_ask_for_is_a_conflict(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    body = {
        "provider": "testbed",
        "instance_types": ["tb.small"],
        "model": "srift.profiling.testmodels:cnn",
        "input": "srift.profiling.testmodels:cnn_input",
    }
    job = _submit(client, write_headers, body, path="/v1/profile-jobs")
    url = f"/v1/profile-jobs/{job['id']}/results"
    other = client.post(
        url, json={"instance_type": "tb.large", "profile": _profile_document()}, headers=write_headers
    )
    assert other.status_code == 409 and other.json()["field"] == "instance_type", other.text
    junk = client.post(
        url, json={"instance_type": "tb.small", "profile": {"model": 3}}, headers=write_headers
    )
    assert junk.status_code == 422 and junk.json()["field"].startswith("profile."), junk.text
    neither = client.post(url, json={"instance_type": "tb.small"}, headers=write_headers)
    assert neither.status_code == 422 and neither.json()["field"] == "profile", neither.text
    ok = client.post(
        url, json={"instance_type": "tb.small", "profile": _profile_document()}, headers=write_headers
    )
    assert ok.status_code == 200 and ok.json()["profile_id"] is not None, ok.text
    schema = client.get("/openapi.json").json()
    assert "409" in schema["paths"]["/v1/profile-jobs/{job_id}/results"]["post"]["responses"]
    body_schema = schema["components"]["schemas"]["ProfileResultIn"]
    assert body_schema["properties"]["profile"]["anyOf"][0] == {"$ref": "#/components/schemas/ProfileIn"}
    assert len(body_schema["anyOf"]) == 2


def _documented_job_bodies() -> list[dict[str, Any]]:
    """The probe and profile job bodies docs/jobs.md shows (its ```json blocks that name a provider)."""
    text = (Path(__file__).parents[2] / "docs" / "jobs.md").read_text()
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, flags=re.S)]
    return [b for b in blocks if "provider" in b]


@pytest.mark.usefixtures("testbed_types")
def test_the_job_bodies_docs_jobs_md_shows_are_accepted_as_written(
    client: TestClient, settings: Settings, write_headers: dict[str, str]
) -> None:
    """A user pastes the documented bodies: the EC2 one used to carry `"sg-..."`, which the schema's
    `^[a-z]+-[0-9a-f]{8,32}$` refuses (422 on ec2.security_group_ids[0]). The testbed bodies are posted
    against the shipped example spec's types (what `srift testbed up` registers)."""
    bodies = _documented_job_bodies()
    assert {b["provider"] for b in bodies} == {"testbed", "ec2"}
    for body in bodies:
        schema = ProfileJobIn if "instance_types" in body else ProbeJobIn
        schema.model_validate(body)
    load_shipped_catalog(settings)  # the EC2 body's type and price
    for body in bodies:
        route = "/v1/profile-jobs" if "instance_types" in body else "/v1/probe-jobs"
        r = client.post(route, json=body, headers=write_headers)
        assert r.status_code == 201, (body, r.text)


def test_an_ec2_subnet_id_has_the_aws_form(
    client: TestClient,
    write_headers: dict[str, str],
    session: Session,
    settings: Settings,
    ec2_options: dict[str, Any],
) -> None:
    """`ec2.subnet_id` took any non-blank text (`"subnet-..."`, `"my subnet"`), unlike image_id and
    security_group_ids, and failed only when EC2 refused the launch; the schema now states AWS's form."""
    subnet = client.get("/openapi.json").json()["components"]["schemas"]["Ec2Document"]["properties"][
        "subnet_id"
    ]
    assert {"type": "string", "pattern": SUBNET_ID} in subnet["anyOf"], subnet
    base = {"provider": "ec2", "instance_type": "g4dn.xlarge", "node_counts": [2], "sizes": [4]}
    for bad in ("subnet-...", "my subnet", "subnet-0123456789abcdef", "SUBNET-01234567", "sg-01234567"):
        r = client.post(
            "/v1/probe-jobs", json={**base, "ec2": {**ec2_options, "subnet_id": bad}}, headers=write_headers
        )
        assert r.status_code == 422 and r.json()["field"] == "ec2.subnet_id", (bad, r.text)
        with pytest.raises(InvalidInput) as caught:
            parse_probe_job({**base, "ec2": {**ec2_options, "subnet_id": bad}})
        assert caught.value.field == "ec2.subnet_id" and "subnet-0123456789abcdef0" in caught.value.hint
    assert session.scalar(select(func.count()).select_from(Job)) == 0
    load_shipped_catalog(settings)
    for good in ("subnet-0123456789abcdef0", "subnet-12c6146b"):
        ok = client.post(
            "/v1/probe-jobs", json={**base, "ec2": {**ec2_options, "subnet_id": good}}, headers=write_headers
        )
        assert ok.status_code == 201, (good, ok.text)


@pytest.mark.usefixtures("testbed_types")
@pytest.mark.parametrize(
    ("change", "field", "hint"),
    [
        ({"sizes": [6]}, "sizes[0]", "multiples of 4"),
        ({"node_counts": [0]}, "node_counts[0]", "hosts per run"),
        ({"testbed_prefix": "Bad!"}, "testbed_prefix", "prefix of a testbed"),
        (
            {"provider": "ec2", "ec2": {"image_id": "ami-xyz", "results_url": "http://10.0.0.5:8000"}},
            "ec2.image_id",
            "ami-0123456789abcdef0",
        ),
    ],
)
def test_the_api_gives_a_job_field_the_hint_the_cli_gives(
    client: TestClient, write_headers: dict[str, str], change: dict[str, Any], field: str, hint: str
) -> None:
    """A schema-level 422 on a job request carried the generic "correct the named field; see /docs" while
    the CLI read the same field's own hint (srift.jobs.spec's hints); both now read the model's
    FIELD_HINTS."""
    r = client.post("/v1/probe-jobs", json={**GOOD, **change}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    with pytest.raises(InvalidInput) as caught:
        parse_probe_job({**GOOD, **change})
    assert caught.value.field == field and hint in caught.value.hint
    assert r.json()["hint"] == caught.value.hint
    query = client.get("/v1/probe-jobs", params={"limit": 0})
    assert query.json()["field"] == "limit" and query.json()["hint"] == "give a number ≥ 1"


@pytest.mark.usefixtures("testbed_types")
def test_a_rings_types_in_either_order_store_into_one_ring_and_find_it(
    client: TestClient, write_headers: dict[str, str], session: Session, db_url: str
) -> None:
    """`tb.small+tb.large` and `tb.large+tb.small` were stored as two rings (two names, two fingerprints for
    one measurement). Both orders now store under the ring's one spelling, its types sorted: posting the
    same samples in the other order adds nothing, and the curves and a job that names the ring in the
    other order find them."""
    ring = [{**_sample(repeat=k), "instance_type": "tb.small+tb.large"} for k in range(2)]
    first = client.post("/v1/probe-results", json={"samples": ring}, headers=write_headers)
    assert first.status_code == 200 and first.json()["stored"] == 2, first.text
    flipped = [{**sample, "instance_type": RING} for sample in ring]
    again = client.post("/v1/probe-results", json={"samples": flipped}, headers=write_headers)
    assert again.status_code == 200 and again.json()["stored"] == 0, again.text
    assert set(session.scalars(select(ProbeSample.instance_type))) == {RING}
    for name in ("tb.small+tb.large", RING):
        curves = client.get(
            "/v1/bandwidth-models/active/curves",
            params={"provider": "testbed", "instance_type": name, "world_size": 2},
        )
        assert curves.status_code == 200, curves.text
        assert curves.json()["instance_type"] == RING and len(curves.json()["samples"]) == 2
    with transaction(db_url) as tx:  # a job stored with the ring's other spelling takes the ring's samples
        job, token = create_job(
            session=tx, spec=parse_probe_job({**GOOD, "instance_type": "tb.small+tb.large"})
        )
        job_id = job.id
    own = {"Authorization": f"Bearer {token}"}
    by_hand = [{**sample, "run_id": "by-hand-3"} for sample in flipped]
    answer = client.post("/v1/probe-results", json={"job_id": job_id, "samples": by_hand}, headers=own)
    assert answer.status_code == 200 and answer.json()["stored"] == 2, answer.text


@pytest.mark.usefixtures("testbed_types")
def test_a_ring_naming_a_type_twice_is_a_422_naming_the_sample_and_the_schema_says_so(
    client: TestClient, write_headers: dict[str, str], session: Session
) -> None:
    samples = [_sample(), {**_sample(repeat=1), "instance_type": "tb.small+tb.large+tb.small"}]
    r = client.post("/v1/probe-results", json={"samples": samples}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "samples[1].instance_type", r.text
    assert "'tb.small' more than once" in r.json()["detail"]
    assert "tb.large+tb.small" in r.json()["hint"]
    assert _samples(session) == 0
    described = client.get("/openapi.json").json()["components"]["schemas"]["ProbeSampleDocument"]
    text = described["properties"]["instance_type"]["description"]
    assert "each once" in text and "stored sorted" in text and "named twice is refused" in text
