"""Launch files of a stored plan; measured iteration times of training runs; learned corrections."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from srift.api.auth import CallerIdentity, RequireRead, RequireWrite, Scope, _require, bearer_token
from srift.api.deps import SessionDep, id_path
from srift.api.schemas.launch import (
    CorrectionList,
    CorrectionOut,
    CorrectionResetIn,
    IterationsIn,
    IterationsOut,
    LaunchOut,
    RunIterationsOut,
    launch_document,
)
from srift.api.schemas.plans import ErrorOut
from srift.documents import NO_NUL, ONE_LINE
from srift.launch.emit import EmitFormat, LaunchOptions
from srift.services import calibration, training_jobs
from srift.services.launch import emit_plan

router = APIRouter(tags=["launch and calibration"])

_PLAN_ID = id_path()
_JOB_ID = id_path()
_AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "a token is required and missing or invalid"},
    403: {"model": ErrorOut, "description": "the token may not write (or is another run's token)"},
}


@dataclass(frozen=True, slots=True)
class IterationPoster:
    """Who posts a run's iteration times: the run's own token (checked against the run by the route), or
    else the owner of a write token (None: authentication off, where every run is everyone's)."""

    run_token: str | None
    owner: str | None


def _run_or_write(request: Request, session: SessionDep) -> IterationPoster:
    """A run's own token, or a write token and whose it is."""
    plain = bearer_token(request)
    if request.app.state.settings.auth_enabled and training_jobs.is_run_token(plain):
        return IterationPoster(run_token=plain, owner=None)
    token = _require(Scope.WRITE)(request, session)
    return IterationPoster(run_token=None, owner=token.name if token is not None else None)


RunOrWrite = Annotated[IterationPoster, Depends(_run_or_write)]


@router.get(
    "/plans/{plan_id}/launch",
    response_model=LaunchOut,
    responses={
        404: {"model": ErrorOut, "description": "no plan with this id"},
        409: {
            "model": ErrorOut,
            "description": "the plan cannot be launched in this format (SkyPilot launches no testbed VMs)",
        },
    },
)
def launch_files(
    session: SessionDep,
    _: RequireRead,
    caller: CallerIdentity,
    plan_id: int = _PLAN_ID,
    format: EmitFormat = Query(EmitFormat.TORCHRUN, description="torchrun, skypilot or kubernetes"),
    script: str = Query(
        "train.py", min_length=1, max_length=500, pattern=ONE_LINE, description="the training script"
    ),
    master_addr: str | None = Query(
        None, max_length=255, pattern=ONE_LINE, description="node 0's address, when known"
    ),
    image: str | None = Query(
        None, max_length=500, pattern=ONE_LINE, description="kubernetes: the container image"
    ),
    setup: str | None = Query(
        None, max_length=2000, pattern=NO_NUL, description="skypilot, kubernetes: the setup command"
    ),
) -> Any:
    """The plan as launch files: per-VM torchrun lines, SkyPilot tasks or Kubernetes JobSets, each with
    the NCCL and network settings the plan was priced under, commented with the assumption they carry.
    Like GET /v1/plans/{id}, only of a plan this token may read (its own or everyone's)."""
    options = LaunchOptions(script=script, master_addr=master_addr)
    options = replace(options, image=image or options.image, setup=setup or options.setup)
    files = emit_plan(session=session, plan_id=plan_id, viewer=caller.owner, fmt=format, options=options)
    return launch_document(plan_id, format, files)


@router.post(
    "/jobs/{job_id}/iterations",
    response_model=IterationsOut,
    responses={
        **_AUTH,
        404: {"model": ErrorOut, "description": "no run with this id"},
        409: {"model": ErrorOut, "description": "the plan is not one of the run's plans"},
    },
)
def report_iterations(
    body: IterationsIn, session: SessionDep, reporter: RunOrWrite, job_id: int = _JOB_ID
) -> Any:
    """Measured iteration times of a run, with the run's own token (or a write token of the run's owner).
    A step already stored counts once. Progress moves to the last step reported; when the run completes, or
    with `final`, its steps become an observation of the plan's prediction and the corrections are
    refitted."""
    if reporter.run_token is not None:
        training_jobs.check_run_token(session=session, job_id=job_id, plain=reporter.run_token)
    else:
        training_jobs.check_run_reader(session=session, job_id=job_id, viewer=reporter.owner)
    return training_jobs.report_iterations(session=session, job_id=job_id, report=body.to_domain())


@router.get(
    "/jobs/{job_id}/iterations",
    response_model=RunIterationsOut,
    responses={404: {"model": ErrorOut, "description": "no run with this id"}},
)
def run_iterations(session: SessionDep, _: RequireRead, caller: CallerIdentity, job_id: int = _JOB_ID) -> Any:
    """A run's measured iteration times per plan, beside each plan's predicted iteration and band (a run
    this token may read, as GET /v1/jobs/{id})."""
    training_jobs.check_run_reader(session=session, job_id=job_id, viewer=caller.owner)
    return RunIterationsOut(job_id=job_id, series=calibration.run_series(session=session, job_id=job_id))


@router.get("/corrections", response_model=CorrectionList)
def list_corrections(
    session: SessionDep,
    _: RequireRead,
    model: str | None = Query(None, max_length=200, pattern=NO_NUL, description="only this model's"),
) -> Any:
    """The corrections learned from measured runs, per model, instance type and network setting."""
    entries = calibration.list_corrections(session=session, model=model)
    return CorrectionList(corrections=[CorrectionOut.model_validate(e.document()) for e in entries])


@router.post(
    "/corrections/reset",
    response_model=CorrectionList,
    responses={**_AUTH, 404: {"model": ErrorOut, "description": "no such correction"}},
)
def reset_correction(body: CorrectionResetIn, session: SessionDep, _: RequireWrite) -> Any:
    """Forget what the runs so far taught a correction: later predictions start from no correction."""
    entries = calibration.reset_correction(
        session=session, model=body.model, instance_type=body.instance_type, network_key=body.network_key
    )
    return CorrectionList(corrections=[CorrectionOut.model_validate(e.document()) for e in entries])
