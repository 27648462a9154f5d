"""Caches of derived answers keyed by what they were derived from: the request and the data revisions.

An entry's key is (database, tokens of the data areas the answer reads, the caller's key). The tokens are
read from the database (srift.db.revisions) before the answer is built, in the same session, and any write
to an area — by the API, the CLI, a worker or plain SQL, in any process — replaces its token, so a later
lookup misses and the answer is rebuilt from the new data. Nothing is ever invalidated by hand.

A guard keeps that true as the code changes: while an answer is built, every statement run through the
session is recorded, and an answer whose build read a table outside the areas of its key (or ran SQL whose
tables cannot be told) is returned but not kept — a warning names the tables once. So a later change that
makes a build read new data (a plan naming probe jobs reads their samples) costs speed, never correctness.
Reads that bypass the session (files, other sessions) are the builder's to declare; model artifacts are
immutable per version, which the bandwidth area covers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.util import find_tables

from srift.db.revisions import REVISIONS_TABLE, WATCHED_TABLES, database_key, read_revisions
from srift.domain.revisions import DataArea, Revisions

T = TypeVar("T")
log = logging.getLogger("srift.cache")
UNKNOWN_TABLE = "<SQL whose tables cannot be told>"


@contextlib.contextmanager
def tables_read(session: Session) -> Iterator[set[str]]:
    """The names of the tables every statement run through `session` inside the block touched."""
    found: set[str] = set()

    def record(state: ORMExecuteState) -> None:
        statement = state.statement
        tables = (
            find_tables(statement, check_columns=True, include_joins=True, include_aliases=True)
            if isinstance(statement, ClauseElement)
            else []
        )
        if tables:
            found.update(t.name for t in tables)
        else:
            found.add(UNKNOWN_TABLE)

    event.listen(session, "do_orm_execute", record)
    try:
        yield found
    finally:
        event.remove(session, "do_orm_execute", record)


class RevisionCache(Generic[T]):
    """A thread-safe LRU of answers keyed by (database, area tokens, key), at most `max_entries` long."""

    def __init__(self, name: str, *, max_entries: int) -> None:
        self.name = name
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.uncacheable = 0
        self._warned: set[frozenset[str]] = set()

    def get_or_build(
        self, *, session: Session, areas: tuple[DataArea, ...], key: Hashable, build: Callable[[], T]
    ) -> T:
        """The cached answer for `key` at the current revisions of `areas`, else `build()` (then kept).

        `build` raising caches nothing, nor does a build that read tables outside `areas` (see the module).
        Two threads missing the same key at once both build; the answers are equal (same inputs), and the
        later one is kept.
        """
        revisions = read_revisions(session=session)
        full_key = (database_key(session), revisions.of(areas), key)
        with self._lock:
            found = self._hit(full_key)
            if found is not _MISSING:
                return found  # type: ignore[return-value]
            self.misses += 1
        with tables_read(session) as read:
            value = build()
        allowed = {REVISIONS_TABLE, *(t for area in areas for t in WATCHED_TABLES[area])}
        outside = frozenset(read - allowed)
        if outside:
            with self._lock:
                self.uncacheable += 1
                first = outside not in self._warned
                self._warned.add(outside)
            if first:
                log.warning(
                    "%s: not cached, the answer read %s, outside the areas of its key (%s)",
                    self.name,
                    ", ".join(sorted(outside)),
                    ", ".join(areas),
                )
            return value
        with self._lock:
            self._items[full_key] = value
            self._items.move_to_end(full_key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value

    def peek(
        self, *, database: str, revisions: Revisions, areas: tuple[DataArea, ...], key: Hashable
    ) -> T | None:
        """The answer kept for `key` at `revisions` (read by the caller, e.g. awaited on an asyncio
        connection) of `areas` in `database` (srift.db.revisions.database_key_of), or None: then the caller
        builds it through get_or_build, which counts the miss."""
        with self._lock:
            found = self._hit((database, revisions.of(areas), key))
        return None if found is _MISSING else found  # type: ignore[return-value]

    def _hit(self, full_key: Hashable) -> object:
        """The entry under `full_key`, counted and made most recent, or _MISSING (the lock is held)."""
        found = self._items.get(full_key, _MISSING)
        if found is not _MISSING:
            self._items.move_to_end(full_key)
            self.hits += 1
        return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


_MISSING = object()
