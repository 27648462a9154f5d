"""GET /v1/health: database reachable, active catalog snapshots, active bandwidth models."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from sqlalchemy import select

from srift import __version__
from srift.api.deps import SettingsDep
from srift.api.schemas.health import ActiveSnapshot, HealthOut, HealthUnavailable
from srift.db.session import session_factory
from srift.db.tables import BandwidthModelRow, CatalogSnapshot
from srift.errors import EnvironmentProblem

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
        with session_factory(settings.resolved_database_url)() as session:
            snapshots = session.scalars(select(CatalogSnapshot).where(CatalogSnapshot.is_active)).all()
            models = session.scalars(select(BandwidthModelRow).where(BandwidthModelRow.is_active)).all()
            catalog = [
                ActiveSnapshot(name=s.name, provider=s.provider, as_of=s.as_of.isoformat(), source=s.source)
                for s in snapshots
            ]
            versions = [m.version for m in models]
    except Exception as exc:
        problem = EnvironmentProblem(
            f"database unreachable ({type(exc).__name__})",
            hint="check SRIFT_DATABASE_URL and that the database is running, then `srift db upgrade`",
        )
        body = HealthUnavailable.model_validate(problem.to_dict())
        return JSONResponse(
            status_code=503, content=body.model_dump(), headers={"Cache-Control": "no-store"}
        )
    return HealthOut(version=__version__, catalog=catalog, bandwidth_models=versions)
