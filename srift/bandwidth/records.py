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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from srift.documents import Number, WholeNumber, invalid_input
from srift.domain.host import HOST_FIELDS, HostFacts
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeRecord(HostFacts):
    """One allreduce measurement plus the host features the learner uses (Srift §4.2's feature list, as
    HostFacts). `run_id` identifies the probe run (or the imported file) the sample came from."""

    run_id: str
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


def _text(required: bool) -> Any:
    def check(value: Any) -> str:
        if value is None:
            if required:
                raise ValueError("is missing or empty")
            return ""
        if not isinstance(value, str):
            raise ValueError(f"must be a string, got {value!r}")
        text: str = value.strip()
        if required and not text:
            raise ValueError("is missing or empty")
        if len(text) > 128:
            raise ValueError("is longer than 128 characters")
        return text

    return BeforeValidator(check)


RequiredText = Annotated[str, _text(True)]
OptionalText = Annotated[str, _text(False)]


def _backend(value: str) -> str:
    if value.lower() not in BACKENDS:
        raise ValueError(f"is {value!r}, an unknown backend (use one of {', '.join(BACKENDS)})")
    return value.lower()


class ProbeSampleDocument(BaseModel):
    """One probe sample as written (a JSON line of probes/allreduce.py, or an object posted to
    /v1/probe-results), before the checks across fields; `probe_record` turns it into a ProbeRecord."""

    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(default=SCHEMA, alias="schema")
    run_id: OptionalText = ""
    provider: Annotated[RequiredText, AfterValidator(str.lower)]
    instance_type: RequiredText
    backend: Annotated[RequiredText, AfterValidator(_backend)]
    buffer_bytes: Annotated[WholeNumber, Field(ge=1, le=MAX_BUFFER_BYTES)]
    world_size: Annotated[WholeNumber, Field(ge=2)]
    nodes: Annotated[WholeNumber, Field(ge=1)] | None = None
    ranks_per_node: Annotated[WholeNumber, Field(ge=1)] | None = None
    time_s: Annotated[Number, Field(gt=0)]
    algbw_gbps: Annotated[Number, Field(ge=0)] | None = None
    busbw_gbps: Annotated[Number, Field(ge=0)] | None = None
    async_count: Annotated[WholeNumber, Field(ge=1)] = 1
    repeat: Annotated[WholeNumber, Field(ge=0)] = 0
    region: OptionalText = ""
    zone: OptionalText = ""
    gpu_name: OptionalText = ""
    cpu_name: OptionalText = ""
    cpu_cores: Annotated[WholeNumber, Field(ge=0)] = 0
    memory_gib: Annotated[Number, Field(ge=0)] = 0.0
    rated_gbps: Annotated[Number, Field(ge=0)] = 0.0
    # written by the probe for people, not read
    probe_version: Any = None
    dtype: Any = None
    timestamp: Any = None
    host: Any = None
    device: Any = None
    extra: Any = None
    iters: Any = None


_HINTS = {
    "schema": f"write samples with schema {SCHEMA!r}",
    "buffer_bytes": "give the buffer size in bytes (at most 1 TiB)",
    "world_size": "an allreduce needs at least 2 ranks",
}


def _bad(where: str, field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"{where}: {message}", hint=hint, field=field)


def _from_dict(data: Mapping[str, Any], *, where: str) -> ProbeRecord:
    if not isinstance(data, Mapping):
        raise _bad(where, "", "a sample must be a JSON object", "write one JSON object per line")
    try:
        doc = ProbeSampleDocument.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc, where=where, hints=_HINTS) from exc
    if doc.schema_ != SCHEMA:
        raise _bad(where, "schema", f"unknown schema {doc.schema_!r}", _HINTS["schema"])
    world = doc.world_size
    nodes = doc.nodes if doc.nodes is not None else world
    per_node = doc.ranks_per_node if doc.ranks_per_node is not None else max(1, world // nodes)
    if nodes * per_node != world:
        raise _bad(
            where,
            "world_size",
            f"nodes × ranks_per_node = {nodes}×{per_node} ≠ world_size {world}",
            "give a world size equal to nodes × ranks per node",
        )
    algbw = algbw_gbps(buffer_bytes=doc.buffer_bytes, time_s=doc.time_s)
    busbw = busbw_gbps(buffer_bytes=doc.buffer_bytes, world_size=world, time_s=doc.time_s)
    for name, given, expected in (
        ("algbw_gbps", doc.algbw_gbps, algbw),
        ("busbw_gbps", doc.busbw_gbps, busbw),
    ):
        if given is not None and abs(given - expected) > _BUSBW_TOLERANCE * expected + 1e-3:
            raise _bad(
                where,
                name,
                f"{name}={given:g} disagrees with time_s and buffer_bytes (expected {expected:.6g})",
                "bandwidths are gigabits/s (GB/s × 8) and busbw = 2s(n−1)/(n·t); or leave them out",
            )
    return ProbeRecord(
        **{name: getattr(doc, name) for name in HOST_FIELDS},
        run_id=doc.run_id,
        backend=doc.backend,
        buffer_bytes=doc.buffer_bytes,
        world_size=world,
        nodes=nodes,
        ranks_per_node=per_node,
        time_s=doc.time_s,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        async_count=doc.async_count,
        repeat=doc.repeat,
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
