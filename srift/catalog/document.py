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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from srift.documents import Number, WholeNumber, read_text_file
from srift.domain.catalog import InstanceType, Interconnect, Market
from srift.errors import InvalidInput

FORMAT = "srift-catalog/1"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
TYPE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SNAPSHOT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
MAX_SOURCE_CHARS = 500

_TOP_KEYS = {
    "format",
    "provider",
    "snapshot",
    "active",
    "source",
    "as_of",
    "price_source",
    "sources",
    "instance_types",
}
_TYPE_KEYS = {
    "name",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "network_gbps",
    "network_burst",
    "interconnect",
    "interconnect_gbps",
    "efa",
    "extra",
    "price_source",
    "prices",
}


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


class _Checker:
    """Raises InvalidInput naming the field, and the origin file and line when known."""

    def __init__(self, origin: str, locate: Locator | None) -> None:
        self.origin = origin
        self.locate = locate

    def fail(self, path: str, problem: str, hint: str) -> InvalidInput:
        line = self._line(path)
        where = f"{self.origin}, line {line}" if line is not None else self.origin
        return InvalidInput(f"{where}: {problem}", hint=hint, field=path or None)

    def _line(self, path: str) -> int | None:
        if self.locate is None:
            return None
        probe = path
        while True:
            line = self.locate(probe)
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
    field path to its 1-based line in the source file, when there is one.
    """
    c = _Checker(origin, locate)
    if not isinstance(document, Mapping):
        raise c.fail(
            "", "is not a mapping", "the file must be a YAML mapping with provider, source, instance_types"
        )
    _no_unknown_keys(c, document, "", _TOP_KEYS)
    fmt = document.get("format", FORMAT)
    if fmt != FORMAT:
        raise c.fail("format", f"{fmt!r} is not supported", f"use `format: {FORMAT}` or leave it out")
    provider = _text(c, document, "provider", "", pattern=NAME_RE, hint="a lowercase name such as `onprem`")
    snapshot = document.get("snapshot")
    if snapshot is None:
        snapshot = f"{provider}-import"
    elif not isinstance(snapshot, str) or not SNAPSHOT_RE.match(snapshot):
        raise c.fail(
            "snapshot", f"{snapshot!r} is not a valid snapshot name", "use letters, digits, '.', '_', '-'"
        )
    active = document.get("active", True)
    if not isinstance(active, bool):
        raise c.fail("active", f"{active!r} is not true or false", "write `active: true` or `active: false`")
    source = _text(
        c, document, "source", "", max_len=MAX_SOURCE_CHARS, hint="say where the numbers come from"
    )
    as_of = _date(c, document, "as_of", "")
    sources = _sources(c, document.get("sources"))
    default_key = _source_key(c, document, "price_source", "", sources)
    default_source = sources[default_key] if default_key else (source, as_of)

    raw_types = document.get("instance_types")
    if not isinstance(raw_types, list) or not raw_types:
        raise c.fail("instance_types", "is missing or empty", "list at least one instance type")
    types: list[TypeData] = []
    prices: list[PriceData] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_types):
        path = f"instance_types[{i}]"
        type_data, type_prices = _instance_type(c, raw, path, provider, sources, default_source)
        name = type_data.instance.name
        if name in seen:
            raise c.fail(f"{path}.name", f"{name!r} appears twice", "give each instance type once")
        seen.add(name)
        types.append(type_data)
        prices.extend(type_prices)
    return SnapshotData(
        name=snapshot,
        provider=provider,
        source=source,
        as_of=as_of,
        active=active,
        types=tuple(types),
        prices=tuple(prices),
    )


def _no_unknown_keys(c: _Checker, data: Mapping[str, Any], path: str, allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise c.fail(
                _join(path, str(key)),
                "is not a known field",
                f"remove it or correct the spelling; known fields: {', '.join(sorted(allowed))}",
            )


def _text(
    c: _Checker,
    data: Mapping[str, Any],
    key: str,
    path: str,
    *,
    hint: str,
    pattern: re.Pattern[str] | None = None,
    max_len: int = 200,
) -> str:
    where = _join(path, key)
    value = data.get(key)
    if value is None:
        raise c.fail(where, "is missing", f"add `{key}`: {hint}")
    if not isinstance(value, str) or not value.strip():
        raise c.fail(where, f"{value!r} is not a non-empty text", hint)
    if len(value) > max_len:
        raise c.fail(where, f"is {len(value)} characters long (limit {max_len})", "shorten it")
    if pattern is not None and not pattern.match(value):
        raise c.fail(where, f"{value!r} is not valid", hint)
    return value.strip()


def _date(c: _Checker, data: Mapping[str, Any], key: str, path: str) -> date:
    where = _join(path, key)
    value = data.get(key)
    if value is None:
        raise c.fail(where, "is missing", f"add `{key}: YYYY-MM-DD`, the date the numbers were valid")
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise c.fail(where, f"{value!r} is not a date", "write it as YYYY-MM-DD")


def _number(
    c: _Checker,
    data: Mapping[str, Any],
    key: str,
    path: str,
    *,
    minimum: float,
    strict: bool,
    default: Any = ...,
) -> float:
    where = _join(path, key)
    value = data.get(key)
    if value is None:
        if default is not ...:
            return float(default)
        raise c.fail(where, "is missing", f"add `{key}`")
    try:
        value = _NUMBER.validate_python(value)
    except ValidationError:
        raise c.fail(where, f"{value!r} is not a number", f"give `{key}` as a number") from None
    if value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise c.fail(where, f"{value} is out of range", f"`{key}` must be {bound}")
    return float(value)


_NUMBER: TypeAdapter[float] = TypeAdapter(Number)
_WHOLE: TypeAdapter[int] = TypeAdapter(WholeNumber)
"""The documents' one rule for numbers and integers (srift.documents): 3.0 is the integer 3 here too."""


