"""Importing probe output files (probe JSON lines or nccl-tests text) into the sample store.

The instance type must be in the catalog (provider "local" — this machine — is exempt; a mixed ring's
samples, "a+b", need each of its types there, and are stored under the ring's one spelling, its types
sorted: `srift.domain.rings`); the catalog's facts fill the host features an nccl-tests log does not print
(GPU model, vCPUs, memory, rated Gbit/s; for a mixed ring the GPU model its types share and its slowest
type's rating, what a probe job of the ring records, and GPUs per instance only where its types agree).
Everything is validated before anything is stored, and stored in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from sqlalchemy.orm import Session

from srift.bandwidth.mixed import ring_members
from srift.bandwidth.nccl_tests import NcclTestsHost, looks_like_nccl_tests, parse_nccl_tests
from srift.bandwidth.records import ProbeRecord, parse_jsonl
from srift.bandwidth.samples import store_samples
from srift.domain import InstanceType
from srift.domain.bandwidth import Collective
from srift.domain.rings import canonical_instance_type
from srift.errors import InvalidInput, NotFound

UNCATALOGUED_PROVIDERS = ("local",)
MAX_IMPORT_BYTES = 50_000_000


class ImportFormat(StrEnum):
    JSONL = "jsonl"
    NCCL_TESTS = "nccl-tests"


@dataclass(frozen=True, slots=True)
class ImportResult:
    """How many samples a file held and how many were new."""

    parsed: int
    stored: int
    instance_types: tuple[str, ...]
    sizes: int


def _catalog_type(session: Session, provider: str, name: str, *, where: str = "") -> InstanceType | None:
    """The catalog's specs of `provider`'s type `name` (None for a provider the catalog need not list).

    An unknown provider or type is NotFound on the import's own field, `provider` or `instance_type` (the
    line's key, or the option that set it), not the catalog function's argument `name`; `where`
    ("file:line") prefixes the detail so a JSON-lines import points at the first line naming it.
    """
    if provider in UNCATALOGUED_PROVIDERS:
        return None
    from srift.catalog import store

    try:
        return store.get_instance_type(session=session, provider=provider, name=name)
    except NotFound as exc:
        field = "provider" if exc.field == "provider" else "instance_type"
        detail = f"{where}: {exc.detail}" if where else exc.detail
        raise NotFound(detail, hint=exc.hint, field=field) from exc


def import_text(
    *,
    session: Session,
    text: str,
    fmt: ImportFormat,
    source: str,
    provider: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    zone: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    job_id: int | None = None,
    collective: Collective | None = None,
) -> ImportResult:
    """Parse, validate against the catalog, and store samples; re-importing a file adds nothing."""
    if len(text.encode()) > MAX_IMPORT_BYTES:
        raise InvalidInput(f"{source} is larger than 50 MB", hint="split the file")
    for name, value in (("nodes", nodes), ("gpus_per_node", gpus_per_node)):
        if value is not None and value < 1:
            raise InvalidInput(
                f"{name} must be ≥ 1, got {value}", hint=f"give --{name.replace('_', '-')} ≥ 1", field=name
            )
    if instance_type is not None:  # a ring given in any order is stored as one ring (srift.domain.rings)
        instance_type = canonical_instance_type(instance_type)
    if fmt is ImportFormat.NCCL_TESTS:
        records = _nccl_tests(
            session=session,
            text=text,
            source=source,
            provider=(provider or "aws").lower(),
            instance_type=instance_type,
            region=region or "",
            zone=zone or "",
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            collective=collective,
        )
    else:
        overrides: dict[str, object] = {
            "provider": provider.lower() if provider else None,
            "instance_type": instance_type,
            "region": region,
            "zone": zone,
        }
        if nodes is not None or gpus_per_node is not None:
            if nodes is None or gpus_per_node is None:
                raise InvalidInput(
                    "give both --nodes and --gpus-per-node, or neither",
                    hint="they set world size",
                    field="nodes",
                )
            overrides.update(nodes=nodes, ranks_per_node=gpus_per_node, world_size=nodes * gpus_per_node)
        records = _jsonl(text, source=source, overrides=overrides)
        line_nos = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        first_line: dict[tuple[str, str], int] = {}
        for line_no, r in zip(line_nos, records, strict=True):
            first_line.setdefault((r.provider, r.instance_type), line_no)
        for (provider_name, type_name), line_no in first_line.items():
            for member in ring_members(type_name):
                _catalog_type(session, provider_name, member, where=f"{source}:{line_no}")
    origin = "nccl-tests" if fmt is ImportFormat.NCCL_TESTS else "jsonl"
    stored = store_samples(session=session, records=records, origin=origin, job_id=job_id)
    return ImportResult(
        parsed=len(records),
        stored=stored,
        instance_types=tuple(sorted({f"{r.provider}/{r.instance_type}" for r in records})),
        sizes=len({r.buffer_bytes for r in records}),
    )


def _jsonl(text: str, *, source: str, overrides: dict[str, object]) -> list[ProbeRecord]:
    """The probe JSON lines of `text`; nccl-tests output given as JSON lines (the default format) is refused
    naming the format to give, not its first line's JSON error."""
    try:
        return parse_jsonl(text, source=source, overrides=overrides)
    except InvalidInput as exc:
        if not looks_like_nccl_tests(text):
            raise
        raise InvalidInput(
            f"{source} is nccl-tests output, not probe JSON lines",
            hint="import it with --format nccl-tests --instance-type TYPE --nodes N (see `srift probe import "
            "--help`)",
            field="format",
        ) from exc


