"""Custom providers: import instance types and prices from a srift-catalog/1 YAML file or document.

For machines AWS does not describe: on-premises clusters, other clouds, negotiated rate cards, and the
emulated testbed (which registers its types under provider "testbed", region "local"). The format is
documented in srift/catalog/document.py and docs/catalog.md; a minimal file::

    provider: onprem
    snapshot: onprem-lab
    source: "Lab rate card v3 (finance)"
    as_of: 2026-11-01
    instance_types:
      - name: a100x8
        gpu_model: A100
        gpu_count: 8
        gpu_memory_gib: 40
        vcpus: 128
        memory_gib: 1024
        network_gbps: 200
        interconnect: nvswitch
        interconnect_gbps: 2400
        efa: true
        prices:
          lab-1: {on_demand: 12.5}

The whole document is validated before anything is written; a malformed or incomplete file raises
InvalidInput naming the file, the line and the field, and the database is left as it was. Importing a
snapshot name again replaces that snapshot (so re-running an import is safe); the names of shipped
snapshots and of other providers' snapshots are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.catalog.document import SnapshotData, load_catalog_file, parse_catalog_document
from srift.catalog.shipped import SHIPPED_PREFIX
from srift.catalog.store import save_snapshot
from srift.db.tables import CatalogSnapshot
from srift.errors import Conflict


def import_document(*, session: Session, document: dict[str, Any], origin: str) -> int:
    """Validate a catalog document (a dict) and store it as a snapshot; return the snapshot id.

    `origin` names the document in errors and in the stored source (e.g. "testbed"). Writes happen in the
    caller's session, after validation succeeded.
    """
    data = parse_catalog_document(document, origin=f"{origin} document")
    return _store(session=session, data=data, origin=origin)


def import_file(*, session: Session, path: Path) -> tuple[int, SnapshotData]:
    """Validate a catalog YAML file and store it; return the snapshot id and what was stored."""
    data = load_catalog_file(path)
    return _store(session=session, data=data, origin=str(path)), data


def _store(*, session: Session, data: SnapshotData, origin: str) -> int:
    existing = session.scalars(select(CatalogSnapshot).where(CatalogSnapshot.name == data.name)).first()
    if existing is not None:
        if existing.source.startswith(SHIPPED_PREFIX):
            raise Conflict(
                f"{origin}: snapshot {data.name!r} is shipped with Srift and cannot be replaced by an import",
                hint="choose another `snapshot:` name in the file",
                field="snapshot",
            )
        if existing.provider != data.provider:
            raise Conflict(
                f"{origin}: snapshot {data.name!r} already holds provider {existing.provider!r}",
                hint="choose another `snapshot:` name in the file",
                field="snapshot",
            )
    return save_snapshot(session=session, snapshot=data, replace=True)
