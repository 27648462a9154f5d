"""A versioned trace set: imported spot traces written as one JSON document (`srift-spot-traces/1`).

`srift traces import` stores a user's traces (their CSV interruption log, or public-format JSON they
hold) in this form, so that `srift plan --replay-traces` and `srift traces fit` read them back without
the original files. Each trace keeps what it is (provider, zone, instance type, kind, fleet size, start)
and where it came from (repository, path, commit, sha256 of the original bytes); its ticks are written in
the public format (`{"metadata": {"gap_seconds": N}, "data": [...], "prices": [...]}`) and read back
through the same validation as an imported file (srift.spot.traces.parse_public), so a damaged set is
refused naming the trace and the row. The public traces themselves are never shipped this way (only the
model fitted to them, srift/spot/data/public-traces.json).

    {"format": "srift-spot-traces/1",
     "traces": [{"provider": "aws", "zone": "us-east-1a", "instance_type": "p3.2xlarge",
                 "kind": "preemption", "node_count": 4, "start": "2023-02-15", "note": "",
                 "source": {"repository": "user", "path": "log.csv", "commit": null, "sha256": "..."},
                 "trace": {"metadata": {"gap_seconds": 60}, "data": [4, 4, 3, ...]}}]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from srift.errors import InvalidInput
from srift.spot.traces import SpotTrace, TraceKind, TraceMeta, TraceSource, parse_public

TRACESET_FORMAT = "srift-spot-traces/1"
"""The document's format tag; a later layout gets a new number (and a reader for the old one)."""

_ENTRY_FIELDS = (
    "provider",
    "zone",
    "instance_type",
    "kind",
    "node_count",
    "start",
    "note",
    "source",
    "trace",
)


def trace_entry(trace: SpotTrace) -> dict[str, Any]:
    """One trace as a set entry: its meta, its source and its ticks in the public format."""
    body: dict[str, Any] = {"metadata": {"gap_seconds": trace.gap_s}, "data": list(trace.counts)}
    if trace.prices_usd_per_hr is not None:
        body["prices"] = list(trace.prices_usd_per_hr)
    return {
        "provider": trace.provider,
        "zone": trace.zone,
        "instance_type": trace.instance_type,
        "kind": trace.meta.kind.value,
        "node_count": trace.node_count,
        "start": trace.meta.start.isoformat() if trace.meta.start else None,
        "note": trace.meta.note,
        "source": {
            "repository": trace.source.repository,
            "path": trace.source.path,
            "commit": trace.source.commit,
            "sha256": trace.source.sha256,
        },
        "trace": body,
    }


def traceset_document(traces: Iterable[SpotTrace]) -> dict[str, Any]:
    """The set document of `traces`, in a stable order (by name)."""
    return {
        "format": TRACESET_FORMAT,
        "traces": [trace_entry(t) for t in sorted(traces, key=lambda t: t.name)],
    }


def _text(entry: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(
            f"{where}.{key} is {value!r}, not a non-empty string",
            hint=f"give {key} as text, or import the trace again",
            field=f"{where}.{key}",
        )
    return value


def _entry(entry: Any, where: str) -> SpotTrace:
    if not isinstance(entry, dict):
        raise InvalidInput(
            f"{where} is a {type(entry).__name__}, not an object",
            hint=f"give each trace as an object with {', '.join(_ENTRY_FIELDS)}",
            field=where,
        )
    extra = sorted(str(k) for k in entry if k not in _ENTRY_FIELDS)
    if extra:
        raise InvalidInput(
            f"{where} has unknown fields {extra}", hint=f"keep only {', '.join(_ENTRY_FIELDS)}", field=where
        )
    kind = entry.get("kind")
    if not isinstance(kind, str) or kind not in {k.value for k in TraceKind}:
        raise InvalidInput(
            f"{where}.kind is {kind!r}", hint="give preemption or availability", field=f"{where}.kind"
        )
    nodes = entry.get("node_count")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise InvalidInput(
            f"{where}.node_count is {nodes!r}, not a whole number ≥ 1",
            hint="give the VMs the trace held or asked for",
            field=f"{where}.node_count",
        )
    start_text = _text(entry, "start", where, optional=True)
    try:
        start = date.fromisoformat(start_text) if start_text else None
    except ValueError as exc:
        raise InvalidInput(
            f"{where}.start is {start_text!r}, not a date",
            hint="give YYYY-MM-DD or null",
            field=f"{where}.start",
        ) from exc
    note = entry.get("note", "")
    source = entry.get("source")
    if not isinstance(source, dict):
        raise InvalidInput(
            f"{where}.source is missing or not an object",
            hint="give repository, path, commit and sha256",
            field=f"{where}.source",
        )
    meta = TraceMeta(
        provider=str(_text(entry, "provider", where)),
        zone=str(_text(entry, "zone", where)),
        instance_type=str(_text(entry, "instance_type", where)),
        kind=TraceKind(kind),
        node_count=nodes,
        start=start,
        note=note if isinstance(note, str) else "",
    )
    src = TraceSource(
        repository=str(_text(source, "repository", f"{where}.source")),
        path=str(_text(source, "path", f"{where}.source")),
        commit=_text(source, "commit", f"{where}.source", optional=True),
        sha256=str(_text(source, "sha256", f"{where}.source")),
    )
    return parse_public(entry.get("trace"), origin=f"{where}.trace", meta=meta, source=src)


def read_traceset(doc: Any, *, origin: str) -> list[SpotTrace]:
    """The traces of a set document; InvalidInput names the trace (`traces[2]`) and the row at fault."""
    if not isinstance(doc, dict) or doc.get("format") != TRACESET_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise InvalidInput(
            f"{origin}: format is {found!r}, not {TRACESET_FORMAT!r}",
            hint="give a file written by `srift traces import`, or import the original traces again",
            field="format",
        )
    entries = doc.get("traces")
    if not isinstance(entries, list):
        raise InvalidInput(
            f"{origin}: traces is missing or not a list", hint="give a list of traces", field="traces"
        )
    return [_entry(e, f"{origin}: traces[{i}]") for i, e in enumerate(entries)]


def merge_traces(old: Sequence[SpotTrace], new: Sequence[SpotTrace]) -> tuple[list[SpotTrace], int, int]:
    """`old` with `new` added by name, a newer import of a name replacing the older: (the set, how many
    were stored, how many were already there unchanged)."""
    by_name = {t.name: t for t in old}
    stored = unchanged = 0
    for t in new:
        if t.name in by_name and by_name[t.name].source.sha256 == t.source.sha256:
            unchanged += 1
        else:
            stored += 1
        by_name[t.name] = t
    return sorted(by_name.values(), key=lambda t: t.name), stored, unchanged
