"""Lookups that bind many values: `IN (...)` queries split to stay under the bound-parameter limits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session

IN_CHUNK = 500
"""Values per `IN (...)` lookup (SQLite allows 32,766 bound parameters, PostgreSQL 65,535)."""


def stored_among(session: Session, column: InstrumentedAttribute[Any], values: Iterable[Any]) -> set[Any]:
    """The values of `values` that `column` already holds, asked `IN_CHUNK` values per query (the fingerprint
    checks of bulk stores: which probe samples or profiles are new)."""
    wanted = list(values)
    found: set[Any] = set()
    for start in range(0, len(wanted), IN_CHUNK):
        found.update(session.scalars(select(column).where(column.in_(wanted[start : start + IN_CHUNK]))))
    return found
