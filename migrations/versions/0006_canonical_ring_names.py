"""canonical ring names: probe samples of a mixed ring stored under its types in another order are renamed

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07 18:00:00

A mixed ring's samples are stored under the ring's types joined by "+". Before srift.domain.rings, the name
was stored as given, so `tb.small+tb.large` and `tb.large+tb.small` were two rings. New samples are stored
with the types sorted; this renames the rows stored before to that spelling, and gives each its
fingerprint under the new name (so importing the same file again still adds nothing), in the upgrade's one
transaction. No row is deleted: where the same measurement was stored under both spellings, the renamed
copy keeps its old fingerprint (the unique column allows no second one) and stays, as it was counted
before. A name that lists a type twice or has an empty member (which the code now refuses) is left as it
was: there is no ring it surely means.

The fingerprint below is frozen as srift.bandwidth.records.ProbeRecord.fingerprint computed it when this
was written (the fields that identify a measurement, the collective only when it is not allreduce).

Downgrade changes nothing: the sorted names are valid rings to the older code too, and the order a name
was first given in is not kept.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEPARATOR = "+"


def _canonical(name: str) -> str | None:
    """The sorted spelling of a ring's name, or None when the name is not a ring one can sort."""
    members = [m.strip() for m in name.split(SEPARATOR)]
    if any(not m for m in members) or len(set(members)) != len(members):
        return None
    return SEPARATOR.join(sorted(members))


def _fingerprint(row: Mapping[str, Any], instance_type: str) -> str:
    feats = row["features"]
    if isinstance(feats, str):
        feats = json.loads(feats)
    feats = feats or {}
    key: tuple[object, ...] = (
        str(feats.get("run_id", "")),
        row["provider"],
        row["region"],
        row["zone"],
        instance_type,
        row["backend"],
        row["buffer_bytes"],
        row["world_size"],
        row["nodes"],
        row["ranks_per_node"],
        row["async_count"],
        int(feats.get("repeat", 0)),
        repr(float(row["time_s"])),
    )
    collective = str(feats.get("collective", "allreduce"))
    if collective != "allreduce":
        key = (*key, collective)
    return hashlib.sha256(json.dumps(key, separators=(",", ":")).encode()).hexdigest()


def upgrade() -> None:
    bind = op.get_bind()
    samples = sa.table(
        "probe_samples",
        *(
            sa.column(name)
            for name in (
                "id",
                "fingerprint",
                "provider",
                "region",
                "zone",
                "instance_type",
                "backend",
                "buffer_bytes",
                "world_size",
                "nodes",
                "ranks_per_node",
                "async_count",
                "time_s",
                "features",
            )
        ),
    )
    rows = bind.execute(
        sa.select(samples).where(samples.c.instance_type.contains(SEPARATOR)).order_by(samples.c.id)
    ).mappings()
    renames = []
    for row in rows:
        name = _canonical(row["instance_type"])
        if name is not None and name != row["instance_type"]:
            renames.append((row["id"], name, _fingerprint(row, name), row["fingerprint"]))
    if not renames:
        return
    wanted = [fp for _, _, fp, _ in renames]
    taken: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        taken.update(
            bind.execute(sa.select(samples.c.fingerprint).where(samples.c.fingerprint.in_(chunk))).scalars()
        )
    for row_id, name, new_print, old_print in renames:
        fingerprint = old_print if new_print in taken else new_print
        taken.add(fingerprint)
        bind.execute(
            sa.update(samples)
            .where(samples.c.id == row_id)
            .values(instance_type=name, fingerprint=fingerprint)
        )


def downgrade() -> None:
    """Nothing to undo (module docstring)."""
