"""Catalog front layer: instance types and priced offers by provider and region, read from the database.

Every other area reads the catalog only through these functions. A *snapshot* is a named, dated set of
instance types and prices from one source (the shipped files, an AWS refresh, a custom import). Unless a
snapshot is named, reads use all *active* snapshots of a provider, the newest first (by as-of date, then
by when it was saved): each price comes from the newest snapshot that has it, and each instance type's
specs from the newest snapshot that lists it. So a refresh of one region overrides the shipped prices there
and leaves other regions, and prices it could not fetch, as they were.

User-supplied names are compared in Python against the known values, never sent to SQL, so a stray byte in
a query string cannot reach the database.

Reads answer from an in-memory copy of the three catalog tables, loaded once per catalog revision (see
srift.db.revisions: database triggers replace the revision token on every write to these tables), so a plan
or a catalog read costs one small query for the token instead of loading hundreds of rows, and a write by
any process is seen by the next read.
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import date
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from srift.catalog.document import PriceData, SnapshotData, TypeData
from srift.catalog.support import compute_capability, lifecycle
from srift.db.revisions import database_key, read_revisions
from srift.db.tables import CatalogSnapshot, InstanceTypeRow, PriceRow
from srift.domain.catalog import InstanceType, Interconnect, Lifecycle, Market, MarketChoice, Offer
from srift.domain.revisions import DataArea
from srift.errors import Conflict, InvalidInput, NotFound
from srift.limits import MAX_SOURCE_CHARS


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """An instance type in one region with its current prices (None where the market has no price)."""

    instance: InstanceType
    region: str
    on_demand: Offer | None
    spot: Offer | None
    snapshot: str
    extra: dict[str, Any]

    def offers(self) -> tuple[Offer, ...]:
        return tuple(o for o in (self.on_demand, self.spot) if o is not None)

    @property
    def compute_capability(self) -> str:
        """The GPUs' compute capability ("8.0"; "" for CPU types and GPUs without a spec)."""
        return compute_capability(self.instance)

    @property
    def status(self) -> Lifecycle:
        """Current, previous generation or retired, as of the entry's prices (srift.catalog.support)."""
        dates = [o.as_of for o in self.offers()]
        entry = lifecycle(self.instance, on=max(dates) if dates else None)
        return entry.status if entry is not None else Lifecycle.CURRENT

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready: specs, accelerator, region, prices with source and as-of date."""
        i = self.instance
        return {
            "provider": i.provider,
            "name": i.name,
            "region": self.region,
            "gpu_model": i.gpu_model,
            "gpu_count": i.gpu_count,
            "gpu_memory_gib": i.gpu_memory_gib,
            "vcpus": i.vcpus,
            "memory_gib": i.memory_gib,
            "network_gbps": i.network_gbps,
            "network_burst": i.network_burst,
            "interconnect": i.interconnect.value,
            "interconnect_gbps": i.interconnect_gbps,
            "efa": i.efa,
            "accelerator": i.accelerator,
            "compute_capability": self.compute_capability or None,
            "status": self.status.value,
            "snapshot": self.snapshot,
            "extra": self.extra,
            "prices": {
                "on_demand": _offer_dict(self.on_demand),
                "spot": _offer_dict(self.spot),
            },
        }


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """A stored snapshot's identity and provenance."""

    id: int
    name: str
    provider: str
    source: str
    as_of: date
    is_active: bool


def _offer_dict(offer: Offer | None) -> dict[str, Any] | None:
    if offer is None:
        return None
    return {
        "price_usd_per_hr": offer.price_usd_per_hr,
        "source": offer.source,
        "as_of": offer.as_of.isoformat(),
    }


# --- writing ---------------------------------------------------------------------------------------------


