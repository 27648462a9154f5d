"""`testbed up` registers the spec's types in the catalog under provider testbed, region local."""

from __future__ import annotations

from sqlalchemy.orm import Session

from srift.catalog.store import get_instance_type, get_offers, list_snapshots
from srift.domain import Market
from srift.testbed import example_spec_path, load_spec
from srift.testbed.catalog import PROVIDER, REGION, catalog_document, register_types


def test_types_are_registered_with_prices_and_link_rates(session: Session) -> None:
    spec = load_spec(example_spec_path(), cores=2)
    register_types(session=session, spec=spec)
    session.commit()
    register_types(session=session, spec=spec)
    session.commit()
    snapshots = [s.name for s in list_snapshots(session=session, provider=PROVIDER)]
    assert snapshots == [f"testbed-{spec.prefix}"]
    offers = get_offers(session=session, provider=PROVIDER, region=REGION)
    prices = {(o.instance.name, o.market): o.price_usd_per_hr for o in offers}
    assert prices == {
        ("tb.small", Market.ON_DEMAND): 0.10,
        ("tb.small", Market.SPOT): 0.04,
        ("tb.large", Market.ON_DEMAND): 0.25,
        ("tb.large", Market.SPOT): 0.09,
    }
    small = get_instance_type(session=session, provider=PROVIDER, name="tb.small")
    assert small.network_gbps == 0.1 and small.gpu_count == 0 and small.vcpus == 1
    assert small.accelerator == "tb.small"


def test_document_keeps_the_exact_quota_and_link_shape() -> None:
    spec = load_spec(example_spec_path(), cores=2)
    doc = catalog_document(spec)
    small = doc["instance_types"][0]
    assert small["extra"]["cpu_cores"] == 0.5 and small["extra"]["delay_ms"] == 2
    assert doc["snapshot"] == f"testbed-{spec.prefix}"
