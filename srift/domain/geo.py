"""Locations, the links between them and what moving a gigabyte between them costs (fleets across places).

A *location* is where a group of VMs runs: a provider's region, optionally one zone of it. VMs in one
location talk over the provider's local network (the bandwidth models); VMs in different locations talk
over a slower *link* with its own bandwidth and latency, and every byte that leaves a location is billed
at the *route* price of its provider (intra-zone, inter-zone, inter-region, inter-continent, to Oceania,
to the internet or another cloud).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from srift.errors import InvalidInput, require_number


class Continent(StrEnum):
    """Where a region is, as egress price tables group them (Erben et al. Table 1: US, EU, ASIA, OCE)."""

    NORTH_AMERICA = "na"
    SOUTH_AMERICA = "sa"
    EUROPE = "eu"
    ASIA = "asia"
    OCEANIA = "oce"
    MIDDLE_EAST = "me"
    AFRICA = "af"


class Route(StrEnum):
    """The kind of path a byte takes between two locations; egress prices are per route and provider."""

    INTRA_ZONE = "intra_zone"
    INTER_ZONE = "inter_zone"
    INTER_REGION = "inter_region"
    INTER_CONTINENT = "inter_continent"
    TO_OCEANIA = "to_oceania"
    INTERNET = "internet"


class AllreducePattern(StrEnum):
    """How gradients cross locations.

    `ring`: one ring over every VM, ordered by location (what PyTorch DDP does with gloo or NCCL's ring):
    each ring step waits for the slowest hop, so every one of the 2(N−1) steps pays the slowest link's
    latency, and each location sends 2(N−1)/N of the gradient bytes to the next location.
    `hierarchical`: reduce inside each location, a ring over one VM per location, broadcast back (what
    Hivemind's grouped averaging does): 2(L−1) steps over the slow links, 2(L−1)/L of the bytes leave
    each location.
    """

    RING = "ring"
    HIERARCHICAL = "hierarchical"


@dataclass(frozen=True, slots=True, order=True)
class Location:
    """A provider's region, or one zone of it (`zone` None: the region's default zone)."""

    provider: str
    region: str
    zone: str | None = None

    @property
    def key(self) -> str:
        """`provider/region` or `provider/region/zone`, the form requests and answers use."""
        return "/".join(p for p in (self.provider, self.region, self.zone) if p)

    @classmethod
    def parse(cls, text: str, *, field: str = "location") -> Location:
        """Parse `provider/region[/zone]`; raises InvalidInput naming `field`."""
        parts = [p.strip() for p in text.split("/")]
        if len(parts) not in (2, 3) or not all(parts):
            raise InvalidInput(
                f"{text!r} is not provider/region or provider/region/zone",
                hint="write a location as e.g. aws/us-east-1 or gcp/us-central1/a",
                field=field,
            )
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


@dataclass(frozen=True, slots=True)
class Link:
    """What two VMs in different locations get between them: one TCP stream's Gbit/s and one-way latency.

    `source` says where the figures come from (a measurement, a paper's table, the user).
    """

    bandwidth_gbps: float
    latency_ms: float
    source: str

    def __post_init__(self) -> None:
        require_number(
            self.bandwidth_gbps,
            field="bandwidth_gbps",
            hint="give bandwidth_gbps > 0",
            positive=True,
            what="link bandwidth",
        )
        require_number(
            self.latency_ms, field="latency_ms", hint="give latency_ms ≥ 0 (one way)", what="link latency"
        )

    @property
    def latency_s(self) -> float:
        return self.latency_ms / 1000.0

    @property
    def bandwidth_bps(self) -> float:
        return self.bandwidth_gbps * 1e9


@dataclass(frozen=True, slots=True)
class RegionInfo:
    """One region of one provider: its continent, a place name and coordinates (for maps)."""

    provider: str
    region: str
    continent: Continent
    place: str = ""
    lat: float | None = None
    lon: float | None = None


@dataclass(frozen=True, slots=True)
class EgressPrices:
    """One provider's USD per GB leaving a location, by route; the inter-region price may differ by continent.

    `usd_per_gb` holds one price per `Route`; for INTER_REGION it is the default, which `inter_region`
    overrides for the continents it names. `to_oceania` applies to traffic from another continent into
    Oceania (Erben Table 1's "ANY-OCE"); `internet` to traffic that leaves the provider (another cloud, the
    public internet). `sources` cites each route's price, by route name.
    """

    provider: str
    usd_per_gb: Mapping[Route, float]
    inter_region: dict[Continent, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def price(self, route: Route, *, continent: Continent | None = None) -> float:
        """USD per GB for `route`; `continent` picks the inter-region price where it differs."""
        if route is Route.INTER_REGION and continent is not None and continent in self.inter_region:
            return self.inter_region[continent]
        return self.usd_per_gb[route]


@dataclass(frozen=True, slots=True)
class EgressFlow:
    """Bytes per iteration that one location sends to another, the route they take and what they cost."""

    source: Location
    destination: Location
    route: Route
    bytes_per_iteration: float
    usd_per_gb: float

    @property
    def usd_per_iteration(self) -> float:
        return self.bytes_per_iteration / 1e9 * self.usd_per_gb
