"""Data revisions: every insert, update and delete on a watched table replaces its area's token (and only
its area's), on SQLite and PostgreSQL, whoever writes — here plain SQL, as a CLI or another process might."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from srift.db.revisions import WATCHED_TABLES, read_revisions
from srift.db.session import session_factory, transaction
from srift.domain.revisions import DataArea as Area
from srift.domain.revisions import Revisions


def _tokens(url: str) -> Revisions:
    with session_factory(url)() as session:
        return read_revisions(session=session)


_SNAPSHOT = (
    "INSERT INTO catalog_snapshots (id, name, provider, source, as_of, created_at, is_active) "
    "VALUES (1, 's', 'aws', 'test', :d, :d, true)"
)
_TYPE = (
    "INSERT INTO instance_types (id, snapshot_id, provider, name, gpu_model, gpu_count, gpu_memory_gib, "
    "vcpus, memory_gib, network_gbps, network_burst, interconnect, interconnect_gbps, efa, extra) VALUES "
    "(1, 1, 'aws', 't', 'T4', 1, 16, 4, 16, 5, false, 'pcie', 16, false, '{}')"
)
_PRICE = (
    "INSERT INTO prices (id, snapshot_id, instance_type, region, market, price_usd_per_hr, source, as_of) "
    "VALUES (1, 1, 't', 'r', 'on_demand', 1.0, 'test', :d)"
)
_PROFILE = (
    "INSERT INTO model_profiles (id, model, accelerator, fingerprint, created_at, document) "
    "VALUES (1, 'm', 'T4', 'f', :d, '{}')"
)
_MODEL = (
    "INSERT INTO bandwidth_models (id, version, created_at, is_active, training_query, hyperparams, metrics, "
    "artifact_dir) VALUES (1, 'v1', :d, false, '{}', '{}', '{}', '/nowhere')"
)

# (table, insert, update, delete) in an order the foreign keys accept; deletes run in reverse
WRITES: list[tuple[str, str, str]] = [
    ("catalog_snapshots", _SNAPSHOT, "UPDATE catalog_snapshots SET is_active = false"),
    ("instance_types", _TYPE, "UPDATE instance_types SET vcpus = 8"),
    ("prices", _PRICE, "UPDATE prices SET price_usd_per_hr = 2.0"),
    ("model_profiles", _PROFILE, "UPDATE model_profiles SET accelerator = 'V100'"),
    ("bandwidth_models", _MODEL, "UPDATE bandwidth_models SET is_active = true"),
    (
        "calibration_observations",
        "INSERT INTO calibration_observations (source, model, network_key, types, predicted_s, compute_s, "
        "comm_s, measured_s, log_variance, prior_sigma, steps, created_at) "
        "VALUES ('run 1', 'm', 'tcp', '{}', 1, 0.5, 0.5, 1.1, 0.01, 0.2, 50, :d)",
        "UPDATE calibration_observations SET measured_s = 1.2",
    ),
    (
        "corrections",
        "INSERT INTO corrections (model, instance_type, network_key, runs, state, reset_after_id, "
        "updated_at) VALUES ('m', 't', 'tcp', 1, '{}', 0, :d)",
        "UPDATE corrections SET runs = 2",
    ),
]


def _area_of(table: str) -> Area:
    return next(area for area, tables in WATCHED_TABLES.items() if table in tables)


def _expect_only(url: str, area: Area, write: Callable[[Session], object]) -> None:
    before = _tokens(url)
    with transaction(url) as session:
        write(session)
    after = _tokens(url)
    for other in Area:
        if other is area:
            assert after.token(other) != before.token(other), f"{area} token unchanged"
            assert after.token(other)
        else:
            assert after.token(other) == before.token(other), f"{other} token changed by a {area} write"


def test_every_write_to_a_watched_table_replaces_its_area_token(db_url: str) -> None:
    assert {t for tables in WATCHED_TABLES.values() for t in tables} == {t for t, _, _ in WRITES}
    d = {"d": date(2026, 1, 1)}
    for table, insert, update in WRITES:
        area = _area_of(table)
        _expect_only(db_url, area, lambda s, sql=insert: s.execute(text(sql), d))
        _expect_only(db_url, area, lambda s, sql=update: s.execute(text(sql)))
    for table, _, _ in reversed(WRITES):
        _expect_only(db_url, _area_of(table), lambda s, t=table: s.execute(text(f"DELETE FROM {t}")))


def test_reads_and_unwatched_writes_leave_the_tokens_alone(db_url: str) -> None:
    with transaction(db_url) as session:
        session.execute(text(_MODEL), {"d": date(2026, 1, 1)})
    before = _tokens(db_url)
    with transaction(db_url) as session:
        session.execute(text("SELECT * FROM bandwidth_models")).all()
        session.execute(text("UPDATE bandwidth_models SET is_active = is_active WHERE id = -1"))
        session.execute(
            text("INSERT INTO plans (created_at, request, result) VALUES (:d, '{}', '{}')"),
            {"d": date(2026, 1, 1)},
        )
    after = _tokens(db_url)
    assert after.token(Area.CATALOG) == before.token(Area.CATALOG)
    assert after.token(Area.PROFILES) == before.token(Area.PROFILES)
    if db_url.startswith("sqlite"):  # row triggers: an UPDATE touching no row fires nothing
        assert after == before


def test_a_rolled_back_write_leaves_the_token_alone(db_url: str) -> None:
    before = _tokens(db_url)
    with pytest.raises(RuntimeError), transaction(db_url) as session:
        session.execute(text(_PROFILE), {"d": date(2026, 1, 1)})
        raise RuntimeError("abort")
    assert _tokens(db_url) == before
