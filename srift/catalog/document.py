"""The srift-catalog/1 document format: parse and validate a catalog file or dict into a SnapshotData.

One format serves the shipped files (srift/catalog/data/*.yaml), `srift catalog import FILE.yaml` and the
testbed's generated documents. Every error names the field at fault as a dotted path
(``instance_types[3].prices.us-east-1.spot``) and, for files, the file and line; nothing is written by this
module. The format, by example::

    format: srift-catalog/1            # optional; the only version so far
    provider: onprem                   # required: lowercase letters, digits, '-'
    snapshot: onprem-2026-11           # optional: defaults to "<provider>-import"; re-importing replaces it
    active: true                       # optional (default true): used by plans unless another is named
    source: "Lab rate card, finance"   # required: where the numbers come from
    as_of: 2026-11-01                  # required: date the prices were valid
    price_source: ratecard             # optional: key of `sources` for prices that name none
    sources:                           # optional: named sources, each with its own text and date
      ratecard: {text: "Finance rate card v3", as_of: 2026-11-01}
    instance_types:                    # required, non-empty
      - name: dgx-a100                 # required, unique
        gpu_model: A100                # required when gpu_count > 0, null/absent for CPU-only types
        gpu_count: 8                   # required, >= 0
        gpu_memory_gib: 40             # GiB per GPU; required when gpu_count > 0
        vcpus: 128                     # required, >= 1
        memory_gib: 1024               # required, > 0
        network_gbps: 200              # required, > 0: rated network bandwidth, gigabits/s
        network_burst: false           # optional (false): true when network_gbps is an "up to" ceiling
        interconnect: nvswitch         # none | pcie | nvlink | nvswitch; required when gpu_count > 1
        interconnect_gbps: 2400        # per-GPU one-direction intra-node bandwidth, gigabits/s
        efa: false                     # optional (false): RDMA-capable fabric (EFA or InfiniBand)
        extra: {note: "rack 3"}        # optional free-form mapping
        price_source: ratecard         # optional: overrides the document's price_source
        prices:                        # required: region -> market -> USD per hour
          lab-1: {on_demand: 12.5, spot: {price_usd_per_hr: 4.0, source: ratecard}}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    ValidationError,
    model_validator,
)

from srift.documents import (
    NOT_BLANK,
    NUMBER,
    WHOLE,
    FreeObject,
    describe,
    error_location,
    read_text_file,
    rule_error,
)
from srift.domain.catalog import InstanceType, Interconnect, Market
from srift.errors import InvalidInput
from srift.limits import MAX_SOURCE_CHARS, MAX_UNITS_PER_INSTANCE

FORMAT: Final = "srift-catalog/1"
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
"""Providers and regions: lowercase letters, digits and '-'."""
TYPE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
SNAPSHOT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"


@dataclass(frozen=True, slots=True)
class PriceData:
    """One price: USD per instance-hour of `instance_type` in `region` and `market`, with its provenance."""

    instance_type: str
    region: str
    market: Market
    price_usd_per_hr: float
    source: str
    as_of: date


@dataclass(frozen=True, slots=True)
class TypeData:
    """One instance type of a snapshot and its free-form extra facts (notes, baseline bandwidth)."""

    instance: InstanceType
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SnapshotData:
    """A validated catalog snapshot, ready for store.save_snapshot."""

    name: str
    provider: str
    source: str
    as_of: date
    active: bool
    types: tuple[TypeData, ...]
    prices: tuple[PriceData, ...]


Locator = Callable[[str], int | None]
E = TypeVar("E", bound=StrEnum)


def _choice(kind: type[E], noun: str) -> BeforeValidator:
    """An enum value whose error says "'x' is not <noun>" and lists the choices (dict keys included)."""
    choices = ", ".join(k.value for k in kind)

    def check(value: Any) -> E:
        if isinstance(value, str) and value in kind._value2member_map_:
            return kind(value)
        raise rule_error(f"{value!r} is not {noun}", field="", hint=f"use one of {choices}")

    return BeforeValidator(check)


def _region(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(NAME_PATTERN, value):
        return value
    raise rule_error(
        f"{value!r} is not a region name", field="", hint="use lowercase letters, digits and '-'"
    )


def _iso_date(value: Any) -> date:
    """A date as YAML writes it (a date, or a timestamp whose day counts) or an ISO string (JSON)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise rule_error(f"{value!r} is not a date", field="", hint="write it as YYYY-MM-DD")


