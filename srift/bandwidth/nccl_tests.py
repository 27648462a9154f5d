"""Reader for nccl-tests `all_reduce_perf`, `all_gather_perf` and `reduce_scatter_perf` output into records.

The table has an out-of-place and an in-place half; we read the OUT-OF-PLACE columns (the first `time`,
`algbw`, `busbw`), which is what gradient allreduce in DDP does and what nccl-tests' summaries quote. One
record per table row; a size printed twice (two tables concatenated) becomes repetition 1, 2, ...

Which collective: the `# Collective test starting: NAME_perf` line nccl-tests prints, else the caller's
(`srift probe import --collective`), else allreduce. Sizes are the whole buffer (for all-gather the
gathered output, for reduce-scatter the input; nccl-tests doc/PERFORMANCE.md).

Units: `size` is bytes, `time` microseconds, `algbw`/`busbw` gigaBYTES/s. We derive the stored bandwidths
from the printed time (busbw = s/t · 2(n−1)/n for allreduce, s/t · (n−1)/n for all-gather and
reduce-scatter, nccl-tests' definitions; ·8/1e9 for GIGABITS/s), because the printed busbw is
rounded to 0.00 below a few KB; each row's printed busbw must agree with that to its rounding, or the row
is rejected. Lines may carry a rank prefix (`0: `, `[1,0]<stdout>:`); `#` comments and NCCL log lines are
skipped. A row that starts with a number but does not parse is an error naming its line.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

from srift.bandwidth.records import ProbeRecord, algbw_gbps, busbw_gbps
from srift.domain.bandwidth import Collective
from srift.domain.host import HostFacts
from srift.errors import InvalidInput

_PREFIX = re.compile(r"^\s*(?:\d+:\s|\[\d+,\d+\]<\w+>:\s?)")
_LOG_LINE = re.compile(r"\bNCCL (?:INFO|WARN|ERROR|TRACE)\b|^\s*\S+:\d+:\d+ \[\d+\]")
_NUMBER_START = re.compile(r"^\s*\d")
_RANKS = re.compile(r"#\s*Rank\s+(\d+)\s")
_TEST = re.compile(r"#\s*Collective test starting:\s*(\w+)_perf")
HINT = "give nccl-tests output as printed (e.g. `all_reduce_perf -b 8 -e 8G -f 2 -g 1 > out.txt`)"
PERF_COLLECTIVES = {
    "all_reduce": Collective.ALLREDUCE,
    "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsHost(HostFacts):
    """What the text does not say: where it ran. `world_size` = nodes × gpus_per_node."""

    nodes: int
    gpus_per_node: int


def _columns(header: str) -> dict[str, int] | None:
    tokens = header.lstrip("#").split()
    needed = ("size", "time", "algbw", "busbw")
    if not all(t in tokens for t in needed):
        return None
    return {name: tokens.index(name) for name in needed}


def looks_like_nccl_tests(text: str) -> bool:
    """Whether `text` is nccl-tests output: a `# Collective test starting` line, or a `#` table header with
    size, time, algbw and busbw columns (rank prefixes allowed), so a caller that expected another format
    can say which one to give."""
    if _TEST.search(text):
        return True
    for line in text.splitlines():
        body = _PREFIX.sub("", line, count=1).lstrip()
        if body.startswith("#") and _columns(body) is not None:
            return True
    return False


def parse_nccl_tests(
    text: str, *, host: NcclTestsHost, source: str = "input", collective: Collective | None = None
) -> list[ProbeRecord]:
    """Records from nccl-tests text (module docstring); InvalidInput names `source:line` for any malformed
    row, and refuses a `collective` the text's own header contradicts."""
    found = _TEST.search(text)
    named = PERF_COLLECTIVES.get(found.group(1)) if found else None
    if found and named is None:
        raise InvalidInput(
            f"{source}: {found.group(1)}_perf is not a collective Srift reads",
            hint="import all_reduce_perf, all_gather_perf or reduce_scatter_perf output",
            field="collective",
        )
    if named is not None and collective is not None and named is not collective:
        raise InvalidInput(
            f"{source} is {found.group(1) if found else ''}_perf output, not {collective.value}",
            hint=f"leave --collective out or give {named.value}",
            field="collective",
        )
    kind = named or collective or Collective.ALLREDUCE
    if host.nodes < 1 or host.gpus_per_node < 1:
        raise InvalidInput("nodes and gpus per node must be ≥ 1", hint="give --nodes and --gpus-per-node")
    world = host.nodes * host.gpus_per_node
    if world < 2:
        raise InvalidInput(
            f"world size {world} < 2: an allreduce needs at least two ranks",
            hint="give the --nodes and --gpus-per-node the test ran with",
            field="world_size",
        )
    run_id = "nccl-tests:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    columns: dict[str, int] | None = None
    ranks_seen: set[int] = set()
    seen: dict[int, int] = {}
    records: list[ProbeRecord] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw, count=1).rstrip()
        where = f"{source}:{line_no}"
        if not line.strip() or _LOG_LINE.search(line):
            continue
        if line.lstrip().startswith("#"):
            rank = _RANKS.match(line.strip())
            if rank:
                ranks_seen.add(int(rank.group(1)))
            columns = _columns(line) or columns
            continue
        if not _NUMBER_START.match(line):
            continue
        if columns is None:
            raise InvalidInput(
                f"{where}: a data row before the column header (# size count type ... time algbw busbw)",
                hint=HINT,
            )
        records.append(
            _row(
                line,
                columns=columns,
                where=where,
                host=host,
                run_id=run_id,
                seen=seen,
                collective=kind,
            )
        )
    if not records:
        perf = next(name for name, c in PERF_COLLECTIVES.items() if c is kind)
        raise InvalidInput(f"{source}: no {perf}_perf rows found", hint=HINT)
    if ranks_seen and len(ranks_seen) != world:
        raise InvalidInput(
            f"{source}: the output lists {len(ranks_seen)} ranks but nodes × gpus per node = {world}",
            hint="give the --nodes and --gpus-per-node the test ran with",
            field="world_size",
        )
    return records


