"""No stale cache: the next plan after storing a new profile, activating another bandwidth model or loading a
new catalog snapshot answers from the new data, while an unchanged request is answered from the cache.

Writes go straight to the database (as the CLI or another server process would); the server's caches learn
of them only through the data revisions (srift.db.revisions). The multi-worker form of this test runs a real
`srift serve --workers 2` (tests/reliability/test_plan_cache_workers.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import update

from srift.bandwidth import registry
from srift.bandwidth.records import SampleQuery
from srift.catalog.custom import import_document
from srift.db.session import transaction
from srift.db.tables import ModelProfileRow
from srift.domain import ComputeCurve, ModelProfile
from srift.optimize.synthetic import synthetic_profile
from srift.profiling.store import EVERYONE, PARSED, delete_profile, get_profile, save_profile
from srift.services.plans import PREPARED
from srift.settings import Settings

SLOW, FAST = "bw.r100.d2", "bw.r1000.d05"  # link shapes the shipped bandwidth model was trained on


def catalog(*, name: str, as_of: str, slow_price: float, fast_price: float) -> dict[str, Any]:
    """A testbed snapshot of two CPU hosts with the shipped model's link rates (100, 1000 Mbit/s)."""

    def host(type_name: str, gbps: float, price: float) -> dict[str, Any]:
        return {
            "name": type_name,
            "gpu_model": None,
            "gpu_count": 0,
            "gpu_memory_gib": 0,
            "vcpus": 2,
            "memory_gib": 4,
            "network_gbps": gbps,
            "interconnect": "none",
            "interconnect_gbps": 0,
            "prices": {"local": {"on_demand": price}},
        }

    return {
        "provider": "testbed",
        "snapshot": name,
        "source": "plan cache test",
        "as_of": as_of,
        "instance_types": [host(SLOW, 0.1, slow_price), host(FAST, 1.0, fast_price)],
    }


def profile(accelerator: str, *, speed: float = 1.0) -> ModelProfile:
    """A small CNN-like profile labelled with a testbed type (profiles match types by name)."""
    base = synthetic_profile("resnet50", "T4")

    def scaled(curve: ComputeCurve) -> ComputeCurve:
        return ComputeCurve(curve.batches, tuple(t / speed for t in curve.times_s))

    return dataclasses.replace(
        base,
        model="cache-cnn",
        accelerator=accelerator,
        forward=scaled(base.forward),
        backward=scaled(base.backward),
    )


def plan_request() -> dict[str, Any]:
    return {
        "model": "cache-cnn",
        "global_batch": 256,
        "iterations": 2000,
        "objective": "min_time",
        "provider": "testbed",
        "region": "local",
        "market": "on_demand",
        "availability": {SLOW: 4, FAST: 4},
        "mode": "exhaustive",
        "solve_budget_s": 10,
    }


def store_first_data(url: str) -> int:
    """The first catalog (snapshot tb-1) and a profile of the model for each host type; returns the fast
    hosts' profile id."""
    with transaction(url) as session:
        import_document(
            session=session,
            document=catalog(name="tb-1", as_of="2026-01-01", slow_price=0.1, fast_price=0.4),
            origin="test",
        )
        save_profile(session=session, profile=profile(SLOW))
        return save_profile(session=session, profile=profile(FAST))


def answer(client: TestClient, headers: dict[str, str]) -> tuple[Any, ...]:
    """What a plan says (not its id, time stamps or solve time)."""
    r = client.post("/v1/plans", json=plan_request(), headers=headers)
    assert r.status_code == 201, r.text
    body = r.json()
    return (
        body["label"],
        tuple((c["instance_type"], c["count"], c["batch"]) for c in body["choices"]),
        round(body["predicted"]["iteration_s"], 9),
        round(body["predicted"]["cost_usd"], 9),
        tuple(body["sources"]),
    )


