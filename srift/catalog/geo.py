"""Network facts between locations (regions, egress prices, links) and spot interruption rates.

The shipped files live in `srift/catalog/data/geo/` (`network.yaml`, `spot.yaml`); each figure names its
source. `GeoCatalog` answers, for two locations: the route a byte takes, what it costs per GB, and the link
(bandwidth of one TCP stream, one-way latency) two VMs get between them. `SpotFacts` answers, for an
instance type in a region, the per-VM interruption rate. Both can be extended: the testbed registers its
emulated locations and links, and a plan request may give its own links and rates.

Link resolution for a pair of different locations, first match wins: a measured link between the two
(either direction's figure for its own direction, the reverse one otherwise); another zone of the same
region; the same continent; the continents' pair; the slowest measured inter-continent pair.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from srift.documents import validated
from srift.domain.geo import Continent, EgressPrices, Link, Location, RegionInfo, Route
from srift.errors import InvalidInput

GEO_DIR = Path(__file__).resolve().parent / "data" / "geo"
HOURS_PER_MONTH = 720.0
"""Spot Advisor's trailing month, as hours: 30 days."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Source(_Strict):
    text: str = Field(min_length=1, max_length=2000)
    as_of: date


class _Region(_Strict):
    continent: Continent
    place: str = ""
    lat: float | None = None
    lon: float | None = None


class _Price(_Strict):
    usd_per_gb: float = Field(ge=0, le=10)
    source: str


class _RegionPrices(_Strict):
    na: float | None = Field(default=None, ge=0, le=10)
    sa: float | None = Field(default=None, ge=0, le=10)
    eu: float | None = Field(default=None, ge=0, le=10)
    asia: float | None = Field(default=None, ge=0, le=10)
    oce: float | None = Field(default=None, ge=0, le=10)
    me: float | None = Field(default=None, ge=0, le=10)
    af: float | None = Field(default=None, ge=0, le=10)
    default: float = Field(ge=0, le=10)
    source: str


class _Egress(_Strict):
    # one field per Route, named as its value: parse_network reads them by route
    intra_zone: _Price
    inter_zone: _Price
    inter_region: _RegionPrices
    inter_continent: _Price
    to_oceania: _Price
    internet: _Price


class _Link(_Strict):
    bandwidth_gbps: float = Field(gt=0, le=10_000)
    rtt_ms: float = Field(ge=0, le=10_000)
    source: str
    note: str = ""


class _PairLink(_Link):
    from_: str = Field(alias="from")
    to: str


class _Priors(_Strict):
    other_zone_same_region: _Link
    same_continent: _Link
    continents: dict[str, _Link]
    unmeasured_continents: _Link


class _NetworkFile(_Strict):
    format: str = Field(pattern=r"^srift-geo/1$")
    as_of: date
    sources: dict[str, _Source]
    regions: dict[str, dict[str, _Region]]
    egress: dict[str, _Egress]
    links: list[_PairLink] = Field(default_factory=list)
    link_priors: _Priors


class _Band(_Strict):
    low: float = Field(ge=0, lt=1)
    high: float = Field(gt=0, lt=1)
    midpoint: float = Field(gt=0, lt=1)


class _SpotEntry(_Strict):
    band: str
    source: str


class _SpotFile(_Strict):
    format: str = Field(pattern=r"^srift-spot/1$")
    as_of: date
    sources: dict[str, _Source]
    bands: dict[str, _Band]
    defaults: dict[str, _SpotEntry]
    entries: dict[str, dict[str, dict[str, _SpotEntry]]] = Field(default_factory=dict)


