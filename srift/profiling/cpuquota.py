"""The CPU quota this process runs under: a CFS bandwidth limit of its cgroup (v1 or v2), or none.

A cloud VM's vCPUs carry no quota; a container with a CPU limit (Kubernetes `limits.cpu`), a burstable
share or a testbed host does. Under a quota of q cores per period P a process runs at full speed until
it has used q·P CPU seconds in the period, then waits for the next one: steps timed back to back run at q
of a core, a step that follows an idle wait starts on unused quota (`ModelProfile.fresh_quota_saving_s`).
How much CPU runs unthrottled after idling is the kernel's to decide (it hands the quota out in per-CPU
slices and keeps a slice's remainder), so it is measured (`measure_burst_cpu_s`), not assumed to be q·P.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC_SELF = Path("/proc/self")


@dataclass(frozen=True, slots=True)
class CpuQuota:
    """The tightest CFS quota on the way from this process's cgroup up to its hierarchy's root."""

    cores: float
    """Quota over period: the share of one CPU the cgroup may use (0.25 = a quarter core)."""
    period_s: float
    path: str
    """The cgroup directory the quota was read from."""
    burst_cpu_s: float | None = None
    """CPU seconds one thread ran before its first throttle after an idle wait (`measure_burst_cpu_s`), or
    None when not measured."""

    def to_extra(self) -> dict[str, float]:
        """What `srift profile` keeps in the profile's `extra["cpu_quota"]`."""
        out = {"cores": round(self.cores, 6), "period_s": round(self.period_s, 6)}
        if self.burst_cpu_s is not None:
            out["burst_cpu_s"] = round(self.burst_cpu_s, 6)
        return out

    def with_burst(self, burst_cpu_s: float | None) -> CpuQuota:
        """The same quota with its measured burst."""
        return dataclasses.replace(self, burst_cpu_s=burst_cpu_s)


def _cpu_mounts(mountinfo: str) -> list[tuple[str, str, bool]]:
    """(mount root, mount point, is v2) of every cgroup mount holding the cpu controller (v1) or a v2 tree."""
    found = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        kind, options = tail[0], tail[2].split(",")
        if kind == "cgroup2":
            found.append((fields[3], fields[4], True))
        elif kind == "cgroup" and "cpu" in options:
            found.append((fields[3], fields[4], False))
    return found


def _own_paths(cgroup: str) -> tuple[str | None, str | None]:
    """This process's cgroup path in the v1 cpu hierarchy and in the v2 hierarchy (/proc/self/cgroup)."""
    v1 = v2 = None
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v1, v2


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _quota_at(directory: Path, *, v2: bool) -> tuple[float, float] | None:
    """(cores, period_s) of one cgroup directory, or None without a limit there."""
    if v2:
        try:
            quota_text, period_text = (directory / "cpu.max").read_text().split()[:2]
        except (OSError, ValueError):
            return None
        if quota_text == "max":
            return None
        try:
            quota, period = int(quota_text), int(period_text)
        except ValueError:
            return None
    else:
        q, p = _read_int(directory / "cpu.cfs_quota_us"), _read_int(directory / "cpu.cfs_period_us")
        if q is None or p is None:
            return None
        quota, period = q, p
    if quota <= 0 or period <= 0:
        return None
    return quota / period, period / 1e6


def read_cpu_quota(proc: Path = PROC_SELF) -> CpuQuota | None:
    """The tightest CPU quota over this process's cgroup and its ancestors, or None (no quota, no cgroups
    visible, or files that cannot be read: a profile then simply carries no quota)."""
    try:
        mountinfo = (proc / "mountinfo").read_text()
        cgroup = (proc / "cgroup").read_text()
    except OSError:
        return None
    v1_path, v2_path = _own_paths(cgroup)
    best: CpuQuota | None = None
    for root, point, v2 in _cpu_mounts(mountinfo):
        own = v2_path if v2 else v1_path
        if own is None:
            continue
        rel = Path(own).relative_to(root) if Path(own).is_relative_to(root) else None
        if rel is None:
            continue
        directory = Path(point) / rel
        while True:
            got = _quota_at(directory, v2=v2)
            if got is not None and (best is None or got[0] < best.cores):
                best = CpuQuota(cores=got[0], period_s=got[1], path=str(directory))
            if directory == Path(point) or directory.parent == directory:
                break
            directory = directory.parent
    return best


def _throttle_count(directory: str) -> int | None:
    """How often the cgroup at `directory` has been throttled (`nr_throttled` of its cpu.stat), or None."""
    try:
        for line in (Path(directory) / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "nr_throttled":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _one_burst(
    quota: CpuQuota, *, idle_s: float, gap_s: float, limit_s: float, sleep: Callable[[float], None]
) -> float | None:
    """CPU seconds this thread spins after `idle_s` idle before the first wall-clock gap longer than `gap_s`
    that the cgroup counts as a throttle (any such gap where cpu.stat cannot be read); None when none
    comes within `limit_s` (the quota does not bind one thread) or the gap was not a throttle."""
    sleep(idle_s)
    before = _throttle_count(quota.path)
    start = last = time.perf_counter()
    cpu_start = time.thread_time()
    while last - start < limit_s:
        now = time.perf_counter()
        if now - last > gap_s:
            # the thread ran no CPU in the gap, so its CPU clock now is what ran before the throttle
            ran_cpu_s = time.thread_time() - cpu_start
            after = _throttle_count(quota.path)
            if before is not None and after is not None and after == before:
                return None
            return ran_cpu_s
        last = now
    return None


def measure_burst_cpu_s(
    quota: CpuQuota,
    *,
    repeats: int = 5,
    idle_periods: float = 4.0,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """The CPU seconds one thread of this process runs unthrottled after an idle wait of `idle_periods`
    quota periods: the median over `repeats` of the CPU it spins before its first throttle (a wall-clock
    gap the cgroup's cpu.stat counts as one). None when no repeat met a throttle (the quota does not bind
    one thread, or every gap was something else).

    On the validation machine (cgroup v1, 2 CPUs) a 0.25-core, 10 ms quota runs 5–7 ms, two to three times
    its q·P. Only a quota below one core can throttle one thread (elsewhere each repeat spins its limit of
    20 periods). Costs about `repeats` × (`idle_periods` + 3) periods of wall time."""
    gap_s = min(1e-3, 0.05 * quota.period_s)
    limit_s = max(0.05, 20 * quota.period_s)
    found = [
        b
        for _ in range(repeats)
        if (
            b := _one_burst(
                quota, idle_s=idle_periods * quota.period_s, gap_s=gap_s, limit_s=limit_s, sleep=sleep
            )
        )
        is not None
    ]
    return statistics.median(found) if found else None
