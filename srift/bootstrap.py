"""Start-up work for `serve`: migrate, then load shipped data (catalog, bandwidth models) when absent."""

from __future__ import annotations

import importlib
import logging

from srift.db import migrate
from srift.db.session import check_database
from srift.settings import Settings

log = logging.getLogger("srift.bootstrap")

# Each entry is "module:function(settings) -> None"; areas add their loader here.
SHIPPED_LOADERS: tuple[str, ...] = (
    "srift.catalog.shipped:load_shipped_catalog",
    "srift.bandwidth.registry:load_shipped_models",
    "srift.refmodels.shipped:load_reference_profiles",
)


def bootstrap(settings: Settings) -> None:
    """Make the database ready to serve: reachable, migrated, shipped data present. Idempotent."""
    url = settings.resolved_database_url
    check_database(url)
    migrate.upgrade(url)
    for target in SHIPPED_LOADERS:
        module_name, func_name = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            log.warning("shipped-data loader %s is not available yet", target)
            continue
        getattr(module, func_name)(settings)
