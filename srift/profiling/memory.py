"""Host memory: the default CPU memory budget (available memory or cgroup limit) and peak-RSS measurement.

Peak growth of one forward+backward is measured as the rise of the process's resident-set high-water mark
(`VmHWM` in /proc/self/status) above its resident set just before the step: freed heap memory is first
returned to the kernel (`malloc_trim`), then the high-water mark is reset by writing "5" to
/proc/self/clear_refs (Linux ≥ 4.0). This counts everything the step touches — activations, gradients,
allocator slack, library workspaces — which is what decides whether a batch fits. Where /proc is not
available the caller falls back to an estimate (see srift.profiling.profiler).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from collections.abc import Callable
from pathlib import Path

UNLIMITED_BYTES = 1 << 60
BUDGET_FRACTION = 0.75
"""Share of the free memory a profile may use by default; the rest is left for the system and allocator."""
HARD_LIMIT_FRACTION = 0.9
"""A batch whose extrapolated growth exceeds this share of the free memory is not tried (OOM-killer guard)."""

_PROC_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_MEMINFO = Path("/proc/meminfo")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= UNLIMITED_BYTES else value


def _own_cgroup_dirs() -> list[Path]:
    """Candidate cgroup directories of this process: its own path (v2 and v1 memory) and the mount roots."""
    dirs: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        if controllers == "":
            dirs.append(_CGROUP_ROOT / rel)
        elif "memory" in controllers.split(","):
            dirs.append(_CGROUP_ROOT / "memory" / rel)
    dirs += [_CGROUP_ROOT, _CGROUP_ROOT / "memory"]
    return dirs


def cgroup_free_bytes() -> int | None:
    """Bytes this process's cgroup may still use (limit minus usage), or None when there is no limit.

    Reads cgroup v2 `memory.max`/`memory.current`, else cgroup v1
    `memory.limit_in_bytes`/`memory.usage_in_bytes`.
    """
    for directory in _own_cgroup_dirs():
        for limit_name, usage_name in (
            ("memory.max", "memory.current"),
            ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        ):
            limit = _read_int(directory / limit_name)
            if limit is None:
                continue
            usage = _read_int(directory / usage_name) or 0
            return max(limit - usage, 0)
    return None


def host_available_bytes() -> int | None:
    """`MemAvailable` from /proc/meminfo, in bytes; None where it cannot be read."""
    try:
        text = _MEMINFO.read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+)\s*kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None


def free_bytes() -> int | None:
    """min(host available memory, cgroup headroom); None when neither can be read."""
    candidates = [v for v in (host_available_bytes(), cgroup_free_bytes()) if v is not None]
    return min(candidates) if candidates else None


def default_budget_bytes() -> int | None:
    """Default CPU budget: BUDGET_FRACTION of `free_bytes()`; None if unknown."""
    free = free_bytes()
    return None if free is None else int(free * BUDGET_FRACTION)


def _status_kib(key: str) -> int | None:
    try:
        text = _PROC_STATUS.read_text()
    except OSError:
        return None
    match = re.search(rf"^{key}:\s+(\d+)\s*kB", text, re.M)
    return int(match.group(1)) if match else None


def _malloc_trim() -> None:
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return


def peak_rss_supported() -> bool:
    """True where the resident-set high-water mark can be read and reset (Linux /proc)."""
    if _status_kib("VmHWM") is None:
        return False
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss_growth_bytes(step: Callable[[], None]) -> int:
    """Run `step` and return how far the resident set peaked above where it was just before."""
    _malloc_trim()
    before = _status_kib("VmRSS")
    _CLEAR_REFS.write_text("5")
    step()
    peak = _status_kib("VmHWM")
    if before is None or peak is None:
        raise OSError("/proc/self/status has no VmRSS/VmHWM")
    return max(peak - before, 0) * 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


@functools.cache
def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    """glibc's mallinfo2, looked up once (ctypes.util.find_library runs ldconfig: milliseconds), or None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        call = ctypes.CDLL(name).mallinfo2
    except (OSError, AttributeError):
        return None
    call.restype = _MallInfo2
    return call


def malloc_in_use_bytes() -> int | None:
    """Bytes glibc's malloc has handed out and not taken back, in every arena and mapping (mallinfo2,
    glibc ≥ 2.33: `uordblks + hblkhd`), or None elsewhere. Unlike the resident set it falls as soon as a
    buffer is freed, so it shows which buffers are alive at an instant (probes/ddp_train.py measures FSDP2's
    peaks the same way); a read takes microseconds."""
    call = _mallinfo2()
    if call is None:
        return None
    found = call()
    return int(found.uordblks + found.hblkhd)
