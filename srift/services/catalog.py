"""The catalog as an application service: instance types and prices for the REST API and the dashboard."""

from __future__ import annotations

from sqlalchemy.orm import Session

from srift.catalog import store
from srift.catalog.store import CatalogEntry
from srift.domain.catalog import MarketChoice


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
    """Instance types with their on-demand and spot prices, filtered (see `srift.catalog.store`)."""
    return store.list_instance_types(
        session=session,
        provider=provider,
        region=region,
        gpu=gpu,
        min_gpus=min_gpus,
        market=market,
        snapshot=snapshot,
    )
