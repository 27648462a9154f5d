"""Reading the CPU quota a process runs under, from cgroup files laid out as the kernel lays them out."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from srift.profiling.cpuquota import CpuQuota, read_cpu_quota

V1_MOUNTS = """\
31 23 0:28 / {root} rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / {root}/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / {root}/memory rw,relatime - cgroup cgroup rw,memory
"""


def _proc(tmp_path: Path, mountinfo: str, cgroup: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(mountinfo)
    (proc / "cgroup").write_text(cgroup)
    return proc


def _v1_group(directory: Path, quota_us: int, period_us: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
    (directory / "cpu.cfs_period_us").write_text(f"{period_us}\n")


def test_v1_quota_of_the_process_cgroup(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _v1_group(root / "cpu", -1, 100_000)
    _v1_group(root / "cpu" / "hosts" / "small0", 2_500, 10_000)
    proc = _proc(tmp_path, V1_MOUNTS.format(root=root), "4:memory:/x\n1:cpu:/hosts/small0\n0::/\n")
    got = read_cpu_quota(proc)
    assert got == CpuQuota(cores=0.25, period_s=0.01, path=str(root / "cpu" / "hosts" / "small0"))
    assert got.to_extra() == {"cores": 0.25, "period_s": 0.01}


def test_v1_the_tightest_ancestor_binds(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _v1_group(root / "cpu", -1, 100_000)
    _v1_group(root / "cpu" / "pod", 50_000, 100_000)
    _v1_group(root / "cpu" / "pod" / "app", 150_000, 100_000)
    proc = _proc(tmp_path, V1_MOUNTS.format(root=root), "1:cpu,cpuacct:/pod/app\n")
    got = read_cpu_quota(proc)
    assert got is not None
    assert (got.cores, got.period_s, got.path) == (0.5, 0.1, str(root / "cpu" / "pod"))


def test_v2_cpu_max(tmp_path: Path) -> None:
    root = tmp_path / "unified"
    (root / "kube" / "pod").mkdir(parents=True)
    (root / "cpu.max").write_text("max 100000\n")
    (root / "kube" / "cpu.max").write_text("max 100000\n")
    (root / "kube" / "pod" / "cpu.max").write_text("150000 100000\n")
    mounts = f"41 31 0:38 / {root} rw,relatime - cgroup2 cgroup2 rw\n"
    got = read_cpu_quota(_proc(tmp_path, mounts, "0::/kube/pod\n"))
    assert got is not None and (got.cores, got.period_s) == (1.5, 0.1)


def test_no_quota_anywhere_is_none(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _v1_group(root / "cpu", -1, 100_000)
    _v1_group(root / "cpu" / "a", -1, 100_000)
    assert read_cpu_quota(_proc(tmp_path, V1_MOUNTS.format(root=root), "1:cpu:/a\n")) is None


def test_unreadable_or_foreign_layouts_are_none(tmp_path: Path) -> None:
    assert read_cpu_quota(tmp_path / "missing") is None
    root = tmp_path / "cg"
    # the process's cgroup is outside the mounted subtree (a container's view): nothing to read
    mounts = f"32 31 0:29 /kubepods {root}/cpu rw - cgroup cgroup rw,cpu\n"
    _v1_group(root / "cpu", 1000, 10_000)
    assert read_cpu_quota(_proc(tmp_path, mounts, "1:cpu:/other\n")) is None


def _cpu_v1_writable() -> Path | None:
    base = Path("/sys/fs/cgroup/cpu")
    if os.geteuid() != 0 or not (base / "cpu.cfs_quota_us").exists():
        return None
    return base


def test_a_real_cgroup_quota_is_read_by_a_process_inside_it() -> None:
    """A cgroup made here with a quarter core per 10 ms: a Python started inside it reads exactly that."""
    base = _cpu_v1_writable()
    if base is None:
        v2 = Path("/sys/fs/cgroup/cgroup.controllers")
        if os.geteuid() != 0 or not v2.exists() or "cpu" not in v2.read_text().split():
            pytest.skip("needs root and a cgroup v1 cpu hierarchy or a v2 tree with the cpu controller")
        base = Path("/sys/fs/cgroup")
    group = base / f"srift-quota-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if (group / "cpu.cfs_quota_us").exists():
            (group / "cpu.cfs_period_us").write_text("10000")
            (group / "cpu.cfs_quota_us").write_text("2500")
        else:
            (group / "cpu.max").write_text("2500 10000")
        code = "from srift.profiling.cpuquota import read_cpu_quota as r; q = r(); print(q.cores, q.period_s)"
        enter = 'echo $$ > "$0/cgroup.procs" && exec "$1" -c "$2"'
        out = subprocess.run(
            ["/bin/sh", "-c", enter, group, sys.executable, code],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
        assert [float(x) for x in out] == [0.25, 0.01]
    finally:
        group.rmdir()
