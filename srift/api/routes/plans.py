"""POST /v1/plans (optimize and store a plan) and GET /v1/plans/{id}."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path

from srift.api.auth import CallerIdentity, RequireRead, RequireWrite
from srift.api.deps import SessionDep, SettingsDep
from srift.api.schemas.plans import ErrorOut, PlanOut, PlanRequest
from srift.services import plans as service

router = APIRouter(tags=["plans"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "a token is required and missing or invalid"},
    403: {"model": ErrorOut, "description": "the token may not write"},
}


@router.post(
    "/plans",
    response_model=PlanOut,
    status_code=201,
    responses={
        **_ERRORS,
        404: {
            "model": ErrorOut,
            "description": "what the request names is not stored: a catalog snapshot, provider or region, an "
            "instance type of `availability`, a profile id, or any profile of `model` (`field` names it)",
        },
        409: {
            "model": ErrorOut,
            "description": "a valid request the stored data cannot answer: no configuration meets the limits "
            "with the stored catalog, profiles and models (error infeasible: which limit, by how much, and "
            "the nearest relaxations), or `profile_ids` name profiles of different models",
        },
        422: {"model": ErrorOut, "description": "invalid request; `field` names it"},
    },
)
def create_plan(
    body: PlanRequest, session: SessionDep, settings: SettingsDep, _: RequireWrite, caller: CallerIdentity
) -> Any:
    """Find the cheapest (min_cost) or fastest (min_time) fleet for a model under time and budget limits.

    Returns counts and per-VM batches per instance type, the predicted time and cost with headroom to each
    limit, the CAP and TAP baselines, and every evaluated configuration with its Pareto flag. The plan is the
    token's: a `model` is planned with this token's profiles and everyone's, never another token's.
    """
    owned = {"owner": caller.owner} if caller.owner is not None else {}
    plan = service.create_plan(
        session=session,
        settings=settings,
        query=body.to_domain(owner=caller.owner),
        request_doc={**body.model_dump(mode="json"), **owned},
    )
    # Commit in this thread, right after the insert: get_db's own commit runs one thread-pool round trip
    # later, and SQLite would hold its single write lock (other writers waiting) for all of that.
    session.commit()
    return plan.document()


@router.get(
    "/plans/{plan_id}",
    response_model=PlanOut,
    responses={401: _ERRORS[401], 404: {"model": ErrorOut, "description": "no plan with this id"}},
)
def get_plan(
    session: SessionDep, _: RequireRead, caller: CallerIdentity, plan_id: int = Path(ge=1, le=2**31 - 1)
) -> Any:
    """A stored plan this token may read (its own or everyone's), as POST /v1/plans returned it."""
    return service.get_plan_for(session=session, plan_id=plan_id, viewer=caller.owner).document()
