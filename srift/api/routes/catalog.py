"""GET /v1/instance-types: the catalog's instance types and prices, filtered."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import TypeAdapter

from srift.api.auth import RequireReadAsync
from srift.api.caching import cached_json_async
from srift.api.deps import DbSession, text_query
from srift.api.schemas.catalog import InstanceTypeOut
from srift.domain.catalog import MarketChoice
from srift.domain.revisions import DataArea
from srift.services import catalog as service

router = APIRouter(tags=["catalog"])
_LIST = TypeAdapter(list[InstanceTypeOut])


@router.get(
    "/instance-types",
    response_model=list[InstanceTypeOut],
    responses={
        404: {
            "description": "no such snapshot, provider, region or GPU in the catalog; the hint lists the "
            "known ones"
        },
        422: {"description": "a bad filter; the hint says how to fix it"},
    },
)
async def list_instance_types(
    request: Request,
    _: RequireReadAsync,
    provider: Annotated[str | None, text_query(max_length=64, description="e.g. aws")] = None,
    region: Annotated[str | None, text_query(max_length=64, description="e.g. us-east-1")] = None,
    gpu: Annotated[str | None, text_query(max_length=64, description="GPU model, e.g. T4")] = None,
    min_gpus: Annotated[int | None, Query(ge=0, le=1024, description="at least this many GPUs")] = None,
    market: Annotated[MarketChoice, Query(description="keep types priced in this market")] = MarketChoice.ANY,
    snapshot: Annotated[
        str | None, text_query(max_length=200, description="read one named snapshot, e.g. srift-paper-2020")
    ] = None,
) -> Response:
    """Instance types with their on-demand and spot prices, each with its source and as-of date.

    The answer carries an ETag: send it back in `If-None-Match` for a bodyless 304 while the catalog is
    unchanged. The server keeps the answer serialized until the catalog changes.
    """

    def build(session: DbSession) -> bytes:
        entries = service.list_instance_types(
            session=session,
            provider=provider,
            region=region,
            gpu=gpu,
            min_gpus=min_gpus,
            market=market,
            snapshot=snapshot,
        )
        return _LIST.dump_json([InstanceTypeOut.model_validate(e.to_dict()) for e in entries])

    key = ("instance-types", provider, region, gpu, min_gpus, market.value, snapshot)
    return await cached_json_async(request, areas=(DataArea.CATALOG,), key=key, build=build)
