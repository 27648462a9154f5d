"""The CPU quota this process runs under: a CFS bandwidth limit of its cgroup (v1 or v2), or none.

A cloud VM's vCPUs carry no quota; a container with a CPU limit (Kubernetes `limits.cpu`), a burstable
share or a testbed host does. Under a quota of q cores per period P a process runs at full speed until
it has used q·P CPU seconds in the period, then waits for the next one: steps timed back to back run at q
of a core, a step that follows an idle wait starts on unused quota (`ModelProfile.fresh_quota_saving_s`).
"""

from __future__ import annotations

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

    def to_extra(self) -> dict[str, float]:
        """What `srift profile` keeps in the profile's `extra["cpu_quota"]`."""
        return {"cores": round(self.cores, 6), "period_s": round(self.period_s, 6)}


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
