"""What the testbed needs from the machine (root, ip, tc, namespaces, cgroups) and how it runs commands."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from srift.errors import EnvironmentProblem

NETNS_DIR = Path("/run/netns")
COMMAND_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Tools:
    """Absolute paths of the iproute2 binaries."""

    ip: str
    tc: str


def require_tools() -> Tools:
    """Check root, iproute2 and network namespaces; raise EnvironmentProblem naming everything missing."""
    missing: list[str] = []
    hints: list[str] = []
    if os.geteuid() != 0:
        missing.append("root privileges (namespaces, tc and cgroups need them)")
        hints.append("run as root, e.g. `sudo srift testbed up ...`")
    ip = shutil.which("ip") or _sbin("ip")
    tc = shutil.which("tc") or _sbin("tc")
    if ip is None or tc is None:
        missing.append("the `ip` and `tc` commands (iproute2)")
        hints.append("install iproute2 (`apt-get install iproute2`)")
    if not Path("/proc/self/ns/net").exists():
        missing.append("network namespaces (/proc/self/ns/net)")
        hints.append("use a kernel with CONFIG_NET_NS")
    if missing:
        raise EnvironmentProblem(
            "the testbed cannot run here: missing " + "; ".join(missing), hint="; ".join(hints)
        )
    assert ip is not None and tc is not None
    return Tools(ip=ip, tc=tc)


def _sbin(name: str) -> str | None:
    for folder in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        path = Path(folder) / name
        if path.exists():
            return str(path)
    return None


def run(
    argv: Sequence[str],
    *,
    input_text: str | None = None,
    check: bool = True,
    pass_fds: Sequence[int] = (),
    what: str = "",
) -> subprocess.CompletedProcess[str]:
    """Run a system command; on failure raise EnvironmentProblem with its stderr."""
    try:
        proc = subprocess.run(
            list(argv),
            input=input_text,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            pass_fds=tuple(pass_fds),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            f"{what or 'command'} failed: {' '.join(argv)} ({exc})",
            hint="check that iproute2 works on this machine",
        ) from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", " | ")[:800]
        raise EnvironmentProblem(
            f"{what or 'command'} failed (exit {proc.returncode}): {' '.join(argv)}: {detail}",
            hint="the kernel may lack the feature named above (veth, bridge, tbf/netem qdisc); "
            "run `srift testbed down` to clean up",
        )
    return proc


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def list_netns() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        return []


def pids_in_netns(name: str) -> list[int]:
    """Processes whose network namespace is the named one (what `ip netns pids` prints)."""
    try:
        target = os.stat(NETNS_DIR / name)
    except OSError:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(entry / "ns" / "net")
        except OSError:
            continue
        if st.st_ino == target.st_ino and st.st_dev == target.st_dev:
            found.append(int(entry.name))
    return found


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (field 3 first), or None when there is no such
    process. The name is cut at its last ")": it may hold spaces and parentheses itself."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def process_started_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (/proc/PID/stat field 22), or None when there
    is no such process. With the pid it names one process: the kernel may give the pid to a later process,
    which started later; an exec keeps both."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None else None


def process_alive(pid: int | None, started_ticks: int | None) -> bool:
    """Whether the process recorded as (`pid`, `started_ticks`: `process_started_ticks` when it started)
    still runs: a process with that pid and start time that is neither a zombie nor dead. Whatever it
    runs or was started as does not matter."""
    if not pid or started_ticks is None:
        return False
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X") and int(fields[19]) == started_ticks
