"""Testbed spec: instance types (CPU quota, link shape, price) and hosts, parsed and validated strictly."""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from srift.documents import NUMBER, WHOLE, invalid_input, rule_error, validated
from srift.errors import InvalidInput

PREFIX_PATTERN = r"^[a-z0-9]{1,10}$"
HOST_PATTERN = r"^[a-z][a-z0-9-]{0,23}$"
TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
LOCATION_PATTERN = r"^[a-z][a-z0-9-]{0,23}$"
RESERVED_HOSTS = frozenset({"switch", "localhost"})
MAX_HOSTS = 64
MAX_RATE_MBIT = 100_000.0
MAX_DELAY_MS = 10_000.0
DEFAULT_SUBNET = "10.213.0.0/24"
DEFAULT_MTU = 9001
MAX_LOCATIONS = 8


class Emulator(StrEnum):
    """How link delay, jitter and loss are applied.

    `netem`: the kernel's netem qdisc on both ends of every link, hosts bridged by a kernel bridge.
    `userspace`: a small switch process (srift.testbed.switch) forwards frames between the links and
    delays, jitters or drops them; rates are still shaped by the kernel (tbf). `auto` picks netem when
    the kernel has it, else the kernel bridge when no link needs delay, jitter or loss, else userspace.
    """

    AUTO = "auto"
    NETEM = "netem"
    USERSPACE = "userspace"


@dataclass(frozen=True, slots=True)
class HostTypeSpec:
    """One emulated instance type.

    `cpu_cores` is a CFS quota in cores (0.5 = half of one core); `memory_mib` an optional memory limit;
    the link to the switch carries `rate_mbit` in each direction. `delay_ms`, `jitter_ms` and `loss_pct`
    are what two hosts of this type see one way between each other: each direction of a host's link adds
    half, so hosts of types X and Y see the mean of their values.
    """

    name: str
    cpu_cores: float
    rate_mbit: float
    price_usd_per_hr: float
    memory_mib: int | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    spot_price_usd_per_hr: float | None = None

    @property
    def needs_emulation(self) -> bool:
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0


@dataclass(frozen=True, slots=True)
class HostSpec:
    """A named host of one type; `index` orders hosts and picks their address (subnet + index + 1)."""

    name: str
    type_name: str
    index: int


