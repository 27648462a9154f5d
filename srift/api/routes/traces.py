"""GET /v1/traces: the imported spot traces (`srift traces import`), e.g. for a plan's recent market."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from srift.api.auth import RequireRead
from srift.api.deps import SettingsDep
from srift.api.schemas.traces import TraceOut
from srift.services import traces as service

router = APIRouter(tags=["traces"])


@router.get("/traces", response_model=list[TraceOut])
def list_traces(settings: SettingsDep, _: RequireRead) -> Any:
    """The imported spot traces, one row each (as `srift traces list --json` prints them): the names a
    plan request's `recent_market.trace` may give, what each traced and its span. Empty before the first
    `srift traces import`."""
    return service.list_traces(settings=settings)
