"""Alembic round trip on both databases: upgrade → downgrade → upgrade leaves the same schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect

from srift.db import migrate
from srift.db.session import get_engine
from srift.db.tables import Base


def _tables(url: str) -> set[str]:
    return set(inspect(get_engine(url)).get_table_names()) - {"alembic_version"}


def test_round_trip(db_url: str) -> None:
    head = migrate.head_revision(db_url)
    assert migrate.current_revision(db_url) == head
    assert _tables(db_url) == {t.name for t in Base.metadata.sorted_tables}

    migrate.downgrade(db_url, "base")
    get_engine(db_url).dispose()
    assert _tables(db_url) == set()
    assert migrate.current_revision(db_url) is None

    migrate.upgrade(db_url)
    get_engine(db_url).dispose()
    assert migrate.current_revision(db_url) == head
    assert _tables(db_url) == {t.name for t in Base.metadata.sorted_tables}


def test_schema_matches_tables(db_url: str) -> None:
    """No drift between srift/db/tables.py and the migrations (autogenerate finds nothing to do)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with get_engine(db_url).connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []


def test_the_scripts_head_read_without_alembic_is_alembics(sqlite_url: str) -> None:
    assert migrate.script_head() == migrate.head_revision(sqlite_url)


def test_upgrade_to_head_runs_alembic_only_when_behind(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alembic import command

    head = migrate.head_revision(sqlite_url)
    previous = sorted(p.stem.split("_")[0] for p in migrate.MIGRATIONS_DIR.glob("versions/*.py"))[-2]
    migrate.downgrade(sqlite_url, previous)
    get_engine(sqlite_url).dispose()
    assert not migrate.is_at_head(sqlite_url)
    ran: list[str] = []
    real = command.upgrade
    monkeypatch.setattr(command, "upgrade", lambda cfg, rev: (ran.append(rev), real(cfg, rev)))
    migrate.upgrade(sqlite_url)
    get_engine(sqlite_url).dispose()
    assert ran == ["head"] and migrate.current_revision(sqlite_url) == head
    assert migrate.is_at_head(sqlite_url)
    migrate.upgrade(sqlite_url)
    assert ran == ["head"], "a database at head needs no Alembic run"


def test_script_head_is_unknown_when_the_scripts_are_not_plain(tmp_path: Path) -> None:
    def script(name: str, body: str) -> None:
        (tmp_path / f"{name}.py").write_text(body)

    script("a", 'revision = "a"\ndown_revision = None\n')
    script("b", 'revision: str = "b"\ndown_revision: str | None = "a"\n')
    assert migrate.script_head(tmp_path) == "b"
    script("c", 'revision = "c"\ndown_revision = "a"\n')
    assert migrate.script_head(tmp_path) is None, "two heads"
    script("d", 'revision = "d"\ndown_revision = ("b", "c")\n')
    assert migrate.script_head(tmp_path) == "d", "a merge"
    script("e", 'revision = make_id()\ndown_revision = "d"\n')
    assert migrate.script_head(tmp_path) is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["db", "downgrade", "zz"], "Can't locate revision identified by 'zz'"),
        (["db", "upgrade", "zz"], "Can't locate revision identified by 'zz'"),
        (["db", "upgrade", "+1"], "Relative revision +1"),
    ],
)
def test_a_revision_alembic_cannot_resolve_is_one_line_naming_it(
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    said: str,
) -> None:
    """`srift db downgrade zz` printed Alembic's CommandError traceback and exited 1: it is a usage error
    (exit 2) on `revision`, naming the revisions there are, and the database stays where it was."""
    from srift.cli import main
    from srift.settings import get_settings

    head = migrate.head_revision(sqlite_url)
    monkeypatch.setenv("SRIFT_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as exited:
            main(argv)
    finally:
        get_settings.cache_clear()
    _, err = capsys.readouterr()
    assert exited.value.code == 2
    assert "Traceback" not in err and err.startswith("error: revision: ")
    assert said in err and "To fix:" in err and f"{head}, head, base" in err
    assert migrate.current_revision(sqlite_url) == head


def test_rings_stored_under_another_order_are_renamed_losing_nothing(db_url: str) -> None:
    """Before srift.domain.rings a mixed ring's name was stored as given: the same ring under two names (and
    one measurement twice, once per order). 0006 renames every such row to the sorted spelling with its
    fingerprint under that name (re-importing finds it), deletes nothing (the second copy of a measurement
    keeps its old fingerprint), and leaves a name listing a type twice as it was."""
    from dataclasses import replace

    from sqlalchemy import select

    from srift.bandwidth.records import ProbeRecord
    from srift.bandwidth.samples import record_from_row
    from srift.db.session import session_factory
    from srift.db.tables import ProbeSample
    from tests.bandwidth.helpers import store_before_canonical_names

    sample = {"run_id": "r1", "provider": "testbed", "instance_type": "tb.small", "backend": "gloo"}
    sample |= {"buffer_bytes": 1024, "world_size": 2, "time_s": 0.001, "collective": "all_gather"}
    base = replace(ProbeRecord.from_dict(sample), instance_type="tb.small+tb.large")  # as stored before
    legacy = [
        base,
        replace(base, instance_type="tb.large+tb.small"),  # the same measurement, stored in the other order
        replace(base, repeat=1),
        replace(base, repeat=2, instance_type="c+a+b"),
        replace(base, instance_type="tb.small+tb.small"),
        replace(base, instance_type="tb.small"),
    ]
    store_before_canonical_names(db_url, legacy)
    with session_factory(db_url)() as session:
        stored = list(session.scalars(select(ProbeSample).order_by(ProbeSample.id)))
        names = [row.instance_type for row in stored]
        assert names == [
            "tb.large+tb.small",
            "tb.large+tb.small",
            "tb.large+tb.small",
            "a+b+c",
            "tb.small+tb.small",
            "tb.small",
        ]
        records = [record_from_row(row) for row in stored]
        assert [replace(r, instance_type="") for r in records] == [
            replace(r, instance_type="") for r in legacy
        ], "every field but the name is as it was"
        prints = [row.fingerprint for row in stored]
        assert prints[1] == legacy[1].fingerprint() == records[0].fingerprint(), "the sorted copy holds it"
        assert prints[0] == legacy[0].fingerprint(), "the other copy keeps its own: nothing is deleted"
        assert prints[2] == records[2].fingerprint() and prints[3] == records[3].fingerprint()
        assert prints[4:] == [r.fingerprint() for r in legacy[4:]]
