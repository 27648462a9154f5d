"""Probe records: JSON-lines validation with line numbers, and idempotent all-or-nothing storage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy.orm import Session

from srift.bandwidth.imports import ImportFormat, import_text
from srift.bandwidth.records import ProbeRecord, parse_jsonl
from srift.bandwidth.samples import count_samples, load_samples, store_samples
from srift.errors import InvalidInput, NotFound


def line(**changes: Any) -> str:
    sample: dict[str, Any] = {
        "schema": "srift-probe/1",
        "run_id": "r1",
        "provider": "local",
        "instance_type": "local",
        "backend": "gloo",
        "buffer_bytes": 1 << 20,
        "world_size": 4,
        "nodes": 4,
        "ranks_per_node": 1,
        "time_s": 0.01,
        "repeat": 0,
        "cpu_cores": 2,
    }
    sample.update(changes)
    return json.dumps({k: v for k, v in sample.items() if v is not None})


def test_a_probe_line_becomes_a_record_with_derived_bandwidths() -> None:
    (record,) = parse_jsonl(line(busbw_gbps=1.2582912, algbw_gbps=0.8388608))
    assert record.busbw_gbps == pytest.approx((1 << 20) * 8 / 0.01 / 1e9 * 2 * 3 / 4)
    assert record.algbw_gbps == pytest.approx((1 << 20) * 8 / 0.01 / 1e9)
    assert (record.world_size, record.nodes, record.async_count, record.repeat) == (4, 4, 1, 0)


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ("{not json", None, "not valid JSON"),  # the line is named once, as s.jsonl:2
        (line(world_size=1, nodes=1), "world_size", "must be ≥ 2"),
        (line(buffer_bytes=0), "buffer_bytes", "must be ≥ 1"),
        (line(buffer_bytes=-8), "buffer_bytes", "must be ≥ 1"),
        (line(time_s=0), "time_s", "≥ 1e-06"),
        (line(busbw_gbps=1.2582912 / 8), "busbw_gbps", "gigabits/s"),
        (line(nodes=3), "world_size", "≠ world_size 4"),
        (line(backend="carrier-pigeon"), "backend", "unknown backend"),
        (line(color="red"), "color", "unknown fields"),
        (line(instance_type=None), "instance_type", "missing"),
        (line(buffer_bytes=1.5), "buffer_bytes", "integer"),
    ],
)
def test_bad_lines_are_rejected_with_their_line_number(bad: str, field: str | None, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_jsonl(line() + "\n" + bad + "\n", source="s.jsonl")
    assert caught.value.field == field
    assert "s.jsonl:2" in caught.value.detail and words in str(caught.value)


def test_store_is_idempotent_by_fingerprint(session: Session) -> None:
    records = parse_jsonl("\n".join(line(repeat=i, time_s=0.01 + i / 1000) for i in range(3)))
    assert store_samples(session=session, records=records, origin="jsonl") == 3
    assert store_samples(session=session, records=records, origin="jsonl") == 0
    more = [*records, *parse_jsonl(line(repeat=3, time_s=0.02))]
    assert store_samples(session=session, records=[*more, *more], origin="jsonl") == 1
    session.commit()
    stored = load_samples(session=session)
    assert sorted(r.repeat for r in stored) == [0, 1, 2, 3]
    assert stored[0] == records[0]


def test_a_file_without_run_ids_is_recognised_when_imported_again(session: Session) -> None:
    text = "\n".join(line(run_id=None, repeat=i) for i in range(2))
    assert {r.run_id for r in parse_jsonl(text)} == {r.run_id for r in parse_jsonl(text)}
    first = import_text(session=session, text=text, fmt=ImportFormat.JSONL, source="a.jsonl")
    again = import_text(session=session, text=text, fmt=ImportFormat.JSONL, source="copy.jsonl")
    assert (first.parsed, first.stored, again.stored) == (2, 2, 0)


def test_one_bad_line_stores_nothing(session: Session) -> None:
    text = line() + "\n" + line(repeat=1) + "\n" + line(repeat=2, world_size=0) + "\n"
    with pytest.raises(InvalidInput) as caught:
        import_text(session=session, text=text, fmt=ImportFormat.JSONL, source="partial.jsonl")
    assert "partial.jsonl:3" in caught.value.detail
    assert count_samples(session=session) == 0


def test_overrides_replace_host_and_shape(session: Session) -> None:
    records = parse_jsonl(
        line(busbw_gbps=1.2582912),
        overrides={"instance_type": "bw.r100.d2", "provider": "testbed", "nodes": 2, "ranks_per_node": 2},
    )
    record: ProbeRecord = records[0]
    assert (record.provider, record.instance_type, record.nodes, record.ranks_per_node) == (
        "testbed",
        "bw.r100.d2",
        2,
        2,
    )


def test_store_rejects_an_empty_origin(session: Session) -> None:
    with pytest.raises(InvalidInput) as caught:
        store_samples(session=session, records=parse_jsonl(line()), origin="")
    assert caught.value.field == "origin"
    assert count_samples(session=session) == 0


def test_samples_of_an_unknown_job_are_refused(session: Session) -> None:
    with pytest.raises(NotFound) as caught:
        store_samples(session=session, records=parse_jsonl(line()), origin="job", job_id=424242)
    assert caught.value.field == "job_id"
    assert count_samples(session=session) == 0


def test_a_mixed_rings_samples_import_when_each_of_its_types_is_catalogued(session: Session) -> None:
    from srift.testbed import example_spec_path, load_spec
    from srift.testbed.catalog import register_types

    register_types(session=session, spec=load_spec(example_spec_path(), cores=64))
    ring = line(provider="testbed", instance_type="tb.large+tb.small", world_size=2, nodes=2)
    done = import_text(session=session, text=ring, fmt=ImportFormat.JSONL, source="ring.jsonl")
    assert (done.stored, done.instance_types) == (1, ("testbed/tb.large+tb.small",))
    unknown = line(provider="testbed", instance_type="tb.large+tb.huge", world_size=2, nodes=2)
    with pytest.raises(NotFound, match=r"tb\.huge"):
        import_text(session=session, text=ring + "\n" + unknown, fmt=ImportFormat.JSONL, source="bad.jsonl")
    assert count_samples(session=session) == 1


def test_a_measurement_stored_under_both_orders_of_a_ring_is_loaded_once(db_url: str) -> None:
    """Before ring names were sorted, one measurement imported as `b+a` and as `a+b` was stored twice;
    migration 0006 renames both rows to `a+b` but keeps the second copy (under its old fingerprint), so
    training loaded, and fitted, it twice. Read back, the copies are the same record with one fingerprint:
    `load_samples` keeps the first. Distinct measurements of the ring (another repeat) all stay."""
    from dataclasses import replace

    from srift.bandwidth.records import SampleQuery
    from srift.db.session import session_factory

    from .helpers import store_before_canonical_names

    base = parse_jsonl(line(provider="testbed", instance_type="tb.small+tb.large"), source="ring.jsonl")[0]
    legacy = [
        replace(base, instance_type="tb.small+tb.large"),
        replace(base, instance_type="tb.large+tb.small"),  # the same measurement in the other order
        replace(base, instance_type="tb.small+tb.large", repeat=1),
        replace(base, instance_type="tb.small"),
    ]
    store_before_canonical_names(db_url, legacy)
    with session_factory(db_url)() as session:
        assert count_samples(session=session) == 4, "the migration deletes nothing"
        for query in (SampleQuery(), SampleQuery(instance_types=("tb.small", "tb.large"))):
            found = load_samples(session=session, query=query)
            assert [(r.instance_type, r.repeat) for r in found] == [
                ("tb.large+tb.small", 0),
                ("tb.large+tb.small", 1),
                ("tb.small", 0),
            ]
