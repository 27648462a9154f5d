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
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from srift.documents import (
    NO_NUL,
    NOT_BLANK,
    NUMBER,
    WHOLE,
    FreeJson,
    StrictModel,
    publish_rules,
    rule_error,
    validated,
)
from srift.domain.bandwidth import Collective
from srift.domain.host import HostFacts
from srift.domain.rings import RING_RULE, RING_TYPES_ONCE, TYPE_OR_RING_TEXT, canonical_instance_type
from srift.errors import InvalidInput

SCHEMA: Final = "srift-probe/1"
BACKENDS = ("gloo", "nccl", "mpi", "nccl-tests")
MAX_BUFFER_BYTES = 1 << 40
# Printed bandwidths may be rounded; anything beyond this relative gap means the units or formula differ.
_BUSBW_TOLERANCE = 0.05


def algbw_gbps(*, buffer_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth s/t in gigabits/s."""
    return buffer_bytes * 8 / time_s / 1e9


def busbw_gbps(
    *, buffer_bytes: int, world_size: int, time_s: float, collective: str = Collective.ALLREDUCE
) -> float:
    """Bus bandwidth in gigabits/s (Srift §4.2; nccl-tests' definition, in bits): 2s(n−1)/(n·t) for an
    allreduce, s(n−1)/(n·t) for an all-gather or reduce-scatter of s bytes (the whole buffer)."""
    factor = Collective(collective).bus_factor(world_size)
    return algbw_gbps(buffer_bytes=buffer_bytes, time_s=time_s) * factor


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
    collective: str = Collective.ALLREDUCE.value
    """allreduce (what learned models train on), all_gather or reduce_scatter."""

    def fingerprint(self) -> str:
        """sha256 over the fields that identify a measurement (run, configuration, repetition, result;
        the collective when it is not allreduce, so that allreduce samples keep their fingerprints)."""
        key: tuple[object, ...] = (
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
        if self.collective != Collective.ALLREDUCE.value:
            key = (*key, self.collective)
        return hashlib.sha256(json.dumps(key, separators=(",", ":")).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "record") -> ProbeRecord:
        """Validate a mapping (a parsed JSON line) into a record; errors name `where` and the field."""
        return _from_dict(data, where=where)


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


MIN_ALLREDUCE_S = 1e-6
"""The shortest plausible allreduce: a kernel launch or a message, microseconds (the 8-byte row of nccl-tests'
all_reduce_perf on 2 × p5.48xlarge, shared/reference/nccl-tests_all_reduce_perf_2x_p5.48xlarge.txt, takes
69 µs). Shorter times are not measurements, and the bandwidths derived from them overflow."""
INT32_MAX = 2**31 - 1
"""Integer columns of the samples table are 32-bit (buffer_bytes is 64-bit)."""
RequiredText = Annotated[
    str, Field(min_length=1, max_length=128, pattern=NOT_BLANK), AfterValidator(str.strip)
]
OptionalText = Annotated[str, Field(max_length=128, pattern=NO_NUL), AfterValidator(str.strip)] | None
Count = Annotated[int, Field(ge=0, le=INT32_MAX), WHOLE]
BACKEND_PATTERN = "^(" + "|".join(_any_case(b) for b in BACKENDS) + ")$"


WORLD_OF_NODES = (
    "world-size-is-nodes-times-ranks",
    "nodes × ranks_per_node = world_size, where nodes defaults to world_size and ranks_per_node to "
    "max(1, world_size // nodes)",
)
BANDWIDTHS_AGREE = (
    "bandwidths-agree-with-time",
    "algbw_gbps and busbw_gbps, when given, are within 5 % (+0.001) of 8·buffer_bytes/time_s/1e9 and of that "
    "times the collective's bus factor over world_size ranks (allreduce 2(n−1)/n, all_gather and "
    "reduce_scatter (n−1)/n)",
)


def _canonical_type(name: str) -> str:
    """A ring's name in its one stored spelling (`srift.domain.rings`), its refusal as this field's error."""
    try:
        return canonical_instance_type(name)
    except InvalidInput as exc:
        raise rule_error(exc.detail, field="", hint=exc.hint) from exc


_HINTS = {
    "schema": f"write samples with schema {SCHEMA!r}",
    "buffer_bytes": "give the buffer size in bytes (at most 1 TiB)",
    "world_size": "an allreduce needs at least 2 ranks",
    "backend": f"use one of {', '.join(BACKENDS)}",
}


class ProbeSampleDocument(StrictModel):
    """One probe sample as written (a JSON line of probes/allreduce.py, or an object posted to
    /v1/probe-results); `to_record` turns it into a ProbeRecord.

    Rules across fields (listed under the schema's `x-srift-rules`): nodes × ranks_per_node = world_size
    (either may be left out and is derived), algbw_gbps/busbw_gbps, when given, agree with time_s and
    buffer_bytes within 5 %, and a mixed ring's instance_type names each type once. The schema states the
    rest of a ring's name as a pattern (TYPE_OR_RING_TEXT: no empty type between '+' signs); reading keeps
    RequiredText's pattern and canonical_instance_type's refusals, whose errors say what is wrong.
    """

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=publish_rules(WORLD_OF_NODES, BANDWIDTHS_AGREE, RING_TYPES_ONCE)
    )

    FIELD_HINTS: ClassVar[Mapping[str, str]] = _HINTS
    """Hints by field for errors the schema finds (srift.documents.field_hint): CLI files and REST bodies."""

    schema_: Literal["srift-probe/1"] = Field(default=SCHEMA, alias="schema")
    run_id: OptionalText = ""
    provider: Annotated[RequiredText, AfterValidator(str.lower)]
    instance_type: Annotated[RequiredText, AfterValidator(_canonical_type)] = Field(
        description=f"a catalog type of the provider, or {RING_RULE}; each of the ring's types in the "
        "catalog, and a type named twice is refused",
        json_schema_extra={"pattern": TYPE_OR_RING_TEXT},
    )
    backend: Annotated[str, Field(pattern=BACKEND_PATTERN), AfterValidator(str.lower)] = Field(
        description=f"one of {', '.join(BACKENDS)} (any case)"
    )
    buffer_bytes: Annotated[int, Field(ge=1, le=MAX_BUFFER_BYTES), WHOLE]
    world_size: Annotated[int, Field(ge=2, le=INT32_MAX), WHOLE]
    nodes: Annotated[int, Field(ge=1, le=INT32_MAX), WHOLE] | None = None
    ranks_per_node: Annotated[int, Field(ge=1, le=INT32_MAX), WHOLE] | None = None
    time_s: Annotated[float, Field(ge=MIN_ALLREDUCE_S, le=86_400), NUMBER]
    algbw_gbps: Annotated[float, Field(ge=0), NUMBER] | None = None
    busbw_gbps: Annotated[float, Field(ge=0), NUMBER] | None = None
    async_count: Annotated[int, Field(ge=1, le=INT32_MAX), WHOLE] = 1
    repeat: Count = 0
    collective: Collective = Field(
        default=Collective.ALLREDUCE, description="allreduce, all_gather or reduce_scatter"
    )
    region: OptionalText = ""
    zone: OptionalText = ""
    gpu_name: OptionalText = ""
    cpu_name: OptionalText = ""
    cpu_cores: Count = 0
    memory_gib: Annotated[float, Field(ge=0), NUMBER] = 0.0
    rated_gbps: Annotated[float, Field(ge=0), NUMBER] = 0.0
    # written by the probe for people, not read
    probe_version: FreeJson = None
    dtype: FreeJson = None
    timestamp: FreeJson = None
    host: FreeJson = None
    device: FreeJson = None
    extra: FreeJson = None
    iters: FreeJson = None

    @model_validator(mode="after")
    def _rules(self) -> ProbeSampleDocument:
        world = self.world_size
        nodes = self.nodes if self.nodes is not None else world
        per_node = self.ranks_per_node if self.ranks_per_node is not None else max(1, world // nodes)
        if nodes * per_node != world:
            raise rule_error(
                f"nodes × ranks_per_node = {nodes}×{per_node} ≠ world_size {world}",
                field="world_size",
                hint="give a world size equal to nodes × ranks per node",
            )
        algbw = algbw_gbps(buffer_bytes=self.buffer_bytes, time_s=self.time_s)
        busbw = busbw_gbps(
            buffer_bytes=self.buffer_bytes, world_size=world, time_s=self.time_s, collective=self.collective
        )
        for name, given, expected in (
            ("algbw_gbps", self.algbw_gbps, algbw),
            ("busbw_gbps", self.busbw_gbps, busbw),
        ):
            if given is not None and abs(given - expected) > _BUSBW_TOLERANCE * expected + 1e-3:
                raise rule_error(
                    f"{name}={given:g} disagrees with time_s and buffer_bytes (expected {expected:.6g})",
                    field=name,
                    hint="bandwidths are gigabits/s (GB/s × 8) and busbw = 2s(n−1)/(n·t); or leave them out",
                )
        return self

    def to_record(self) -> ProbeRecord:
        world = self.world_size
        nodes = self.nodes if self.nodes is not None else world
        per_node = self.ranks_per_node if self.ranks_per_node is not None else max(1, world // nodes)
        return ProbeRecord(
            run_id=self.run_id or "",
            provider=self.provider,
            instance_type=self.instance_type,
            backend=self.backend,
            buffer_bytes=self.buffer_bytes,
            world_size=world,
            nodes=nodes,
            ranks_per_node=per_node,
            time_s=self.time_s,
            algbw_gbps=algbw_gbps(buffer_bytes=self.buffer_bytes, time_s=self.time_s),
            busbw_gbps=busbw_gbps(
                buffer_bytes=self.buffer_bytes,
                world_size=world,
                time_s=self.time_s,
                collective=self.collective,
            ),
            async_count=self.async_count,
            repeat=self.repeat,
            collective=self.collective.value,
            region=self.region or "",
            zone=self.zone or "",
            gpu_name=self.gpu_name or "",
            cpu_name=self.cpu_name or "",
            cpu_cores=self.cpu_cores,
            memory_gib=self.memory_gib,
            rated_gbps=self.rated_gbps,
        )


def _from_dict(data: Mapping[str, Any], *, where: str) -> ProbeRecord:
    if not isinstance(data, Mapping):
        raise InvalidInput(
            f"{where}: a sample must be a JSON object", hint="write one JSON object per line", field=""
        )
    return validated(ProbeSampleDocument, data, where=where).to_record()


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
    collective: str | None = Collective.ALLREDUCE.value
    """Only this collective's samples (None: every one); learned models train on allreduce."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "providers": list(self.providers),
            "instance_types": list(self.instance_types),
            "backends": list(self.backends),
            "min_world_size": self.min_world_size,
        }
