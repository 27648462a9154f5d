"""POST /v1/plans (optimize and store a plan), GET /v1/plans/{id} and GET /v1/plans/{id}/replay."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from srift.api.auth import CallerIdentity, RequireRead, RequireWrite
from srift.api.deps import SessionDep, SettingsDep, id_path
from srift.api.schemas.plans import ErrorOut, PlanOut, PlanRequest
from srift.api.schemas.replays import PlanReplayOut
from srift.services import plans as service
from srift.services import replays

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
            "description": "what the request names is not stored: a catalog snapshot, a provider or "
            "region (`provider`, `providers[i]`, `region`, `regions[i]`; the hint lists the known ones), an "
            "instance type of `availability`, a profile id, or any profile of `model` (`field` names it)"
            "; a probe job of `network.probe_job_ids`; an imported spot trace `recent_market.trace` names "
            "(the hint lists the imported ones)",
        },
        409: {
            "model": ErrorOut,
            "description": "a valid request the stored data cannot answer: no configuration meets the limits "
            "with the stored catalog, profiles and models (error infeasible: which limit, by how much, and "
            "the nearest relaxations), or `profile_ids` name profiles of different models or precisions "
            "(or not in the asked `precision`)"
            "; a probe job of `network.probe_job_ids` that stored no samples across two or more nodes",
        },
        422: {
            "model": ErrorOut,
            "description": "invalid request; `field` names it (e.g. a `regions` entry naming a zone, or a "
            "provider/region whose provider `providers` leaves out)",
        },
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
def get_plan(session: SessionDep, _: RequireRead, caller: CallerIdentity, plan_id: int = id_path()) -> Any:
    """A stored plan this token may read (its own or everyone's), as POST /v1/plans returned it."""
    return service.get_plan_for(session=session, plan_id=plan_id, viewer=caller.owner).document()


@router.get(
    "/plans/{plan_id}/replay",
    response_model=PlanReplayOut,
    responses={401: _ERRORS[401], 404: {"model": ErrorOut, "description": "no plan with this id"}},
)
def get_plan_replay(
    session: SessionDep,
    settings: SettingsDep,
    _: RequireRead,
    caller: CallerIdentity,
    plan_id: int = id_path(),
) -> Any:
    """A stored plan's spot run replayed through the imported spot traces (`srift traces import`).

    Each applicable trace (the fleet's type in its region, tracing at least its VM count) is cut into
    windows as long as the deadline (the plan's time limit, else twice the on-demand fallback's time),
    started every 30 minutes (over very long traces, evenly enough to keep 20,000 windows at most). Every
    window is run under each deadline policy (on-demand only, spot only, spot then on-demand, Uniform
    Progress, Srift's): finish time, cost and deadline misses, pooled with each trace weighing the same,
    with the distribution of Srift's policy's finish times and costs, beside the plan's own expected time,
    cost and P(meets the time limit). A plan that cannot be replayed (no spot fleet, several, no on-demand
    fallback, no covering trace, traces shorter than the deadline) answers 200 with `status` saying which
    and `reason` why, and `rates` still says what the plan's prediction rests on (the model fitted to the
    shipped public traces, or the fallback band). A replay through many traces takes seconds; it is kept
    per plan and trace set, so a second request answers at once. A plan conditioned on a recent market
    (its request's `recent_market`) is predicted as it was: each window from the trace before it (the
    nowcast), and `spot_model` says which.
    """
    record = service.get_plan_for(session=session, plan_id=plan_id, viewer=caller.owner)
    return replays.plan_replay(session=session, settings=settings, record=record)
