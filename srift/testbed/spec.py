"""Testbed spec: instance types (CPU quota, link shape, price) and hosts, parsed and validated strictly."""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from srift.errors import InvalidInput

PREFIX_RE = re.compile(r"^[a-z0-9]{1,10}$")
HOST_RE = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RESERVED_HOSTS = frozenset({"switch", "localhost"})
MAX_HOSTS = 64
MAX_RATE_MBIT = 100_000.0
MAX_DELAY_MS = 10_000.0
DEFAULT_SUBNET = "10.213.0.0/24"
DEFAULT_MTU = 9001

_TYPE_FIELDS = {
    "name",
    "cpu_cores",
    "memory_mib",
    "rate_mbit",
    "delay_ms",
    "jitter_ms",
    "loss_pct",
    "price_usd_per_hr",
    "spot_price_usd_per_hr",
}
_HOST_FIELDS = {"type", "count", "name", "names"}
_TOP_FIELDS = {
    "prefix",
    "subnet",
    "mtu",
    "emulator",
    "seed",
    "types",
    "hosts",
    "description",
    "locations",
    "links",
}
_LOCATION_FIELDS = {"name", "hosts"}
_LINK_FIELDS = {"between", "rate_mbit", "delay_ms"}
LOCATION_RE = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
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


def _bad(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(message, hint=hint, field=field)


def _unknown(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            field = f"{where}.{key}" if where else str(key)
            raise _bad(
                field,
                f"unknown field {key!r}",
                f"remove it; allowed fields here are {', '.join(sorted(allowed))}",
            )


def _number(
    data: Mapping[str, Any],
    key: str,
    field: str,
    *,
    default: float | None = None,
    minimum: float = 0.0,
    exclusive: bool = False,
    maximum: float | None = None,
) -> float:
    if key not in data or data[key] is None:
        if default is None:
            raise _bad(field, f"{key} is required", f"add {key}")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(field, f"{key} must be a finite number, got {value!r}", f"write {key} as a number")
    number = float(value)
    if number < minimum or (exclusive and number == minimum):
        bound = f"> {minimum:g}" if exclusive else f"≥ {minimum:g}"
        raise _bad(field, f"{key} must be {bound}, got {value!r}", f"use {key} {bound}")
    if maximum is not None and number > maximum:
        raise _bad(field, f"{key} must be ≤ {maximum:g}, got {value!r}", f"use {key} ≤ {maximum:g}")
    return number


def _int(data: Mapping[str, Any], key: str, field: str, *, default: int, minimum: int, maximum: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, f"{key} must be an integer, got {value!r}", f"write {key} as a whole number")
    if not minimum <= value <= maximum:
        raise _bad(
            field, f"{key} must be in [{minimum}, {maximum}], got {value}", f"pick {key} in that range"
        )
    return value


def _check_prefix(value: object, field: str) -> str:
    if not isinstance(value, str) or not PREFIX_RE.match(value):
        raise _bad(
            field,
            f"prefix must be 1-10 lowercase letters or digits, got {value!r}",
            "pick a short name such as tb or tb2 (it prefixes namespaces and cgroups)",
        )
    return value


def _parse_type(raw: object, where: str, cores: int) -> HostTypeSpec:
    if not isinstance(raw, Mapping):
        raise _bad(where, "each type must be a mapping", "write the type as `- name: ...` with its fields")
    _unknown(raw, _TYPE_FIELDS, where)
    name = raw.get("name")
    if not isinstance(name, str) or not TYPE_RE.match(name):
        raise _bad(
            f"{where}.name",
            f"type name must be 1-64 letters, digits, '.', '_' or '-', got {name!r}",
            "name it like tb.small",
        )
    cpu = _number(raw, "cpu_cores", f"{where}.cpu_cores", minimum=0.0, exclusive=True)
    if cpu < 0.01:
        raise _bad(f"{where}.cpu_cores", f"cpu_cores must be ≥ 0.01, got {cpu:g}", "use at least 0.01 cores")
    if cpu > cores:
        raise _bad(
            f"{where}.cpu_cores",
            f"cpu_cores {cpu:g} is above this machine's {cores} cores",
            f"use cpu_cores ≤ {cores}",
        )
    memory: int | None = None
    if raw.get("memory_mib") is not None:
        mem = raw["memory_mib"]
        if isinstance(mem, bool) or not isinstance(mem, int) or mem < 16:
            raise _bad(
                f"{where}.memory_mib",
                f"memory_mib must be an integer ≥ 16, got {mem!r}",
                "give MiB, e.g. 2048",
            )
        memory = mem
    spot: float | None = None
    if raw.get("spot_price_usd_per_hr") is not None:
        spot = _number(raw, "spot_price_usd_per_hr", f"{where}.spot_price_usd_per_hr", minimum=0.0)
    return HostTypeSpec(
        name=name,
        cpu_cores=cpu,
        memory_mib=memory,
        rate_mbit=_number(
            raw, "rate_mbit", f"{where}.rate_mbit", minimum=0.0, exclusive=True, maximum=MAX_RATE_MBIT
        ),
        delay_ms=_number(raw, "delay_ms", f"{where}.delay_ms", default=0.0, maximum=MAX_DELAY_MS),
        jitter_ms=_number(raw, "jitter_ms", f"{where}.jitter_ms", default=0.0, maximum=MAX_DELAY_MS),
        loss_pct=_number(raw, "loss_pct", f"{where}.loss_pct", default=0.0, maximum=100.0),
        price_usd_per_hr=_number(raw, "price_usd_per_hr", f"{where}.price_usd_per_hr", minimum=0.0),
        spot_price_usd_per_hr=spot,
    )


def _parse_hosts(raw: object, type_names: list[str]) -> tuple[HostSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise _bad(
            "hosts",
            "hosts must be a non-empty list",
            "list hosts as `- {type: tb.small, count: 2}` or `- {name: a, type: tb.small}`",
        )
    names: list[tuple[str, str, str]] = []
    counters: dict[str, int] = {}
    for i, entry in enumerate(raw):
        where = f"hosts[{i}]"
        if not isinstance(entry, Mapping):
            raise _bad(where, "each host entry must be a mapping", "write `- {type: tb.small, count: 2}`")
        _unknown(entry, _HOST_FIELDS, where)
        type_name = entry.get("type")
        if type_name not in type_names:
            raise _bad(
                f"{where}.type",
                f"unknown type {type_name!r}",
                f"use one of the types declared under `types`: {', '.join(type_names)}",
            )
        assert isinstance(type_name, str)
        given: list[str] = []
        if "name" in entry:
            given = [entry["name"]]
            if "count" in entry and entry["count"] != 1:
                raise _bad(f"{where}.count", "a named host has count 1", "drop count, or use `names: [...]`")
        elif "names" in entry:
            given = entry["names"] if isinstance(entry["names"], list) else [entry["names"]]
            if "count" in entry and entry["count"] != len(given):
                raise _bad(f"{where}.count", "count differs from the number of names", "drop count")
        else:
            count = _int(entry, "count", f"{where}.count", default=1, minimum=1, maximum=MAX_HOSTS)
            stem = re.sub(r"[^a-z0-9]+", "-", type_name.rsplit(".", 1)[-1].lower()).strip("-") or "host"
            if not stem[0].isalpha():
                stem = "h" + stem
            for _ in range(count):
                n = counters.get(stem, 0)
                counters[stem] = n + 1
                given.append(f"{stem[:20]}{n}")
        field = f"{where}.name" if "name" in entry else f"{where}.names"
        for name in given:
            names.append((name, type_name, field))
    if len(names) > MAX_HOSTS:
        raise _bad("hosts", f"{len(names)} hosts is more than {MAX_HOSTS}", f"use at most {MAX_HOSTS} hosts")
    seen: set[str] = set()
    hosts = []
    for index, (name, type_name, field) in enumerate(names):
        if not isinstance(name, str) or not HOST_RE.match(name) or name in RESERVED_HOSTS:
            raise _bad(
                field,
                f"host name must start with a letter and hold 1-24 lowercase letters, digits or '-' "
                f"(not {', '.join(sorted(RESERVED_HOSTS))}), got {name!r}",
                "rename the host",
            )
        if name in seen:
            raise _bad(field, f"duplicate host name {name!r}", "give every host a different name")
        seen.add(name)
        hosts.append(HostSpec(name=name, type_name=type_name, index=index))
    return tuple(hosts)


def _parse_locations(raw: object, hosts: tuple[HostSpec, ...]) -> tuple[LocationSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise _bad(
            "locations",
            "locations must be a non-empty list",
            "write `- {name: east, hosts: [small0, small1]}` per location, or drop `locations`",
        )
    if len(raw) > MAX_LOCATIONS:
        raise _bad("locations", f"{len(raw)} locations is more than {MAX_LOCATIONS}", "use fewer locations")
    known = [h.name for h in hosts]
    placed: dict[str, str] = {}
    out: list[LocationSpec] = []
    for i, entry in enumerate(raw):
        where = f"locations[{i}]"
        if not isinstance(entry, Mapping):
            raise _bad(where, "each location must be a mapping", "write `- {name: east, hosts: [small0]}`")
        _unknown(entry, _LOCATION_FIELDS, where)
        name = entry.get("name")
        if not isinstance(name, str) or not LOCATION_RE.match(name):
            raise _bad(
                f"{where}.name",
                f"location name must start with a letter and hold 1-24 lowercase letters, digits or '-', "
                f"got {name!r}",
                "name it like east or eu-west",
            )
        if any(loc.name == name for loc in out):
            raise _bad(
                f"{where}.name", f"duplicate location {name!r}", "give every location a different name"
            )
        members = entry.get("hosts")
        if not isinstance(members, list) or not members:
            raise _bad(f"{where}.hosts", "hosts must be a non-empty list of host names", "list its hosts")
        for host in members:
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
            placed[host] = name
        out.append(LocationSpec(name=name, hosts=tuple(members)))
    missing = [h for h in known if h not in placed]
    if missing:
        raise _bad(
            "locations",
            f"hosts {', '.join(missing)} are in no location",
            "put every host in exactly one location",
        )
    return tuple(out)


def _parse_links(raw: object, locations: tuple[LocationSpec, ...]) -> tuple[LinkSpec, ...]:
    if raw is None:
        return ()
    names = [loc.name for loc in locations]
    if not isinstance(raw, list):
        raise _bad(
            "links", "links must be a list", "write `- {between: [east, west], rate_mbit: 50, delay_ms: 20}`"
        )
    if raw and len(names) < 2:
        raise _bad("links", "links join locations, and the spec has fewer than two", "add `locations` first")
    out: list[LinkSpec] = []
    for i, entry in enumerate(raw):
        where = f"links[{i}]"
        if not isinstance(entry, Mapping):
            raise _bad(
                where, "each link must be a mapping", "write `- {between: [east, west], rate_mbit: 50}`"
            )
        _unknown(entry, _LINK_FIELDS, where)
        pair = entry.get("between")
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(p in names for p in pair)
            or pair[0] == pair[1]
        ):
            raise _bad(
                f"{where}.between",
                f"between must name two different locations, got {pair!r}",
                f"use two of: {', '.join(names)}",
            )
        if any(set(k.between) == set(pair) for k in out):
            raise _bad(
                f"{where}.between", f"a second link between {pair[0]} and {pair[1]}", "keep one link per pair"
            )
        out.append(
            LinkSpec(
                between=(str(pair[0]), str(pair[1])),
                rate_mbit=_number(
                    entry,
                    "rate_mbit",
                    f"{where}.rate_mbit",
                    minimum=0.0,
                    exclusive=True,
                    maximum=MAX_RATE_MBIT,
                ),
                delay_ms=_number(entry, "delay_ms", f"{where}.delay_ms", default=0.0, maximum=MAX_DELAY_MS),
            )
        )
    return tuple(out)


def _parse_subnet(value: object, host_count: int) -> str:
    try:
        network = ipaddress.ip_network(str(value), strict=True)
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


def parse_spec(document: object, *, cores: int | None = None) -> TestbedSpec:
    """Validate a spec document (as loaded from YAML); every error names the offending field."""
    if not isinstance(document, Mapping):
        raise _bad("", "a testbed spec must be a mapping with `types` and `hosts`", "see docs/testbed.md")
    _unknown(document, _TOP_FIELDS, "")
    cores = cores if cores is not None else machine_cores()
    raw_types = document.get("types")
    if not isinstance(raw_types, list) or not raw_types:
        raise _bad("types", "types must be a non-empty list", "declare at least one type under `types`")
    types = tuple(_parse_type(t, f"types[{i}]", cores) for i, t in enumerate(raw_types))
    type_names = [t.name for t in types]
    for i, name in enumerate(type_names):
        if name in type_names[:i]:
            raise _bad(
                f"types[{i}].name", f"duplicate type name {name!r}", "give every type a different name"
            )
    hosts = _parse_hosts(document.get("hosts"), type_names)
    prefix = _check_prefix(document.get("prefix", "tb"), "prefix")
    subnet = _parse_subnet(document.get("subnet", DEFAULT_SUBNET), len(hosts))
    mtu = _int(document, "mtu", "mtu", default=DEFAULT_MTU, minimum=576, maximum=65000)
    try:
        emulator = Emulator(str(document.get("emulator", "auto")))
    except ValueError as exc:
        raise _bad(
            "emulator", f"unknown emulator {document.get('emulator')!r}", "use auto, netem or userspace"
        ) from exc
    seed = _int(document, "seed", "seed", default=0, minimum=0, maximum=2**31 - 1)
    description = document.get("description", "")
    if not isinstance(description, str):
        raise _bad("description", "description must be a string", "quote it")
    locations = _parse_locations(document.get("locations"), hosts)
    links = _parse_links(document.get("links"), locations)
    return TestbedSpec(
        types=types,
        hosts=hosts,
        prefix=prefix,
        subnet=subnet,
        mtu=mtu,
        emulator=emulator,
        seed=seed,
        description=description,
        locations=locations,
        links=links,
    )


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