def _nccl_tests(
    *,
    session: Session,
    text: str,
    source: str,
    provider: str,
    instance_type: str | None,
    region: str,
    zone: str,
    nodes: int | None,
    gpus_per_node: int | None,
    collective: Collective | None = None,
) -> list[ProbeRecord]:
    if not instance_type:
        raise InvalidInput(
            "nccl-tests output does not say which instance type it ran on",
            hint="give --instance-type, e.g. --instance-type p5.48xlarge",
            field="instance_type",
        )
    if nodes is None:
        raise InvalidInput(
            "give --nodes (how many instances the test spanned)", hint="e.g. --nodes 2", field="nodes"
        )
    members = ring_members(instance_type)
    specs = [_catalog_type(session, provider, member) for member in members]
    host = NcclTestsHost(
        provider=provider,
        instance_type=instance_type,
        nodes=nodes,
        gpus_per_node=gpus_per_node or _gpus_per_node(members, specs),
        region=region,
        zone=zone,
    )
    known = [spec for spec in specs if spec is not None]
    if len(known) == 1:
        spec = known[0]
        host = replace(
            host,
            gpu_name=spec.gpu_model or "",
            cpu_cores=spec.vcpus,
            memory_gib=spec.memory_gib,
            rated_gbps=spec.network_gbps,
        )
    elif known:  # a mixed ring: its slowest link's rating, as a probe job of the ring records it
        gpus = {spec.gpu_model or "" for spec in known}
        host = replace(
            host,
            gpu_name=gpus.pop() if len(gpus) == 1 else "",
            rated_gbps=min(spec.network_gbps for spec in known),
        )
    return parse_nccl_tests(text, host=host, source=source, collective=collective)


def _gpus_per_node(members: Sequence[str], specs: Sequence[InstanceType | None]) -> int:
    """The GPUs per instance the catalog gives every member type (a mixed ring's types alike); else
    InvalidInput on `gpus_per_node`: an uncatalogued provider's type, or a ring whose types differ (the
    option says how many ranks each instance ran)."""
    counts = {member: spec.devices for member, spec in zip(members, specs, strict=True) if spec is not None}
    if len(counts) == len(members) and len(set(counts.values())) == 1:
        return next(iter(counts.values()))
    if len(counts) == len(members):
        listed = ", ".join(f"{member}: {count}" for member, count in counts.items())
        raise InvalidInput(
            f"the mixed ring's types have different GPU counts ({listed}), so the ranks per instance are not "
            "known",
            hint="give --gpus-per-node (the ranks each instance ran)",
            field="gpus_per_node",
        )
    raise InvalidInput("give --gpus-per-node", hint="e.g. --gpus-per-node 8", field="gpus_per_node")
