"""Start-up work for `serve`: migrate, then load shipped data (catalog, bandwidth models) when absent."""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable

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
WHAT_LOADS = {
    "srift.catalog.shipped:load_shipped_catalog": "the shipped catalog (instance types, prices)",
    "srift.bandwidth.registry:load_shipped_models": "the shipped bandwidth models",
    "srift.refmodels.shipped:load_reference_profiles": "the reference models' profiles (each GPU, 4 "
    "precisions)",
}
"""What each loader does, in the words `progress` reports while a new data folder is prepared."""


def bootstrap(settings: Settings, *, progress: Callable[[str], None] | None = None) -> None:
    """Make the database ready to serve: reachable, migrated, shipped data present. Idempotent.

    `progress` (e.g. a print to stderr) hears each step, with its time, when the database was behind
    (a new data folder: the first `make run` takes a minute or two); an up-to-date one is silent."""
    url = settings.resolved_database_url
    check_database(url)
    behind = not migrate.is_at_head(url)  # without importing Alembic where nothing is to be migrated
    say = progress if behind and progress is not None else None
    start = time.perf_counter()
    if say is not None:
        say(f"preparing the data folder {settings.data_dir}: migrating the database")
    migrate.upgrade(url)
    for target in SHIPPED_LOADERS:
        module_name, func_name = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            log.warning("shipped-data loader %s is not available yet", target)
            continue
        step = time.perf_counter()
        if say is not None:
            say(f"  loading {WHAT_LOADS.get(target, target)} …")
        getattr(module, func_name)(settings)
        if say is not None:
            say(f"  … done in {time.perf_counter() - step:.1f} s")
    if say is not None:
        say(f"the data folder is ready ({time.perf_counter() - start:.0f} s)")