def test_the_next_plan_sees_new_profiles_models_and_catalogs(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    url = settings.resolved_database_url
    store_first_data(url)

    first = answer(client, write_headers)
    hits = PREPARED.hits
    assert answer(client, write_headers) == first, "an unchanged request must give the same plan"
    assert PREPARED.hits == hits + 1, "an unchanged request must be served from the prepared-problem cache"
    assert any(s.startswith("prior:") for s in first[4]), first[4]

    # 1. another bandwidth model becomes active: the shipped, learned model
    registry.load_shipped_models(settings)
    with_model = answer(client, write_headers)
    assert with_model != first
    assert any(s.startswith("xgb:testbed-") for s in with_model[4]), with_model[4]

    # ... and then a version trained on one link shape only (the other falls back to the prior)
    with transaction(url) as session:
        shipped = registry.active_version(session=session)
        assert shipped is not None
        narrow = registry.train_version(
            session=session,
            settings=settings,
            query=SampleQuery(instance_types=(FAST,)),
            tune=False,
            activate_it=True,
        )
    with_narrow = answer(client, write_headers)
    assert with_narrow != with_model and f"xgb:{narrow.version}" in with_narrow[4]
    with transaction(url) as session:  # rolling back to the shipped version gives its plan again
        registry.activate(session=session, version=shipped.version)
    assert answer(client, write_headers) == with_model

    # 2. a new profile of the model (a faster run on the fast hosts)
    with transaction(url) as session:
        save_profile(session=session, profile=profile(FAST, speed=3.0))
    with_profile = answer(client, write_headers)
    assert with_profile != with_model
    assert with_profile[2] < with_model[2] or with_profile[1] != with_model[1]

    # 3. a new catalog snapshot: the fast hosts now cost a tenth (a newer snapshot wins)
    with transaction(url) as session:
        import_document(
            session=session,
            document=catalog(name="tb-2", as_of="2026-06-01", slow_price=0.1, fast_price=0.04),
            origin="test",
        )
    with_catalog = answer(client, write_headers)
    assert with_catalog != with_profile
    assert with_catalog[3] < with_profile[3]


def test_a_stored_profile_edited_or_replaced_is_planned_as_stored_now(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """The server reads each stored profile document once (srift.profiling.store.PARSED): a profile edited
    in place by plain SQL (its fingerprint left as it was), or deleted and stored again, is planned from what
    the database holds now, as a fresh process plans it."""
    url = settings.resolved_database_url
    fast_id = store_first_data(url)
    first = answer(client, write_headers)

    def fresh() -> tuple[Any, ...]:
        """The answer of a process that has read nothing yet."""
        PARSED.clear()
        PREPARED.clear()
        return answer(client, write_headers)

    faster = profile(FAST, speed=3.0).to_dict()
    with transaction(url) as session:
        session.execute(update(ModelProfileRow).where(ModelProfileRow.id == fast_id).values(document=faster))
    edited = answer(client, write_headers)
    assert edited != first
    assert edited == fresh()

    with transaction(url) as session:
        delete_profile(session=session, profile_id=fast_id, viewer=EVERYONE)
        save_profile(session=session, profile=profile(FAST))
    replaced = answer(client, write_headers)
    assert replaced[1:4] == first[1:4], "the fast hosts' first profile again: the first plan"
    assert replaced == fresh()


def test_a_plan_by_model_reads_only_that_model_s_stored_profiles(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    """The first plan of a process reads (validates and keeps in PARSED) the stored profiles of the model it
    names, no other model's."""
    url = settings.resolved_database_url
    store_first_data(url)
    with transaction(url) as session:
        others = [
            save_profile(session=session, profile=dataclasses.replace(profile(kind, speed=s), model="other"))
            for kind, s in ((SLOW, 1.0), (FAST, 1.0), (FAST, 2.0))
        ]
    PARSED.clear()
    PREPARED.clear()
    answer(client, write_headers)
    assert len(PARSED) == 2, "the two stored profiles of cache-cnn, and nothing else"
    misses = PARSED.misses
    with transaction(url) as session:
        for pid in others:
            get_profile(session=session, profile_id=pid)
    assert PARSED.misses == misses + len(others), "no profile of another model was read by the plan"
