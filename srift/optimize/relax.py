"""Relaxations of the batch split that bound whole subtrees of the exhaustive search, from compute tables.

A subtree of the search (srift.optimize.exhaustive) fixes some groups and leaves `rem` samples to place on
the candidates from a position on. Each bound here relaxes how those samples are split and solves the
relaxation exactly, from one table per candidate: its (scaled) compute at every whole per-GPU batch up to
what the global batch can use, built once from the profile's linear pieces (`linear_points`), so no work
grows with a type's largest batch beyond the global batch.

- `reach_time_s`: the least iteration time at which the later candidates, each VM computing no longer,
  can hold `rem` samples with the batches the policy allows (powers of two but for one group) and the rent
  the budget leaves (a fractional knapsack per time step).
- `least_compute_holding_s`: the least compute of any later VM holding at least s samples.
- `rent_bound`: the least rent per iteration of the fleet, every VM paid for the whole iteration and the
  iteration at least every VM's compute; over the added VM with the least price per sample, exact on each
  linear piece of its compute (monotone or convex there).
- `cheap_rent`: a quicker, weaker form of the same, for the many children of one expansion.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from srift.optimize.search import linear_points
from srift.optimize.space import BatchPolicy, Problem

GRID_MAX_ENTRIES = 2_000_000
"""`least_time_with_vms` tabulates every candidate's capacity at every event time when the table has at most
this many entries (memory: two int64 tables, 32 MB at most); above, it walks the candidates each time."""
RENT_STEP_LOG = math.log(1.01)
"""`least_time_within_rent` rounds the rent up to powers of 1.01 (a cache key; rounding up keeps a bound)."""
ROUNDING = 1.0 - 1e-12
"""Interpolated table values are lowered by this factor, so that float rounding never lifts a bound."""


def _first_index(n: int, holds: Callable[[int], bool], *, lo: int = 0) -> int:
    """The least index in [lo, n) at which `holds` is true, `n` when none: `holds` is false, then true (the
    samples a relaxation holds only grow with the time an index stands for), so it is bisected."""
    return bisect.bisect_left(range(n), True, lo=lo, key=holds)


def _first_time(times: Sequence[float], holds: Callable[[int], bool]) -> float:
    """The first of `times` (ascending) at whose index `holds` is true (`_first_index`); inf when none."""
    index = _first_index(len(times), holds)
    return times[index] if index < len(times) else math.inf


class SplitRelaxation:
    """The relaxations of the module docstring for one problem, its floor factor and per-VM batch caps.

    With `scales` (one per candidate, each ≥ 1), candidate q's compute is taken `scales[q]` times slower:
    the tables then bound a quantity that is at least every VM's compute so scaled, such as the quantile's
    time of srift.optimize.exhaustive (`BranchAndBound`), and every bound here holds for it as it holds for
    the iteration time at scale 1."""

    def __init__(self, problem: Problem, *, factor: float, scales: Sequence[float] | None = None) -> None:
        self.problem = problem
        self.factor = factor
        cands = problem.candidates
        g = problem.constraints.global_batch
        self.last = len(cands)
        self.cap = [x.cap for x in cands]
        self.d = [x.devices for x in cands]
        self.price = [x.price_usd_per_s for x in cands]
        self._cap_arr = np.asarray(self.cap, dtype=np.int64)
        self._price_arr = np.asarray(self.price, dtype=np.float64)
        self.policy = problem.batch_policy
        self._table: list[np.ndarray] = []
        self._pieces: list[tuple[list[float], list[float]]] = []
        for q, x in enumerate(cands):
            top = min(x.max_vm_batch, g) // x.devices * x.devices
            points = [b for b in linear_points(x) if b <= top]
            if top >= x.devices and (not points or points[-1] < top):
                points.append(top)
            scale = factor * (scales[q] if scales is not None else 1.0)
            values = [scale * x.floor_s(b) for b in points]
            self._pieces.append(([float(b) for b in points], values))
            batches = np.arange(x.devices, top + 1, x.devices, dtype=np.float64)
            table = np.interp(batches, points, values) * ROUNDING if points else batches
            self._table.append(np.maximum(table, 0.0))
        self.hi: list[int] = []
        self._within = [self._sorted_times(table) for table in self._table]

    @staticmethod
    def _sorted_times(table: np.ndarray) -> tuple[list[float], list[int]]:
        """A table's per-GPU batches in order of compute, each kept where it raises the largest batch so
        far: (times, largest per-GPU batch whose compute is at most that time)."""
        if table.size == 0:
            return [], []
        order = np.argsort(table, kind="stable")
        best = np.maximum.accumulate(order + 1)
        keep = np.ones(best.size, dtype=bool)
        keep[1:] = best[1:] > best[:-1]
        return table[order][keep].tolist(), best[keep].tolist()

    def largest_batch_within(self, q: int, compute_s: float) -> int:
        """Candidate q's largest per-VM batch (up to the global batch) whose (scaled) compute is at most
        `compute_s`; 0 when none is."""
        times, best = self._within[q]
        j = bisect.bisect_right(times, compute_s)
        return best[j - 1] * self.d[q] if j else 0

    def cut(self, hi: Sequence[int]) -> None:
        """Limit each candidate to per-VM batches ≤ hi (a multiple of its devices; below them: unusable)."""
        self.hi = list(hi)
        self._k_top = [max(h // d, 0) for h, d in zip(self.hi, self.d, strict=True)]
        self._per_gpu = [self._per_gpu_arrays(q) for q in range(self.last)]
        self._per_gpu_pow2 = [self._per_gpu_arrays(q, pow2=True) for q in range(self.last)]
        self._hold = [self._holding(q) for q in range(self.last)]
        self._eff = [self._efficiency(q) for q in range(self.last)]
        self._pieces_arrays()
        self._events: dict[int, tuple[list[float], list[int], list[int], list[bool]]] = {}
        self._hold_cache: dict[tuple[int, int], float] = {}
        self._cheap: dict[tuple[int, int, float], float] = {}
        self._vms_cache: dict[tuple[int, int, int, int], float] = {}
        self._held_cache: dict[tuple[int, int, int, int], int] = {}
        self._unlimited: dict[tuple[int, int], float] = {}
        self._grid: tuple[list[float], np.ndarray, np.ndarray] | None = None
        self._grid_refused = False
        self._prices: dict[int, list[float]] = {}
        self._rent_cache: dict[tuple[int, int, int, int | None], float] = {}
        self._rent_held: dict[tuple[int, int, float, int], float] = {}

    # -- tables -------------------------------------------------------------------------------------------

    def _per_gpu_arrays(self, q: int, *, pow2: bool = False) -> tuple[list[float], list[int]]:
        """Candidate q's per-GPU batches within its hi (`pow2`: only powers of two) in order of compute
        time, each kept where it raises the largest batch that fits: (times, largest per-GPU batch from
        that time on)."""
        table = self._table[q][: self._k_top[q]]
        if not pow2:
            return self._sorted_times(table)
        ks = [k for k in (1 << e for e in range(max(table.size, 1).bit_length())) if k <= table.size]
        pairs = sorted((float(table[k - 1]), k) for k in ks)
        times: list[float] = []
        best: list[int] = []
        for t, k in pairs:
            if not best or k > best[-1]:
                times.append(t)
                best.append(k)
        return times, best

    def _holding(self, q: int) -> np.ndarray:
        """Per per-GPU batch k (index k − 1), the least compute over per-GPU batches ≥ k."""
        table = self._table[q][: self._k_top[q]]
        return np.minimum.accumulate(table[::-1])[::-1] if table.size else table

    def _efficiency(self, q: int) -> np.ndarray:
        """Per per-GPU batch k (index k − 1), the least price · compute / per-VM batch over batches ≤ k."""
        table = self._table[q][: self._k_top[q]]
        if table.size == 0:
            return table
        batches = np.arange(1, table.size + 1, dtype=np.float64) * self.d[q]
        return np.minimum.accumulate(self.price[q] * table / batches)

    def _pieces_arrays(self) -> None:
        """Every usable candidate's linear compute pieces within its hi, in candidate order, as arrays: the
        pieces of the candidates from a position on are a suffix."""
        cols: list[list[float]] = [[], [], [], [], [], []]
        self._piece_start = [0] * (self.last + 1)
        for q in range(self.last):
            self._piece_start[q] = len(cols[0])
            d, hi = self.d[q], self.hi[q]
            if hi < d:
                continue
            xs, ys = self._pieces[q]
            pts = [(b, c) for b, c in zip(xs, ys, strict=True) if d <= b <= hi]
            if not pts or pts[0][0] > d:
                pts.insert(0, (float(d), self._at(q, d)))
            if pts[-1][0] < hi:
                pts.append((float(hi), self._at(q, hi)))
            pairs = list(itertools.pairwise(pts)) or [(pts[0], pts[0])]
            for (u, cu), (v, cv) in pairs:
                for col, value in zip(cols, (u, v, cu, cv, self.price[q], float(hi)), strict=True):
                    col.append(value)
        self._piece_start[self.last] = len(cols[0])
        self._piece = tuple(np.asarray(col, dtype=np.float64) for col in cols)

    def compute_s(self, q: int, batch: int) -> float:
        """Candidate q's (scaled, rounded down) compute at a per-VM batch: a multiple of its devices, at
        most the global batch."""
        return self._at(q, batch)

    def _at(self, q: int, batch: int) -> float:
        """Candidate q's scaled compute at a per-VM batch (a multiple of its devices within its table)."""
        return float(self._table[q][batch // self.d[q] - 1])

    # -- bounds -------------------------------------------------------------------------------------------

    def reach_time_s(
        self, pos: int, rem: int, *, price: float, t0: float, stop: float, budget_usd: float, iterations: int
    ) -> float:
        """The least t ≥ t0 at which candidates from `pos` on can hold `rem` samples with every VM computing
        for at most t and, under a budget, renting no more than iterations · t · (price + theirs) ≤
        budget_usd allows; inf when no t up to `stop` does.

        At a given t a VM holds at most the largest per-VM batch its policy allows whose compute fits: under
        pow2_split every group but the last present takes a power of two per GPU, so the candidates hold at
        most their power-of-two capacities plus, for one candidate only, the rest of its capacity (the last
        group's exact remainder). Under a budget the power-of-two part is a fractional knapsack (types by
        samples per dollar), an upper bound of any real choice. Without a budget capacity only grows with
        t, so the first time it suffices is bisected; from there on, between the times where some capacity
        grows it only shrinks (less rent per second), so the least t is one of those times: they are
        scanned in increasing order.
        """
        events = self._events.get(pos)
        if events is None:
            events = self._events[pos] = self._event_lists(pos)
        times, qs, ks, last_kind = events
        i = bisect.bisect_right(times, t0)
        if self._held_unlimited(pos, i - 1) < rem:
            lo = _first_index(len(times), lambda j: self._held_unlimited(pos, j) >= rem, lo=i)
            if lo >= len(times):
                return math.inf
            t0 = times[lo]
            i = bisect.bisect_right(times, t0)
        base, full = self._held_at(pos, t0)
        ratio = max((h / self.price[q] for q, h in base.items()), default=0.0)
        extra = max((self.cap[q] * h for q, h in full.items()), default=0)
        t = t0
        while True:
            if t > stop:
                return math.inf
            money = (budget_usd / (iterations * t) - price) if t > 0 else math.inf
            if money <= 0:
                return math.inf
            # money · the best samples per dollar (plus one type's whole capacity) bounds what it buys:
            # most times fail that quick test
            if money * ratio + extra >= rem and self._held(base, full, money) >= rem:
                return t
            if i >= len(times):
                return math.inf
            t = times[i]
            while i < len(times) and times[i] == t:
                q = qs[i]
                if last_kind[i]:
                    full[q] = ks[i] * self.d[q]
                    extra = max(extra, self.cap[q] * full[q])
                else:
                    base[q] = ks[i] * self.d[q]
                    ratio = max(ratio, base[q] / self.price[q])
                i += 1

    def _held_unlimited(self, pos: int, index: int) -> float:
        """`_held` without a budget at the `index`-th event time of `pos` (before the first: nothing),
        remembered: `reach_time_s` bisects the same times for many subtrees."""
        if index < 0:
            return 0.0
        key = (pos, index)
        found = self._unlimited.get(key)
        if found is None:
            base, full = self._held_at(pos, self._events[pos][0][index])
            found = self._unlimited[key] = self._held(base, full, math.inf)
        return found

    def _held_at(self, pos: int, t: float) -> tuple[dict[int, int], dict[int, int]]:
        """Per candidate from `pos` on, the most samples one VM holds at t with the batches every group
        may take (powers of two under pow2 and pow2_split), and (pow2_split) with those the last group
        present may take."""
        base: dict[int, int] = {}
        full: dict[int, int] = {}
        split = self.policy is BatchPolicy.POW2_SPLIT
        for q in range(pos, self.last):
            times, best = self._per_gpu[q] if self.policy is BatchPolicy.ANY else self._per_gpu_pow2[q]
            j = bisect.bisect_right(times, t)
            if j:
                base[q] = best[j - 1] * self.d[q]
            if split:
                times, best = self._per_gpu[q]
                j = bisect.bisect_right(times, t)
                if j:
                    full[q] = best[j - 1] * self.d[q]
        return base, full

    def _held(self, base: dict[int, int], full: dict[int, int], usd_per_s: float) -> float:
        """The most samples the candidates can hold at `base` samples per VM within `usd_per_s` of rent,
        plus, for the one candidate whose group may be the last present, the rest of its capacity."""
        extra = max((self.cap[q] * (h - base.get(q, 0)) for q, h in full.items()), default=0)
        return self._most_held(base, usd_per_s) + extra

    def _most_held(self, held: dict[int, int], usd_per_s: float) -> float:
        """The most samples the candidates can hold at `held` samples per VM within `usd_per_s` of rent."""
        if usd_per_s == math.inf:
            return float(sum(self.cap[q] * h for q, h in held.items()))
        if usd_per_s <= 0:
            return 0.0
        total = 0.0
        for q in sorted(held, key=lambda q: -held[q] / self.price[q]):
            n = min(float(self.cap[q]), usd_per_s / self.price[q])
            total += n * held[q]
            usd_per_s -= n * self.price[q]
            if usd_per_s <= 0:
                break
        return total

    def _event_lists(self, pos: int) -> tuple[list[float], list[int], list[int], list[bool]]:
        """The times at which some candidate from `pos` on holds more: (time, candidate, per-GPU batch,
        whether it is a batch only the last group may take), in time order."""
        rows: list[tuple[float, int, int, bool]] = []
        split = self.policy is BatchPolicy.POW2_SPLIT
        for q in range(pos, self.last):
            every = self._per_gpu[q] if self.policy is BatchPolicy.ANY else self._per_gpu_pow2[q]
            kinds = [(every, False), (self._per_gpu[q], True)] if split else [(every, False)]
            for (times, best), last in kinds:
                rows.extend((t, q, k, last) for t, k in zip(times, best, strict=True))
        rows.sort()
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]

    def least_time_with_vms(self, pos: int, rem: int, vms: int, *, max_price: float = math.inf) -> float:
        """The least t at which `vms` VMs of candidates from `pos` on (each type at most its cap, each VM
        renting at most `max_price` per second) can hold `rem` samples, every VM computing for at most t
        with the batches the policy allows (powers of two but for the last group); inf when none can.

        At a given t the VMs hold at most the `vms` largest power-of-two capacities plus, for one type, the
        rest of its capacity on its VMs; capacity only grows with t, so the event times are bisected.
        """
        if rem <= 0:
            return 0.0
        if vms <= 0:
            return math.inf
        prices = self._prices_from(pos)
        allowed = bisect.bisect_right(prices, max_price)
        key = (pos, rem, vms, allowed)
        found = self._vms_cache.get(key)
        if found is not None:
            return found
        events = self._events.get(pos)
        if events is None:
            events = self._events[pos] = self._event_lists(pos)
        times = events[0]
        found = _first_time(times, lambda j: self._vms_held(pos, allowed, vms, j) >= rem)
        if len(self._vms_cache) < 1 << 18:
            self._vms_cache[key] = found
        return found

    def _vms_held(self, pos: int, allowed: int, vms: int, index: int) -> int:
        """The most samples `vms` VMs of candidates from `pos` on, among the `allowed` cheapest (each type at
        most its cap), hold at the `index`-th event time of `pos` (`least_time_with_vms`): the `vms` largest
        power-of-two capacities plus, for one type, the rest of its capacity on its VMs. Remembered: it does
        not depend on the samples asked for, so the bisections of many subtrees share it."""
        key = (pos, allowed, vms, index)
        found = self._held_cache.get(key)
        if found is not None:
            return found
        prices = self._prices_from(pos)
        ceiling = prices[allowed - 1] if allowed else -1.0
        t = self._events[pos][0][index]
        grid = self._held_grid()
        if grid is not None:
            found = self._vms_held_grid(grid, pos, ceiling, vms, t)
            if len(self._held_cache) < 1 << 18:
                self._held_cache[key] = found
            return found
        base, full = self._held_at(pos, t)
        sizes = sorted(((h, self.cap[q]) for q, h in base.items() if self.price[q] <= ceiling), reverse=True)
        left, total = vms, 0
        for h, cap in sizes:
            n = min(cap, left)
            total += n * h
            left -= n
            if not left:
                break
        rest = [
            min(self.cap[q], vms) * (h - base.get(q, 0)) for q, h in full.items() if self.price[q] <= ceiling
        ]
        found = total + max(rest, default=0)
        if len(self._held_cache) < 1 << 18:
            self._held_cache[key] = found
        return found

    def _held_grid(self) -> tuple[list[float], np.ndarray, np.ndarray] | None:
        """Every candidate's per-VM capacity at every event time (`_held_at` for all candidates at once):
        (times, rows of the batches every group may take, rows of those the last group may take); None
        when the grid would exceed GRID_MAX_ENTRIES (then `_held_at` answers one time at a time)."""
        if self._grid is not None or self._grid_refused:
            return self._grid
        events = self._events.get(0)
        if events is None:
            events = self._events[0] = self._event_lists(0)
        times = sorted(set(events[0]))
        if len(times) * max(self.last, 1) > GRID_MAX_ENTRIES:
            self._grid_refused = True
            return None
        at = np.asarray(times, dtype=np.float64)
        base = np.zeros((len(times), self.last), dtype=np.int64)
        full = np.zeros((len(times), self.last), dtype=np.int64)
        split = self.policy is BatchPolicy.POW2_SPLIT
        for q in range(self.last):
            every = self._per_gpu[q] if self.policy is BatchPolicy.ANY else self._per_gpu_pow2[q]
            for (steps, best), out in ((every, base), *(((self._per_gpu[q], full),) if split else ())):
                if steps:
                    j = np.searchsorted(np.asarray(steps, dtype=np.float64), at, side="right")
                    out[:, q] = np.where(j > 0, np.asarray(best, dtype=np.int64)[j - 1] * self.d[q], 0)
        self._grid = (times, base, full)
        return self._grid

    def _vms_held_grid(
        self, grid: tuple[list[float], np.ndarray, np.ndarray], pos: int, ceiling: float, vms: int, t: float
    ) -> int:
        """`_vms_held` from the grid: the same sums, vectorised over the candidates."""
        times, base, full = grid
        row = bisect.bisect_right(times, t) - 1
        if row < 0:
            return 0
        keep = self._price_arr[pos:] <= ceiling
        held = base[row, pos:][keep]
        caps = self._cap_arr[pos:][keep]
        if held.size == 0:
            return 0
        order = np.argsort(-held, kind="stable")
        sizes, counts = held[order], np.minimum(caps[order], vms)
        before = np.cumsum(counts) - counts
        total = int((np.clip(vms - before, 0, counts) * sizes).sum())
        rest = np.minimum(caps, vms) * (full[row, pos:][keep] - held)
        return total + max(int(rest.max()), 0)

    def least_time_within_rent(self, pos: int, rem: int, vms: int, *, usd_per_s: float) -> float:
        """The least t at which at most `vms` VMs of candidates from `pos` on (each type at most its cap),
        renting at most `usd_per_s` per second together, can hold `rem` samples, every VM computing for at
        most t; 0 when it cannot tell (no rent limit, or no grid), inf when no t can.

        Why: `least_time_with_vms` limits each VM's rent, not their sum, so a subtree that must spread its
        samples over many VMs is bounded as if each could be the fastest, dearest type. At a given t each VM
        holds at most the largest per-VM batch whose compute fits (any batch: an upper bound of every
        policy), and the most samples that `vms` VMs within the rent hold is at most, for any λ ≥ 0, λ ·
        usd_per_s + the `vms` largest (held − λ · price)⁺ (Lagrangian relaxation of the rent; taken at λ =
        0 and where each type's term reaches 0). That only grows with t (a fixed rent), so the event times
        are bisected. The rent is rounded up to a 1 % grid (more rent: an earlier t, still a bound) so that
        subtrees share the answer."""
        if rem <= 0:
            return 0.0
        if vms <= 0:
            return math.inf
        if usd_per_s == math.inf:
            return 0.0
        grid = self._held_grid()
        if grid is None:
            return 0.0
        # no rent (or less than none) is taken as none: more rent only lowers the answer
        step = math.ceil(math.log(usd_per_s) / RENT_STEP_LOG) if usd_per_s > 0 else None
        key = (pos, rem, vms, step)
        found = self._rent_cache.get(key)
        if found is not None:
            return found
        money = math.exp(step * RENT_STEP_LOG) if step is not None else 0.0
        found = _first_time(grid[0], lambda j: self._held_within_rent(pos, vms, money, j) >= rem)
        if len(self._rent_cache) < 1 << 18:
            self._rent_cache[key] = found
        return found

    def _held_within_rent(self, pos: int, vms: int, money: float, row: int) -> float:
        """An upper bound of the samples at most `vms` VMs of candidates from `pos` on hold at the grid's
        `row`-th time while renting at most `money` per second together (`least_time_within_rent`)."""
        key = (pos, vms, money, row)
        found = self._rent_held.get(key)
        if found is not None:
            return found
        assert self._grid is not None
        _, base, full = self._grid
        rows = full if self.policy is BatchPolicy.POW2_SPLIT else base
        held = rows[row, pos:].astype(np.float64)
        prices = self._price_arr[pos:]
        keep = held > 0
        if not keep.any():
            found = 0.0
        else:
            held, prices = held[keep], prices[keep]
            counts = np.minimum(self._cap_arr[pos:][keep], vms)
            free = prices <= 0
            lams = np.concatenate(([0.0], held[~free] / prices[~free]))
            value = np.maximum(held[None, :] - lams[:, None] * prices[None, :], 0.0)
            order = np.argsort(-value, axis=1, kind="stable")
            value = np.take_along_axis(value, order, axis=1)
            n = counts[order]
            before = np.cumsum(n, axis=1) - n
            take = np.clip(vms - before, 0, n)
            found = float((lams * money + (take * value).sum(axis=1)).min())
        if len(self._rent_held) < 1 << 18:
            self._rent_held[key] = found
        return found

    def _prices_from(self, pos: int) -> list[float]:
        """The prices of the usable candidates from `pos` on, ascending."""
        found = self._prices.get(pos)
        if found is None:
            found = self._prices[pos] = sorted(
                self.price[q] for q in range(pos, self.last) if self.hi[q] >= self.d[q]
            )
        return found

    def least_compute_holding_s(
        self, pos: int, samples: int, *, only: bool = False, max_price: float = math.inf
    ) -> float:
        """The least (scaled) compute of any VM of a candidate from `pos` on (`only`: of candidate `pos`)
        that holds `samples` samples or more and rents for at most `max_price` per second (inf when none
        can; 0 for none)."""
        if samples <= 0:
            return 0.0
        if max_price < math.inf:
            least = math.inf
            for q in range(pos, pos + 1 if only else self.last):
                table = self._hold[q]
                k = -(-samples // self.d[q])
                if self.price[q] <= max_price and k <= table.size and table[k - 1] < least:
                    least = float(table[k - 1])
            return least
        key = (pos if not only else -1 - pos, samples)
        found = self._hold_cache.get(key)
        if found is None:
            found = math.inf
            for q in range(pos, pos + 1 if only else self.last):
                table = self._hold[q]
                k = -(-samples // self.d[q])
                if k <= table.size and table[k - 1] < found:
                    found = float(table[k - 1])
            self._hold_cache[key] = found
        return found

    def cheap_rent(self, pos: int, rem: int, t: float) -> float:
        """A lower bound of the rent per iteration of the VMs that hold `rem` samples on candidates from
        `pos` on when every iteration takes at least t: each such VM (per-VM batch b ≤ min(hi, rem), a
        multiple of its devices) is paid for max(t, its compute), ≥ b · price · max(t / its largest such b,
        least compute per sample up to that batch)."""
        if rem <= 0:
            return 0.0
        key = (pos, rem, t)
        found = self._cheap.get(key)
        if found is not None:
            return found
        best = math.inf
        for q in range(pos, self.last):
            eff = self._eff[q]
            k = min(eff.size, rem // self.d[q])
            if k <= 0:
                continue
            value = max(self.price[q] * t / (k * self.d[q]), float(eff[k - 1]))
            if value < best:
                best = value
        found = rem * best
        if len(self._cheap) < 1 << 20:
            self._cheap[key] = found
        return found

    def rent_bound(self, pos: int, rem: int, *, t: float, price: float) -> float:
        """A lower bound of the rent per iteration of a fleet whose VMs so far rent `price` per second, that
        places `rem` more samples on candidates from `pos` on, and whose iteration takes at least t.

        Every VM is paid for the whole iteration T ≥ t, and T is at least the compute of every VM. Of the
        VMs added, the one with the least price per sample (type q, batch b) gives rent ≥ T · (price +
        rem · p_q / b) with T ≥ max(t, compute_q(b)). Minimised over q and over real b in [devices,
        min(hi, rem)], piece by piece of the (linear) compute: on each piece the function is monotone or
        convex, so its least value lies at a piece end, where compute crosses t, or at the stationary point.
        """
        if rem <= 0:
            return t * price
        lo = self._piece_start[pos]
        if lo == self._piece_start[self.last]:
            return math.inf
        u, v, cu, cv, p, hi = (x[lo:] for x in self._piece)
        top = np.minimum(hi, float(rem))
        keep = u <= top
        if not keep.all():
            u, v, cu, cv, p, top = u[keep], v[keep], cu[keep], cv[keep], p[keep], top[keep]
            if u.size == 0:
                return math.inf
        width = v - u
        slope = np.divide(cv - cu, width, out=np.zeros_like(u), where=width > 0)
        v = np.minimum(v, top)
        k = rem * p
        trial = [u, v]
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = u + (t - cu) / slope
            trial.append(np.where((cross > u) & (cross < v), cross, u))
            if price > 0:
                alpha = cu - slope * u
                stat = np.sqrt(alpha * k / (slope * price))
                trial.append(np.where((alpha > 0) & (slope > 0) & (stat > u) & (stat < v), stat, u))
        best = math.inf
        for b in trial:
            c = cu + slope * (b - u)
            value = float((np.maximum(c, t) * (price + k / b)).min())
            if value < best:
                best = value
        return best
