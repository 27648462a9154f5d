"""Per-host cgroups: CPU quota (v1 cpu.cfs_quota_us or v2 cpu.max) and an optional memory limit.

Host cgroups nest under the cgroup of the process that brings the testbed up (on each controller's
hierarchy), so they stay inside whatever limits a container or service manager placed on it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from srift.errors import EnvironmentProblem

CFS_PERIOD_US = 100_000


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """Where host cgroups go: `version` 1 (one hierarchy per controller) or 2 (unified)."""

    version: int
    cpu_parent: Path
    memory_parent: Path | None


def _mounts() -> list[tuple[str, str, list[str]]]:
    found = []
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1], parts[2], parts[3].split(",")))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (or '' for the unified hierarchy) → this process's cgroup path."""
    paths: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return paths
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[1] == "":
            paths[""] = parts[2]
        for controller in parts[1].split(","):
            if controller:
                paths[controller] = parts[2]
    return paths


def detect_layout() -> CgroupLayout:
    """Find the cpu (and memory) controllers; raise EnvironmentProblem when there is no CPU quota support."""
    mounts = _mounts()
    own = _own_paths()
    v1_cpu = next((m for m in mounts if m[1] == "cgroup" and "cpu" in m[2]), None)
    if v1_cpu is not None and (Path(v1_cpu[0]) / "cpu.cfs_quota_us").exists():
        v1_mem = next((m for m in mounts if m[1] == "cgroup" and "memory" in m[2]), None)
        cpu_parent = Path(v1_cpu[0] + own.get("cpu", "/").rstrip("/"))
        mem_parent = Path(v1_mem[0] + own.get("memory", "/").rstrip("/")) if v1_mem else None
        return CgroupLayout(version=1, cpu_parent=cpu_parent, memory_parent=mem_parent)
    for mount, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        controllers = _read(Path(mount) / "cgroup.controllers").split()
        if "cpu" in controllers:
            parent = Path(mount)
            return CgroupLayout(
                version=2, cpu_parent=parent, memory_parent=parent if "memory" in controllers else None
            )
    raise EnvironmentProblem(
        "no cgroup CPU controller found (need cgroup v1 `cpu` with cpu.cfs_quota_us, or v2 with `cpu`)",
        hint="mount the cpu cgroup controller (e.g. boot with cgroups enabled) and run as root",
    )


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


WRITE_HINT = "run as root on a machine whose cgroups allow CPU quotas (and memory limits when set)"


def write_value(path: Path, value: str, *, hint: str = WRITE_HINT) -> None:
    """Write one cgroup control file; an OSError becomes an EnvironmentProblem that says how to fix it."""
    try:
        path.write_text(value)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot write {value.strip()!r} to {path} ({exc.strerror})", hint=hint
        ) from exc


def planned_dirs(layout: CgroupLayout, name: str, *, memory: bool) -> list[Path]:
    """The cgroup directories a host will get (cpu first, then memory on v1 when limited)."""
    dirs = [layout.cpu_parent / name]
    if layout.version == 1 and memory:
        if layout.memory_parent is None:
            raise EnvironmentProblem(
                "a memory limit was asked for but the memory cgroup controller is not mounted",
                hint="drop memory_mib from the spec, or mount the memory controller",
            )
        dirs.append(layout.memory_parent / name)
    return dirs


def create(layout: CgroupLayout, path: Path, *, cpu_cores: float, memory_mib: int | None) -> None:
    """Create one cgroup directory and apply its limits (idempotent)."""
    path.mkdir(exist_ok=True)
    if layout.version == 1:
        if (path / "cpu.cfs_quota_us").exists():
            write_value(path / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            write_value(path / "cpu.cfs_quota_us", str(max(1000, round(cpu_cores * CFS_PERIOD_US))))
        if memory_mib is not None and (path / "memory.limit_in_bytes").exists():
            write_value(path / "memory.limit_in_bytes", str(memory_mib * 1024 * 1024))
        return
    write_value(path / "cpu.max", f"{max(1000, round(cpu_cores * CFS_PERIOD_US))} {CFS_PERIOD_US}")
    if memory_mib is not None:
        write_value(path / "memory.max", str(memory_mib * 1024 * 1024))


def enable_v2_controllers(layout: CgroupLayout, *, memory: bool) -> None:
    """On cgroup v2, let children of the parent use cpu (and memory)."""
    if layout.version != 2:
        return
    wanted = ["+cpu"] + (["+memory"] if memory else [])
    control = layout.cpu_parent / "cgroup.subtree_control"
    current = _read(control).split()
    for item in wanted:
        if item[1:] not in current:
            write_value(control, item)


def procs_in(path: Path) -> list[int]:
    return [int(x) for x in _read(path / "cgroup.procs").split() if x.strip().isdigit()]


def remove(path: Path, *, grace_s: float = 2.0) -> None:
    """Kill whatever runs in the cgroup and remove its directory; a missing directory is fine."""
    if not path.exists():
        return
    me = os.getpid()
    deadline = time.monotonic() + grace_s + 5.0
    sig = signal.SIGTERM
    term_until = time.monotonic() + grace_s
    while True:
        pids = [p for p in procs_in(path) if p != me]
        if not pids:
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise EnvironmentProblem(
                        f"cannot remove cgroup {path} ({exc.strerror})",
                        hint="stop the processes still in it, then run `srift testbed down` again",
                    ) from exc
        else:
            if time.monotonic() > term_until:
                sig = signal.SIGKILL
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"processes {pids} in cgroup {path} would not exit",
                    hint="kill them by hand, then run `srift testbed down` again",
                )
        time.sleep(0.05)
