"""Data revisions: one token per watched area (catalog, profiles, bandwidth models) that the database replaces
on every write to that area's tables, so in-process caches keyed by them never answer from changed data.

Triggers (migration 0003) do the replacing, on SQLite and PostgreSQL alike, for writes from any process or
plain SQL; nobody has to remember to invalidate a cache. A reader takes the tokens first and the data
after, in the same session: a write committed in between only makes the cached entry newer than its key, and
the next reader sees the new token. An area with no token yet (an empty or freshly truncated database) reads
as "" — it has not been written to since, so its tables are as empty as when the token went away.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.db.tables import DataRevision


class Area(StrEnum):
    """What a token covers."""

    CATALOG = "catalog"
    PROFILES = "profiles"
    BANDWIDTH_MODELS = "bandwidth_models"


WATCHED_TABLES: dict[Area, tuple[str, ...]] = {
    Area.CATALOG: ("catalog_snapshots", "instance_types", "prices"),
    Area.PROFILES: ("model_profiles",),
    Area.BANDWIDTH_MODELS: ("bandwidth_models",),
}
"""Tables whose writes replace each area's token (the triggers of migration 0003 mirror this mapping)."""


@dataclass(frozen=True, slots=True)
class Revisions:
    """The current token of every area; equal revisions mean no watched table has been written in between."""

    catalog: str
    profiles: str
    bandwidth_models: str


def database_key(session: Session) -> str:
    """Which database `session` talks to (its URL, password hidden): caches are per database and revision."""
    return session.get_bind().engine.url.render_as_string(hide_password=True)


def read_revisions(*, session: Session) -> Revisions:
    """Every area's current token, in one query."""
    tokens = {name: token for name, token in session.execute(select(DataRevision.name, DataRevision.token))}
    return Revisions(
        catalog=tokens.get(Area.CATALOG.value, ""),
        profiles=tokens.get(Area.PROFILES.value, ""),
        bandwidth_models=tokens.get(Area.BANDWIDTH_MODELS.value, ""),
    )
