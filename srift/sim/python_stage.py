"""The simulator's pure-Python exchange stage kernel: one fair-shared stage (Srift eq. 2) event by event.

`srift.sim.exchange` runs each stage through this kernel or its C twin (`srift.sim._stage`, same signature
and results); tests hold both equal to the literal event-engine reference.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Sequence

INF = math.inf


BULK_MIN = 12
"""Fewest shared transfers for which the departure tail is computed in one batch instead of event by event."""


def _uncontended(
    ready_s: Sequence[float], bits: Sequence[float], klass: Sequence[int], rates: Sequence[float], cap: float
) -> tuple[list[float], list[tuple[float, float]], int]:
    """How far the timeline runs with every transfer at its own rate: (finish times, busy intervals, i0).

    If the sum of the own rates of the transfers in flight stays below the cap, eq. 2 slows nobody and
    running each at its own rate *is* the timeline. That holds up to the arrival of transfer `i0` (n when
    it holds throughout): the returned finish times and busy intervals are exact for the transfers before
    `i0`; a transfer still in flight at ready_s[i0] has its own-rate finish, which the event loop then
    takes over. (A margin of 1e-9 keeps this check and the event loop from disagreeing on rounding at a tie;
    stopping early is always safe.)
    """
    n = len(ready_s)
    own = [rates[k] for k in klass]
    end = [s + b / r for s, b, r in zip(ready_s, bits, own, strict=True)]
    i0 = n
    threshold = cap * (1.0 - 1e-9)
    if sum(own) >= threshold:
        if any(map(operator.eq, end, ready_s)):
            # A transfer that ends the instant it starts: let the event loop order it.
            return [], [], 0
        # Replay starts and ends in time order (an end before a start at equal times) until the own rates
        # in flight reach the cap.
        heap: list[tuple[float, int]] = []
        total = 0.0
        for j in range(n):
            t = ready_s[j]
            while heap and heap[0][0] <= t:
                total -= own[heapq.heappop(heap)[1]]
            total += own[j]
            if total >= threshold:
                i0 = j
                break
            heapq.heappush(heap, (end[j], j))
    if i0 == 0:
        return [], [], 0
    # Busy intervals of the first i0 transfers: a new one opens at a start later than every earlier end.
    busy = []
    open_s, reach = ready_s[0], end[0]
    for j in range(1, i0):
        t = ready_s[j]
        if t > reach:
            busy.append((open_s, reach))
            open_s, reach = t, end[j]
        elif end[j] > reach:
            reach = end[j]
    busy.append((open_s, reach))
    return end, busy, i0


def _move_classes(
    t: float,
    clock: float,
    share: float,
    capped: bool,
    rates: Sequence[float],
    klass: Sequence[int],
    shared: list[tuple[float, int]],
    own: list[tuple[float, int]],
    shared_active: set[int],
    own_active: set[int],
) -> tuple[list[tuple[float, int]], list[tuple[float, int]], float, float]:
    """Put every active class in the mode eq. 2 now gives it; returns (shared, own, min_shared, max_own)."""
    to_shared = [k for k in own_active if rates[k] >= share] if capped else []
    to_own = [k for k in shared_active if not (capped and rates[k] >= share)]
    # Entries are unique (mark or finish, job), so pop order does not depend on how a heap was built: a heap
    # that only gains entries takes pushes, one that lost entries is rebuilt.
    if to_shared:
        moving, own = _take(to_shared, own, own_active, shared_active, klass, len(rates))
        for f, j in moving:
            heapq.heappush(shared, (clock + (f - t) * rates[klass[j]], j))
    if to_own:
        moving, shared = _take(to_own, shared, shared_active, own_active, klass, len(rates))
        heapq.heapify(shared)
        if to_shared:
            own.extend([(t + (m - clock) / rates[klass[j]], j) for m, j in moving])
        else:
            for m, j in moving:
                heapq.heappush(own, (t + (m - clock) / rates[klass[j]], j))
    if to_shared:
        heapq.heapify(own)
    min_shared = min([rates[x] for x in shared_active]) if shared_active else INF
    max_own = max([rates[x] for x in own_active]) if own_active else -INF
    return shared, own, min_shared, max_own


def _water_level(active: set[int], count: Sequence[int], rates: Sequence[float], cap: float) -> float:
    """The capped regime's share: the level L with Σ over active transfers of min(own rate, L) = cap.

    Classes are taken from the slowest: one whose own rate is below the level of what is left keeps its own
    rate and leaves the rest of the cap to the others (max-min fairness, as TCP flows or NCCL channels
    sharing a link get); the first that is not runs at the level, and so does every faster one.
    """
    left = cap
    m = 0
    for k in active:
        m += count[k]
    for k in sorted(active, key=rates.__getitem__):
        level = left / m
        if rates[k] >= level:
            return level
        left -= rates[k] * count[k]
        m -= count[k]
    # Only when rounding leaves every class below the level (the own rates sum to the cap): the fastest
    # class's rate is the level.
    return max(rates[k] for k in active)


def _take(
    classes: list[int],
    entries: list[tuple[float, int]],
    source: set[int],
    target: set[int],
    klass: Sequence[int],
    n_classes: int,
) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """Move `classes` from the `source` mode's set to the `target`'s; (their entries, the other entries)."""
    source.difference_update(classes)
    target.update(classes)
    flag = [False] * n_classes
    for k in classes:
        flag[k] = True
    return [e for e in entries if flag[klass[e[1]]]], [e for e in entries if not flag[klass[e[1]]]]


_CONTINUE, _MOVE, _EVENT, _DONE = range(4)
"""What a step of `run_stage`'s loop asks for next: pick the next step by regime; put the classes in the
modes eq. 2 now gives them (`_Stage.move_classes`); handle the next event one at a time (`_Stage.events`);
stop (every transfer has left)."""


class _Stage:
    """`run_stage`'s state: the transfers, both heaps, the regime, and what has finished.

    Shared transfers keep *marks* in the heap `shared`: the group clock `clock` advances by `share` bits
    per second of wall time while capped, and a shared transfer departs when the clock reaches its mark
    (the clock when it joined + its bits). Own-rate transfers keep their finish times in the heap `own`.
    """

    __slots__ = (
        "agg",
        "agg_own",
        "bits",
        "bulk_min",
        "busy",
        "busy_start",
        "c",
        "cap",
        "capped",
        "clock",
        "count",
        "finish",
        "i",
        "job_rate",
        "klass",
        "last_t",
        "max_own",
        "min_shared",
        "n",
        "own",
        "own_active",
        "quiet",
        "rates",
        "ready_s",
        "share",
        "shared",
        "shared_active",
    )

    def __init__(
        self,
        ready_s: Sequence[float],
        bits: Sequence[float],
        klass: Sequence[int],
        rates: Sequence[float],
        cap: float,
        bulk_min: int,
    ) -> None:
        self.ready_s, self.bits, self.klass, self.rates, self.cap = ready_s, bits, klass, rates, cap
        self.bulk_min = bulk_min
        self.n = len(ready_s)
        self.job_rate = [rates[k] for k in klass]
        # Active transfers of each class.
        self.count = [0] * len(rates)
        self.shared_active: set[int] = set()
        self.own_active: set[int] = set()
        self.shared: list[tuple[float, int]] = []
        self.own: list[tuple[float, int]] = []
        # Active transfers.
        self.c = 0
        # The sum of the active transfers' own rates (eq. 2's b_agg).
        self.agg = 0.0
        # The part of it from transfers at their own rates (below the share).
        self.agg_own = 0.0
        self.capped = False
        # The water level while capped, (cap − agg_own) / (shared transfers), else INF.
        self.share = INF
        self.clock = 0.0
        self.last_t = 0.0
        self.busy_start = 0.0
        # The slowest own rate among the shared classes.
        self.min_shared = INF
        # The fastest own rate among the own-rate classes.
        self.max_own = -INF
        # Events to handle one by one before trying the bulk tail again.
        self.quiet = 0
        self.finish = [math.nan] * self.n
        # The next transfer to arrive.
        self.i = 0
        self.busy: list[tuple[float, float]] = []

    def take_over(self, own_finish: list[float], busy: list[tuple[float, float]], i0: int) -> None:
        """Start from `_uncontended`'s prefix: transfers done by ready_s[i0] keep their finish, the rest run
        on at their own rates, and the busy interval still open is reopened."""
        self.busy, self.i = busy, i0
        if i0 == 0:
            return
        self.last_t = self.ready_s[i0]
        for j in range(i0):
            if own_finish[j] <= self.last_t:
                self.finish[j] = own_finish[j]
            else:
                self.own.append((own_finish[j], j))
                k = self.klass[j]
                self.count[k] += 1
                self.own_active.add(k)
                self.c += 1
                self.agg += self.job_rate[j]
        heapq.heapify(self.own)
        self.agg_own = self.agg
        self.max_own = max((self.rates[x] for x in self.own_active), default=-INF)
        if self.c:
            self.busy_start = busy.pop()[0]

    def join(self, k: int, *, shares: bool) -> None:
        """Class k's first active transfer arrives: the class joins the shared mode when `shares`, else its
        own."""
        rate = self.rates[k]
        if shares:
            self.shared_active.add(k)
            if rate < self.min_shared:
                self.min_shared = rate
        else:
            self.own_active.add(k)
            if rate > self.max_own:
                self.max_own = rate

    def class_left(self, k: int, *, from_shared: bool) -> None:
        """Class k's last active transfer has left its mode: the mode's slowest / fastest rate again."""
        rate = self.rates[k]
        if from_shared:
            self.shared_active.discard(k)
            if rate == self.min_shared:
                self.min_shared = min((self.rates[x] for x in self.shared_active), default=INF)
        else:
            self.own_active.discard(k)
            if rate == self.max_own:
                self.max_own = max((self.rates[x] for x in self.own_active), default=-INF)

    def regime(self) -> bool:
        """Re-judge the regime after a change of the active set, and the share the current modes give;
        whether the regime flipped."""
        was_capped = self.capped
        self.capped = self.c > 0 and not self.agg < self.cap
        self.share = (self.cap - self.agg_own) / len(self.shared) if self.capped and self.shared else INF
        return self.capped != was_capped

    def consistent(self) -> bool:
        """Whether every active class is in the mode the share gives it (uncapped: all at their own rates;
        capped: some share, the shared ones at least as fast as the share, the own-rate ones slower)."""
        if not self.capped:
            return not self.shared
        return bool(self.shared) and self.min_shared >= self.share and self.max_own < self.share

    def move_classes(self) -> None:
        """Put every active class in the mode the water level now gives it (at the current time, last_t)."""
        if self.capped:
            self.share = _water_level(self.shared_active | self.own_active, self.count, self.rates, self.cap)
        self.shared, self.own, self.min_shared, self.max_own = _move_classes(
            self.last_t,
            self.clock,
            self.share,
            self.capped,
            self.rates,
            self.klass,
            self.shared,
            self.own,
            self.shared_active,
            self.own_active,
        )
        self.agg_own = sum([self.rates[k] * self.count[k] for k in self.own_active])

    def bulk_departures(self) -> int:
        """Every transfer has arrived and at least `bulk_min` share: the departures that keep the regime,
        in mark order, in one pass (`_bulk_times`)."""
        shared = self.shared
        shared.sort()
        t_limit = self.own[0][0] if self.own else INF
        times = _bulk_times(
            shared,
            self.rates,
            self.klass,
            clock=self.clock,
            last_t=self.last_t,
            agg=self.agg,
            agg_own=self.agg_own,
            cap=self.cap,
            t_limit=t_limit,
        )
        stop = len(times)
        if stop < self.bulk_min:
            self.quiet = self.bulk_min
        if stop == 0:
            return _CONTINUE
        for pos in range(stop):
            j = shared[pos][1]
            t = times[pos]
            self.finish[j] = t if t > self.last_t else self.last_t
            k = self.klass[j]
            self.count[k] -= 1
            self.agg -= self.rates[k]
            if self.count[k] == 0:
                self.shared_active.discard(k)
        self.last_t = max(self.last_t, times[-1])
        self.clock = shared[stop - 1][0]
        self.c -= stop
        del shared[:stop]
        self.min_shared = min((self.rates[k] for k in self.shared_active), default=INF)
        if self.c == 0:
            self.agg = self.agg_own = 0.0
            self.busy.append((self.busy_start, self.last_t))
        if not self.regime() and self.consistent():
            return _CONTINUE
        return _MOVE

    def capped_events(self) -> int:
        """Capped regime with every class in its mode (shared ones at the water level, own ones below it):
        handle events here until the regime flips, a class must change mode, or the bulk tail can take
        over. The hot loop: what it updates at every event lives in locals, stored back once at the end."""
        shared, own, finish, count, bits = self.shared, self.own, self.finish, self.count, self.bits
        klass, job_rate, ready_s, n, cap = self.klass, self.job_rate, self.ready_s, self.n, self.cap
        shared_active, push, pop = self.shared_active, heapq.heappush, heapq.heappop
        clock, last_t, share, c, agg, i = self.clock, self.last_t, self.share, self.c, self.agg, self.i
        agg_own = self.agg_own
        t_arr = ready_s[i] if i < n else INF
        step = _CONTINUE
        while True:
            if shared:
                # A shared transfer departs when the group clock, advancing at `share`, reaches its mark.
                t = last_t + (shared[0][0] - clock) / share
                from_shared = True
                if own and own[0][0] <= t:
                    t = own[0][0]
                    from_shared = False
            else:
                t = own[0][0]
                from_shared = False
            if t <= t_arr:
                if t < last_t:
                    t = last_t
                clock += share * (t - last_t)
                last_t = t
                j = pop(shared if from_shared else own)[1]
                finish[j] = t
                k = klass[j]
                c -= 1
                count[k] -= 1
                if c == 0:
                    agg, agg_own, share = 0.0, 0.0, INF
                    self.busy.append((self.busy_start, t))
                    self.capped = False
                    shared_active.discard(k)
                    self.own_active.discard(k)
                    self.min_shared, self.max_own = INF, -INF
                    break
                agg -= job_rate[j]
                if not from_shared:
                    agg_own -= job_rate[j]
                if count[k] == 0:
                    self.class_left(k, from_shared=from_shared)
                if agg < cap:
                    self.capped, share, step = False, INF, _MOVE
                    break
                if not shared:
                    step = _MOVE
                    break
                # A departure raises the level: own-rate classes stay below it, a shared one may fall below.
                share = (cap - agg_own) / len(shared)
                if self.min_shared < share:
                    step = _MOVE
                    break
                if i == n:
                    self.quiet -= 1
                    if self.quiet <= 0 and len(shared) >= self.bulk_min:
                        break
            else:
                # An arrival lowers the level: it joins its class's mode (a new class shares when it is at
                # least as fast as the level with it sharing), unless the new level falls to an own-rate
                # class's rate (then the one-by-one events take it).
                rate = job_rate[i]
                k = klass[i]
                free = cap - agg_own
                n_shared = len(shared)
                joins = k in shared_active if count[k] else rate * (n_shared + 1) >= free
                if joins:
                    after = free / (n_shared + 1)
                    top = self.max_own
                elif n_shared:
                    after = (free - rate) / n_shared
                    top = rate if rate > self.max_own else self.max_own
                else:
                    step = _EVENT
                    break
                if top >= after:
                    step = _EVENT
                    break
                clock += share * (t_arr - last_t)
                last_t = t_arr
                if count[k] == 0:
                    self.join(k, shares=joins)
                count[k] += 1
                if joins:
                    push(shared, (clock + bits[i], i))
                else:
                    push(own, (t_arr + bits[i] / rate, i))
                    agg_own += rate
                i += 1
                c += 1
                agg += rate
                share = after
                t_arr = ready_s[i] if i < n else INF
        self.clock, self.last_t, self.share, self.c, self.agg, self.i = clock, last_t, share, c, agg, i
        self.agg_own = agg_own
        return step

    def events(self) -> int:
        """Handle events one at a time (every regime) until the regime or a class's mode must change; while
        uncapped there is nothing faster to hand over to."""
        own, shared, klass, rates, count = self.own, self.shared, self.klass, self.rates, self.count
        while True:
            self.quiet -= 1
            t_own = own[0][0] if own else INF
            t_shared = self.last_t + (shared[0][0] - self.clock) / self.share if shared else INF
            t_arr = self.ready_s[self.i] if self.i < self.n else INF
            from_shared = t_shared < t_own
            t = t_shared if from_shared else t_own
            departing = t <= t_arr
            if departing:
                if t == INF:
                    return _DONE
            else:
                t = t_arr
            if t < self.last_t:
                t = self.last_t
            if self.capped:
                self.clock += self.share * (t - self.last_t)
            self.last_t = t
            if departing:
                j = heapq.heappop(shared if from_shared else own)[1]
                k = klass[j]
                self.finish[j] = t
                self.c -= 1
                count[k] -= 1
                if self.c == 0:
                    self.agg = self.agg_own = 0.0
                    self.busy.append((self.busy_start, t))
                else:
                    self.agg -= rates[k]
                    if not from_shared:
                        self.agg_own -= rates[k]
                if count[k] == 0:
                    self.class_left(k, from_shared=from_shared)
            else:
                j = self.i
                self.i += 1
                k = klass[j]
                rate = rates[k]
                if self.c == 0:
                    self.busy_start = t
                self.c += 1
                self.agg += rate
                if count[k] == 0:
                    # Capped with it: it shares when at least as fast as the level with it sharing.
                    capped = not self.agg < self.cap
                    free = self.cap - self.agg_own
                    self.join(k, shares=capped and rate * (len(shared) + 1) >= free)
                count[k] += 1
                if k in self.shared_active:
                    heapq.heappush(shared, (self.clock + self.bits[j], j))
                else:
                    heapq.heappush(own, (t + self.bits[j] / rate, j))
                    self.agg_own += rate
            flipped = self.regime()
            if flipped or not self.consistent():
                return _MOVE
            if self.capped:
                return _CONTINUE


def _bulk_times(
    shared: list[tuple[float, int]],
    rates: Sequence[float],
    klass: Sequence[int],
    *,
    clock: float,
    last_t: float,
    agg: float,
    agg_own: float,
    cap: float,
    t_limit: float,
) -> list[float]:
    """Departure times of the shared transfers in mark order (`shared` sorted), for as long as the regime
    holds: the own rates still in flight reach the cap, the slowest class left still shares, and no
    own-rate transfer finishes first (at `t_limit`). The own-rate transfers (`agg_own` in all) keep their
    rates throughout, so the shared ones split what they leave of the cap."""
    own_rate = [rates[klass[e[1]]] for e in shared]
    m = len(own_rate)
    # slowest_left[pos]: the slowest own rate among the transfers from pos on (a minimum from the end).
    slowest_left = own_rate[:]
    for pos in range(m - 2, -1, -1):
        if slowest_left[pos + 1] < slowest_left[pos]:
            slowest_left[pos] = slowest_left[pos + 1]
    times: list[float] = []
    prev_mark = clock
    elapsed = 0.0
    done_rate = 0.0
    free = cap - agg_own
    for pos in range(m):
        left = m - pos
        mark = shared[pos][0]
        # Between two marks the group clock advances mark − prev_mark while `left` shared transfers split
        # what the own-rate ones leave of the cap (each at free / left): (mark − prev_mark)·left / free
        # seconds of wall time.
        elapsed += (mark - prev_mark) * left / free
        t = last_t + elapsed
        # done_rate sums the own rates of the transfers gone, so agg − done_rate is b_agg of those left.
        if not (agg - done_rate >= cap and slowest_left[pos] >= free / left and t < t_limit):
            break
        times.append(t)
        prev_mark = mark
        done_rate += own_rate[pos]
    return times


def run_stage(
    ready_s: Sequence[float],
    bits: Sequence[float],
    klass: Sequence[int],
    rates: Sequence[float],
    cap: float,
    bulk_min: int = BULK_MIN,
) -> tuple[list[float], list[tuple[float, float]]]:
    """One stage on its own: finish time of every transfer (ready_s sorted) and the stage's busy intervals.

    Transfers run in one of two modes. *Shared*: in the capped regime every class whose own rate is at least
    the share (the water level: what the own-rate transfers leave of the cap, split evenly) runs at exactly
    the share, so their transfers keep marks (service still to receive, on one group clock) in the heap
    `shared`. *Own*: a transfer at its own rate has a fixed finish time, in the heap `own`. A class that
    changes mode has its transfers moved to the other heap. An event costs O(log n); classes are moved
    only when the regime flips, or when the share crosses the slowest shared class's rate (a departure)
    or the fastest own class's rate (an arrival). While every transfer shares (pure processor
    sharing, the common case when communication-bound) a tight inner loop handles events. Once every
    transfer has arrived, shared departures come in mark order and their times follow from a cumulative sum,
    so that tail is computed in one pass of running sums until the regime would change or an own-rate
    transfer finishes first.
    """
    n = len(ready_s)
    if n == 0:
        return [], []
    own_finish, busy, i0 = _uncontended(ready_s, bits, klass, rates, cap)
    if i0 == n:
        return own_finish, busy
    stage = _Stage(ready_s, bits, klass, rates, cap, bulk_min)
    stage.take_over(own_finish, busy, i0)
    while True:
        if stage.i == n and stage.capped and len(stage.shared) >= bulk_min and stage.quiet <= 0:
            step = stage.bulk_departures()
        elif stage.capped:
            step = stage.capped_events()
        else:
            step = _EVENT
        if step == _EVENT:
            step = stage.events()
        if step == _DONE:
            return stage.finish, stage.busy
        if step == _MOVE:
            stage.move_classes()
