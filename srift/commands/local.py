"""The database a command uses when it talks to no server (no --url): the configured one, migrated to the
latest schema, with the shipped data the command reads loaded."""

from __future__ import annotations

from collections.abc import Callable

from srift.settings import Settings, get_settings


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
