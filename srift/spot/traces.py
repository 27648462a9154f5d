"""Spot traces: the public per-zone JSON (skypilot-org/spot-traces) and a user's CSV log, read into SpotTrace.

The public format (README of skypilot-org/spot-traces, commit 221da1a, 2024-03-31) is one JSON file per
zone, instance type and fleet size:

    {"metadata": {"gap_seconds": 300}, "data": [0, 0, 4, 4, 3, ...], "prices": [0.918, ...]}

where `data[i]` is the number of spot VMs available at tick i (ticks `gap_seconds` apart) and the optional
`prices[i]` the spot price then (USD per VM-hour; some preemption files carry it). The repository's
layout names the rest: `<kind>/<N>-node/<provider>-<MM-DD-YYYY>/<zone>_<type token>.json`, where kind is
`preemption` (a fleet of N VMs was held and relaunched when taken back: data is how many ran) or
`availability` (N VMs were asked for at every tick: data is how many could be had). Srift treats both the
same way, as Can't Be Late does: at a tick, a fleet of n ≤ N VMs can run on spot when data ≥ n.

A user's own log is a CSV of events, one a row (`time,zone,instance_type,event,count`, optionally
`provider`), `time` an ISO 8601 date and time (`2024-05-01T10:00:00Z`; without an offset, UTC; not epoch
seconds, which `20240501` would be mistaken for), `event` being `launched` (count VMs came up) or
`interrupted` (count VMs were taken back);
it becomes a preemption trace per (provider, zone, type) sampled every `tick_s` seconds.

Every refusal is an InvalidInput naming the file and the row (`data[17]`, `rows[3].count`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from srift.domain.requests import DEFAULT_LOG_TICK_S
from srift.errors import InvalidInput

PUBLIC_REPOSITORY = "skypilot-org/spot-traces"
"""Where the public traces live (Wu et al., "Can't Be Late", NSDI '24)."""
MAX_TICKS = 2_000_000
"""Refuse longer traces (45 days at 2 s ticks); the public ones have at most 20,158 ticks."""
MAX_GAP_S = 86_400.0
MAX_NODES = 4096
MAX_CSV_ROWS = 200_000
DEFAULT_TICK_S = DEFAULT_LOG_TICK_S
"""A user log is sampled once a minute unless `tick_s` says otherwise (a choice, not a fact; the plan
request's inline `recent_market.log_csv` shares it)."""


class TraceKind(StrEnum):
    """What a trace's counts mean: VMs of a held fleet running, or VMs that could be had."""

    PREEMPTION = "preemption"
    AVAILABILITY = "availability"


@dataclass(frozen=True, slots=True)
class TraceSource:
    """Where a trace came from: repository (or `user`), path inside it, commit, and a hash of its bytes."""

    repository: str
    path: str
    commit: str | None
    sha256: str

    def describe(self) -> str:
        at = f"@{self.commit[:12]}" if self.commit else ""
        return f"{self.repository}{at}:{self.path}"


@dataclass(frozen=True, slots=True)
class TraceMeta:
    """What the file does not say itself: provider, zone, instance type, kind, fleet size, start date."""

    provider: str
    zone: str
    instance_type: str
    kind: TraceKind
    node_count: int
    start: date | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class SpotTrace:
    """Spot VMs available (`counts[i]`, 0..node_count) at ticks `gap_s` apart, for one zone and type."""

    meta: TraceMeta
    gap_s: float
    counts: tuple[int, ...] = field(repr=False)
    source: TraceSource
    prices_usd_per_hr: tuple[float, ...] | None = field(default=None, repr=False)

    @property
    def provider(self) -> str:
        return self.meta.provider

    @property
    def zone(self) -> str:
        return self.meta.zone

    @property
    def region(self) -> str:
        return region_of_zone(self.meta.provider, self.meta.zone)

    @property
    def instance_type(self) -> str:
        return self.meta.instance_type

    @property
    def node_count(self) -> int:
        return self.meta.node_count

    @property
    def ticks(self) -> int:
        return len(self.counts)

    @property
    def duration_s(self) -> float:
        return self.ticks * self.gap_s

    @property
    def name(self) -> str:
        """A stable name: the source path (public) or provider/zone/type/kind (a user's log)."""
        return self.source.describe()

    def array(self) -> np.ndarray:
        return np.asarray(self.counts, dtype=np.int64)

    def up(self, nodes: int) -> np.ndarray:
        """Per tick, whether a fleet of `nodes` VMs can run on spot (counts ≥ nodes)."""
        return self.array() >= nodes


def region_of_zone(provider: str, zone: str) -> str:
    """The region of a zone: AWS `us-east-1a` → `us-east-1`, GCP `us-central1-a` → `us-central1`."""
    if provider == "gcp":
        head, _, tail = zone.rpartition("-")
        if head and len(tail) == 1 and tail.isalpha():
            return head
    elif provider == "azure":
        head, _, tail = zone.rpartition("-")
        if head and tail.isdigit():
            return head
    else:
        m = re.fullmatch(r"(.*\d)([a-z]+)", zone)
        if m:
            return m.group(1)
    raise InvalidInput(
        f"{zone!r} is not a zone name of {provider} (e.g. us-east-1a, us-central1-a)",
        hint="give the zone as the provider writes it",
        field="zone",
    )


PUBLIC_TYPES: Mapping[tuple[str, str], tuple[str, str]] = {
    ("aws", "v100_1"): ("p3.2xlarge", "README: p3.2xlarge (1 V100)"),
    ("aws", "v100_8"): ("p3.16xlarge", "README: p3.16xlarge (8 V100)"),
    ("aws", "k80_1"): (
        "p2.xlarge",
        "README names p2.2xlarge, which AWS never offered; p2.xlarge is the 1-GPU K80 type",
    ),
    ("aws", "k80_8"): ("p2.16xlarge", "README: p2.16xlarge (8 K80 boards, 16 GPUs)"),
    ("aws", "intel_64"): ("r5.16xlarge", "README: r5.16xlarge (64 vCPUs)"),
    ("gcp", "c3-88"): ("c3-highcpu-88", "README: c3-highcpu-88 (88 vCPUs)"),
}
"""The public file names' type tokens, as the repository's README (commit 221da1a) names the types."""

_PUBLIC_PATH = re.compile(
    r"(?:.*/)?(?P<kind>preemption|availability)/(?P<nodes>\d+)-node/"
    r"(?P<provider>[a-z]+)-(?P<mm>\d\d)-(?P<dd>\d\d)-(?P<yyyy>\d{4})/"
    r"(?P<zone>[a-z0-9-]+?)_(?P<token>[A-Za-z0-9_.-]+)\.json"
)


def public_meta(path: str) -> TraceMeta | None:
    """What the public repository's layout says of a file (None: the path does not follow it)."""
    m = _PUBLIC_PATH.fullmatch(str(PurePosixPath(path)))
    if m is None:
        return None
    provider, token = m["provider"], m["token"]
    known = PUBLIC_TYPES.get((provider, token))
    if known is None:
        raise InvalidInput(
            f"{path}: type token {token!r} is not one the public traces use "
            f"({', '.join(sorted(t for _, t in PUBLIC_TYPES))})",
            hint="name the instance type yourself (srift traces import --instance-type ...)",
            field="instance_type",
        )
    try:
        start = date(int(m["yyyy"]), int(m["mm"]), int(m["dd"]))
    except ValueError:
        start = None
    nodes = int(m["nodes"])
    if not 1 <= nodes <= MAX_NODES:
        raise InvalidInput(
            f"{path}: {nodes}-node is outside 1..{MAX_NODES}",
            hint="name the fleet size yourself (--node-count)",
            field="node_count",
        )
    return TraceMeta(
        provider=provider,
        zone=m["zone"],
        instance_type=known[0],
        kind=TraceKind(m["kind"]),
        node_count=nodes,
        start=start,
        note=known[1],
    )


def sha256_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _refuse(origin: str, where: str, what: str, hint: str) -> InvalidInput:
    """InvalidInput for `where` in file `origin`; the error's field names `where` (its message starts with
    it), so the detail does not name it again: `rows[0].time: log.csv: (line 2) 'x' is not ...`."""
    return InvalidInput(f"{origin}: {what}", hint=hint, field=where)


def _whole(value: Any) -> int | None:
    """`value` as an int when it is a whole number (JSON 3 or 3.0), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def parse_public(data: Any, *, origin: str, meta: TraceMeta, source: TraceSource) -> SpotTrace:
    """Validate a decoded public trace document; InvalidInput names the row (`data[i]`) or field at fault."""
    if not isinstance(data, dict):
        raise _refuse(
            origin,
            "document",
            f"is a JSON {type(data).__name__}, not an object with metadata and data",
            'write {"metadata": {"gap_seconds": N}, "data": [...]}',
        )
    extra = sorted(str(k) for k in data if k not in ("metadata", "data", "prices"))
    if extra:
        raise _refuse(
            origin, "document", f"has unknown fields {extra}", "keep only metadata, data and prices"
        )
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        raise _refuse(
            origin, "metadata", "is missing or not an object", 'give "metadata": {"gap_seconds": N}'
        )
    gap = metadata.get("gap_seconds")
    if isinstance(gap, bool) or not isinstance(gap, int | float) or not math.isfinite(gap):
        raise _refuse(
            origin,
            "metadata.gap_seconds",
            f"is {gap!r}, not a number",
            "give the seconds between two ticks, e.g. 300",
        )
    if not 1 <= gap <= MAX_GAP_S:
        raise _refuse(
            origin,
            "metadata.gap_seconds",
            f"is {gap}, outside 1..{MAX_GAP_S:.0f}",
            "give the seconds between two ticks, e.g. 300",
        )
    rows = data.get("data")
    if not isinstance(rows, list):
        raise _refuse(origin, "data", "is missing or not a list", "give one count of available VMs per tick")
    if not 2 <= len(rows) <= MAX_TICKS:
        raise _refuse(
            origin,
            "data",
            f"has {len(rows)} ticks, outside 2..{MAX_TICKS}",
            "give at least two ticks (and split very long traces)",
        )
    counts: list[int] = []
    for i, raw in enumerate(rows):
        v = _whole(raw)
        if v is None:
            raise _refuse(
                origin,
                f"data[{i}]",
                f"is {raw!r}, not a whole number of VMs",
                "give the number of spot VMs available at each tick (0..node count)",
            )
        if not 0 <= v <= meta.node_count:
            raise _refuse(
                origin,
                f"data[{i}]",
                f"is {v}, outside 0..{meta.node_count} (the trace's fleet size)",
                f"fix the row, or give the right fleet size (now {meta.node_count})",
            )
        counts.append(v)
    prices = _prices(data.get("prices"), ticks=len(counts), origin=origin)
    return SpotTrace(
        meta=meta, gap_s=float(gap), counts=tuple(counts), source=source, prices_usd_per_hr=prices
    )


def _prices(rows: Any, *, ticks: int, origin: str) -> tuple[float, ...] | None:
    if rows is None:
        return None
    if not isinstance(rows, list) or len(rows) != ticks:
        raise _refuse(
            origin,
            "prices",
            f"is not a list of {ticks} prices (one per tick of data)",
            "give one spot price (USD per VM-hour) per tick, or leave prices out",
        )
    out: list[float] = []
    for i, raw in enumerate(rows):
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= 10_000:
            raise _refuse(
                origin,
                f"prices[{i}]",
                f"is {raw!r}, not a price in 0..10000 USD per VM-hour",
                "fix the row, or leave prices out",
            )
        out.append(float(raw))
    return tuple(out)


def read_public(
    raw: bytes,
    *,
    path: str,
    repository: str = PUBLIC_REPOSITORY,
    commit: str | None = None,
    meta: TraceMeta | None = None,
) -> SpotTrace:
    """Decode and validate one public trace file; `meta` wins over what its path says."""
    found = meta or public_meta(path)
    if found is None:
        raise InvalidInput(
            f"{path}: the path does not say the provider, zone, instance type and fleet size "
            "(<kind>/<N>-node/<provider>-<MM-DD-YYYY>/<zone>_<type>.json)",
            hint="name them (srift traces import FILE --provider aws --zone us-east-1a "
            "--instance-type p3.2xlarge --node-count 1)",
            field="path",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(path, "document", f"is not UTF-8 (byte {exc.start})", "save the file as UTF-8") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refuse(
            path,
            "document",
            f"is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            "give the public format, a JSON object",
        ) from exc
    except RecursionError as exc:
        raise _refuse(path, "document", "nests too deeply", "give the public format") from exc
    source = TraceSource(repository=repository, path=path, commit=commit, sha256=sha256_of(raw))
    return parse_public(data, origin=path, meta=found, source=source)


class LogEvent(StrEnum):
    """A row of a user's interruption log."""

    LAUNCHED = "launched"
    INTERRUPTED = "interrupted"


_LOG_COLUMNS = ("time", "zone", "instance_type", "event", "count")


def _parse_time(text: str) -> datetime:
    stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC)


