"""GET /v1/jobs: the list of tracked training runs, which the dashboard's Jobs page shows.

Mounted by the dashboard (srift.api.dashboard.mount); the runs themselves are served by training_jobs.py.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from srift.api.auth import CallerIdentity, RequireRead
from srift.api.deps import Offset, SessionDep
from srift.api.schemas.dashboard import TrainingRunList, TrainingRunSummary
from srift.domain.states import TrainingState
from srift.services import dashboard

router = APIRouter(tags=["training jobs"])


@router.get(
    "/jobs",
    response_model=TrainingRunList,
    responses={401: {"description": "a read token is required (SRIFT_READ_REQUIRES_TOKEN)"}},
)
def list_training_runs(
    session: SessionDep,
    _: RequireRead,
    caller: CallerIdentity,
    state: Annotated[TrainingState | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> TrainingRunList:
    """Tracked training runs this token may read (of its own plans and everyone's), newest first, with their
    interruption and re-plan counts."""
    runs, total = dashboard.list_training_runs(
        session=session, state=state, limit=limit, offset=offset, owner=caller.owner
    )
    return TrainingRunList(
        runs=[TrainingRunSummary.model_validate(r, from_attributes=True) for r in runs], total=total
    )
