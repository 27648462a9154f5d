"""Tracked training runs: POST /v1/jobs, progress, interruptions (re-planning), GET /v1/jobs/{id}."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from srift.api.auth import CallerIdentity, RequireRead, RequireWrite
from srift.api.deps import SessionDep, SettingsDep, id_path
from srift.api.schemas.launch import JobStartOut
from srift.api.schemas.plans import (
    AmendmentIn,
    ErrorOut,
    InterruptionIn,
    InterruptionOut,
    JobCreate,
    PlanOut,
    ProgressIn,
    TrainingJobOut,
)
from srift.domain.records import TrainingRun
from srift.services import plans as plans_service
from srift.services import training_jobs as service

router = APIRouter(tags=["training jobs"])

_AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "a token is required and missing or invalid"},
    403: {"model": ErrorOut, "description": "the token may not write"},
}
_NO_JOB: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut, "description": "no job with this id"}}
_JOB_ID = id_path()


def _replan_errors(*, conflict: str, invalid: str) -> dict[int | str, dict[str, Any]]:
    """The documented errors of a route that re-plans a job: the token's, no such job, `conflict` (409,
    including no plan fitting) and `invalid` (422, a body the route rejects)."""
    return {
        **_AUTH,
        **_NO_JOB,
        409: {"model": ErrorOut, "description": conflict},
        422: {"model": ErrorOut, "description": invalid},
    }


def _owned_job(session: SessionDep, caller: CallerIdentity, job_id: int = _JOB_ID) -> int:
    """The path's job id, once the run is the token's (its plan is the token's or everyone's): 404 else."""
    service.check_run_reader(session=session, job_id=job_id, viewer=caller.owner)
    return job_id


OwnedJob = Annotated[int, Depends(_owned_job)]


def _out(run: TrainingRun) -> TrainingJobOut:
    return TrainingJobOut.model_validate(run, from_attributes=True)


@router.post(
    "/jobs",
    response_model=JobStartOut,
    status_code=201,
    responses={
        **_AUTH,
        404: {"model": ErrorOut, "description": "no plan with this `plan_id`"},
        422: {"model": ErrorOut, "description": "invalid request"},
    },
)
def start_job(body: JobCreate, session: SessionDep, _: RequireWrite, caller: CallerIdentity) -> Any:
    """Start tracking a training run of a stored plan (the token's own or everyone's). The answer carries
    the run's own token, once."""
    plans_service.get_plan_for(session=session, plan_id=body.plan_id, viewer=caller.owner)
    run = service.start_job(session=session, plan_id=body.plan_id)
    return JobStartOut.model_validate(run, from_attributes=True)


@router.get("/jobs/{job_id}", response_model=TrainingJobOut, responses={401: _AUTH[401], **_NO_JOB})
def get_job(session: SessionDep, _: RequireRead, job_id: OwnedJob) -> Any:
    """The job, its plans (the first and each re-plan) and every event."""
    return _out(service.get_run(session=session, job_id=job_id))


@router.post(
    "/jobs/{job_id}/progress",
    response_model=TrainingJobOut,
    responses={
        **_AUTH,
        **_NO_JOB,
        409: {
            "model": ErrorOut,
            "description": "the job has completed, or progress goes backwards or past the job's iterations",
        },
    },
)
def report_progress(body: ProgressIn, session: SessionDep, _: RequireWrite, job_id: OwnedJob) -> Any:
    """Record iterations done, seconds elapsed and money spent so far."""
    return _out(service.record_progress(session=session, job_id=job_id, progress=body.to_domain()))


@router.post(
    "/jobs/{job_id}/interruptions",
    response_model=InterruptionOut,
    responses=_replan_errors(
        conflict="the job has completed, or its current plan runs no (or fewer) such VMs, or no plan for the "
        "rest of the run meets the original limits (error infeasible, saying by how much; the interruption "
        "is still recorded)",
        invalid="invalid report; `field` names it",
    ),
)
def report_interruption(
    body: InterruptionIn, session: SessionDep, settings: SettingsDep, _: RequireWrite, job_id: OwnedJob
) -> Any:
    """Record lost VMs and re-plan the remaining iterations within the remaining time and budget.

    The remaining time is the original deadline minus the elapsed time and `launch_overhead_s`; the lost type
    is not launched again (its surviving VMs may stay).
    """
    run, plan = service.record_interruption(
        session=session, settings=settings, job_id=job_id, interruption=body.to_domain()
    )
    return InterruptionOut(job=_out(run), plan=PlanOut.model_validate(plan.document()))


@router.post(
    "/jobs/{job_id}/amendments",
    response_model=InterruptionOut,
    responses=_replan_errors(
        conflict="the job has completed, or no plan fits the rest of the run under the new limits (error "
        "infeasible, saying by how much; nothing is kept: the job's limits, state and current plan stay as "
        "they were)",
        invalid="invalid amendment; `field` names it",
    ),
)
def amend_job(
    body: AmendmentIn, session: SessionDep, settings: SettingsDep, _: RequireWrite, job_id: OwnedJob
) -> Any:
    """Change the run's time limit, budget or objective and re-plan the rest under them: a job in
    `needs_input` (no plan fitted after an interruption) resumes as `running` with the new plan."""
    run, plan = service.amend(session=session, settings=settings, job_id=job_id, amendment=body.to_domain())
    return InterruptionOut(job=_out(run), plan=PlanOut.model_validate(plan.document()))