def save_snapshot(*, session: Session, snapshot: SnapshotData, replace: bool = False) -> int:
    """Write a snapshot (its types and prices) in the caller's transaction; return its id.

    A snapshot of the same name is replaced when `replace` is true, else this raises Conflict. Nothing is
    committed here: the caller's transaction makes the write all-or-nothing.
    """
    existing = session.scalars(select(CatalogSnapshot).where(CatalogSnapshot.name == snapshot.name)).first()
    if existing is not None:
        if not replace:
            raise Conflict(
                f"a catalog snapshot named {snapshot.name!r} already exists",
                hint="choose another snapshot name, or replace it explicitly",
                field="snapshot",
            )
        delete_snapshot(session=session, snapshot_id=existing.id)
    row = CatalogSnapshot(
        name=snapshot.name,
        provider=snapshot.provider,
        source=snapshot.source[:MAX_SOURCE_CHARS],
        as_of=snapshot.as_of,
        is_active=snapshot.active,
    )
    session.add(row)
    session.flush()
    # Multi-row INSERTs of plain rows, not an ORM object per type and price: each new data folder stores the
    # shipped snapshots' thousands of prices at start-up (srift.catalog.shipped).
    types = [
        {"snapshot_id": row.id, **_columns(t.instance), "provider": snapshot.provider, "extra": dict(t.extra)}
        for t in snapshot.types
    ]
    if types:
        session.execute(insert(InstanceTypeRow), types)
    prices = [
        {
            "snapshot_id": row.id,
            "instance_type": p.instance_type,
            "region": p.region,
            "market": p.market.value,
            "price_usd_per_hr": p.price_usd_per_hr,
            "source": p.source[:MAX_SOURCE_CHARS],
            "as_of": p.as_of,
        }
        for p in snapshot.prices
    ]
    if prices:
        session.execute(insert(PriceRow), prices)
    return row.id


def delete_snapshot(*, session: Session, snapshot_id: int) -> None:
    """Remove a snapshot with its types and prices (explicitly, so it works without ON DELETE CASCADE)."""
    session.execute(delete(PriceRow).where(PriceRow.snapshot_id == snapshot_id))
    session.execute(delete(InstanceTypeRow).where(InstanceTypeRow.snapshot_id == snapshot_id))
    session.execute(delete(CatalogSnapshot).where(CatalogSnapshot.id == snapshot_id))
    session.flush()


# --- reading ---------------------------------------------------------------------------------------------


def list_snapshots(*, session: Session, provider: str | None = None) -> list[SnapshotInfo]:
    """All stored snapshots (active or not), newest first."""
    return [r for r in _copy(session).snapshots if provider is None or r.provider == provider]


def known_providers(session: Session, *, snapshot: str | None = None) -> list[str]:
    """Providers with an active snapshot (or the named snapshot's provider), sorted."""
    if snapshot is not None:
        return [_named_snapshot(session, snapshot).provider]
    return sorted({r.provider for r in _copy(session).snapshots if r.is_active})


def known_instance_types(session: Session) -> list[str]:
    """Names of the instance types of every active snapshot, of any provider, sorted."""
    return sorted({name for p in known_providers(session) for name in _all_type_names(session, p, None)})


def known_regions(session: Session, provider: str, *, snapshot: str | None = None) -> list[str]:
    """Regions with at least one price for `provider` (in its active snapshots, or in the named one)."""
    copy = _copy(session)
    snaps = _snapshots(session, provider, snapshot)
    return sorted({p.region for s in snaps for p in copy.prices.get(s.id, ())})


def get_offers(
    *,
    session: Session,
    provider: str,
    region: str,
    names: Sequence[str] | None = None,
    market: MarketChoice = MarketChoice.ANY,
    snapshot: str | None = None,
) -> list[Offer]:
    """Priced offers of `provider` in `region` (spot and/or on-demand per `market`), sorted by name, market.

    `names` restricts the result to those instance types; a name the provider does not know raises NotFound
    listing close names, while a known type without a price here simply yields no offer. Unknown provider
    or region raises NotFound listing the valid values. `snapshot` selects one snapshot by name (e.g.
    "srift-paper-2020"); the default is the provider's active snapshots.
    """
    entries = _entries(session, provider=provider, region=region, snapshot=snapshot)
    if names is not None:
        known = {e.instance.name for e in entries} | _all_type_names(session, provider, snapshot)
        for name in names:
            if name not in known:
                raise _unknown_type(name, provider, sorted(known), field="names")
        wanted = set(names)
        entries = [e for e in entries if e.instance.name in wanted]
    offers = [o for e in entries for o in e.offers() if market.allows(o.market)]
    return sorted(offers, key=lambda o: (o.instance.name, o.market.value))