@dataclass(frozen=True, slots=True)
class LocationSpec:
    """A group of hosts that stands for one location (a zone, region or cloud): they talk over the switch
    as usual, and to hosts of another location over that pair's link."""

    name: str
    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """What joins two locations: each host gets `rate_mbit` (each direction) to the other location's hosts,
    like a cloud VM's one-stream rate across regions, and every packet between them is delayed `delay_ms`
    one way on top of the hosts' own delays (round trip: 2 × delay_ms more)."""

    between: tuple[str, str]
    rate_mbit: float
    delay_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class TestbedSpec:
    """A whole testbed: types, hosts, the private subnet they share, MTU and emulator choice."""

    __test__ = False

    types: tuple[HostTypeSpec, ...]
    hosts: tuple[HostSpec, ...]
    prefix: str = "tb"
    subnet: str = DEFAULT_SUBNET
    mtu: int = DEFAULT_MTU
    emulator: Emulator = Emulator.AUTO
    seed: int = 0
    description: str = ""
    locations: tuple[LocationSpec, ...] = ()
    links: tuple[LinkSpec, ...] = ()

    def location_of(self, host: str) -> str | None:
        """The location holding `host` (None when the spec has no locations)."""
        for loc in self.locations:
            if host in loc.hosts:
                return loc.name
        return None

    def link_between(self, a: str, b: str) -> LinkSpec | None:
        """The link joining locations `a` and `b` (either order), None for one location or no link."""
        if a == b:
            return None
        for link in self.links:
            if set(link.between) == {a, b}:
                return link
        return None

    @property
    def needs_emulation(self) -> bool:
        """True when some path needs delay, jitter or loss (a type's, or a link's delay)."""
        return any(t.needs_emulation for t in self.types) or any(k.delay_ms > 0 for k in self.links)

    def type_of(self, host: str) -> HostTypeSpec:
        for h in self.hosts:
            if h.name == host:
                return self.type_named(h.type_name)
        raise KeyError(host)

    def type_named(self, name: str) -> HostTypeSpec:
        for t in self.types:
            if t.name == name:
                return t
        raise KeyError(name)

    def address_of(self, host: str) -> str:
        network = ipaddress.ip_network(self.subnet)
        for h in self.hosts:
            if h.name == host:
                return str(network.network_address + h.index + 1)
        raise KeyError(host)

    @property
    def prefix_len(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    def to_dict(self) -> dict[str, Any]:
        """The canonical document (re-parsable by `parse_spec`)."""
        types = []
        for t in self.types:
            d = {k: v for k, v in asdict(t).items() if v is not None}
            types.append(d)
        out: dict[str, Any] = {
            "prefix": self.prefix,
            "subnet": self.subnet,
            "mtu": self.mtu,
            "emulator": self.emulator.value,
            "seed": self.seed,
            "description": self.description,
            "types": types,
            "hosts": [{"name": h.name, "type": h.type_name} for h in self.hosts],
        }
        if self.locations:
            out["locations"] = [{"name": loc.name, "hosts": list(loc.hosts)} for loc in self.locations]
        if self.links:
            out["links"] = [
                {"between": list(k.between), "rate_mbit": k.rate_mbit, "delay_ms": k.delay_ms}
                for k in self.links
            ]
        return out

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def with_prefix(self, prefix: str) -> TestbedSpec:
        _check_prefix(prefix, "prefix")
        return dataclasses.replace(self, prefix=prefix)


def machine_cores() -> int:
    """Logical CPUs this process may run on (the bound for a host's quota)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _not_reserved(name: str) -> str:
    if name in RESERVED_HOSTS:
        raise ValueError(f"must not be {' or '.join(sorted(RESERVED_HOSTS))}")
    return name


TypeNamePattern = Annotated[str, Field(pattern=TYPE_PATTERN)]
HostName = Annotated[str, Field(pattern=HOST_PATTERN), AfterValidator(_not_reserved)]
"""1-24 lowercase letters, digits or '-', starting with a letter; not a reserved name."""
Prefix = Annotated[str, Field(pattern=PREFIX_PATTERN)]
Rate = Annotated[float, Field(gt=0, le=MAX_RATE_MBIT), NUMBER]
Delay = Annotated[float, Field(ge=0, le=MAX_DELAY_MS), NUMBER]
Price = Annotated[float, Field(ge=0), NUMBER]

_HINTS = {
    "prefix": "pick a short name such as tb or tb2 (1-10 lowercase letters or digits)",
    "emulator": "use auto, netem or userspace",
    "subnet": "write it like 10.213.0.0/24",
    "hosts": "list hosts as `- {type: tb.small, count: 2}` or `- {name: a, type: tb.small}`",
    "types": "declare types as `- {name: tb.small, cpu_cores: 0.5, rate_mbit: 100, price_usd_per_hr: 0.1}`",
}


class HostTypeDocument(BaseModel):
    """One emulated instance type as written (see HostTypeSpec)."""

    model_config = ConfigDict(extra="forbid")

    name: TypeNamePattern
    cpu_cores: Annotated[float, Field(ge=0.01), NUMBER]
    memory_mib: Annotated[int, Field(ge=16), WHOLE] | None = None
    rate_mbit: Rate
    delay_ms: Delay | None = 0.0
    jitter_ms: Delay | None = 0.0
    loss_pct: Annotated[float, Field(ge=0, le=100), NUMBER] | None = 0.0
    price_usd_per_hr: Price
    spot_price_usd_per_hr: Price | None = None

    @field_validator("cpu_cores")
    @classmethod
    def _within_machine(cls, cores: float, info: ValidationInfo) -> float:
        machine = (info.context or {}).get("cores") or machine_cores()
        if cores > machine:
            raise rule_error(
                f"cpu_cores {cores:g} is above this machine's {machine} cores",
                field="",
                hint=f"use cpu_cores ≤ {machine}",
            )
        return cores

    def to_domain(self) -> HostTypeSpec:
        return HostTypeSpec(
            name=self.name,
            cpu_cores=self.cpu_cores,
            memory_mib=self.memory_mib,
            rate_mbit=self.rate_mbit,
            delay_ms=self.delay_ms or 0.0,
            jitter_ms=self.jitter_ms or 0.0,
            loss_pct=self.loss_pct or 0.0,
            price_usd_per_hr=self.price_usd_per_hr,
            spot_price_usd_per_hr=self.spot_price_usd_per_hr,
        )


class HostsDocument(BaseModel):
    """Hosts of one type: one `name`, several `names`, or `count` hosts named after the type."""

    model_config = ConfigDict(extra="forbid")

    type: str
    count: Annotated[int, Field(ge=1, le=MAX_HOSTS), WHOLE] | None = None
    name: HostName | None = None
    names: list[HostName] | HostName | None = None

    @model_validator(mode="after")
    def _count(self) -> HostsDocument:
        if self.name is not None and self.count not in (None, 1):
            raise rule_error(
                "a named host has count 1", field="count", hint="drop count, or use `names: [...]`"
            )
        names = self.names is not None and self.name is None
        if names and self.count is not None and self.count != len(self.given_names()):
            raise rule_error("count differs from the number of names", field="count", hint="drop count")
        return self

    def given_names(self) -> list[str]:
        if self.name is not None:
            return [self.name]
        if self.names is not None:
            return self.names if isinstance(self.names, list) else [self.names]
        return []


class LocationDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=LOCATION_PATTERN)]
    hosts: list[str] = Field(min_length=1)


class LinkDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    between: list[str]
    rate_mbit: Rate
    delay_ms: Delay | None = 0.0


class TestbedDocument(BaseModel):
    """A testbed spec as written (YAML or JSON); `to_domain` checks the rules across its parts (declared
    types, unique names, every host in one location, links between known locations, the subnet)."""

    __test__ = False
    model_config = ConfigDict(extra="forbid")

    prefix: Prefix = "tb"
    subnet: str = DEFAULT_SUBNET
    mtu: Annotated[int, Field(ge=576, le=65000), WHOLE] = DEFAULT_MTU
    emulator: Emulator = Emulator.AUTO
    seed: Annotated[int, Field(ge=0, le=2**31 - 1), WHOLE] = 0
    description: str = ""
    types: list[HostTypeDocument] = Field(min_length=1)
    hosts: list[HostsDocument] = Field(min_length=1)
    locations: list[LocationDocument] | None = Field(default=None, min_length=1, max_length=MAX_LOCATIONS)
    links: list[LinkDocument] | None = None

    def to_domain(self) -> TestbedSpec:
        types = tuple(t.to_domain() for t in self.types)
        type_names = [t.name for t in types]
        for i, name in enumerate(type_names):
            if name in type_names[:i]:
                raise _bad(
                    f"types[{i}].name", f"duplicate type name {name!r}", "give every type a different name"
                )
        hosts = self._hosts(type_names)
        locations = self._locations(hosts)
        return TestbedSpec(
            types=types,
            hosts=hosts,
            prefix=self.prefix,
            subnet=_subnet(self.subnet, len(hosts)),
            mtu=self.mtu,
            emulator=self.emulator,
            seed=self.seed,
            description=self.description,
            locations=locations,
            links=self._links(locations),
        )

    def _hosts(self, type_names: list[str]) -> tuple[HostSpec, ...]:
        names: list[tuple[str, str, str]] = []
        counters: dict[str, int] = {}
        for i, entry in enumerate(self.hosts):
            where = f"hosts[{i}]"
            if entry.type not in type_names:
                raise _bad(
                    f"{where}.type",
                    f"unknown type {entry.type!r}",
                    f"use one of the types declared under `types`: {', '.join(type_names)}",
                )
            given = entry.given_names()
            if entry.name is None and entry.names is None:
                stem = re.sub(r"[^a-z0-9]+", "-", entry.type.rsplit(".", 1)[-1].lower()).strip("-") or "host"
                if not stem[0].isalpha():
                    stem = "h" + stem
                for _ in range(entry.count or 1):
                    n = counters.get(stem, 0)
                    counters[stem] = n + 1
                    given.append(f"{stem[:20]}{n}")
            field = f"{where}.name" if entry.name is not None else f"{where}.names"
            names.extend((name, entry.type, field) for name in given)
        if len(names) > MAX_HOSTS:
            raise _bad(
                "hosts", f"{len(names)} hosts is more than {MAX_HOSTS}", f"use at most {MAX_HOSTS} hosts"
            )
        seen: set[str] = set()
        hosts = []
        for index, (name, type_name, field) in enumerate(names):
            if name in seen:
                raise _bad(field, f"duplicate host name {name!r}", "give every host a different name")
            seen.add(name)
            hosts.append(HostSpec(name=name, type_name=type_name, index=index))
        return tuple(hosts)

    def _locations(self, hosts: tuple[HostSpec, ...]) -> tuple[LocationSpec, ...]:
        if self.locations is None:
            return ()
        known = [h.name for h in hosts]
        placed: dict[str, str] = {}
        out: list[LocationSpec] = []
        for i, entry in enumerate(self.locations):
            where = f"locations[{i}]"
            if any(loc.name == entry.name for loc in out):
                raise _bad(
                    f"{where}.name",
                    f"duplicate location {entry.name!r}",
                    "give every location a different name",
                )
            for host in entry.hosts:
                if host not in known:
                    raise _bad(
                        f"{where}.hosts",
                        f"unknown host {host!r}",
                        f"use the hosts' names ({', '.join(known)})",
                    )
                if host in placed:
                    raise _bad(
                        f"{where}.hosts",
                        f"host {host!r} is already in location {placed[host]!r}",
                        "put every host in exactly one location",
                    )
                placed[host] = entry.name
            out.append(LocationSpec(name=entry.name, hosts=tuple(entry.hosts)))
        missing = [h for h in known if h not in placed]
        if missing:
            raise _bad(
                "locations",
                f"hosts {', '.join(missing)} are in no location",
                "put every host in exactly one location",
            )
        return tuple(out)

    def _links(self, locations: tuple[LocationSpec, ...]) -> tuple[LinkSpec, ...]:
        if self.links is None:
            return ()
        names = [loc.name for loc in locations]
        if self.links and len(names) < 2:
            raise _bad(
                "links", "links join locations, and the spec has fewer than two", "add `locations` first"
            )
        out: list[LinkSpec] = []
        for i, entry in enumerate(self.links):
            where = f"links[{i}]"
            pair = entry.between
            if len(pair) != 2 or not all(p in names for p in pair) or pair[0] == pair[1]:
                raise _bad(
                    f"{where}.between",
                    f"between must name two different locations, got {pair!r}",
                    f"use two of: {', '.join(names)}",
                )
            if any(set(k.between) == set(pair) for k in out):
                raise _bad(
                    f"{where}.between",
                    f"a second link between {pair[0]} and {pair[1]}",
                    "keep one link per pair",
                )
            out.append(
                LinkSpec(
                    between=(pair[0], pair[1]), rate_mbit=entry.rate_mbit, delay_ms=entry.delay_ms or 0.0
                )
            )
        return tuple(out)


def _bad(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(message, hint=hint, field=field)


def _subnet(value: str, host_count: int) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise _bad(
            "subnet", f"subnet {value!r} is not an IPv4 network ({exc})", "write it like 10.213.0.0/24"
        ) from exc
    if network.version != 4 or not network.is_private or network.is_loopback or network.is_link_local:
        raise _bad(
            "subnet",
            f"subnet {network} is not a private IPv4 range",
            "use one inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 (default 10.213.0.0/24)",
        )
    if not 8 <= network.prefixlen <= 28 or network.num_addresses - 2 < host_count:
        raise _bad(
            "subnet",
            f"subnet {network} cannot hold {host_count} hosts",
            "use a /24 (or larger) private network",
        )
    return str(network)


def _check_prefix(value: object, field: str) -> str:
    try:
        prefix: str = _PREFIX.validate_python(value)
    except ValidationError as exc:
        raise invalid_input(exc, hints={"": _HINTS["prefix"], "value": _HINTS["prefix"]}) from exc
    return prefix


_PREFIX: TypeAdapter[str] = TypeAdapter(Prefix)


def parse_spec(document: object, *, cores: int | None = None) -> TestbedSpec:
    """Validate a spec document (as loaded from YAML); every error names the offending field."""
    if not isinstance(document, Mapping):
        raise _bad("", "a testbed spec must be a mapping with `types` and `hosts`", "see docs/testbed.md")
    return validated(TestbedDocument, dict(document), hints=_HINTS, context={"cores": cores}).to_domain()


def load_spec(path: str | Path, *, cores: int | None = None) -> TestbedSpec:
    """Read and validate a YAML (or JSON) spec file."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InvalidInput(
            f"cannot read spec {p} ({exc.strerror})", hint="check the path", field="spec"
        ) from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(
            f"spec {p} is not valid YAML ({exc})", hint="fix the YAML syntax", field="spec"
        ) from exc
    return parse_spec(document, cores=cores)


def example_spec_path(name: str = "two-types") -> Path:
    """Path of a shipped example spec (srift/testbed/examples/<name>.yaml)."""
    return Path(__file__).parent / "examples" / f"{name}.yaml"
