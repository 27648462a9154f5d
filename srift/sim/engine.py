"""A small discrete-event engine: a heap of (time, priority, seq, event); it knows nothing of its domain.

Modelled on SimPy's core loop. There is exactly one ordering key, ``(time, priority, seq)``: earlier time
first, then lower priority, then the order of scheduling. Cancelling marks an event dead (lazy invalidation);
dead events are dropped when they reach the top of the heap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from itertools import count


class Event:
    """A scheduled callback; `cancelled` events are skipped when popped."""

    __slots__ = ("callback", "cancelled", "priority", "seq", "time")

    def __init__(self, time: float, priority: int, seq: int, callback: Callable[[], None]) -> None:
        self.time = time
        self.priority = priority
        self.seq = seq
        self.callback = callback
        self.cancelled = False

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"<Event t={self.time} p={self.priority} #{self.seq}{state}>"


class Engine:
    """The event loop: `schedule` callbacks, `step` through them in order, or `run` until a time."""

    __slots__ = ("_queue", "_seq", "now")

    def __init__(self, *, start: float = 0.0) -> None:
        self.now = start
        self._queue: list[tuple[float, int, int, Event]] = []
        self._seq = count()

    def schedule(self, delay: float, callback: Callable[[], None], *, priority: int = 0) -> Event:
        """Run `callback` `delay` seconds from now (delay ≥ 0)."""
        if not delay >= 0.0:
            raise ValueError(f"delay must be ≥ 0, got {delay}")
        return self.schedule_at(self.now + delay, callback, priority=priority)

    def schedule_at(self, time: float, callback: Callable[[], None], *, priority: int = 0) -> Event:
        """Run `callback` at absolute `time` (not before now)."""
        if not time >= self.now or math.isnan(time):
            raise ValueError(f"cannot schedule at {time}: the clock is at {self.now}")
        event = Event(time, priority, next(self._seq), callback)
        heapq.heappush(self._queue, (time, priority, event.seq, event))
        return event

    @staticmethod
    def cancel(event: Event) -> None:
        """Mark `event` dead; it will be skipped (cancelling twice or after it ran is harmless)."""
        event.cancelled = True

    def peek(self) -> float:
        """Time of the next live event, or +inf when none is left."""
        queue = self._queue
        while queue and queue[0][3].cancelled:
            heapq.heappop(queue)
        return queue[0][0] if queue else math.inf

    def step(self) -> bool:
        """Process the next live event; False when the queue is empty."""
        queue = self._queue
        while queue:
            time, _, _, event = heapq.heappop(queue)
            if event.cancelled:
                continue
            self.now = time
            event.cancelled = True
            event.callback()
            return True
        return False

    def run(self, until: float | None = None) -> None:
        """Process events in order until none is left, or until the next one is later than `until`.

        With `until`, the clock ends at `until` (events exactly at `until` are processed).
        """
        if until is None:
            while self.step():
                pass
            return
        if until < self.now:
            raise ValueError(f"until={until} is before now={self.now}")
        while self.peek() <= until:
            self.step()
        self.now = until

    def __len__(self) -> int:
        """Number of queued entries, dead ones included (they are dropped lazily)."""
        return len(self._queue)
