"""POST/GET /v1/profiles: store compute profiles and read them back, grouped by model name."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from srift.api.auth import CallerIdentity, RequireRead, RequireWrite
from srift.api.caching import cached_json
from srift.api.deps import Offset, SessionDep, id_path, text_query
from srift.api.limits import error_response
from srift.api.schemas.profiles import (
    ModelProfilesOut,
    ProfileCreated,
    ProfileIn,
    ProfileListOut,
    ProfileOut,
    ProfileSummaryOut,
)
from srift.domain.revisions import DataArea
from srift.services import profiles as service
from srift.services.profiles import EVERYONE

router = APIRouter(tags=["profiles"])
ProfileIdPath = Annotated[int, id_path("id returned by POST /v1/profiles")]


@router.post(
    "/profiles",
    status_code=status.HTTP_201_CREATED,
    response_model=ProfileCreated,
    responses={422: error_response("the profile is invalid; `field` names the offending value")},
)
def create_profile(
    body: ProfileIn,
    session: SessionDep,
    _: RequireWrite,
    caller: CallerIdentity,
    shared: Annotated[
        bool, Query(description="let other tokens name this profile by id (they never get it by `model`)")
    ] = False,
) -> ProfileCreated:
    """Validate and store a profile (the JSON `srift profile --out` writes); storing it again is a no-op.

    The profile is the token's: it answers this token's plans and predictions by `model` (before everyone's
    reference estimates), and nobody else's; `shared=true` lets other tokens name it by id. Checks: the
    schema's types and bounds (passes of 1 µs to a day), each breakpoint once, no breakpoint above
    `max_batch`, gradients no larger than the structure's parameters. Profiles are grouped under `model`,
    one per accelerator.
    """
    profile = body.to_profile()
    profile_id, created = service.store_profile(
        session=session, profile=profile, owner=caller.owner, shared=shared
    )
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
    caller: CallerIdentity,
    model: Annotated[str | None, text_query(max_length=200, description="only this model")] = None,
    accelerator: Annotated[
        str | None, text_query(max_length=200, description="only this accelerator")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="profiles per page")] = 200,
    offset: Offset = 0,
) -> Response:
    """Stored profiles this token may read (its own, everyone's and shared ones) grouped by model name
    (ordered by model, then id), a page at a time: `total` says how many there are over all pages (the
    shipped reference models alone are more than one default page).

    The server keeps the answer serialized until a profile is stored or deleted (by anyone, from any
    process): building it reads every listed document with today's rules (0.3 s for the 336 shipped
    reference profiles on a 2-core host), and the Plan and Predict pages ask for it on every load."""

    owner = caller.owner

    def build() -> bytes:
        groups, count, total = service.list_profiles_by_model(
            session=session, model=model, accelerator=accelerator, limit=limit, offset=offset, viewer=owner
        )
        listing = ProfileListOut(
            models=[
                ModelProfilesOut(
                    model=name,
                    accelerators=accelerators,
                    profiles=[ProfileSummaryOut.model_validate(s) for s in summaries],
                )
                for name, accelerators, summaries in groups
            ],
            count=count,
            total=total,
        )
        return listing.model_dump_json().encode()

    key = ("profiles", owner, model, accelerator, limit, offset)
    return cached_json(session=session, areas=(DataArea.PROFILES,), key=key, build=build)


@router.get(
    "/profiles/{profile_id}",
    response_model=ProfileOut,
    responses={404: error_response("no profile with this id")},
)
def get_profile(
    session: SessionDep,
    _: RequireRead,
    caller: CallerIdentity,
    profile_id: ProfileIdPath,
) -> ProfileOut:
    """One stored profile this token may read, the full document."""
    profile = service.get_profile(session=session, profile_id=profile_id, viewer=caller.owner)
    return ProfileOut.model_validate({"id": profile_id, **profile.to_dict()})


@router.delete(
    "/profiles/{profile_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: error_response("no profile with this id that this token owns")},
)
def delete_profile(
    session: SessionDep, _: RequireWrite, caller: CallerIdentity, profile_id: ProfileIdPath
) -> Response:
    """Delete a profile this token uploaded (an admin token: any profile), e.g. to replace one that is no
    longer plausible; plans already made keep their numbers."""
    service.delete_profile(
        session=session, profile_id=profile_id, viewer=EVERYONE if caller.admin else caller.owner
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)
