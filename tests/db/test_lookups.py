"""stored_among: which of many values a column already holds, over every chunk of its IN lookups."""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.orm import Session

from srift.db.lookups import IN_CHUNK, stored_among
from srift.db.tables import ModelProfileRow


def _store(session: Session, fingerprints: list[str]) -> None:
    rows = [{"model": "m", "accelerator": "T4", "fingerprint": f, "document": {}} for f in fingerprints]
    session.execute(insert(ModelProfileRow), rows)
    session.flush()


def test_finds_the_stored_values_in_every_chunk(session: Session) -> None:
    asked = [f"f{i:05d}" for i in range(2 * IN_CHUNK + 7)]
    stored = [*asked[::3], "not-asked"]
    _store(session, stored)

    found = stored_among(session, ModelProfileRow.fingerprint, asked)

    assert found == set(asked[::3])
    assert any(asked.index(f) >= 2 * IN_CHUNK for f in found)  # the last, partial chunk was asked too


def test_nothing_asked_is_nothing_found(session: Session) -> None:
    _store(session, ["a"])

    assert stored_among(session, ModelProfileRow.fingerprint, []) == set()
    assert stored_among(session, ModelProfileRow.fingerprint, iter(["a", "b"])) == {"a"}
