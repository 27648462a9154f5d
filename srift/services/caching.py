"""Caches of derived answers keyed by what they were derived from: the request and the data revisions.

An entry's key is (database, tokens of the data areas the answer reads, the caller's key). The tokens are
read from the database (srift.db.revisions) before the answer is built, in the same session, and any write
to an area — by the API, the CLI, a worker or plain SQL, in any process — replaces its token, so a later
lookup misses and the answer is rebuilt from the new data. Nothing is ever invalidated by hand.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sqlalchemy.orm import Session

from srift.db.revisions import database_key, read_revisions
from srift.domain.revisions import DataArea

T = TypeVar("T")


class RevisionCache(Generic[T]):
    """A thread-safe LRU of answers keyed by (database, area tokens, key), at most `max_entries` long."""

    def __init__(self, name: str, *, max_entries: int) -> None:
        self.name = name
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_build(
        self, *, session: Session, areas: tuple[DataArea, ...], key: Hashable, build: Callable[[], T]
    ) -> T:
        """The cached answer for `key` at the current revisions of `areas`, else `build()` (then kept).

        `build` raising caches nothing. Two threads missing the same key at once both build; the answers are
        equal (same inputs), and the later one is kept.
        """
        revisions = read_revisions(session=session)
        full_key = (database_key(session), revisions.of(areas), key)
        with self._lock:
            found = self._items.get(full_key, _MISSING)
            if found is not _MISSING:
                self._items.move_to_end(full_key)
                self.hits += 1
                return found  # type: ignore[return-value]
            self.misses += 1
        value = build()
        with self._lock:
            self._items[full_key] = value
            self._items.move_to_end(full_key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


_MISSING = object()
