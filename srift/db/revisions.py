"""Data revisions: one token per watched area (catalog, profiles, bandwidth models) that the database replaces
on every write to that area's tables, so in-process caches keyed by them never answer from changed data.

Triggers (migration 0003) do the replacing, on SQLite and PostgreSQL alike, for writes from any process or
plain SQL; nobody has to remember to invalidate a cache. A reader takes the tokens first and the data
after, in the same session: a write committed in between only makes the cached entry newer than its key, and
the next reader sees the new token. Migration 0003 gives every area a token, and on PostgreSQL a TRUNCATE
replaces it too; an area whose row is missing reads as "".

A new table whose rows a cached answer depends on needs its triggers (a migration, as 0003 does) and its
entry in WATCHED_TABLES; tests/db/test_revisions.py writes to every watched table and checks the token.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from srift.db.tables import DataRevision
from srift.domain.revisions import DataArea, Revisions

REVISIONS_TABLE = DataRevision.__tablename__

WATCHED_TABLES: dict[DataArea, tuple[str, ...]] = {
    DataArea.CATALOG: ("catalog_snapshots", "instance_types", "prices"),
    DataArea.PROFILES: ("model_profiles",),
    DataArea.BANDWIDTH_MODELS: ("bandwidth_models",),
    DataArea.CORRECTIONS: ("calibration_observations", "corrections"),
}
"""Tables whose writes replace each area's token (the triggers of migrations 0003 and 0004 mirror it)."""


def database_key(session: Session) -> str:
    """Which database `session` talks to (its URL, password hidden): caches are per database and revision."""
    return session.get_bind().engine.url.render_as_string(hide_password=True)


def database_key_of(url: str) -> str:
    """`database_key` of the sessions a database URL makes."""
    return make_url(url).render_as_string(hide_password=True)


def read_revisions(*, session: Session) -> Revisions:
    """Every area's current token, in one query."""
    return Revisions.from_names(
        {name: token for name, token in session.execute(select(DataRevision.name, DataRevision.token))}
    )


async def read_revisions_async(engine: AsyncEngine) -> Revisions:
    """`read_revisions` over an asyncio engine: the one query, awaited instead of blocking a thread."""
    async with engine.connect() as conn:
        rows = await conn.execute(select(DataRevision.name, DataRevision.token))
    return Revisions.from_names({name: token for name, token in rows})
