"""GET /v1/health: database reachable, active catalog snapshots, active bandwidth models."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from srift import __version__
from srift.api.deps import SettingsDep
from srift.api.schemas.health import ActiveSnapshot, HealthOut, HealthUnavailable
from srift.errors import EnvironmentProblem
from srift.services.health import check_health

router = APIRouter(tags=["health"])


@router.get(
    "/health",
    response_model=HealthOut,
    responses={503: {"model": HealthUnavailable, "description": "database unreachable"}},
)
def health(settings: SettingsDep, response: Response) -> HealthOut | JSONResponse:
    """Report whether the service can answer plans: database, catalog snapshots and bandwidth models."""
    response.headers["Cache-Control"] = "no-store"
    try:
        found = check_health(settings=settings)
    except EnvironmentProblem as problem:
        body = HealthUnavailable.model_validate(problem.to_dict())
        return JSONResponse(status_code=503, content=body.model_dump(), headers={"Cache-Control": "no-store"})
    return HealthOut(
        version=__version__,
        catalog=[ActiveSnapshot.model_validate(s, from_attributes=True) for s in found.catalog],
        bandwidth_models=list(found.bandwidth_models),
    )
