"""Request-scoped dependencies: settings, a transactional database session, and the id path parameter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from sqlalchemy.orm import Session

from srift.db.session import transaction
from srift.documents import NO_NUL
from srift.settings import Settings

MAX_ID = 2**31 - 1
"""Stored ids are the tables' 32-bit integer keys: a path's id is 1 to MAX_ID, a list's offset 0 to MAX_ID."""


Offset = Annotated[int, Query(ge=0, le=MAX_ID, description="items to skip (pagination), at most 2³¹−1")]
"""The `offset` query parameter of every list route: one bound for all (no table holds more rows)."""


def id_path(description: str | None = None) -> Any:
    """A path parameter naming a stored row by id (1 to MAX_ID)."""
    return Path(ge=1, le=MAX_ID, description=description)


def text_query(*, max_length: int, description: str) -> Any:
    """An optional query parameter of text (a filter, a name): not empty, no NUL (PostgreSQL cannot compare
    text holding one: a 500 rather than a 422 naming the parameter), at most `max_length` characters."""
    return Query(min_length=1, max_length=max_length, pattern=NO_NUL, description=description)


def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_db(request: Request) -> Iterator[Session]:
    """One session per request; commits when the route returns, rolls back on any error.

    `SessionDep` gives it scope="function" so the commit runs before the response is sent: a 2xx means
    the data is stored, and a failing commit becomes a 500 instead of a 200 for nothing.
    """
    settings: Settings = request.app.state.settings
    with transaction(settings.resolved_database_url) as session:
        yield session


DbSession = Session
"""The session a cached_json_async builder gets (routes import no SQLAlchemy)."""
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
SessionDep = Annotated[Session, Depends(get_db, scope="function")]
