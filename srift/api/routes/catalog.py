"""GET /v1/instance-types: the catalog's instance types and prices, filtered."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from srift.api.auth import RequireRead
from srift.api.deps import SessionDep
from srift.api.schemas.catalog import InstanceTypeOut
from srift.domain.catalog import MarketChoice
from srift.services import catalog as service

router = APIRouter(tags=["catalog"])


@router.get(
    "/instance-types",
    response_model=list[InstanceTypeOut],
    responses={
        404: {"description": "the named snapshot does not exist; the hint lists known ones"},
        422: {"description": "unknown provider, region or GPU, or a bad filter; the hint lists valid values"},
    },
)
def list_instance_types(
    session: SessionDep,
    _: RequireRead,
    provider: Annotated[str | None, Query(min_length=1, max_length=64, description="e.g. aws")] = None,
    region: Annotated[str | None, Query(min_length=1, max_length=64, description="e.g. us-east-1")] = None,
    gpu: Annotated[str | None, Query(min_length=1, max_length=64, description="GPU model, e.g. T4")] = None,
    min_gpus: Annotated[int | None, Query(ge=0, le=1024, description="at least this many GPUs")] = None,
    market: Annotated[MarketChoice, Query(description="keep types priced in this market")] = MarketChoice.ANY,
    snapshot: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="read one named snapshot, e.g. srift-paper-2020"),
    ] = None,
) -> list[InstanceTypeOut]:
    """Instance types with their on-demand and spot prices, each with its source and as-of date."""
    entries = service.list_instance_types(
        session=session,
        provider=provider,
        region=region,
        gpu=gpu,
        min_gpus=min_gpus,
        market=market,
        snapshot=snapshot,
    )
    return [InstanceTypeOut.model_validate(e.to_dict()) for e in entries]
