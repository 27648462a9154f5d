"""Timestamps in the tables are naive UTC whatever the host's time zone."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from srift.db.tables import utcnow


def test_utcnow_is_utc_on_a_host_far_from_greenwich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: a local clock would be half a day off
    time.tzset()
    try:
        got = utcnow()
        want = datetime.now(UTC).replace(tzinfo=None)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert got.tzinfo is None
    assert abs(want - got) < timedelta(seconds=5)
