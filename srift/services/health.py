"""Whether the service can answer plans: the database, its active catalog snapshots and bandwidth models."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from srift.db.session import session_factory
from srift.db.tables import BandwidthModelRow, CatalogSnapshot
from srift.errors import EnvironmentProblem
from srift.settings import Settings


@dataclass(frozen=True, slots=True)
class ServedSnapshot:
    """A catalog snapshot that plans are served from."""

    name: str
    provider: str
    as_of: str
    source: str


@dataclass(frozen=True, slots=True)
class Health:
    """Active catalog snapshots and bandwidth model versions."""

    catalog: tuple[ServedSnapshot, ...]
    bandwidth_models: tuple[str, ...]


def check_health(*, settings: Settings) -> Health:
    """Read what is active; EnvironmentProblem (with a hint) when the database cannot be reached."""
    try:
        with session_factory(settings.resolved_database_url)() as session:
            snapshots = session.scalars(select(CatalogSnapshot).where(CatalogSnapshot.is_active)).all()
            models = session.scalars(select(BandwidthModelRow).where(BandwidthModelRow.is_active)).all()
            return Health(
                catalog=tuple(
                    ServedSnapshot(
                        name=s.name, provider=s.provider, as_of=s.as_of.isoformat(), source=s.source
                    )
                    for s in snapshots
                ),
                bandwidth_models=tuple(m.version for m in models),
            )
    except Exception as exc:
        raise EnvironmentProblem(
            f"database unreachable ({type(exc).__name__})",
            hint="check SRIFT_DATABASE_URL and that the database is running, then `srift db upgrade`",
        ) from exc
