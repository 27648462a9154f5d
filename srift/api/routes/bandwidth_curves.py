"""GET /v1/bandwidth-models/{version}/curves: a model's busbw-vs-buffer curves beside the probe samples.

Mounted by the dashboard (srift.api.dashboard.mount), which draws it; scripts may use it too.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import Field

from srift.api.auth import RequireRead
from srift.api.deps import SessionDep, SettingsDep, text_query
from srift.api.schemas.dashboard import BandwidthCurves
from srift.api.schemas.types import NO_NUL
from srift.documents import publish_rules
from srift.domain.rings import QUERY_RULE, RING_RULE, RING_TYPES_ONCE, TYPE_OR_RING_TEXT
from srift.services import dashboard
from srift.services.dashboard import MAX_WORLD_SIZE, MAX_WORLD_SIZES

router = APIRouter(tags=["bandwidth-models"])

ERRORS: dict[int | str, dict[str, str]] = {
    401: {"description": "a read token is required (SRIFT_READ_REQUIRES_TOKEN)"},
    404: {
        "description": "unknown model version, provider or instance type (a name with a space: a ring's '+' "
        "not written %2B in the query string)"
    },
    422: {"description": "invalid world size, or a mixed ring naming a type twice"},
}


@router.get("/bandwidth-models/{version}/curves", response_model=BandwidthCurves, responses=ERRORS)
def bandwidth_curves(
    session: SessionDep,
    settings: SettingsDep,
    _: RequireRead,
    version: Annotated[
        str,
        Path(
            min_length=1,
            max_length=64,
            pattern=NO_NUL,
            description="a model version, or 'active' for the model that serves predictions",
        ),
    ],
    provider: Annotated[
        str | None, text_query(max_length=64, description="default: the first probed type's, else aws")
    ] = None,
    instance_type: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            pattern=NO_NUL,
            description=f"a type, or {RING_RULE}; {QUERY_RULE}; default: the first probed type",
            json_schema_extra=publish_rules(RING_TYPES_ONCE, then={"pattern": TYPE_OR_RING_TEXT}),
        ),
    ] = None,
    world_size: Annotated[
        list[Annotated[int, Field(ge=2, le=MAX_WORLD_SIZE)]] | None,
        Query(max_length=MAX_WORLD_SIZES, description="repeat for several; default: the probed world sizes"),
    ] = None,
) -> BandwidthCurves:
    """Predicted bus bandwidth (Gbit/s) over buffer sizes per world size, beside the stored samples.

    Buffer sizes run from 1 KiB to 1 GiB in √2 steps, widened to cover the samples shown.
    """
    result = dashboard.bandwidth_curves(
        session=session,
        settings=settings,
        version=version,
        provider=provider,
        instance_type=instance_type,
        world_sizes=world_size or [],
    )
    return BandwidthCurves.model_validate(result, from_attributes=True)
