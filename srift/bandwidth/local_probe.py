"""Running probes/allreduce.py on this machine: N ranks on loopback, as `srift probe run` does.

The ranks share one host, so they are recorded as one node with N ranks (the intra-node level), and rank
i runs as LOCAL_RANK i: under NCCL each on its own GPU, as NCCL requires."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from srift.bandwidth.records import ProbeRecord, parse_jsonl
from srift.errors import EnvironmentProblem, InvalidInput
from srift.settings import REPO_ROOT

PROBE_NAME = "allreduce.py"


def probe_script_path() -> Path:
    """probes/allreduce.py of the source checkout (or of ./probes in a container)."""
    for candidate in (REPO_ROOT / "probes" / PROBE_NAME, Path.cwd() / "probes" / PROBE_NAME):
        if candidate.is_file():
            return candidate.resolve()
    raise EnvironmentProblem(
        "probes/allreduce.py is not available",
        hint="run from a source checkout of srift (it ships the probes)",
    )


def free_port() -> int:
    """A TCP port on loopback that is free now (the kernel's choice; another process may take it before
    the caller binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True)
class LocalProbe:
    """What to run: `nodes` processes (one rank each, all on this host) on loopback, and the grid."""

    nodes: int
    sizes: tuple[int, ...] = ()
    min_bytes: int = 4
    max_bytes: int = 64 << 20
    repeats: int = 5
    warmup: int = 2
    async_count: int = 1
    backend: str = "gloo"
    time_budget_s: float = 300.0
    provider: str = "local"
    instance_type: str = "local"
    rated_gbps: float = 0.0

    def __post_init__(self) -> None:
        """Refuse a probe that cannot run when it is described, before any process starts or any progress
        is drawn; each error names the `srift probe run` option that gave the value."""
        if self.nodes < 2:
            raise InvalidInput(
                f"an allreduce needs at least 2 processes, not {self.nodes}",
                hint="use --nodes 2 or more",
                field="--nodes",
            )
        if self.nodes > 64:
            raise InvalidInput("at most 64 local processes", hint="use --nodes ≤ 64", field="--nodes")
        bad = next((s for s in self.sizes if s <= 0 or s % 4), None)
        if bad is not None:
            raise InvalidInput(
                f"size {bad} B is not a positive multiple of 4 bytes (one float32)",
                hint="e.g. --sizes 4,1024,1048576",
                field="--sizes",
            )
        if self.min_bytes <= 0:
            raise InvalidInput(
                f"{self.min_bytes} B is not a positive size", hint="e.g. --min-bytes 4", field="--min-bytes"
            )
        if self.max_bytes < self.min_bytes:
            raise InvalidInput(
                f"the grid's smallest size ({self.min_bytes} B) is above its largest, --max-bytes "
                f"({self.max_bytes} B)",
                hint="give --min-bytes no larger than --max-bytes, e.g. --min-bytes 4K --max-bytes 1M",
                field="--min-bytes",
            )

    def args(self, out: Path) -> list[str]:
        grid = ["--sizes", ",".join(str(s) for s in self.sizes)] if self.sizes else []
        grid = grid or ["--min-bytes", str(self.min_bytes), "--max-bytes", str(self.max_bytes)]
        return [
            *grid,
            "--repeats", str(self.repeats),
            "--warmup", str(self.warmup),
            "--async-count", str(self.async_count),
            "--backend", self.backend,
            "--time-budget-s", str(self.time_budget_s),
            "--nodes", "1",
            "--ranks-per-node", str(self.nodes),
            "--ifname", "lo",
            "--provider", self.provider,
            "--region", "",
            "--instance-type", self.instance_type,
            "--rated-gbps", str(self.rated_gbps),
            "--out", str(out),
        ]  # fmt: skip


def run_local_probe(
    probe: LocalProbe, *, on_progress: Callable[[int, int, int], None] | None = None, out: Path | None = None
) -> list[ProbeRecord]:
    """Run the probe with `probe.nodes` local processes; `on_progress(done, total, size)` per size. (The
    probe checked its nodes and grid when it was made.)"""
    script = probe_script_path()
    with tempfile.TemporaryDirectory(prefix="srift-probe-") as tmp:
        target = out or Path(tmp) / "samples.jsonl"
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()),
            "WORLD_SIZE": str(probe.nodes),
            "LOCAL_WORLD_SIZE": str(probe.nodes),
            "GLOO_SOCKET_IFNAME": "lo",
            "OMP_NUM_THREADS": "1",
        }
        procs: list[subprocess.Popen[str]] = []
        try:
            for rank in range(probe.nodes):
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(script), *probe.args(target)],
                        env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                        text=True,
                    )
                )
            errors = _follow(procs[0], on_progress)
            deadline = time.monotonic() + 30
            codes = [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
        except subprocess.TimeoutExpired as exc:
            raise EnvironmentProblem("probe processes did not exit", hint="check for a hung rank") from exc
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if any(codes):
            raise EnvironmentProblem(
                f"the probe failed (exit codes {codes}): {errors.strip()[-800:]}",
                hint="check that loopback networking works and torch.distributed has gloo",
            )
        if not target.exists() or not target.read_text().strip():
            raise EnvironmentProblem("the probe wrote no samples", hint="raise --time-budget-s")
        return parse_jsonl(target.read_text(), source=str(target))


def _follow(proc: subprocess.Popen[str], on_progress: Callable[[int, int, int], None] | None) -> str:
    """Read rank 0's stderr to the end, reporting progress lines; return the other lines."""
    assert proc.stderr is not None
    other: list[str] = []
    for line in proc.stderr:
        if line.startswith("progress "):
            try:
                fraction, size = line.split()[1], int(line.split()[2].split("=")[1])
                done, total = (int(x) for x in fraction.split("/"))
            except (IndexError, ValueError):
                other.append(line)
                continue
            if on_progress is not None:
                on_progress(done, total, size)
        else:
            other.append(line)
    return "".join(other[-40:])


def summarize(records: Sequence[ProbeRecord]) -> list[tuple[int, int, float, float]]:
    """Per (size, world size): median time_s and median busbw_gbps over repetitions."""
    import statistics

    groups: dict[tuple[int, int], list[ProbeRecord]] = {}
    for r in records:
        groups.setdefault((r.buffer_bytes, r.world_size), []).append(r)
    return [
        (size, world, statistics.median(r.time_s for r in rs), statistics.median(r.busbw_gbps for r in rs))
        for (size, world), rs in sorted(groups.items())
    ]


_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
}
_UNITS |= {"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_size(text: str, *, field: str = "sizes") -> int:
    """'4', '64K', '512M', '1G' → bytes (binary multiples, as the probe reads them)."""
    raw = text.strip().upper()
    digits = raw.rstrip("BKMGI")
    unit = raw[len(digits) :]
    if not digits.isdigit() or unit not in _UNITS or int(digits) <= 0:
        raise InvalidInput(
            f"{text!r} is not a positive size", hint="write sizes like 4, 64K, 512M or 1G", field=field
        )
    return int(digits) * _UNITS[unit]
