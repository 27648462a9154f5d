"""Shared helpers of the bandwidth tests."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from srift.bandwidth.records import ProbeRecord
from srift.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `srift ARGV` through the real entry point; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def store_before_canonical_names(db_url: str, records: Sequence[ProbeRecord]) -> None:
    """Store `records` as the code before srift.domain.rings did (each ring's name as given, fingerprinted
    under it) into the database at revision 0005, then upgrade it to head (migration 0006 renames them)."""
    from sqlalchemy import insert

    from srift.bandwidth.samples import _row
    from srift.db import migrate
    from srift.db.session import get_engine, session_factory
    from srift.db.tables import ProbeSample

    migrate.downgrade(db_url, "0005")
    get_engine(db_url).dispose()
    with session_factory(db_url)() as session:
        rows = [_row(r, fingerprint=r.fingerprint(), origin="jsonl", job_id=None) for r in records]
        session.execute(insert(ProbeSample), rows)
        session.commit()
    migrate.upgrade(db_url)
    get_engine(db_url).dispose()