def get_instance_type(
    *, session: Session, provider: str, name: str, snapshot: str | None = None
) -> InstanceType:
    """The specs of one instance type (from the newest snapshot listing it); NotFound lists close names."""
    snaps = _snapshots(session, provider, snapshot)
    specs = _specs(session, snaps, provider)
    if name not in specs:
        raise _unknown_type(name, provider, sorted(specs), field="name")
    return specs[name][0]


def list_instance_types(
    *,
    session: Session,
    provider: str | None = None,
    region: str | None = None,
    gpu: str | None = None,
    min_gpus: int | None = None,
    market: MarketChoice = MarketChoice.ANY,
    snapshot: str | None = None,
) -> list[CatalogEntry]:
    """Instance types with their prices, one entry per (provider, type, region), sorted.

    Filters: `provider` and `region` (NotFound listing valid values when unknown; region needs a
    provider unless only one is known); `gpu` matches the GPU model the way profiles do ("T4",
    "Tesla T4") or a type name exactly; `min_gpus` keeps types with at least that many GPUs; `market`
    keeps entries priced in that market; `snapshot` reads one named snapshot instead of the active ones.
    """
    if min_gpus is not None and min_gpus < 0:
        raise InvalidInput(f"min_gpus is {min_gpus}", hint="give a count of 0 or more", field="min_gpus")
    providers = [provider] if provider is not None else known_providers(session, snapshot=snapshot)
    if provider is None and region is not None:
        providers = [p for p in providers if region in known_regions(session, p, snapshot=snapshot)]
        if not providers:
            all_regions = sorted(
                {
                    r
                    for p in known_providers(session, snapshot=snapshot)
                    for r in known_regions(session, p, snapshot=snapshot)
                }
            )
            raise NotFound(
                f"{_scope(None, None, snapshot)} has no region {region!r}",
                hint=f"use one of: {', '.join(all_regions) or 'none (the catalog is empty)'}",
                field="region",
            )
    entries: list[CatalogEntry] = []
    for p in providers:
        entries.extend(_entries(session, provider=p, region=region, snapshot=snapshot))
    if gpu is not None:
        matched = [e for e in entries if e.instance.matches_accelerator(gpu)]
        if not matched and entries:
            models = sorted({e.instance.gpu_model for e in entries if e.instance.gpu_model})
            raise NotFound(
                f"no instance type of {_scope(provider, region, snapshot)} has GPU {gpu!r}",
                hint=f"use one of: {', '.join(models)}",
                field="gpu",
            )
        entries = matched
    if min_gpus is not None:
        entries = [e for e in entries if e.instance.gpu_count >= min_gpus]
    if market is not MarketChoice.ANY:
        entries = [e for e in entries if any(market.allows(o.market) for o in e.offers())]
    return entries


# --- internals -------------------------------------------------------------------------------------------


def _scope(provider: str | None, region: str | None, snapshot: str | None) -> str:
    """What a catalog listing looked through, for its messages: "snapshot 'x'", "aws in eu-west-1", "the
    catalog"."""
    where = f"snapshot {snapshot!r}" if snapshot is not None else provider or "the catalog"
    return where + (f" in {region}" if region else "")


_INSTANCE_FIELDS = tuple(f.name for f in fields(InstanceType))
"""InstanceType's fields: InstanceTypeRow's columns of the same names (units as documented there)."""


def _columns(instance: InstanceType) -> dict[str, Any]:
    """The instance type as InstanceTypeRow's columns."""
    values = {name: getattr(instance, name) for name in _INSTANCE_FIELDS}
    return {**values, "interconnect": instance.interconnect.value}


