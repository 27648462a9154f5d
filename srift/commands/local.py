"""The database a command uses when it talks to no server (no --url): the configured one, migrated to the
latest schema, with the shipped data the command reads loaded."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from srift.settings import Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def migrated_url() -> str:
    """The configured database's URL, its schema migrated to the latest revision."""
    from srift.db import migrate

    url = get_settings().resolved_database_url
    migrate.upgrade(url)
    return url


def catalog_database(settings: Settings) -> str:
    """Reachable, migrated, the shipped catalog loaded (catalog commands; probe imports check instance
    types against it)."""
    from srift.catalog.shipped import load_shipped_catalog

    return _ready(settings, load_shipped_catalog)


def models_database(settings: Settings) -> str:
    """Reachable, migrated, the shipped bandwidth models registered."""
    from srift.bandwidth.registry import load_shipped_models

    return _ready(settings, load_shipped_models)


def _ready(settings: Settings, load: Callable[[Settings], object]) -> str:
    from srift.db import migrate
    from srift.db.session import check_database

    url = settings.resolved_database_url
    check_database(url)
    migrate.upgrade(url)
    load(settings)
    return url


@contextmanager
def served_session(*, tell_progress: bool = True) -> Iterator[tuple[Session, Settings]]:
    """One transaction on the configured database made ready as `srift serve` makes it (srift.bootstrap:
    migrated, shipped data loaded; its steps told on stderr unless not `tell_progress`), with the settings:
    how `srift plan` and `srift predict` answer here, without a server."""
    import typer

    from srift.bootstrap import bootstrap
    from srift.db.session import transaction

    settings = get_settings()
    bootstrap(settings, progress=(lambda line: typer.echo(line, err=True)) if tell_progress else None)
    with transaction(settings.resolved_database_url) as session:
        yield session, settings
