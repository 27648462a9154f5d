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
        own_active.difference_update(to_shared)
        shared_active.update(to_shared)
        flag = [False] * len(rates)
        for k in to_shared:
            flag[k] = True
        moving = [e for e in own if flag[klass[e[1]]]]
        own = [e for e in own if not flag[klass[e[1]]]]
        for f, j in moving:
            heapq.heappush(shared, (clock + (f - t) * rates[klass[j]], j))
    if to_own:
        shared_active.difference_update(to_own)
        own_active.update(to_own)
        flag = [False] * len(rates)
        for k in to_own:
            flag[k] = True
        moving = [e for e in shared if flag[klass[e[1]]]]
        shared = [e for e in shared if not flag[klass[e[1]]]]
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
    the share cap/c runs at exactly the share, so their transfers keep marks (service still to receive, on one
    group clock) in the heap `shared`. *Own*: a transfer at its own rate has a fixed finish time, in the heap
    `own`. A class that changes mode has its transfers moved to the other heap. An event costs O(log n);
    classes are moved only when the regime flips, or when the share crosses the slowest shared class's rate
    (a departure) or the fastest own class's rate (an arrival). While every transfer shares (pure processor
    sharing, the common case when communication-bound) a tight inner loop handles events. Once every
    transfer has arrived, shared departures come in mark order and their times follow from a cumulative sum,
    so that tail is computed in one pass of running sums until the regime would change or an own-rate
    transfer finishes first.
    """
    n = len(ready_s)
    if n == 0:
        return [], []
    own_finish, busy, i = _uncontended(ready_s, bits, klass, rates, cap)
    if i == n:
        return own_finish, busy
    job_rate = [rates[k] for k in klass]
    count = [0] * len(rates)
    shared_active: set[int] = set()
    own_active: set[int] = set()
    shared: list[tuple[float, int]] = []
    own: list[tuple[float, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    c = 0
    agg = 0.0
    capped = was_capped = False
    share = INF
    clock = 0.0
    last_t = 0.0
    busy_start = 0.0
    min_shared = INF
    max_own = -INF
    quiet = 0
    finish = [math.nan] * n
    if i > 0:
        # Take over from the own-rate prefix: transfers done by ready_s[i] keep their finish, the rest run on.
        last_t = ready_s[i]
        for j in range(i):
            if own_finish[j] <= last_t:
                finish[j] = own_finish[j]
            else:
                own.append((own_finish[j], j))
                k = klass[j]
                count[k] += 1
                own_active.add(k)
                c += 1
                agg += job_rate[j]
        heapq.heapify(own)
        max_own = max((rates[x] for x in own_active), default=-INF)
        if c:
            busy_start = busy.pop()[0]
    while True:
        fall_through = False
        if i == n and capped and len(shared) >= bulk_min and quiet <= 0:
            shared.sort()
            t_limit = own[0][0] if own else INF
            # Departures in mark order while the regime holds: the slowest class left still shares, the
            # own rates still reach the cap, and no own-rate transfer finishes first.
            jobs = [e[1] for e in shared]
            own_rate = [rates[klass[j]] for j in jobs]
            m = len(jobs)
            slowest_left = own_rate[:]
            for pos in range(m - 2, -1, -1):
                if slowest_left[pos + 1] < slowest_left[pos]:
                    slowest_left[pos] = slowest_left[pos + 1]
            times = []
            prev_mark = clock
            elapsed = 0.0
            done_rate = 0.0
            stop = m
            for pos in range(m):
                left = c - pos
                mark = shared[pos][0]
                elapsed += (mark - prev_mark) * left / cap
                t = last_t + elapsed
                if not (agg - done_rate >= cap and slowest_left[pos] >= cap / left and t < t_limit):
                    stop = pos
                    break
                times.append(t)
                prev_mark = mark
                done_rate += own_rate[pos]
            if stop < bulk_min:
                quiet = bulk_min
            if stop == 0:
                continue
            for pos in range(stop):
                j = jobs[pos]
                t = times[pos]
                finish[j] = t if t > last_t else last_t
                k = klass[j]
                count[k] -= 1
                agg -= rates[k]
                if count[k] == 0:
                    shared_active.discard(k)
            last_t = max(last_t, times[-1])
            t = last_t
            clock = shared[stop - 1][0]
            c -= stop
            del shared[:stop]
            min_shared = min((rates[k] for k in shared_active), default=INF)
            if c == 0:
                agg = 0.0
                busy.append((busy_start, t))
            was_capped = capped
            capped = c > 0 and not agg < cap
            share = cap / c if capped else INF
            if capped == was_capped and (not capped or min_shared >= share):
                continue
            moved = True
        elif capped:
            # Capped regime with every class in its mode (shared ones at cap/c, own ones below it): handle
            # events here until the regime flips or a class must change mode.
            moved = False
            t_arr = ready_s[i] if i < n else INF
            while True:
                if shared:
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
                    rate = job_rate[j]
                    c -= 1
                    left_k = count[k] - 1
                    count[k] = left_k
                    if c == 0:
                        agg = 0.0
                        busy.append((busy_start, t))
                        capped = False
                        share = INF
                        shared_active.discard(k)
                        own_active.discard(k)
                        min_shared = INF
                        max_own = -INF
                        break
                    agg -= rate
                    if left_k == 0:
                        if from_shared:
                            shared_active.discard(k)
                            if rate == min_shared:
                                min_shared = min((rates[x] for x in shared_active), default=INF)
                        else:
                            own_active.discard(k)
                            if rate == max_own:
                                max_own = max((rates[x] for x in own_active), default=-INF)
                    if agg < cap:
                        capped = False
                        share = INF
                        moved = True
                        break
                    share = cap / c
                    if min_shared < share:
                        moved = True
                        break
                    if i == n:
                        quiet -= 1
                        if quiet <= 0 and len(shared) >= bulk_min:
                            break
                else:
                    rate = job_rate[i]
                    after = cap / (c + 1)
                    if max_own >= after:
                        fall_through = True
                        break
                    clock += share * (t_arr - last_t)
                    last_t = t_arr
                    k = klass[i]
                    if count[k] == 0:
                        if rate >= after:
                            shared_active.add(k)
                            if rate < min_shared:
                                min_shared = rate
                        else:
                            own_active.add(k)
                            if rate > max_own:
                                max_own = rate
                    count[k] += 1
                    if k in shared_active:
                        push(shared, (clock + bits[i], i))
                    else:
                        push(own, (t_arr + bits[i] / rate, i))
                    i += 1
                    c += 1
                    agg += rate
                    share = after
                    t_arr = ready_s[i] if i < n else INF
            if not (moved or fall_through):
                continue
            t = last_t
        else:
            moved = False
        if not moved:
            quiet -= 1
            t_own = own[0][0] if own else INF
            t_shared = last_t + (shared[0][0] - clock) / share if shared else INF
            t_arr = ready_s[i] if i < n else INF
            from_shared = t_shared < t_own
            t = t_shared if from_shared else t_own
            departing = t <= t_arr
            if departing:
                if t == INF:
                    break
            else:
                t = t_arr
            if t < last_t:
                t = last_t
            if capped:
                clock += share * (t - last_t)
            last_t = t
            if departing:
                j = pop(shared if from_shared else own)[1]
                k = klass[j]
                finish[j] = t
                c -= 1
                count[k] -= 1
                if c == 0:
                    agg = 0.0
                    busy.append((busy_start, t))
                else:
                    agg -= rates[k]
                if count[k] == 0:
                    if from_shared:
                        shared_active.discard(k)
                        if rates[k] == min_shared:
                            min_shared = min((rates[x] for x in shared_active), default=INF)
                    else:
                        own_active.discard(k)
                        if rates[k] == max_own:
                            max_own = max((rates[x] for x in own_active), default=-INF)
                was_capped = capped
                capped = c > 0 and not agg < cap
                share = cap / c if capped else INF
                if capped == was_capped and (not capped or min_shared >= share):
                    continue
            else:
                j = i
                i += 1
                k = klass[j]
                rate = rates[k]
                if c == 0:
                    busy_start = t
                c += 1
                agg += rate
                was_capped = capped
                capped = not agg < cap
                share = cap / c if capped else INF
                if count[k] == 0:
                    if capped and rate >= share:
                        shared_active.add(k)
                        if rate < min_shared:
                            min_shared = rate
                    else:
                        own_active.add(k)
                        if rate > max_own:
                            max_own = rate
                count[k] += 1
                if k in shared_active:
                    push(shared, (clock + bits[j], j))
                else:
                    push(own, (t + bits[j] / rate, j))
                if capped == was_capped and (not capped or max_own < share):
                    continue
        shared, own, min_shared, max_own = _move_classes(
            t, clock, share, capped, rates, klass, shared, own, shared_active, own_active
        )
    return finish, busy