def _instance(row: InstanceTypeRow) -> InstanceType:
    """The instance type a row stores."""
    values = {name: getattr(row, name) for name in _INSTANCE_FIELDS}
    return InstanceType(**{**values, "interconnect": Interconnect(row.interconnect)})


class _CatalogCopy:
    """The catalog tables as read at one revision, with the derived answers memoised (they never change)."""

    def __init__(self, session: Session) -> None:
        rows = session.scalars(
            select(CatalogSnapshot).order_by(CatalogSnapshot.as_of.desc(), CatalogSnapshot.id.desc())
        ).all()
        self.snapshots = tuple(
            SnapshotInfo(r.id, r.name, r.provider, r.source, r.as_of, r.is_active) for r in rows
        )
        self.types: dict[int, list[TypeData]] = {}
        """Snapshot id -> the instance types it lists."""
        for t in session.scalars(select(InstanceTypeRow)).all():
            self.types.setdefault(t.snapshot_id, []).append(TypeData(_instance(t), dict(t.extra)))
        self.prices: dict[int, list[PriceData]] = {}
        """Snapshot id -> its prices."""
        for p in session.scalars(select(PriceRow)).all():
            price = PriceData(
                p.instance_type, p.region, Market(p.market), p.price_usd_per_hr, p.source, p.as_of
            )
            self.prices.setdefault(p.snapshot_id, []).append(price)
        self._memo: dict[tuple[Any, ...], Any] = {}

    def memo(self, key: tuple[Any, ...]) -> Any:
        return self._memo.get(key)

    def remember(self, key: tuple[Any, ...], value: Any) -> None:
        self._memo[key] = value


_MAX_COPIES = 8
_copies: OrderedDict[str, tuple[str, _CatalogCopy]] = OrderedDict()
_copies_lock = threading.Lock()


def _copy(session: Session) -> _CatalogCopy:
    """The in-memory catalog of `session`'s database at its current revision (loaded when it changed)."""
    token = read_revisions(session=session).token(DataArea.CATALOG)
    url = database_key(session)
    with _copies_lock:
        held = _copies.get(url)
        if held is not None and held[0] == token:
            _copies.move_to_end(url)
            return held[1]
    copy = _CatalogCopy(session)
    with _copies_lock:
        _copies[url] = (token, copy)
        _copies.move_to_end(url)
        while len(_copies) > _MAX_COPIES:
            _copies.popitem(last=False)
    return copy


def _named_snapshot(session: Session, name: str) -> SnapshotInfo:
    rows = _copy(session).snapshots
    for row in rows:
        if row.name == name:
            return row
    names = sorted(r.name for r in rows)
    close = difflib.get_close_matches(name, names, n=3)
    lead = f"did you mean {', '.join(close)}? " if close else ""
    raise NotFound(
        f"no catalog snapshot named {name!r}",
        hint=f"{lead}known snapshots: {', '.join(names) or 'none (load the shipped catalog first)'}",
        field="snapshot",
    )


def _snapshots(session: Session, provider: str, snapshot: str | None) -> list[SnapshotInfo]:
    """The snapshots a read uses, highest precedence first; validates the provider."""
    if snapshot is not None:
        row = _named_snapshot(session, snapshot)
        if row.provider != provider:
            raise NotFound(
                f"snapshot {snapshot!r} is of provider {row.provider!r}, not {provider!r}",
                hint=f"use provider {row.provider!r} with this snapshot, or leave the snapshot out",
                field="provider",
            )
        return [row]
    rows = [r for r in _copy(session).snapshots if r.is_active]
    mine = [r for r in rows if r.provider == provider]
    if not mine:
        valid = sorted({r.provider for r in rows})
        raise NotFound(
            f"unknown provider {provider!r}",
            hint=f"use one of: {', '.join(valid) or 'none (the catalog is empty; run `srift db upgrade`)'}",
            field="provider",
        )
    return mine


