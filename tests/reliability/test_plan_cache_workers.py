"""No stale cache across processes: `srift serve --workers 2`, each worker with its own caches, answers the
next plan from the new data after a profile is stored through the API, another bandwidth model is activated
or a new catalog snapshot is loaded behind its back (as `srift models activate` or `srift catalog import`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_kit import WAIT_S, wait_for, workers_of

from srift.bandwidth import registry
from srift.bandwidth.records import SampleQuery
from srift.bandwidth.registry import load_shipped_models
from srift.catalog.custom import import_document
from srift.db import migrate
from srift.db.session import transaction
from srift.settings import Settings
from srift.testing.server import create_write_token, process_cpu_seconds, start_server
from tests.services.test_plan_cache import FAST, catalog, plan_request, profile, store_first_data

BURST = 16


def _burst(base_url: str, headers: dict[str, str]) -> set[tuple[Any, ...]]:
    """BURST concurrent plan requests on separate connections; the set of distinct answers."""
    answers: list[tuple[Any, ...]] = []
    failures: list[str] = []

    def one() -> None:
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
            r = http.post("/v1/plans", json=plan_request())
        if r.status_code != 201:
            failures.append(r.text[:300])
            return
        body = r.json()
        answers.append(
            (
                tuple((c["instance_type"], c["count"], c["batch"]) for c in body["choices"]),
                round(body["predicted"]["iteration_s"], 9),
                round(body["predicted"]["cost_usd"], 9),
                tuple(s for s in body["sources"] if not s.startswith("profile:")),
            )
        )

    threads = [threading.Thread(target=one) for _ in range(BURST)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    return set(answers)


@pytest.mark.slow
def test_every_worker_sees_new_profiles_models_and_catalogs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    migrate.upgrade(url)
    settings = Settings(database_url=url, data_dir=tmp_path, models_dir=tmp_path / "models")
    store_first_data(url)
    # Of the shipped data only the bandwidth model (and its samples, which the model trained below refits)
    # plays a part in these testbed plans: the server starts without the rest of a fresh data folder's
    # preparation (the AWS catalog, the reference models' profiles).
    load_shipped_models(settings)
    headers = {"Authorization": f"Bearer {create_write_token(url)}"}
    server = start_server(database_url=url, data_dir=tmp_path, workers=2, bootstrap=False)
    try:
        assert wait_for(lambda: len(workers_of(server.pid)) == 2, timeout_s=WAIT_S)
        workers = sorted(workers_of(server.pid))
        cpu_before = [process_cpu_seconds(pid) for pid in workers]
        (first,) = _burst(server.base_url, headers)
        grew = [process_cpu_seconds(pid) - before for pid, before in zip(workers, cpu_before, strict=True)]
        assert all(g > 0.02 for g in grew), f"one worker answered no plan (CPU seconds used: {grew})"
        assert _burst(server.base_url, headers) == {first}
        assert any(s.startswith("xgb:testbed-") for s in first[3])

        # a new profile, stored through the API (one worker writes; both must see it)
        r = httpx.post(
            server.base_url + "/v1/profiles",
            json=profile(FAST, speed=3.0).to_dict(),
            headers=headers,
            timeout=60,
        )
        assert r.status_code in (200, 201), r.text
        (with_profile,) = _burst(server.base_url, headers)
        assert with_profile != first

        # another bandwidth model, trained and activated outside the server
        with transaction(url) as session:
            narrow = registry.train_version(
                session=session,
                settings=settings,
                query=SampleQuery(instance_types=(FAST,)),
                tune=False,
                activate_it=True,
            )
        (with_model,) = _burst(server.base_url, headers)
        assert with_model != with_profile and f"xgb:{narrow.version}" in with_model[3]

        # a new catalog snapshot, imported outside the server
        with transaction(url) as session:
            import_document(
                session=session,
                document=catalog(name="tb-2", as_of="2026-06-01", slow_price=0.1, fast_price=0.04),
                origin="test",
            )
        (with_catalog,) = _burst(server.base_url, headers)
        assert with_catalog != with_model and with_catalog[2] < with_model[2]
        assert server.process.poll() is None
    finally:
        server.stop()
