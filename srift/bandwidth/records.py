"""Probe samples as values: the ProbeRecord, its JSON-lines form (validated), and the query that selects them.

One record is one timed allreduce configuration: `async_count` concurrent allreduces of `buffer_bytes` each
across `world_size` ranks on `nodes` hosts, repetition `repeat` of run `run_id`. Bandwidths are in
gigabits/s: `algbw_gbps = 8·s/t/1e9` and `busbw_gbps = algbw_gbps · 2(n−1)/n` (nccl-tests prints GB/s, ×8).
With `async_count` > 1, `time_s` is until all of them finished and the bandwidths are per allreduce.
Nothing here touches the database (`srift.bandwidth.samples` stores and loads them).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from srift.errors import InvalidInput

SCHEMA = "srift-probe/1"
BACKENDS = ("gloo", "nccl", "mpi", "nccl-tests")
MAX_BUFFER_BYTES = 1 << 40
# Printed bandwidths may be rounded; anything beyond this relative gap means the units or formula differ.
_BUSBW_TOLERANCE = 0.05


def algbw_gbps(*, buffer_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth s/t in gigabits/s."""
    return buffer_bytes * 8 / time_s / 1e9


def busbw_gbps(*, buffer_bytes: int, world_size: int, time_s: float) -> float:
    """Bus bandwidth 2s(n−1)/(n·t) in gigabits/s (Srift §4.2; the nccl-tests definition, in bits)."""
    return algbw_gbps(buffer_bytes=buffer_bytes, time_s=time_s) * 2 * (world_size - 1) / world_size


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One allreduce measurement plus the host features the learner uses (Srift §4.2's feature list).

    `rated_gbps` is the provider's rated network bandwidth of the host, `memory_gib` its RAM, `cpu_cores`
    its logical CPU count. `run_id` identifies the probe run (or the imported file) the sample came from.
    """

    run_id: str
    provider: str
    instance_type: str
    backend: str
    buffer_bytes: int
    world_size: int
    nodes: int
    ranks_per_node: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    async_count: int = 1
    repeat: int = 0
    region: str = ""
    zone: str = ""
    gpu_name: str = ""
    cpu_name: str = ""
    cpu_cores: int = 0
    memory_gib: float = 0.0
    rated_gbps: float = 0.0

    def fingerprint(self) -> str:
        """sha256 over the fields that identify a measurement (run, configuration, repetition, result)."""
        key = (
            self.run_id,
            self.provider,
            self.region,
            self.zone,
            self.instance_type,
            self.backend,
            self.buffer_bytes,
            self.world_size,
            self.nodes,
            self.ranks_per_node,
            self.async_count,
            self.repeat,
            repr(float(self.time_s)),
        )
        return hashlib.sha256(json.dumps(key, separators=(",", ":")).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "record") -> ProbeRecord:
        """Validate a mapping (a parsed JSON line) into a record; errors name `where` and the field."""
        return _from_dict(data, where=where)


_FIELDS = {f.name for f in fields(ProbeRecord)}
_REQUIRED = ("provider", "instance_type", "backend", "buffer_bytes", "world_size", "time_s")
_IGNORED = {"schema", "probe_version", "dtype", "timestamp", "host", "device", "extra", "iters"}


def _bad(where: str, field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"{where}: {message}", hint=hint, field=field)


def _int(data: Mapping[str, Any], name: str, where: str, *, minimum: int, default: int | None = None) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _bad(
                where, name, f"{name} must be an integer, got {value!r}", f"write {name} as a whole number"
            )
    if value < minimum:
        raise _bad(where, name, f"{name} must be ≥ {minimum}, got {value}", f"use {name} ≥ {minimum}")
    return value


def _float(
    data: Mapping[str, Any], name: str, where: str, *, positive: bool, default: float | None = None
) -> float:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(where, name, f"{name} must be a number, got {value!r}", f"write {name} as a number")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else "≥ 0"
        raise _bad(where, name, f"{name} must be finite and {bound}, got {value!r}", f"use {name} {bound}")
    return number


def _str(data: Mapping[str, Any], name: str, where: str, *, required: bool) -> str:
    value = data.get(name, "" if not required else None)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _bad(where, name, f"{name} must be a string, got {value!r}", f"write {name} as a string")
    value = value.strip()
    if required and not value:
        raise _bad(where, name, f"{name} is missing or empty", f"give {name}")
    if len(value) > 128:
        raise _bad(where, name, f"{name} is longer than 128 characters", f"shorten {name}")
    return value


def _from_dict(data: Mapping[str, Any], *, where: str) -> ProbeRecord:
    if not isinstance(data, Mapping):
        raise _bad(where, "", "a sample must be a JSON object", "write one JSON object per line")
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise _bad(where, "schema", f"unknown schema {schema!r}", f"write samples with schema {SCHEMA!r}")
    unknown = sorted(set(data) - _FIELDS - _IGNORED)
    if unknown:
        raise _bad(where, unknown[0], f"unknown fields {unknown}", f"use only the fields of {SCHEMA}")
    for name in _REQUIRED:
        if name not in data:
            raise _bad(where, name, f"{name} is missing", f"every sample needs {', '.join(_REQUIRED)}")
    backend = _str(data, "backend", where, required=True).lower()
    if backend not in BACKENDS:
        raise _bad(where, "backend", f"unknown backend {backend!r}", f"use one of {', '.join(BACKENDS)}")
    size = _int(data, "buffer_bytes", where, minimum=1)
    if size > MAX_BUFFER_BYTES:
        raise _bad(
            where, "buffer_bytes", f"buffer_bytes {size} is over 1 TiB", "check the size's unit (bytes)"
        )
    world = _int(data, "world_size", where, minimum=2)
    nodes = _int(data, "nodes", where, minimum=1, default=world)
    per_node = _int(data, "ranks_per_node", where, minimum=1, default=max(1, world // nodes))
    if nodes * per_node != world:
        raise _bad(
            where,
            "world_size",
            f"nodes × ranks_per_node = {nodes}×{per_node} ≠ world_size {world}",
            "give a world size equal to nodes × ranks per node",
        )
    time_s = _float(data, "time_s", where, positive=True)
    algbw = algbw_gbps(buffer_bytes=size, time_s=time_s)
    busbw = busbw_gbps(buffer_bytes=size, world_size=world, time_s=time_s)
    for name, expected in (("algbw_gbps", algbw), ("busbw_gbps", busbw)):
        if name in data:
            given = _float(data, name, where, positive=False)
            if abs(given - expected) > _BUSBW_TOLERANCE * expected + 1e-3:
                raise _bad(
                    where,
                    name,
                    f"{name}={given:g} disagrees with time_s and buffer_bytes (expected {expected:.6g})",
                    "bandwidths are gigabits/s (GB/s × 8) and busbw = 2s(n−1)/(n·t); or leave them out",
                )
    return ProbeRecord(
        run_id=_str(data, "run_id", where, required=False) or "",
        provider=_str(data, "provider", where, required=True).lower(),
        instance_type=_str(data, "instance_type", where, required=True),
        backend=backend,
        buffer_bytes=size,
        world_size=world,
        nodes=nodes,
        ranks_per_node=per_node,
        time_s=time_s,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        async_count=_int(data, "async_count", where, minimum=1, default=1),
        repeat=_int(data, "repeat", where, minimum=0, default=0),
        region=_str(data, "region", where, required=False),
        zone=_str(data, "zone", where, required=False),
        gpu_name=_str(data, "gpu_name", where, required=False),
        cpu_name=_str(data, "cpu_name", where, required=False),
        cpu_cores=_int(data, "cpu_cores", where, minimum=0, default=0),
        memory_gib=_float(data, "memory_gib", where, positive=False, default=0.0),
        rated_gbps=_float(data, "rated_gbps", where, positive=False, default=0.0),
    )


def parse_line(
    line: str, *, line_no: int, source: str = "input", overrides: Mapping[str, Any] | None = None
) -> ProbeRecord:
    """Parse one JSON line (fields in `overrides` replace the line's); errors name `source:line_no`."""
    where = f"{source}:{line_no}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno})",
            hint="write one JSON object per line, as probes/allreduce.py does",
            field=f"line {line_no}",
        ) from exc
    if overrides and isinstance(data, dict):
        given = {k: v for k, v in overrides.items() if v is not None}
        if "world_size" in given:
            data.pop("algbw_gbps", None)
            data.pop("busbw_gbps", None)
        data.update(given)
    return _from_dict(data, where=where)


def parse_jsonl(
    text: str, *, source: str = "input", overrides: Mapping[str, Any] | None = None
) -> list[ProbeRecord]:
    """Parse JSON-lines probe output (blank lines skipped).

    Records without a run_id get one derived from the text, so importing the same file twice identifies
    the same samples. `overrides` replace fields (e.g. an instance type given on the command line).
    """
    file_id = "file:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    records: list[ProbeRecord] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record = parse_line(line, line_no=line_no, source=source, overrides=overrides)
        records.append(record if record.run_id else replace(record, run_id=file_id))
    if not records:
        raise InvalidInput(f"{source}: no samples found", hint="give a file with at least one JSON line")
    return records


def records_to_jsonl(records: Iterable[ProbeRecord]) -> str:
    return "".join(r.to_json() + "\n" for r in records)


@dataclass(frozen=True, slots=True)
class SampleQuery:
    """Which stored samples a model trains on (recorded with each model version)."""

    providers: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    min_world_size: int = 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "providers": list(self.providers),
            "instance_types": list(self.instance_types),
            "backends": list(self.backends),
            "min_world_size": self.min_world_size,
        }