def _text_keys(value: Any) -> Any:
    """YAML mapping keys as text (`5:` is the key "5"), as field paths and JSON write them."""
    if isinstance(value, Mapping):
        return {str(k): _text_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_text_keys(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """Turn YAML values (dates included) into JSON-storable ones."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, date):
        return value.isoformat()
    return value


Name = Annotated[str, Field(pattern=NAME_PATTERN)]
SourceText = Annotated[
    str, Field(min_length=1, max_length=MAX_SOURCE_CHARS, pattern=NOT_BLANK), AfterValidator(str.strip)
]
IsoDate = Annotated[date, BeforeValidator(_iso_date)]
Units = Annotated[int, Field(ge=0, le=MAX_UNITS_PER_INSTANCE), WHOLE]
Positive = Annotated[float, Field(gt=0), NUMBER]
NonNegative = Annotated[float, Field(ge=0), NUMBER]
Region = Annotated[str, BeforeValidator(_region)]
MarketKey = Annotated[Market, _choice(Market, "a market")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceDocument(_Strict):
    """A named source of prices: its text and the date its numbers were valid."""

    text: SourceText
    as_of: IsoDate


class PriceDocument(_Strict):
    """A price with its own source (a key of the document's `sources`)."""

    price_usd_per_hr: Positive
    source: str | None = None


_NUMBER_TAG, _MAPPING_TAG = "=number", "=mapping"
"""Tags of the two forms of a price (not valid region or market names, so paths can drop them)."""
PriceValue = Annotated[
    Union[  # noqa: UP007 (tagged arms)
        Annotated[Positive, Tag(_NUMBER_TAG)],
        Annotated[PriceDocument, Tag(_MAPPING_TAG)],
    ],
    Discriminator(lambda v: _MAPPING_TAG if isinstance(v, Mapping) else _NUMBER_TAG),
]


class InstanceTypeDocument(_Strict):
    """One instance type as written; its rules across fields (GPUs, interconnect) are checked here."""

    name: Annotated[str, Field(pattern=TYPE_NAME_PATTERN)]
    gpu_model: (
        Annotated[str, Field(min_length=1, max_length=64, pattern=NOT_BLANK), AfterValidator(str.strip)]
        | None
    ) = None
    gpu_count: Units
    gpu_memory_gib: NonNegative | None = None
    vcpus: Annotated[int, Field(ge=1, le=MAX_UNITS_PER_INSTANCE), WHOLE]
    memory_gib: Positive
    network_gbps: Positive
    network_burst: StrictBool = False
    interconnect: Annotated[Interconnect, _choice(Interconnect, "an interconnect")] | None = None
    interconnect_gbps: NonNegative | None = None
    efa: StrictBool = False
    extra: Annotated[FreeObject, BeforeValidator(_plain)] | None = None
    price_source: str | None = None
    prices: dict[Region, Annotated[dict[MarketKey, PriceValue], Field(min_length=1)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _gpus(self) -> InstanceTypeDocument:
        n, memory = self.gpu_count, self.gpu_memory_gib
        if n > 0 and self.gpu_model is None:
            raise rule_error(
                "gpu_model is missing", field="gpu_model", hint="give the GPU's model, e.g. T4 or A100"
            )
        if n > 0 and not memory:
            raise rule_error(
                "gpu_memory_gib is missing"
                if memory is None
                else "gpu_memory_gib must be > 0 for a GPU type",
                field="gpu_memory_gib",
                hint="give each GPU's memory in GiB",
            )
        if n == 0 and self.gpu_model is not None:
            raise rule_error(
                "gpu_model is set but gpu_count is 0",
                field="gpu_model",
                hint="remove gpu_model or set gpu_count",
            )
        if n == 0 and memory:
            raise rule_error(
                "gpu_memory_gib is set but gpu_count is 0",
                field="gpu_memory_gib",
                hint="set it to 0 or remove it",
            )
        choices = ", ".join(i.value for i in Interconnect)
        link, link_gbps = self.interconnect, self.interconnect_gbps
        if link is None and n > 1:
            raise rule_error(
                "interconnect is missing for a multi-GPU type",
                field="interconnect",
                hint=f"add interconnect: one of {choices}",
            )
        if link not in (None, Interconnect.NONE) and n <= 1:
            raise rule_error(
                f"interconnect is {link} but the type has {n} GPU(s)",
                field="interconnect",
                hint="use none below two GPUs",
            )
        if link is Interconnect.NONE and n > 1:
            raise rule_error(
                "interconnect is none for a multi-GPU type",
                field="interconnect",
                hint=f"use one of {choices}",
            )
        if link in (None, Interconnect.NONE) and link_gbps:
            raise rule_error(
                "interconnect_gbps is set but interconnect is none",
                field="interconnect_gbps",
                hint="set it to 0",
            )
        if link not in (None, Interconnect.NONE) and not link_gbps:
            raise rule_error(
                "interconnect_gbps is missing"
                if link_gbps is None
                else f"interconnect_gbps must be > 0 with {link}",
                field="interconnect_gbps",
                hint="give the per-GPU one-direction intra-node bandwidth in gigabits/s",
            )
        return self

    def source_keys(self) -> list[tuple[str, str]]:
        """(field relative to this type, source key) of every source it names."""
        named = [("price_source", self.price_source)] if self.price_source is not None else []
        for region, by_market in self.prices.items():
            for market, value in by_market.items():
                if isinstance(value, PriceDocument) and value.source is not None:
                    named.append((f"prices.{region}.{market}.source", value.source))
        return named

    def to_domain(
        self, *, provider: str, sources: Mapping[str, tuple[str, date]], default: tuple[str, date]
    ) -> tuple[TypeData, list[PriceData]]:
        instance = InstanceType(
            provider=provider,
            name=self.name,
            gpu_model=self.gpu_model,
            gpu_count=self.gpu_count,
            gpu_memory_gib=self.gpu_memory_gib or 0.0,
            vcpus=self.vcpus,
            memory_gib=self.memory_gib,
            network_gbps=self.network_gbps,
            network_burst=self.network_burst,
            interconnect=self.interconnect or Interconnect.NONE,
            interconnect_gbps=self.interconnect_gbps or 0.0,
            efa=self.efa,
        )
        own = sources[self.price_source] if self.price_source is not None else default
        prices = []
        for region, by_market in self.prices.items():
            for market, value in by_market.items():
                if isinstance(value, PriceDocument):
                    text, as_of = sources[value.source] if value.source is not None else own
                    price = value.price_usd_per_hr
                else:
                    (text, as_of), price = own, value
                prices.append(PriceData(self.name, region, market, price, text, as_of))
        return TypeData(instance=instance, extra=dict(self.extra or {})), prices


class CatalogDocument(_Strict):
    """A srift-catalog/1 document as written (see the module docstring); `to_domain` gives the SnapshotData.

    Rules across the document: instance type names are unique; every `price_source` and price `source`
    is a key of `sources`.
    """

    format: Literal["srift-catalog/1"] = FORMAT
    provider: Name
    snapshot: Annotated[str, Field(pattern=SNAPSHOT_PATTERN)] | None = None
    active: StrictBool = True
    source: SourceText
    as_of: IsoDate
    price_source: str | None = None
    sources: dict[str, SourceDocument] | None = None
    instance_types: list[InstanceTypeDocument] = Field(min_length=1)

    @model_validator(mode="after")
    def _names_and_sources(self) -> CatalogDocument:
        known = self.sources or {}
        named = [("price_source", self.price_source)] if self.price_source is not None else []
        seen: set[str] = set()
        for i, t in enumerate(self.instance_types):
            if t.name in seen:
                raise rule_error(
                    f"{t.name!r} appears twice",
                    field=f"instance_types[{i}].name",
                    hint="give each instance type once",
                )
            seen.add(t.name)
            named.extend((f"instance_types[{i}].{where}", key) for where, key in t.source_keys())
        for where, key in named:
            if key not in known:
                raise rule_error(
                    f"{key!r} is not a key of `sources`",
                    field=where,
                    hint=f"use one of: {', '.join(sorted(known)) or 'none defined'}",
                )
        return self

    def to_domain(self) -> SnapshotData:
        sources = {k: (s.text, s.as_of) for k, s in (self.sources or {}).items()}
        default = sources[self.price_source] if self.price_source is not None else (self.source, self.as_of)
        types: list[TypeData] = []
        prices: list[PriceData] = []
        for t in self.instance_types:
            type_data, type_prices = t.to_domain(provider=self.provider, sources=sources, default=default)
            types.append(type_data)
            prices.extend(type_prices)
        return SnapshotData(
            name=self.snapshot if self.snapshot is not None else f"{self.provider}-import",
            provider=self.provider,
            source=self.source,
            as_of=self.as_of,
            active=self.active,
            types=tuple(types),
            prices=tuple(prices),
        )


_MARKETS = ", ".join(m.value for m in Market)
_PRICE_HINT = "give USD per hour, e.g. 12.5, or {price_usd_per_hr: 12.5, source: KEY}"
_HINTS = {
    "format": f"use `format: {FORMAT}` or leave it out",
    "provider": "give a lowercase name such as `onprem` (letters, digits, '-')",
    "snapshot": "use letters, digits, '.', '_', '-'",
    "source": "say where the numbers come from",
    "text": "describe the source",
    "as_of": "write as_of: YYYY-MM-DD, the date the numbers were valid",
    "sources": "map each source key to {text: ..., as_of: YYYY-MM-DD}",
    "instance_types": "list at least one instance type",
    "name": "give a name such as `g4dn.xlarge` (letters, digits, '.', '_', '-')",
    "gpu_count": "give gpu_count as an integer",
    "vcpus": "give vcpus as an integer",
    "extra": "give extra facts as a mapping, or remove it",
    "prices": "map each region to {on_demand: USD/h, spot: USD/h}",
    "price_source": "give a key of `sources`",
    "price_usd_per_hr": _PRICE_HINT,
    **{m.value: _PRICE_HINT for m in Market},
    **{f: f"write `{f}: true` or `{f}: false`" for f in ("active", "network_burst", "efa")},
}
"""Hints by field name, for what the shared wording (srift.documents.describe) can only call "correct X"."""
_OWN_HINTS = {
    "rule",
    "extra_forbidden",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "too_long",
    "string_too_long",
}
_TAGS = ("[key]", _NUMBER_TAG, _MAPPING_TAG)


def _known_fields(loc: Sequence[str | int]) -> list[str]:
    """The fields of the mapping an unknown field `loc` was found in."""
    parent = loc[:-1]
    if not parent:
        model: type[BaseModel] = CatalogDocument
    elif parent[0] == "sources":
        model = SourceDocument
    elif len(parent) == 2:
        model = InstanceTypeDocument
    else:
        model = PriceDocument
    return sorted(model.model_fields)


def _problem(error: Mapping[str, Any]) -> tuple[str, str, str]:
    """(field path, message, hint) of one error, in the catalog's words where the shared ones are vague."""
    loc = [p for p in error["loc"] if p not in _TAGS]
    path = error_location(error, skip=_TAGS)
    message, hint = describe(error, skip=_TAGS)
    kind = error["type"]
    if kind == "extra_forbidden":
        hint = f"remove it or correct the spelling; known fields: {', '.join(_known_fields(loc))}"
    elif kind not in _OWN_HINTS and loc:
        if len(loc) == 4 and loc[2] == "prices":
            hint = f"map markets ({_MARKETS}) to USD per hour"
        elif len(loc) == 2 and loc[0] == "instance_types":
            hint = "give each instance type as a mapping with name, vcpus, memory_gib, ..."
        elif len(loc) == 2 and loc[0] == "sources":
            hint = "give {text: ..., as_of: YYYY-MM-DD}"
        elif len(loc) == 6 and loc[-1] == "source":
            hint = _HINTS["price_source"]
        else:
            hint = _HINTS.get(str(loc[-1]), hint)
    return path, message, hint


def _report(errors: Sequence[Mapping[str, Any]], *, origin: str, locate: Locator | None) -> InvalidInput:
    """One InvalidInput for every problem of a document, in file order: the first names its field, file
    and line; the others follow in its message, each with its line, field and fix."""
    found = sorted(
        ((_line(path, locate), path, message, hint) for path, message, hint in map(_problem, errors)),
        key=lambda p: p[0] or 0,
    )
    (line, path, message, hint), rest = found[0], found[1:]
    detail = f"{_where(origin, line)}: {message}"
    if rest:
        others = "; ".join(
            f"[{k}] {'' if n is None else f'line {n}, '}{p or 'document'}: {m} ({h})"
            for k, (n, p, m, h) in enumerate(rest, start=2)
        )
        detail += f"; and {len(rest)} more problem{'s' if len(rest) > 1 else ''}: {others}"
    return InvalidInput(detail, hint=hint, field=path or None)


def _where(origin: str, line: int | None) -> str:
    return f"{origin}, line {line}" if line is not None else origin


def _line(path: str, locate: Locator | None) -> int | None:
    """The line of `path`, or of its nearest parent the file has (a missing field: its mapping's line)."""
    if locate is None:
        return None
    probe = path
    while True:
        line = locate(probe)
        if line is not None or not probe:
            return line
        probe = _parent(probe)


def _parent(path: str) -> str:
    if path.endswith("]"):
        return path[: path.rindex("[")]
    return path.rsplit(".", 1)[0] if "." in path else ""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_catalog_document(document: Any, *, origin: str, locate: Locator | None = None) -> SnapshotData:
    """Validate a srift-catalog/1 document (already loaded) and return it as a SnapshotData.

    `origin` names the document in errors (a file path, or e.g. "testbed document"); `locate` maps a dotted
    field path to its 1-based line in the source file, when there is one. Every problem is reported.
    """
    if not isinstance(document, Mapping):
        raise InvalidInput(
            f"{_where(origin, _line('', locate))}: is not a mapping",
            hint="the file must be a YAML mapping with provider, source, instance_types",
        )
    try:
        parsed = CatalogDocument.model_validate(_text_keys(document))
    except ValidationError as exc:
        raise _report(exc.errors(), origin=origin, locate=locate) from None
    return parsed.to_domain()


# --- YAML files with line numbers ---------------------------------------------------------------------------


def _loader() -> type[yaml.SafeLoader]:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_with_lines(text: str, *, origin: str) -> tuple[Any, Locator]:
    """Parse YAML text; return the data and a locator from dotted field paths to 1-based line numbers.

    Composes the node tree first (yaml keeps each node's start mark) so that errors found later can name the
    line of the field at fault. Duplicate mapping keys are rejected here, naming both lines.
    """
    try:
        node = yaml.compose(text, Loader=_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InvalidInput(f"{origin}{line}: not valid YAML ({problem})", hint="fix the YAML syntax") from exc
    if node is None:
        raise InvalidInput(f"{origin}: the file is empty", hint="write a srift-catalog/1 document")
    lines: dict[str, int] = {}
    _index(node, "", lines, origin)
    loader = _loader()("")
    try:
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise InvalidInput(
            f"{origin}{line}: cannot read a value ({exc})", hint="fix the value's syntax"
        ) from exc
    finally:
        loader.dispose()
    return data, lines.get


def _index(node: yaml.Node, path: str, lines: dict[str, int], origin: str) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            child = _join(path, key)
            if key in seen:
                raise InvalidInput(
                    f"{origin}, line {line}: appears twice (first at line {seen[key]})",
                    hint="keep one of the two",
                    field=child,
                )
            seen[key] = line
            _index(value_node, child, lines, origin)
            lines[child] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, f"{path}[{i}]", lines, origin)


def load_catalog_file(path: Path, *, origin: str | None = None) -> SnapshotData:
    """Read and validate a catalog YAML file; errors name the file, the line and the field."""
    name = origin or str(path)
    try:
        text = read_text_file(path, field=None)
    except FileNotFoundError:
        raise InvalidInput(f"{name}: no such file", hint="check the path") from None
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read it ({exc})", hint="pass a readable YAML file") from exc
    data, locate = load_yaml_with_lines(text, origin=name)
    return parse_catalog_document(data, origin=name, locate=locate)
