"""Measurement conditions on the testbed: a fine-grained CPU quota and priority over the machine's other work.

The testbed caps each host with a CFS quota over a 100 ms period. A host of 0.25 cores may then run a 10 ms
operation at full speed when its quota is fresh, or stall for up to 75 ms when it is spent, so single timings
are bimodal and a profile's medians do not describe the mean throughput training sees. Validation therefore
shortens every host's period (same share of a core, `period_us` = 10 ms by default): an operation of a few
milliseconds then spans several periods and runs at `cpu_cores` of a core on average, like a slower CPU.

On a shared machine the hosts also compete with unrelated processes. A CFS quota only caps a cgroup; it does
not guarantee its share. Raising the host cgroups' CPU weight (`cpu.shares` on cgroup v1, `cpu.weight` on
v2) lets them get their quota first. Both settings are restored by `restore`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from srift.testbed.cgroups import write_value

DEFAULT_PERIOD_US = 10_000
MIN_QUOTA_US = 1_000
BOOST_SHARES_V1 = 10_240
BOOST_WEIGHT_V2 = 1_000


@dataclass(frozen=True, slots=True)
class CgroupSettings:
    """What one host cgroup directory held before tuning, so it can be put back."""

    path: str
    files: tuple[tuple[str, str], ...]


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    write_value(path, value, hint="run validation as root on a testbed that is up (`srift testbed status`)")


def period_for(cpu_cores: float, period_us: int) -> int:
    """The period to use: `period_us`, lengthened where the quota would fall below the kernel's 1 ms."""
    return max(period_us, int(-(-MIN_QUOTA_US // cpu_cores)) if cpu_cores < 1 else period_us)


def longest_period_s(cpu_cores: Iterable[float], period_us: int = DEFAULT_PERIOD_US) -> float:
    """The longest CPU quota period (seconds) that `tune_cgroup` gives hosts of these quotas: an idle wait
    that long leaves each of them a fresh quota."""
    return max(period_for(cores, period_us) for cores in cpu_cores) / 1e6


def tune_cgroup(
    directory: str, *, cpu_cores: float, period_us: int = DEFAULT_PERIOD_US
) -> CgroupSettings | None:
    """Shorten the CPU period (keeping `cpu_cores`) and raise the weight of one host's CPU cgroup.

    Returns the previous settings, or None for a directory without CPU files (a memory-only cgroup).
    """
    d = Path(directory)
    period = period_for(cpu_cores, period_us)
    quota = max(MIN_QUOTA_US, round(cpu_cores * period))
    if (d / "cpu.cfs_quota_us").exists():
        old = tuple(
            (name, _read(d / name)) for name in ("cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.shares")
        )
        current_period = int(old[0][1])
        # the kernel checks quota against the period at each write: shrink quota first, grow period first
        if period < current_period:
            _write(d / "cpu.cfs_quota_us", str(quota))
            _write(d / "cpu.cfs_period_us", str(period))
        else:
            _write(d / "cpu.cfs_period_us", str(period))
            _write(d / "cpu.cfs_quota_us", str(quota))
        _write(d / "cpu.shares", str(BOOST_SHARES_V1))
        return CgroupSettings(directory, old)
    if (d / "cpu.max").exists():
        old = tuple((name, _read(d / name)) for name in ("cpu.max", "cpu.weight") if (d / name).exists())
        _write(d / "cpu.max", f"{quota} {period}")
        if (d / "cpu.weight").exists():
            _write(d / "cpu.weight", str(BOOST_WEIGHT_V2))
        return CgroupSettings(directory, old)
    return None


def restore(saved: Sequence[CgroupSettings]) -> None:
    """Put back what `tune_cgroup` changed (missing directories, e.g. after `testbed down`, are skipped)."""
    for item in saved:
        d = Path(item.path)
        if not d.is_dir():
            continue
        values = dict(item.files)
        if "cpu.cfs_period_us" in values:
            period, quota = values["cpu.cfs_period_us"], values["cpu.cfs_quota_us"]
            if int(period) < int(_read(d / "cpu.cfs_period_us")):
                _write(d / "cpu.cfs_quota_us", quota)
                _write(d / "cpu.cfs_period_us", period)
            else:
                _write(d / "cpu.cfs_period_us", period)
                _write(d / "cpu.cfs_quota_us", quota)
            _write(d / "cpu.shares", values["cpu.shares"])
        else:
            for name, value in item.files:
                _write(d / name, value)


def cpu_stat(directory: str) -> dict[str, int]:
    """The cgroup's `cpu.stat` counters (throttling periods and time), empty when unreadable."""
    try:
        text = (Path(directory) / "cpu.stat").read_text()
    except OSError:
        return {}
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def load_average() -> float:
    """The machine's 1-minute load average (how busy other work kept it), 0.0 when unavailable."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def busy_fraction(before: Mapping[str, float], after: Mapping[str, float]) -> float:
    """Share of the machine's CPU time spent busy between two `cpu_times()` snapshots."""
    total = sum(after.values()) - sum(before.values())
    idle = (after.get("idle", 0.0) + after.get("iowait", 0.0)) - (
        before.get("idle", 0.0) + before.get("iowait", 0.0)
    )
    return 0.0 if total <= 0 else max(0.0, min(1.0, 1.0 - idle / total))


def cpu_times() -> dict[str, float]:
    """The machine-wide CPU time counters of /proc/stat (jiffies), by kind."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return {}
    return {name: float(v) for name, v in zip(names, first[1:], strict=False)}