def _row(
    line: str,
    *,
    columns: dict[str, int],
    where: str,
    host: NcclTestsHost,
    run_id: str,
    seen: dict[int, int],
    collective: Collective,
) -> ProbeRecord:
    tokens = line.split()
    if len(tokens) <= max(columns.values()):
        raise InvalidInput(
            f"{where}: expected at least {max(columns.values()) + 1} columns, found {len(tokens)}",
            hint=HINT,
        )
    try:
        size = int(tokens[columns["size"]])
        time_us = float(tokens[columns["time"]])
        printed_busbw_gbyte = float(tokens[columns["busbw"]])
    except ValueError as exc:
        raise InvalidInput(f"{where}: cannot read size, time or busbw ({exc})", hint=HINT) from exc
    if size <= 0 or not math.isfinite(time_us) or time_us <= 0:
        raise InvalidInput(f"{where}: size and time must be positive", hint=HINT)
    world = host.nodes * host.gpus_per_node
    time_s = time_us / 1e6
    busbw = busbw_gbps(buffer_bytes=size, world_size=world, time_s=time_s, collective=collective)
    printed = printed_busbw_gbyte * 8
    if abs(busbw - printed) > 0.02 * busbw + 0.01 * 8 * 1.01:
        raise InvalidInput(
            f"{where}: busbw {printed_busbw_gbyte} GB/s does not match size and time across {world} ranks "
            f"({busbw / 8:.2f} GB/s)",
            hint=f"check --nodes and --gpus-per-node, and that this is {collective.value} output",
        )
    repeat = seen.get(size, 0)
    seen[size] = repeat + 1
    return ProbeRecord(
        **host.host_facts(),
        run_id=run_id,
        backend="nccl-tests",
        buffer_bytes=size,
        world_size=world,
        nodes=host.nodes,
        ranks_per_node=host.gpus_per_node,
        time_s=time_s,
        algbw_gbps=algbw_gbps(buffer_bytes=size, time_s=time_s),
        busbw_gbps=busbw,
        repeat=repeat,
        collective=collective.value,
    )