def _specs(
    session: Session, snaps: Sequence[SnapshotInfo], provider: str
) -> dict[str, tuple[InstanceType, str, dict[str, Any]]]:
    """name -> (specs, snapshot name, extra), from the highest-precedence snapshot listing each type."""
    copy = _copy(session)
    key = ("specs", provider, tuple(s.id for s in snaps))
    found: dict[str, tuple[InstanceType, str, dict[str, Any]]] | None = copy.memo(key)
    if found is not None:
        return found
    rank = {s.id: i for i, s in enumerate(snaps)}
    names = {s.id: s.name for s in snaps}
    best: dict[str, tuple[int, TypeData]] = {}
    for sid in rank:
        for listed in copy.types.get(sid, ()):
            held = best.get(listed.instance.name)
            if held is None or rank[sid] < rank[held[0]]:
                best[listed.instance.name] = (sid, listed)
    found = {name: (t.instance, names[sid], dict(t.extra)) for name, (sid, t) in best.items()}
    copy.remember(key, found)
    return found


def _entries(
    session: Session, *, provider: str, region: str | None, snapshot: str | None
) -> list[CatalogEntry]:
    """Entries of `provider` (in `region`), sorted; shared between callers of one revision: do not mutate."""
    copy = _copy(session)
    snaps = _snapshots(session, provider, snapshot)
    ids = [s.id for s in snaps]
    key = ("entries", provider, region, tuple(ids))
    found: tuple[CatalogEntry, ...] | None = copy.memo(key)
    if found is not None:
        return list(found)
    price_rows = [(sid, p) for sid in ids for p in copy.prices.get(sid, ())]
    regions = sorted({p.region for _, p in price_rows})
    if region is not None and region not in regions:
        raise NotFound(
            f"unknown region {region!r} for provider {provider!r}",
            hint=f"use one of: {', '.join(regions) or 'none'}",
            field="region",
        )
    rank = {sid: i for i, sid in enumerate(ids)}
    best: dict[tuple[str, str, Market], tuple[int, PriceData]] = {}
    for sid, p in price_rows:
        if region is not None and p.region != region:
            continue
        price_key = (p.instance_type, p.region, p.market)
        held = best.get(price_key)
        if held is None or rank[sid] < rank[held[0]]:
            best[price_key] = (sid, p)
    specs = _specs(session, snaps, provider)
    by_type: dict[tuple[str, str], dict[Market, Offer]] = {}
    for (name, reg, market), (_, p) in best.items():
        if name not in specs:
            continue
        by_type.setdefault((name, reg), {})[market] = Offer(
            instance=specs[name][0],
            region=reg,
            market=market,
            price_usd_per_hr=p.price_usd_per_hr,
            source=p.source,
            as_of=p.as_of,
        )
    entries = [
        CatalogEntry(
            instance=specs[name][0],
            region=reg,
            on_demand=offers.get(Market.ON_DEMAND),
            spot=offers.get(Market.SPOT),
            snapshot=specs[name][1],
            extra=specs[name][2],
        )
        for (name, reg), offers in by_type.items()
    ]
    entries.sort(key=lambda e: (e.instance.provider, e.region, _type_order(e.instance.name)))
    copy.remember(key, tuple(entries))
    return entries


def _type_order(name: str) -> tuple[str, float, str]:
    """Sort g4dn.xlarge < g4dn.2xlarge < g4dn.12xlarge < g4dn.metal: family, then size."""
    family, _, size = name.partition(".")
    digits = size.split("xlarge")[0] if size.endswith("xlarge") else ""
    if size == "large":
        weight = 0.5
    elif size == "xlarge":
        weight = 1.0
    elif digits.isdigit():
        weight = float(digits)
    else:
        weight = 1e6
    return (family, weight, size)


def _all_type_names(session: Session, provider: str, snapshot: str | None) -> set[str]:
    return set(_specs(session, _snapshots(session, provider, snapshot), provider))


def _unknown_type(name: str, provider: str, known: Iterable[str], *, field: str) -> NotFound:
    known = list(known)
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = (
        f"did you mean {', '.join(close)}?"
        if close
        else f"list them with `srift catalog list --provider {provider}`"
    )
    return NotFound(f"provider {provider!r} has no instance type {name!r}", hint=hint, field=field)