def read_log_csv(
    raw: bytes,
    *,
    path: str,
    provider: str = "aws",
    tick_s: float = DEFAULT_TICK_S,
) -> list[SpotTrace]:
    """A user's interruption log (module docstring) as one preemption trace per (provider, zone, type).

    Rows may come in any order across groups but must be in time order within one; a group's fleet size
    is the most VMs it ran at once. InvalidInput names the row (`rows[i]`, the CSV line i + 2)."""
    if not (math.isfinite(tick_s) and 1 <= tick_s <= MAX_GAP_S):
        raise InvalidInput(
            f"tick {tick_s} s is outside 1..{MAX_GAP_S:.0f}", hint="give --tick-s, e.g. 60", field="tick_s"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _refuse(path, "document", f"is not UTF-8 (byte {exc.start})", "save the file as UTF-8") from exc
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise _refuse(path, "header", f"is not CSV ({exc})", "give a CSV header line") from exc
    cols = [c.strip().lower() for c in header or []]
    missing = [c for c in _LOG_COLUMNS if c not in cols]
    if missing:
        raise _refuse(
            path,
            "header",
            f"lacks the columns {missing}",
            f"start the file with the header {','.join(('provider', *_LOG_COLUMNS))} (provider optional)",
        )
    if len(set(cols)) != len(cols):
        raise _refuse(path, "header", "names a column twice", "name each column once")
    at = {c: cols.index(c) for c in cols}
    groups: dict[tuple[str, str, str], list[tuple[datetime, int, int]]] = {}
    i = -1
    try:
        for i, row in enumerate(reader):
            if i >= MAX_CSV_ROWS:
                raise _refuse(
                    path, "rows", f"are more than {MAX_CSV_ROWS}", "split the log into several files"
                )
            if not row or all(not c.strip() for c in row):
                continue
            where = f"rows[{i}]"
            if len(row) != len(cols):
                raise _refuse(
                    path,
                    where,
                    f"(line {i + 2}) has {len(row)} cells, the header {len(cols)}",
                    "give one cell per column",
                )

            def cell(name: str, row: list[str] = row) -> str:
                return row[at[name]].strip()

            try:
                stamp = _parse_time(cell("time"))
            except ValueError as exc:
                raise _refuse(
                    path,
                    f"{where}.time",
                    f"(line {i + 2}) {cell('time')!r} is not an ISO 8601 time",
                    "write e.g. 2024-05-01T10:00:00Z (no offset: UTC); epoch seconds are not read, convert "
                    "them first (e.g. date -u -d @1714557600 +%FT%TZ)",
                ) from exc
            prov = cell("provider") if "provider" in at else provider
            zone, itype = cell("zone"), cell("instance_type")
            for name, value in (("provider", prov), ("zone", zone), ("instance_type", itype)):
                if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", value):
                    raise _refuse(
                        path,
                        f"{where}.{name}",
                        f"(line {i + 2}) {value!r} is not a name",
                        "use letters, digits, '.', '_' and '-'",
                    )
            try:
                region_of_zone(prov, zone)
            except InvalidInput as exc:
                raise _refuse(path, f"{where}.zone", f"(line {i + 2}) {exc.detail}", exc.hint) from exc
            try:
                event = LogEvent(cell("event").lower())
            except ValueError as exc:
                raise _refuse(
                    path,
                    f"{where}.event",
                    f"(line {i + 2}) {cell('event')!r} is not launched or interrupted",
                    "write launched or interrupted",
                ) from exc
            count_text = cell("count")
            if not count_text.isdigit() or not 1 <= int(count_text) <= MAX_NODES:
                raise _refuse(
                    path,
                    f"{where}.count",
                    f"(line {i + 2}) {count_text!r} is not a whole number in 1..{MAX_NODES}",
                    "give how many VMs came up or were taken back",
                )
            delta = int(count_text) if event is LogEvent.LAUNCHED else -int(count_text)
            groups.setdefault((prov, zone, itype), []).append((stamp, delta, i))
    except csv.Error as exc:
        raise _refuse(
            path, f"rows[{i + 1}]", f"(line {i + 3}) is not CSV ({exc})", "fix the quoting"
        ) from exc
    if not groups:
        raise _refuse(path, "rows", "hold no event", "give at least a launched and an interrupted row")
    digest = sha256_of(raw)
    out = []
    for (prov, zone, itype), events in sorted(groups.items()):
        out.append(
            _log_trace(events, path=path, provider=prov, zone=zone, itype=itype, tick_s=tick_s, sha=digest)
        )
    return out


def _log_trace(
    events: Sequence[tuple[datetime, int, int]],
    *,
    path: str,
    provider: str,
    zone: str,
    itype: str,
    tick_s: float,
    sha: str,
) -> SpotTrace:
    running, top = 0, 0
    for k, (stamp, delta, row) in enumerate(events):
        if k and stamp < events[k - 1][0]:
            raise _refuse(
                path,
                f"rows[{row}].time",
                f"(line {row + 2}) is earlier than the row before it for {zone} {itype}",
                "sort each zone and type's rows by time",
            )
        running += delta
        if running < 0:
            raise _refuse(
                path,
                f"rows[{row}].count",
                f"(line {row + 2}) takes back more {itype} VMs in {zone} than were running",
                "log every launch before the interruptions that follow it",
            )
        top = max(top, running)
    if top == 0:
        raise _refuse(
            path, "rows", f"launch no {itype} VM in {zone}", "log the launches as well as the interruptions"
        )
    t0 = events[0][0]
    span_s = (events[-1][0] - t0).total_seconds()
    ticks = math.floor(span_s / tick_s) + 1
    if ticks < 2:
        raise _refuse(
            path,
            "rows",
            f"span {span_s:.0f} s for {zone} {itype}, less than two ticks of {tick_s:.0f} s",
            "give a longer log, or a shorter --tick-s",
        )
    if ticks > MAX_TICKS:
        raise _refuse(
            path,
            "rows",
            f"span {ticks} ticks for {zone} {itype}, more than {MAX_TICKS}",
            "give a longer --tick-s",
        )
    offsets = np.array([(e[0] - t0).total_seconds() for e in events])
    level = np.cumsum([e[1] for e in events])
    idx = np.searchsorted(offsets, np.arange(ticks) * tick_s, side="right") - 1
    counts = tuple(int(x) for x in level[idx])
    meta = TraceMeta(
        provider=provider,
        zone=zone,
        instance_type=itype,
        kind=TraceKind.PREEMPTION,
        node_count=top,
        start=t0.date(),
        note=f"user log, sampled every {tick_s:.0f} s",
    )
    source = TraceSource(repository="user", path=f"{path}#{provider}/{zone}/{itype}", commit=None, sha256=sha)
    return SpotTrace(meta=meta, gap_s=float(tick_s), counts=counts, source=source)


def with_meta(trace: SpotTrace, **changes: Any) -> SpotTrace:
    """A copy with some of its meta replaced (provider, zone, instance_type, kind, node_count, start)."""
    return replace(trace, meta=replace(trace.meta, **changes))


def describe_traces(traces: Iterable[SpotTrace]) -> list[dict[str, Any]]:
    """One row per trace for tables and provenance: name, provider, zone, type, kind, fleet size, span."""
    return [
        {
            "name": t.name,
            "provider": t.provider,
            "zone": t.zone,
            "region": t.region,
            "instance_type": t.instance_type,
            "kind": t.meta.kind.value,
            "node_count": t.node_count,
            "gap_s": t.gap_s,
            "ticks": t.ticks,
            "days": t.duration_s / 86_400.0,
            "start": t.meta.start.isoformat() if t.meta.start else None,
            "repository": t.source.repository,
            "path": t.source.path,
            "commit": t.source.commit,
            "sha256": t.source.sha256,
            "note": t.meta.note,
        }
        for t in traces
    ]
