"""The catalog front layer against a real database: shipped load, offers, filters, precedence, errors."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from srift.catalog import store
from srift.catalog.document import PriceData, SnapshotData, TypeData
from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory, transaction
from srift.db.tables import CatalogSnapshot, InstanceTypeRow, PriceRow
from srift.domain.catalog import Interconnect, Market, MarketChoice
from srift.errors import Conflict, NotFound
from srift.settings import Settings


@pytest.fixture
def loaded(settings: Settings) -> Settings:
    assert load_shipped_catalog(settings) == 4  # aws, azure, gcp, srift-paper-2020
    return settings


def _counts(url: str) -> tuple[int, int, int]:
    with session_factory(url)() as s:
        return (
            s.scalar(select(func.count()).select_from(CatalogSnapshot)) or 0,
            s.scalar(select(func.count()).select_from(InstanceTypeRow)) or 0,
            s.scalar(select(func.count()).select_from(PriceRow)) or 0,
        )


def test_shipped_load_is_idempotent(loaded: Settings) -> None:
    before = _counts(loaded.resolved_database_url)
    assert before[0] == 4 and before[2] > 200
    assert load_shipped_catalog(loaded) == 0
    assert _counts(loaded.resolved_database_url) == before
    # A snapshot stored from an older version of a file (other hash) is replaced, not duplicated.
    with transaction(loaded.resolved_database_url) as s:
        row = s.scalars(select(CatalogSnapshot).where(CatalogSnapshot.name == "aws-2025-05")).one()
        row.source = "shipped file aws.yaml sha256:0000000000000000; older data"
    assert load_shipped_catalog(loaded) == 1
    assert _counts(loaded.resolved_database_url) == before


def test_offers_providers_regions_and_errors(loaded: Settings, session: Session) -> None:
    assert store.known_providers(session) == ["aws", "azure", "gcp"]
    assert store.known_regions(session, "aws") == ["eu-central-1", "eu-west-1", "us-east-1", "us-west-2"]
    offers = store.get_offers(
        session=session, provider="aws", region="us-east-1", names=["p3.8xlarge", "g4dn.8xlarge"]
    )
    assert [(o.instance.name, o.market) for o in offers] == [
        ("g4dn.8xlarge", Market.ON_DEMAND),
        ("g4dn.8xlarge", Market.SPOT),
        ("p3.8xlarge", Market.ON_DEMAND),
        ("p3.8xlarge", Market.SPOT),
    ]
    p3 = offers[2]
    assert p3.price_usd_per_hr == 12.24 and p3.region == "us-east-1" and p3.as_of == date(2025, 5, 31)
    assert p3.instance.interconnect is Interconnect.NVLINK and p3.instance.gpu_count == 4
    spot = store.get_offers(session=session, provider="aws", region="us-west-2", market=MarketChoice.SPOT)
    assert len(spot) == 54 and all(o.market is Market.SPOT for o in spot)

    with pytest.raises(NotFound) as bad_provider:
        store.get_offers(session=session, provider="oracle", region="us-east-1")
    assert bad_provider.value.field == "provider" and "aws" in bad_provider.value.hint
    with pytest.raises(NotFound) as bad_region:
        store.get_offers(session=session, provider="aws", region="ap-south-1")
    assert (
        bad_region.value.field == "region"
        and "eu-central-1, eu-west-1, us-east-1, us-west-2" in bad_region.value.hint
    )
    with pytest.raises(NotFound) as bad_name:
        store.get_offers(session=session, provider="aws", region="us-east-1", names=["p3.8xlarg"])
    assert "p3.8xlarge" in bad_name.value.hint
    with pytest.raises(NotFound) as bad_type:
        store.get_instance_type(session=session, provider="aws", name="g4dn.x1arge")
    assert "g4dn.xlarge" in bad_type.value.hint
    assert store.get_instance_type(session=session, provider="aws", name="p5en.48xlarge").gpu_model == "H200"


def test_list_filters(loaded: Settings, session: Session) -> None:
    east = store.list_instance_types(session=session, provider="aws", region="us-east-1")
    assert len([e for e in east if e.instance.gpu_count > 0]) >= 30
    t4 = store.list_instance_types(session=session, provider="aws", region="us-east-1", gpu="Tesla T4")
    assert [e.instance.name for e in t4] == [
        f"g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal")
    ]
    eight = store.list_instance_types(session=session, provider="aws", region="us-west-2", min_gpus=8)
    assert {e.instance.name for e in eight} >= {
        "p4d.24xlarge",
        "p5.48xlarge",
        "g4dn.metal",
        "p2.8xlarge",
        "p2.16xlarge",
    }
    assert all(e.instance.gpu_count >= 8 for e in eight)
    both = store.list_instance_types(session=session, gpu="H100")
    assert [(e.instance.name, e.region) for e in both] == [
        ("p5.48xlarge", "us-east-1"),
        ("p5.48xlarge", "us-west-2"),
    ]
    with pytest.raises(NotFound) as bad_gpu:
        store.list_instance_types(session=session, provider="aws", gpu="TPUv5")
    assert bad_gpu.value.field == "gpu" and "A100" in bad_gpu.value.hint


def test_paper_snapshot_is_selectable_by_name_and_not_used_by_default(
    loaded: Settings, session: Session
) -> None:
    paper = store.get_offers(
        session=session,
        provider="aws",
        region="us-east-1",
        market=MarketChoice.SPOT,
        snapshot="srift-paper-2020",
    )
    assert {o.instance.name: o.price_usd_per_hr for o in paper} == {
        "p3.8xlarge": 3.68,
        "g3.8xlarge": 0.69,
        "g4dn.8xlarge": 0.72,
    }
    assert all(o.as_of == date(2020, 8, 20) for o in paper)
    default = store.get_offers(
        session=session, provider="aws", region="us-east-1", names=["g3.8xlarge"], market=MarketChoice.SPOT
    )
    assert default[0].price_usd_per_hr == pytest.approx(0.684)
    with pytest.raises(NotFound) as bad:
        store.get_offers(session=session, provider="aws", region="us-east-1", snapshot="srift-paper")
    assert "srift-paper-2020" in bad.value.hint
    with pytest.raises(NotFound):
        store.get_offers(session=session, provider="aws", region="us-west-2", snapshot="srift-paper-2020")


def _newer(spot_usd: float) -> SnapshotData:
    base = store.get_instance_type
    del base
    from srift.catalog.document import load_catalog_file
    from srift.catalog.shipped import DATA_DIR

    p3 = next(t for t in load_catalog_file(DATA_DIR / "aws.yaml").types if t.instance.name == "p3.2xlarge")
    return SnapshotData(
        name="aws-us-east-1-refresh",
        provider="aws",
        source="test refresh",
        as_of=date(2026, 11, 1),
        active=True,
        types=(TypeData(p3.instance, {"network_performance": "Up to 10 Gigabit"}),),
        prices=(
            PriceData("p3.2xlarge", "us-east-1", Market.SPOT, spot_usd, "refresh spot", date(2026, 11, 1)),
        ),
    )


def test_newer_snapshot_overrides_only_what_it_holds(loaded: Settings, session: Session) -> None:
    store.save_snapshot(session=session, snapshot=_newer(0.91))
    session.flush()
    east = {
        o.market: o
        for o in store.get_offers(session=session, provider="aws", region="us-east-1", names=["p3.2xlarge"])
    }
    assert east[Market.SPOT].price_usd_per_hr == 0.91 and east[Market.SPOT].source == "refresh spot"
    assert east[Market.ON_DEMAND].price_usd_per_hr == 3.06 and east[Market.ON_DEMAND].as_of == date(
        2025, 5, 31
    )
    west = {
        o.market: o
        for o in store.get_offers(session=session, provider="aws", region="us-west-2", names=["p3.2xlarge"])
    }
    assert west[Market.SPOT].price_usd_per_hr == pytest.approx(0.9362)
    (entry,) = store.list_instance_types(
        session=session, provider="aws", region="us-east-1", gpu="V100", min_gpus=1, market=MarketChoice.SPOT
    )[:1]
    assert entry.snapshot == "aws-us-east-1-refresh"
    with pytest.raises(Conflict):
        store.save_snapshot(session=session, snapshot=_newer(0.5))
    store.save_snapshot(session=session, snapshot=_newer(0.5), replace=True)
    spot = store.get_offers(
        session=session, provider="aws", region="us-east-1", names=["p3.2xlarge"], market=MarketChoice.SPOT
    )
    assert spot[0].price_usd_per_hr == 0.5


def test_empty_catalog_says_so(session: Session) -> None:
    assert store.list_instance_types(session=session) == []
    with pytest.raises(NotFound) as info:
        store.get_offers(session=session, provider="aws", region="us-east-1")
    assert "catalog is empty" in info.value.hint
