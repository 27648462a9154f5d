"""Alembic round trip on both databases: upgrade → downgrade → upgrade leaves the same schema."""

from __future__ import annotations

from sqlalchemy import inspect

from srift.db import migrate
from srift.db.session import get_engine
from srift.db.tables import Base


def _tables(url: str) -> set[str]:
    return set(inspect(get_engine(url)).get_table_names()) - {"alembic_version"}


def test_round_trip(db_url: str) -> None:
    head = migrate.head_revision(db_url)
    assert migrate.current_revision(db_url) == head
    assert _tables(db_url) == {t.name for t in Base.metadata.sorted_tables}

    migrate.downgrade(db_url, "base")
    get_engine(db_url).dispose()
    assert _tables(db_url) == set()
    assert migrate.current_revision(db_url) is None

    migrate.upgrade(db_url)
    get_engine(db_url).dispose()
    assert migrate.current_revision(db_url) == head
    assert _tables(db_url) == {t.name for t in Base.metadata.sorted_tables}


def test_schema_matches_tables(db_url: str) -> None:
    """No drift between srift/db/tables.py and the migrations (autogenerate finds nothing to do)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with get_engine(db_url).connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []
