"""Probe and profile jobs (queued for `srift worker`) and the results their hosts post back."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, status

from srift.api.auth import RequireJobOrWrite, RequireRead, RequireWrite
from srift.api.deps import Offset, SessionDep, id_path
from srift.api.limits import error_response
from srift.api.schemas.jobs import (
    JobCreated,
    JobList,
    JobOut,
    ProbeJobIn,
    ProbeResultsIn,
    ProbeResultsOut,
    ProfileJobIn,
    ProfileResultIn,
    ProfileResultOut,
)
from srift.domain.states import JobKind, JobState
from srift.errors import InvalidInput
from srift.services import jobs as service
from srift.services.jobs import job_document

router = APIRouter(tags=["jobs"])

JobId = Annotated[int, id_path("job id")]
StateQuery = Annotated[
    JobState | None, Query(description="only jobs in this state (queued, running, succeeded, failed)")
]
KindQuery = Annotated[JobKind | None, Query(description="only probe or only profile jobs")]
Limit = Annotated[int, Query(ge=1, le=500, description="page size")]


AUTH: dict[int | str, dict[str, Any]] = {
    401: error_response("a token is required, and missing or unknown"),
    403: error_response("the token may not do this"),
}
SUBMIT: dict[int | str, dict[str, Any]] = {
    **AUTH,
    404: error_response("an instance type (or region, or price) the catalog does not have; `field` names it"),
    409: error_response(
        "ec2.max_cost_usd is below what the catalog prices the job at (price × instances × timeout)"
    ),
    422: error_response(
        "invalid job: world size < 2, bad sizes, caps exceeded (the grid size, ec2.max_instances), a mixed "
        "ring (`a+b`) as a probe job's instance_type (a job runs one type); `field` names it"
    ),
}
READ: dict[int | str, dict[str, Any]] = {401: AUTH[401], 403: AUTH[403], 404: error_response("no such job")}


@router.post("/probe-jobs", status_code=status.HTTP_201_CREATED, response_model=JobCreated, responses=SUBMIT)
def create_probe_job(body: ProbeJobIn, session: SessionDep, _: RequireWrite) -> Any:
    """Queue an allreduce probe job; `srift worker` runs it and stores its samples.

    The answer holds the job's token once: it lets whoever runs the probe post the samples to
    `POST /v1/probe-results`. Example: `{"provider": "testbed", "instance_type": "tb.small",
    "node_counts": [2, 4], "sizes": [4, 65536, 4194304], "repeats": 5}`.
    """
    return service.submit_job(session=session, spec=body.to_domain())


@router.get("/probe-jobs", response_model=JobList, responses=AUTH)
def list_probe_jobs(
    session: SessionDep,
    _: RequireRead,
    kind: KindQuery = None,
    state: StateQuery = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Any:
    """The job queue, newest first: probe and profile jobs (or only `kind`)."""
    return service.job_page(session=session, kind=kind, state=state, limit=limit, offset=offset)


@router.get("/probe-jobs/{job_id}", response_model=JobOut, responses=READ)
def get_probe_job(job_id: JobId, session: SessionDep, _: RequireRead) -> Any:
    """One job of the queue (probe or profile): state, attempts, log, and what it stored."""
    return job_document(service.get_job(session=session, job_id=job_id))


@router.post(
    "/profile-jobs", status_code=status.HTTP_201_CREATED, response_model=JobCreated, responses=SUBMIT
)
def create_profile_job(body: ProfileJobIn, session: SessionDep, _: RequireWrite) -> Any:
    """Queue a profile job: `srift profile` on a testbed host or EC2 instance of each type.

    Example: `{"provider": "testbed", "instance_types": ["tb.small", "tb.large"],
    "model": "srift.profiling.testmodels:cnn", "input": "srift.profiling.testmodels:cnn_input"}`.
    """
    return service.submit_job(session=session, spec=body.to_domain())


@router.get("/profile-jobs", response_model=JobList, responses=AUTH)
def list_profile_jobs(
    session: SessionDep, _: RequireRead, state: StateQuery = None, limit: Limit = 100, offset: Offset = 0
) -> Any:
    """Profile jobs, newest first."""
    return service.job_page(session=session, kind=JobKind.PROFILE, state=state, limit=limit, offset=offset)


@router.get("/profile-jobs/{job_id}", response_model=JobOut, responses=READ)
def get_profile_job(job_id: JobId, session: SessionDep, _: RequireRead) -> Any:
    """One profile job, with the ids of the profiles it stored."""
    return job_document(service.get_job(session=session, job_id=job_id, kind=JobKind.PROFILE))


@router.post(
    "/probe-results",
    response_model=ProbeResultsOut,
    responses={
        **AUTH,
        404: error_response(
            "no such probe job, or a sample's provider or instance type is not in the catalog (a mixed "
            "ring's: each of its types); `field` names the sample's field"
        ),
        409: error_response(
            "a sample does not answer the job: its provider, instance type, nodes or world size is not what "
            "the job asked; `field` names it (`samples[i].instance_type`), nothing is stored"
        ),
        422: error_response("a sample is invalid; `field` names it"),
    },
)
def post_probe_results(body: ProbeResultsIn, session: SessionDep, caller: RequireJobOrWrite) -> Any:
    """Store probe samples: with a job's token for that job (401 without a valid token, 403 for another
    job's), or with a write token. A job's samples are stored all at once with its final batch.

    Samples posted for a job must answer it: the job's provider (`aws` for an ec2 job), its instance
    type, `nodes` among its `node_counts`, and `world_size` = `nodes` × its `ranks_per_node`; any other is
    a 409 naming `samples[i].<field>` and what the job asked, and nothing of the batch is staged or stored.
    A mixed ring's samples carry the ring's name (`tb.large+tb.small`: its types joined by "+"), stored
    with its types sorted, so `tb.small+tb.large` is the same ring; a type named twice is a 422 naming
    `samples[i].instance_type`. Each of its types must be in the catalog, not the name. A probe job runs
    one type, so a ring's samples are posted with a write token and no `job_id` (or imported with
    `srift probe import`)."""
    caller.authorize_job(body.job_id)
    outcome = service.post_probe_results(
        session=session,
        job_id=body.job_id,
        records=[sample.to_record() for sample in body.samples],
        final=body.final,
        error=body.error,
    )
    return {
        "parsed": outcome.parsed,
        "stored": outcome.stored,
        "staged": outcome.staged,
        "job_state": outcome.job_state,
    }


@router.post(
    "/profile-jobs/{job_id}/results",
    response_model=ProfileResultOut,
    responses={
        **AUTH,
        404: error_response("no such profile job"),
        409: error_response("the job did not ask for this instance type"),
        422: error_response("the profile is invalid"),
    },
)
def post_profile_result(
    job_id: JobId, body: ProfileResultIn, session: SessionDep, caller: RequireJobOrWrite
) -> Any:
    """One instance's profile for a profile job (posted by the instance with the job's token)."""
    caller.authorize_job(job_id)
    if body.job_id is not None and body.job_id != job_id:
        caller.authorize_job(body.job_id)
    profile = None
    if body.error is None and body.profile is not None:
        try:
            profile = body.profile.to_profile()
        except InvalidInput as exc:
            field = f"profile.{exc.field}" if exc.field else "profile"
            raise InvalidInput(exc.detail, hint=exc.hint, field=field) from exc
    profile_id, state = service.post_profile_result(
        session=session, job_id=job_id, instance_type=body.instance_type, profile=profile, error=body.error
    )
    return {"profile_id": profile_id, "job_state": state}
