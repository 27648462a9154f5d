"""RevisionCache: answers are kept per revision of the areas they read, rebuilt after a write to an area, and
never kept when their build read a table outside those areas."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from srift.db.tables import Job, ModelProfileRow, PlanRow
from srift.domain.revisions import DataArea
from srift.services.caching import RevisionCache


def _profile(session: Session, n: int) -> None:
    row = ModelProfileRow(model="m", accelerator="T4", fingerprint=f"f{n}", document={})
    row.created_at = datetime(2026, 1, 1)
    session.add(row)
    session.commit()


def test_kept_per_revision_and_rebuilt_after_a_write(session: Session) -> None:
    cache: RevisionCache[int] = RevisionCache("test", max_entries=4)
    builds: list[int] = []

    def count_profiles() -> int:
        builds.append(1)
        return len(session.scalars(select(ModelProfileRow)).all())

    def ask() -> int:
        return cache.get_or_build(session=session, areas=(DataArea.PROFILES,), key="n", build=count_profiles)

    assert ask() == 0 and ask() == 0 and len(builds) == 1
    _profile(session, 1)
    assert ask() == 1 and len(builds) == 2
    session.add(PlanRow(request={}, result={}))  # another area: the key stays
    session.commit()
    assert ask() == 1 and len(builds) == 2
    assert (cache.hits, cache.misses) == (2, 2)


def test_a_build_reading_unwatched_tables_is_not_kept(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    cache: RevisionCache[int] = RevisionCache("guarded", max_entries=4)
    builds: list[str] = []

    def reads_jobs() -> int:
        builds.append("jobs")
        session.scalars(select(ModelProfileRow)).all()
        return len(session.scalars(select(Job)).all())

    def raw_sql() -> int:
        builds.append("sql")
        return int(session.execute(text("SELECT count(*) FROM model_profiles")).scalar_one())

    with caplog.at_level(logging.WARNING, logger="srift.cache"):
        for _ in range(3):
            cache.get_or_build(session=session, areas=(DataArea.PROFILES,), key="jobs", build=reads_jobs)
            cache.get_or_build(session=session, areas=(DataArea.PROFILES,), key="sql", build=raw_sql)
    assert builds == ["jobs", "sql"] * 3 and len(cache) == 0 and cache.uncacheable == 6
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # once per set of tables
    assert "jobs" in warnings[0] and "cannot be told" in warnings[1]
