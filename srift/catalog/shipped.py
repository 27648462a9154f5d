"""Load the catalog files shipped in srift/catalog/data/ into the database, once per file version.

Called by `srift serve` at start-up (srift.bootstrap), by the catalog CLI and by tests. Idempotent: a file
whose snapshot is already stored with the same content hash is skipped; a changed file replaces the
snapshot it shipped before. All files load in one transaction.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from srift.catalog.document import SnapshotData, load_catalog_file
from srift.catalog.store import delete_snapshot, save_snapshot
from srift.db.session import transaction
from srift.db.tables import CatalogSnapshot
from srift.limits import MAX_SOURCE_CHARS
from srift.settings import Settings

log = logging.getLogger("srift.catalog")

DATA_DIR = Path(__file__).resolve().parent / "data"
SHIPPED_PREFIX = "shipped file "


def shipped_files() -> list[Path]:
    """The catalog files shipped with Srift, in load order."""
    return sorted(DATA_DIR.glob("*.yaml"))


@lru_cache(maxsize=16)
def _parsed(path: Path, digest: str) -> SnapshotData:
    return load_catalog_file(path, origin=f"srift/catalog/data/{path.name}")


def _marker(path: Path) -> tuple[str, str]:
    """(full sha256 of the file, the marker its stored snapshot's `source` starts with)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest, f"{SHIPPED_PREFIX}{path.name} sha256:{digest[:16]}"


def shipped_snapshot(path: Path) -> SnapshotData:
    """The validated snapshot of one shipped file, its source prefixed with the file's marker."""
    digest, marker = _marker(path)
    data = _parsed(path, digest)
    return replace(data, source=f"{marker}; {data.source}"[:MAX_SOURCE_CHARS])


def load_shipped_catalog(settings: Settings) -> int:
    """Store every shipped catalog file not yet stored in this version; return how many were written.

    When another process loads the same files at the same moment, the loser's insert hits the unique
    snapshot name; it then retries once and finds the files already stored.
    """
    try:
        return _load(settings)
    except IntegrityError:
        log.info("shipped catalog was loaded concurrently; checking again")
        return _load(settings)


def _load(settings: Settings) -> int:
    written = 0
    with transaction(settings.resolved_database_url) as session:
        stored = session.scalars(select(CatalogSnapshot)).all()
        for path in shipped_files():
            _, marker = _marker(path)
            prefix = f"{SHIPPED_PREFIX}{path.name} "
            mine = [s for s in stored if s.source.startswith(prefix)]
            if any(s.source.startswith(marker) for s in mine):
                continue
            data = shipped_snapshot(path)
            for old in mine:
                delete_snapshot(session=session, snapshot_id=old.id)
            save_snapshot(session=session, snapshot=data, replace=True)
            written += 1
            log.info("loaded shipped catalog %s as snapshot %s", path.name, data.name)
    return written