def _integer(c: _Checker, data: Mapping[str, Any], key: str, path: str, *, minimum: int) -> int:
    where = _join(path, key)
    value = data.get(key)
    if value is None:
        raise c.fail(where, "is missing", f"add `{key}`")
    try:
        value = _WHOLE.validate_python(value)
    except ValidationError:
        raise c.fail(where, f"{value!r} is not a whole number", f"give `{key}` as an integer") from None
    if value < minimum or value > 100_000:
        raise c.fail(where, f"{value} is out of range", f"`{key}` must be between {minimum} and 100000")
    return value


def _flag(c: _Checker, data: Mapping[str, Any], key: str, path: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise c.fail(
            _join(path, key), f"{value!r} is not true or false", f"write `{key}: true` or `{key}: false`"
        )
    return value


def _sources(c: _Checker, raw: Any) -> dict[str, tuple[str, date]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise c.fail("sources", "is not a mapping", "map each source key to {text: ..., as_of: YYYY-MM-DD}")
    out: dict[str, tuple[str, date]] = {}
    for key, entry in raw.items():
        path = f"sources.{key}"
        if not isinstance(entry, Mapping):
            raise c.fail(path, "is not a mapping", "give {text: ..., as_of: YYYY-MM-DD}")
        _no_unknown_keys(c, entry, path, {"text", "as_of"})
        text = _text(c, entry, "text", path, max_len=MAX_SOURCE_CHARS, hint="describe the source")
        out[str(key)] = (text, _date(c, entry, "as_of", path))
    return out


def _source_key(
    c: _Checker, data: Mapping[str, Any], key: str, path: str, sources: Mapping[str, tuple[str, date]]
) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or value not in sources:
        known = ", ".join(sorted(sources)) or "none defined"
        raise c.fail(_join(path, key), f"{value!r} is not a key of `sources`", f"use one of: {known}")
    return value


def _instance_type(
    c: _Checker,
    raw: Any,
    path: str,
    provider: str,
    sources: Mapping[str, tuple[str, date]],
    default_source: tuple[str, date],
) -> tuple[TypeData, list[PriceData]]:
    if not isinstance(raw, Mapping):
        raise c.fail(path, "is not a mapping", "give each instance type as a mapping with name, vcpus, ...")
    _no_unknown_keys(c, raw, path, _TYPE_KEYS)
    name = _text(c, raw, "name", path, pattern=TYPE_NAME_RE, max_len=128, hint="e.g. `g4dn.xlarge`")
    gpu_count = _integer(c, raw, "gpu_count", path, minimum=0)
    gpu_model = raw.get("gpu_model")
    if gpu_count > 0:
        gpu_model = _text(c, raw, "gpu_model", path, max_len=64, hint="the GPU's model, e.g. `T4` or `A100`")
        gpu_memory = _number(c, raw, "gpu_memory_gib", path, minimum=0, strict=True)
    else:
        if gpu_model is not None:
            raise c.fail(
                _join(path, "gpu_model"), "is set but gpu_count is 0", "remove gpu_model or set gpu_count"
            )
        gpu_memory = _number(c, raw, "gpu_memory_gib", path, minimum=0, strict=False, default=0)
        if gpu_memory != 0:
            raise c.fail(
                _join(path, "gpu_memory_gib"), "is set but gpu_count is 0", "set it to 0 or remove it"
            )
    vcpus = _integer(c, raw, "vcpus", path, minimum=1)
    memory = _number(c, raw, "memory_gib", path, minimum=0, strict=True)
    network = _number(c, raw, "network_gbps", path, minimum=0, strict=True)
    burst = _flag(c, raw, "network_burst", path)
    efa = _flag(c, raw, "efa", path)
    interconnect = _interconnect(c, raw, path, gpu_count)
    if interconnect is Interconnect.NONE:
        ic_gbps = _number(c, raw, "interconnect_gbps", path, minimum=0, strict=False, default=0)
        if ic_gbps != 0:
            raise c.fail(_join(path, "interconnect_gbps"), "is set but interconnect is none", "set it to 0")
    else:
        ic_gbps = _number(c, raw, "interconnect_gbps", path, minimum=0, strict=True)
    extra = raw.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise c.fail(_join(path, "extra"), "is not a mapping", "give extra facts as a mapping, or remove it")
    type_source_key = _source_key(c, raw, "price_source", path, sources)
    type_source = sources[type_source_key] if type_source_key else default_source
    instance = InstanceType(
        provider=provider,
        name=name,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        gpu_memory_gib=gpu_memory,
        vcpus=vcpus,
        memory_gib=memory,
        network_gbps=network,
        network_burst=burst,
        interconnect=interconnect,
        interconnect_gbps=ic_gbps,
        efa=efa,
    )
    prices = _prices(c, raw.get("prices"), _join(path, "prices"), name, sources, type_source)
    return TypeData(instance=instance, extra=_plain(dict(extra))), prices


def _interconnect(c: _Checker, raw: Mapping[str, Any], path: str, gpu_count: int) -> Interconnect:
    value = raw.get("interconnect")
    where = _join(path, "interconnect")
    choices = ", ".join(i.value for i in Interconnect)
    if value is None:
        if gpu_count > 1:
            raise c.fail(where, "is missing for a multi-GPU type", f"add `interconnect`: one of {choices}")
        return Interconnect.NONE
    try:
        ic = Interconnect(value)
    except ValueError:
        raise c.fail(where, f"{value!r} is not an interconnect", f"use one of {choices}") from None
    if gpu_count <= 1 and ic is not Interconnect.NONE:
        raise c.fail(where, f"is {ic.value} but the type has {gpu_count} GPU(s)", "use `none` below two GPUs")
    if gpu_count > 1 and ic is Interconnect.NONE:
        raise c.fail(where, "is none for a multi-GPU type", f"use one of {choices}")
    return ic


def _prices(
    c: _Checker,
    raw: Any,
    path: str,
    name: str,
    sources: Mapping[str, tuple[str, date]],
    default_source: tuple[str, date],
) -> list[PriceData]:
    if not isinstance(raw, Mapping) or not raw:
        raise c.fail(path, "is missing or empty", "map each region to {on_demand: USD/h, spot: USD/h}")
    out: list[PriceData] = []
    markets = ", ".join(m.value for m in Market)
    for region, by_market in raw.items():
        rpath = f"{path}.{region}"
        if not isinstance(region, str) or not NAME_RE.match(region):
            raise c.fail(rpath, f"{region!r} is not a region name", "use lowercase letters, digits and '-'")
        if not isinstance(by_market, Mapping) or not by_market:
            raise c.fail(rpath, "has no prices", f"map markets ({markets}) to USD per hour")
        for market_key, value in by_market.items():
            mpath = f"{rpath}.{market_key}"
            try:
                market = Market(market_key)
            except ValueError:
                raise c.fail(mpath, f"{market_key!r} is not a market", f"use {markets}") from None
            if isinstance(value, Mapping):
                _no_unknown_keys(c, value, mpath, {"price_usd_per_hr", "source"})
                price = _number(c, value, "price_usd_per_hr", mpath, minimum=0, strict=True)
                key = _source_key(c, value, "source", mpath, sources)
                text, as_of = sources[key] if key else default_source
            else:
                price = _number(c, by_market, str(market_key), rpath, minimum=0, strict=True)
                text, as_of = default_source
            out.append(PriceData(name, region, market, price, text, as_of))
    return out


def _plain(value: Any) -> Any:
    """Turn YAML values (dates included) into JSON-storable ones."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, date):
        return value.isoformat()
    return value


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
