"""POST/GET /v1/profiles: store compute profiles and read them back, grouped by model name."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, status

from srift.api.auth import RequireRead, RequireWrite
from srift.api.deps import SessionDep
from srift.api.limits import ErrorBody
from srift.api.schemas.profiles import (
    ModelProfilesOut,
    ProfileCreated,
    ProfileIn,
    ProfileListOut,
    ProfileOut,
    ProfileSummaryOut,
)
from srift.api.schemas.types import NO_NUL
from srift.services import profiles as service

router = APIRouter(tags=["profiles"])


@router.post(
    "/profiles",
    status_code=status.HTTP_201_CREATED,
    response_model=ProfileCreated,
    responses={
        422: {"model": ErrorBody, "description": "the profile is invalid; `field` names the offending value"}
    },
)
def create_profile(body: ProfileIn, session: SessionDep, _: RequireWrite) -> ProfileCreated:
    """Validate and store a profile (the JSON `srift profile --out` writes); storing it again is a no-op.

    Checks: breakpoints strictly increasing and ≥ 1, one positive time per breakpoint, `ready_frac` and
    `exec_prob` in [0, 1], `grad_bytes` ≥ 0. Profiles are grouped under `model`, one per accelerator.
    """
    profile = body.to_profile()
    profile_id, created = service.store_profile(session=session, profile=profile)
    return ProfileCreated(
        id=profile_id, model=profile.model, accelerator=profile.accelerator, created=created
    )


@router.get(
    "/profiles",
    response_model=ProfileListOut,
)
def list_profiles(
    session: SessionDep,
    _: RequireRead,
    model: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=NO_NUL, description="only this model")
    ] = None,
    accelerator: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=NO_NUL, description="only this accelerator")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="profiles per page")] = 200,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000, description="profiles to skip")] = 0,
) -> ProfileListOut:
    """Stored profiles grouped by model name (ordered by model, then id)."""
    groups, count = service.list_profiles_by_model(
        session=session, model=model, accelerator=accelerator, limit=limit, offset=offset
    )
    return ProfileListOut(
        models=[
            ModelProfilesOut(
                model=name,
                accelerators=accelerators,
                profiles=[ProfileSummaryOut.model_validate(s) for s in summaries],
            )
            for name, accelerators, summaries in groups
        ],
        count=count,
    )


@router.get(
    "/profiles/{profile_id}",
    response_model=ProfileOut,
    responses={404: {"model": ErrorBody, "description": "no profile with this id"}},
)
def get_profile(
    session: SessionDep,
    _: RequireRead,
    profile_id: Annotated[int, Path(ge=1, le=2**31 - 1, description="id returned by POST /v1/profiles")],
) -> ProfileOut:
    """One stored profile, the full document."""
    profile = service.get_profile(session=session, profile_id=profile_id)
    return ProfileOut.model_validate({"id": profile_id, **profile.to_dict()})
