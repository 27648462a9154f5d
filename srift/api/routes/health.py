"""GET /v1/health: database reachable, active catalog snapshots, active bandwidth models."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import select

from srift import __version__
from srift.api.deps import SessionDep
from srift.db.tables import BandwidthModelRow, CatalogSnapshot

router = APIRouter(tags=["health"])


@router.get("/health")
def health(session: SessionDep) -> dict[str, Any]:
    """Report whether the service can answer plans: database, catalog snapshots and bandwidth models."""
    snapshots = session.scalars(select(CatalogSnapshot).where(CatalogSnapshot.is_active)).all()
    models = session.scalars(select(BandwidthModelRow).where(BandwidthModelRow.is_active)).all()
    return {
        "status": "ok",
        "version": __version__,
        "database": "ok",
        "catalog": [
            {"name": s.name, "provider": s.provider, "as_of": s.as_of.isoformat(), "source": s.source}
            for s in snapshots
        ],
        "bandwidth_models": [m.version for m in models],
    }
