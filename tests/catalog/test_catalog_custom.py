"""Custom providers: documents and files import as snapshots; bad files write nothing; names are guarded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from srift.catalog import store
from srift.catalog.custom import import_document, import_file
from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory, transaction
from srift.db.tables import CatalogSnapshot, InstanceTypeRow, PriceRow
from srift.domain.catalog import Market
from srift.errors import Conflict, InvalidInput
from srift.settings import Settings


def _testbed_document(price: float = 0.05) -> dict[str, Any]:
    return {
        "provider": "testbed",
        "snapshot": "testbed-local",
        "source": "emulated testbed: tc-shaped network namespaces",
        "as_of": "2026-11-22",
        "instance_types": [
            {
                "name": "tb.cpu2",
                "gpu_count": 0,
                "vcpus": 2,
                "memory_gib": 2,
                "network_gbps": 1,
                "extra": {"rate_mbit": 1000},
                "prices": {"local": {"on_demand": price, "spot": price / 2}},
            },
            {
                "name": "tb.cpu4",
                "gpu_count": 0,
                "vcpus": 4,
                "memory_gib": 4,
                "network_gbps": 0.5,
                "network_burst": True,
                "prices": {"local": {"on_demand": price * 2}},
            },
        ],
    }


def _rows(url: str) -> tuple[int, int, int]:
    with session_factory(url)() as s:
        return tuple(  # type: ignore[return-value]
            s.scalar(select(func.count()).select_from(t)) or 0
            for t in (CatalogSnapshot, InstanceTypeRow, PriceRow)
        )


def test_testbed_document_imports_and_reimport_replaces(db_url: str) -> None:
    with transaction(db_url) as s:
        first = import_document(session=s, document=_testbed_document(), origin="testbed")
    with transaction(db_url) as s:
        second = import_document(session=s, document=_testbed_document(price=0.08), origin="testbed")
    assert isinstance(first, int) and isinstance(second, int) and _rows(db_url) == (1, 2, 3)
    with session_factory(db_url)() as s:
        assert store.known_regions(s, "testbed") == ["local"]
        offers = store.get_offers(session=s, provider="testbed", region="local")
        assert [(o.instance.name, o.market, o.price_usd_per_hr) for o in offers] == [
            ("tb.cpu2", Market.ON_DEMAND, 0.08),
            ("tb.cpu2", Market.SPOT, 0.04),
            ("tb.cpu4", Market.ON_DEMAND, 0.16),
        ]
        assert offers[0].instance.accelerator == "tb.cpu2" and offers[0].source.startswith("emulated testbed")
        (entry,) = [
            e
            for e in store.list_instance_types(session=s, provider="testbed")
            if e.instance.name == "tb.cpu2"
        ]
        assert entry.extra == {"rate_mbit": 1000}


def test_malformed_file_writes_nothing(db_url: str, tmp_path: Path) -> None:
    doc = _testbed_document()
    good = tmp_path / "good.yaml"
    import yaml

    good.write_text(yaml.safe_dump(doc, sort_keys=False))
    with transaction(db_url) as s:
        import_file(session=s, path=good)
    before = _rows(db_url)
    text = good.read_text()
    bad = tmp_path / "bad.yaml"
    # The second type loses its vcpus: the first, valid one must not be written either.
    bad.write_text(text.replace("  vcpus: 4\n", "", 1).replace("testbed-local", "testbed-two"))
    with pytest.raises(InvalidInput) as info, transaction(db_url) as s:
        import_file(session=s, path=bad)
    assert (
        info.value.field == "instance_types[1].vcpus"
        and str(bad) in str(info.value)
        and "line " in str(info.value)
    )
    assert _rows(db_url) == before


def test_shipped_and_foreign_snapshot_names_are_refused(settings: Settings, session: Session) -> None:
    load_shipped_catalog(settings)
    doc = _testbed_document()
    doc["snapshot"] = "srift-paper-2020"
    with pytest.raises(Conflict):
        import_document(session=session, document=doc, origin="user")
    import_document(session=session, document=_testbed_document(), origin="testbed")
    other = _testbed_document()
    other["provider"] = "onprem"
    with pytest.raises(Conflict) as info:
        import_document(session=session, document=other, origin="user")
    assert "testbed" in info.value.detail
