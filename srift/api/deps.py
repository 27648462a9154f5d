"""Request-scoped dependencies: settings and a transactional database session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from srift.db.session import transaction
from srift.settings import Settings


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