def _read(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _cite(sources: Mapping[str, _Source], key: str, *, origin: str) -> str:
    if key not in sources:
        raise InvalidInput(
            f"{origin}: source {key!r} is not defined",
            hint="name a key of the file's `sources`",
            field="source",
        )
    s = sources[key]
    return f"{s.text.strip()} (as of {s.as_of.isoformat()})"


def one_way_link(*, bandwidth_gbps: float, rtt_ms: float, source: str) -> Link:
    """A Link from a measured round trip: the simulator's latency is one way, half the round trip."""
    return Link(bandwidth_gbps=bandwidth_gbps, latency_ms=rtt_ms / 2.0, source=source)


@dataclass(frozen=True)
class GeoCatalog:
    """Regions, egress prices and links; pure lookups, no database (built once from the shipped files)."""

    regions: dict[tuple[str, str], RegionInfo]
    egress: dict[str, EgressPrices]
    links: dict[tuple[str, str], Link]
    other_zone: Link
    same_continent: Link
    continents: dict[frozenset[Continent], Link]
    unmeasured: Link
    sources: tuple[str, ...] = field(default=())

    def region(self, location: Location) -> RegionInfo | None:
        return self.regions.get((location.provider, location.region))

    def continent(self, location: Location) -> Continent | None:
        info = self.region(location)
        return info.continent if info is not None else None

    def knows(self, location: Location) -> bool:
        return (location.provider, location.region) in self.regions

    def route(self, source: Location, destination: Location) -> Route:
        """The route bytes from `source` to `destination` take (the source provider's price applies)."""
        if source.provider != destination.provider:
            return Route.INTERNET
        if source.region == destination.region:
            return Route.INTRA_ZONE if source.zone == destination.zone else Route.INTER_ZONE
        a, b = self.continent(source), self.continent(destination)
        if a is not None and a == b:
            return Route.INTER_REGION
        if b is Continent.OCEANIA:
            return Route.TO_OCEANIA
        return Route.INTER_CONTINENT

    def egress_usd_per_gb(self, source: Location, destination: Location) -> float:
        """USD per GB that `source`'s provider charges for bytes sent to `destination`."""
        prices = self.egress.get(source.provider)
        if prices is None:
            return 0.0
        return prices.price(self.route(source, destination), continent=self.continent(source))

    def link(self, source: Location, destination: Location) -> Link:
        """The link between two different locations (see the module docstring for the order of rules)."""
        if source == destination:
            raise ValueError("a location has no link to itself; its VMs use the provider's network")
        for a, b in ((source, destination), (destination, source)):
            for key in ((a.key, b.key), (_region_key(a), _region_key(b))):
                found = self.links.get(key)
                if found is not None:
                    return found
        if source.provider == destination.provider and source.region == destination.region:
            return self.other_zone
        ca, cb = self.continent(source), self.continent(destination)
        if ca is not None and ca == cb:
            return self.same_continent
        if ca is not None and cb is not None:
            found = self.continents.get(frozenset((ca, cb)))
            if found is not None:
                return found
        return self.unmeasured

    def with_links(self, extra: Mapping[tuple[str, str], Link]) -> GeoCatalog:
        """A copy with more (or replaced) measured links, keyed by (from, to) location keys."""
        return replace(self, links={**self.links, **extra})

    def with_regions(self, extra: Iterable[RegionInfo]) -> GeoCatalog:
        """A copy that also knows these regions (the testbed's emulated locations, a user's own)."""
        regions = dict(self.regions)
        for info in extra:
            regions[(info.provider, info.region)] = info
        return replace(self, regions=regions)

    def with_egress(self, prices: EgressPrices) -> GeoCatalog:
        """A copy with one provider's egress prices added or replaced."""
        return replace(self, egress={**self.egress, prices.provider: prices})


def _region_key(location: Location) -> str:
    return f"{location.provider}/{location.region}"


def parse_network(data: Any, *, origin: str) -> GeoCatalog:
    """Validate a srift-geo/1 document and build the catalog; InvalidInput names the field at fault."""
    doc = validated(_NetworkFile, data, where=origin)

    def cite(key: str) -> str:
        return _cite(doc.sources, key, origin=origin)

    regions = {
        (provider, name): RegionInfo(provider, name, r.continent, r.place, r.lat, r.lon)
        for provider, items in doc.regions.items()
        for name, r in items.items()
    }
    egress = {}
    for provider, e in doc.egress.items():
        by_continent = {
            Continent(k): v
            for k, v in e.inter_region.model_dump().items()
            if k not in ("default", "source") and v is not None
        }
        by_route = {route: getattr(e, route.value) for route in Route}  # INTER_REGION: a _RegionPrices
        egress[provider] = EgressPrices(
            provider=provider,
            usd_per_gb={
                route: p.default if route is Route.INTER_REGION else p.usd_per_gb
                for route, p in by_route.items()
            },
            inter_region=by_continent,
            sources={route.value: cite(p.source) for route, p in by_route.items()},
        )
    links = {}
    for i, pair_link in enumerate(doc.links):
        a = Location.parse(pair_link.from_, field=f"links[{i}].from")
        b = Location.parse(pair_link.to, field=f"links[{i}].to")
        links[(a.key, b.key)] = one_way_link(
            bandwidth_gbps=pair_link.bandwidth_gbps, rtt_ms=pair_link.rtt_ms, source=cite(pair_link.source)
        )

    def prior(raw: _Link) -> Link:
        text = cite(raw.source) + (f"; {raw.note.strip()}" if raw.note else "")
        return one_way_link(bandwidth_gbps=raw.bandwidth_gbps, rtt_ms=raw.rtt_ms, source=text)

    continents = {}
    for pair, raw in doc.link_priors.continents.items():
        parts = pair.split("-")
        if len(parts) != 2:
            raise InvalidInput(
                f"{origin}: continent pair {pair!r} is not two codes joined by '-'",
                hint="write pairs as e.g. na-eu",
                field=f"link_priors.continents.{pair}",
            )
        try:
            key = frozenset(Continent(p) for p in parts)
        except ValueError as exc:
            raise InvalidInput(
                f"{origin}: {pair!r} names an unknown continent",
                hint=f"use {', '.join(c.value for c in Continent)}",
                field=f"link_priors.continents.{pair}",
            ) from exc
        continents[key] = prior(raw)
    return GeoCatalog(
        regions=regions,
        egress=egress,
        links=links,
        other_zone=prior(doc.link_priors.other_zone_same_region),
        same_continent=prior(doc.link_priors.same_continent),
        continents=continents,
        unmeasured=prior(doc.link_priors.unmeasured_continents),
        sources=tuple(cite(k) for k in doc.sources),
    )


@functools.lru_cache(maxsize=1)
def shipped_geo() -> GeoCatalog:
    """The shipped network facts (srift/catalog/data/geo/network.yaml), parsed once."""
    path = GEO_DIR / "network.yaml"
    return parse_network(_read(path), origin=f"srift/catalog/data/geo/{path.name}")


def hourly_to_monthly_fraction(per_hr: float) -> float:
    """The monthly share of VMs interrupted at `per_hr` interruptions per VM-hour (monthly_to_hourly_rate's
    inverse): 1 - exp(-720 per_hr)."""
    return -math.expm1(-per_hr * HOURS_PER_MONTH)


def monthly_to_hourly_rate(fraction: float) -> float:
    """Per-VM interruptions per hour from a monthly share of VMs interrupted: -ln(1 - f) / 720."""
    if not 0 <= fraction < 1:
        raise InvalidInput(
            f"{fraction} is outside [0, 1)",
            hint="give the share of VMs interrupted in a month, e.g. 0.075 for 7.5 %",
            field="interruption_rates",
        )
    return -math.log1p(-fraction) / HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class SpotRate:
    """One spot offer's interruption rate: per VM-hour, the band it came from, and the source."""

    per_hr: float
    band: str
    monthly_fraction: float
    source: str


@dataclass(frozen=True)
class SpotFacts:
    """Spot interruption bands per provider, region and instance type, with a default per provider."""

    bands: dict[str, tuple[float, float, float]]
    defaults: dict[str, tuple[str, str]]
    entries: dict[tuple[str, str, str], tuple[str, str]]

    def _rate(self, band: str, source: str) -> SpotRate:
        _, _, mid = self.bands[band]
        return SpotRate(monthly_to_hourly_rate(mid), band, mid, source)

    def widened(self, band: str) -> tuple[float, float]:
        """`band`'s monthly range widened one band each side (the low edge of the band below, the high edge
        of the band above): what a fallback band claims where no trace checked it."""
        low, high, _ = self.bands[band]
        below = [b[0] for b in self.bands.values() if b[0] < low]
        above = [b[1] for b in self.bands.values() if b[1] > high]
        return max(below, default=low), min(above, default=high)

    def rate(self, *, provider: str, region: str, instance_type: str) -> SpotRate:
        """The interruption rate of one spot offer (the provider's default band where none is shipped)."""
        found = self.entries.get((provider, region, instance_type))
        if found is not None:
            return self._rate(*found)
        default = self.defaults.get(provider)
        if default is not None:
            band, source = default
            return self._rate(band, f"default for {provider}: {source}")
        band, source = self.defaults.get("aws", ("5-20%", "no source"))
        return self._rate(band, f"no figure for provider {provider}; AWS's default: {source}")


def parse_spot(data: Any, *, origin: str) -> SpotFacts:
    """Validate a srift-spot/1 document; InvalidInput names the field at fault."""
    doc = validated(_SpotFile, data, where=origin)
    bands = {}
    for name, b in doc.bands.items():
        if not b.low <= b.midpoint <= b.high:
            raise InvalidInput(
                f"{origin}: band {name!r} has its midpoint outside [low, high]",
                hint="give low ≤ midpoint ≤ high",
                field=f"bands.{name}",
            )
        bands[name] = (b.low, b.high, b.midpoint)

    def entry(e: _SpotEntry, where: str) -> tuple[str, str]:
        if e.band not in bands:
            raise InvalidInput(
                f"{origin}: band {e.band!r} is not defined",
                hint=f"use one of {', '.join(bands)}",
                field=where,
            )
        return e.band, _cite(doc.sources, e.source, origin=origin)

    defaults = {p: entry(e, f"defaults.{p}") for p, e in doc.defaults.items()}
    entries = {
        (p, r, t): entry(e, f"entries.{p}.{r}.{t}")
        for p, regions in doc.entries.items()
        for r, types in regions.items()
        for t, e in types.items()
    }
    return SpotFacts(bands=bands, defaults=defaults, entries=entries)


@functools.lru_cache(maxsize=1)
def shipped_spot() -> SpotFacts:
    """The shipped spot interruption facts (srift/catalog/data/geo/spot.yaml), parsed once."""
    path = GEO_DIR / "spot.yaml"
    return parse_spot(_read(path), origin=f"srift/catalog/data/geo/{path.name}")
