"""The trace importer: the public JSON format, a user's CSV log, refusals that name the row, and fuzzing."""

from __future__ import annotations

import json
import string
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srift.errors import InvalidInput
from srift.spot.sources import read_traces
from srift.spot.traces import (
    SpotTrace,
    TraceKind,
    public_meta,
    read_log_csv,
    read_public,
    region_of_zone,
)

PATH = "preemption/4-node/aws-08-03-2023/us-east-1f_v100_1.json"


def public_bytes(data: list[object], *, gap: object = 300, **extra: object) -> bytes:
    return json.dumps({"metadata": {"gap_seconds": gap}, "data": data, **extra}).encode()


def test_the_public_layout_names_provider_zone_type_fleet_size_and_start() -> None:
    trace = read_public(public_bytes([0, 4, 4, 3, 0, 4]), path=PATH, commit="221da1a" + "0" * 33)
    assert (trace.provider, trace.zone, trace.region) == ("aws", "us-east-1f", "us-east-1")
    assert (trace.instance_type, trace.node_count, trace.meta.kind) == ("p3.2xlarge", 4, TraceKind.PREEMPTION)
    assert trace.meta.start == date(2023, 8, 3)
    assert trace.counts == (0, 4, 4, 3, 0, 4)
    assert trace.gap_s == 300.0
    assert trace.duration_s == 1800.0
    assert trace.up(4).tolist() == [False, True, True, False, False, True]
    assert trace.up(3).tolist() == [False, True, True, True, False, True]
    assert trace.source.repository == "skypilot-org/spot-traces"
    assert trace.name == f"skypilot-org/spot-traces@221da1a00000:{PATH}"
    assert len(trace.source.sha256) == 64


def test_the_public_type_tokens_follow_the_readme() -> None:
    def itype(path: str) -> str:
        meta = public_meta(path)
        assert meta is not None
        return meta.instance_type

    assert itype("availability/1-node/aws-10-26-2022/us-west-2a_v100_8.json") == "p3.16xlarge"
    assert itype("availability/1-node/aws-10-26-2022/us-west-2a_k80_8.json") == "p2.16xlarge"
    assert itype("preemption/1-node/aws-04-19-2023/us-east-1b_intel_64.json") == "r5.16xlarge"
    gcp = public_meta("preemption/1-node/gcp-04-30-2023/us-central1-a_c3-88.json")
    assert gcp is not None and (gcp.provider, gcp.zone, gcp.instance_type) == (
        "gcp",
        "us-central1-a",
        "c3-highcpu-88",
    )
    assert public_meta("somewhere/else.json") is None


def test_prices_per_tick_are_kept_when_the_file_has_them() -> None:
    trace = read_public(
        public_bytes([1, 1, 0], prices=[0.9, 0.95, 1.0]), path=PATH.replace("4-node", "1-node")
    )
    assert trace.prices_usd_per_hr == (0.9, 0.95, 1.0)


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        (public_bytes([0, 4, "x", 4]), "data[2]", "not a whole number"),
        (public_bytes([0, 4, 5, 4]), "data[2]", "outside 0..4"),
        (public_bytes([0, -1, 4]), "data[1]", "outside 0..4"),
        (public_bytes([0, 4, 1.5]), "data[2]", "not a whole number"),
        (public_bytes([0, 4, True]), "data[2]", "not a whole number"),
        (public_bytes([0, 4], gap=0), "metadata.gap_seconds", "outside"),
        (public_bytes([0, 4], gap="300"), "metadata.gap_seconds", "not a number"),
        (public_bytes([0]), "data", "1 ticks"),
        (public_bytes([0, 4], prices=[1.0]), "prices", "2 prices"),
        (public_bytes([0, 4], prices=[1.0, -2]), "prices[1]", "not a price"),
        (public_bytes([0, 4], extra=1), "document", "unknown fields"),
        (b"[1, 2]", "document", "not an object"),
        (b'{"metadata": {"gap_seconds": 30}, "data": [0, 1,', "document", "not JSON"),
        (b"\xff\xfe", "document", "not UTF-8"),
        (b'{"data": [0, 1]}', "metadata", "missing"),
    ],
)
def test_a_malformed_public_trace_is_refused_naming_the_row_or_field(
    raw: bytes, field: str, words: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_public(raw, path=PATH)
    err = caught.value
    assert err.field == field
    assert words in str(err)
    assert PATH in str(err)
    assert "To fix:" in str(err)


def test_an_unknown_type_token_or_layout_asks_for_the_type() -> None:
    with pytest.raises(InvalidInput) as caught:
        read_public(public_bytes([0, 1]), path="availability/1-node/aws-02-15-2023/us-east-1a_h100_1.json")
    assert caught.value.field == "instance_type"
    with pytest.raises(InvalidInput) as caught:
        read_public(public_bytes([0, 1]), path="mytrace.json")
    assert caught.value.field == "path"
    assert "--instance-type" in str(caught.value)


LOG = b"""time,provider,zone,instance_type,event,count
2024-05-01T10:00:00Z,aws,us-east-1a,p3.2xlarge,launched,4
2024-05-01T10:05:00Z,aws,us-east-1a,p3.2xlarge,interrupted,2
2024-05-01T10:09:00Z,aws,us-east-1a,p3.2xlarge,launched,2
2024-05-01T10:00:00Z,aws,us-west-2b,g5.xlarge,launched,1
2024-05-01T10:03:00Z,aws,us-west-2b,g5.xlarge,interrupted,1
"""


def test_a_user_log_becomes_one_preemption_trace_per_zone_and_type() -> None:
    traces = read_log_csv(LOG, path="log.csv", tick_s=60.0)
    by = {(t.zone, t.instance_type): t for t in traces}
    big = by[("us-east-1a", "p3.2xlarge")]
    assert big.meta.kind is TraceKind.PREEMPTION and big.node_count == 4 and big.gap_s == 60.0
    # minutes 0..9: 4 running until 10:05, 2 until 10:09, then 4 again.
    assert big.counts == (4, 4, 4, 4, 4, 2, 2, 2, 2, 4)
    small = by[("us-west-2b", "g5.xlarge")]
    assert small.counts == (1, 1, 1, 0)
    assert small.source.repository == "user"


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        (LOG.replace(b"interrupted,2", b"interrupted,9"), "rows[1].count", "more p3.2xlarge VMs"),
        (LOG.replace(b"launched,4", b"launched,four"), "rows[0].count", "not a whole number"),
        (LOG.replace(b"2024-05-01T10:05:00Z", b"yesterday"), "rows[1].time", "ISO 8601"),
        (LOG.replace(b"2024-05-01T10:09:00Z", b"2024-05-01T09:00:00Z"), "rows[2].time", "earlier"),
        (LOG.replace(b",interrupted,1", b",stopped,1"), "rows[4].event", "launched or interrupted"),
        (LOG.replace(b"us-west-2b", b"nowhere"), "rows[3].zone", "not a zone"),
        (LOG.replace(b",launched,1\n", b",launched\n"), "rows[3]", "cells"),
        (b"when,where\n1,2\n", "header", "lacks the columns"),
        (b"time,zone,instance_type,event,count\n", "rows", "no event"),
    ],
)
def test_a_malformed_log_is_refused_naming_the_row(raw: bytes, field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_log_csv(raw, path="log.csv")
    assert caught.value.field == field
    assert words in str(caught.value)
    assert "To fix:" in str(caught.value)


def test_zones_map_to_their_regions() -> None:
    assert region_of_zone("aws", "us-west-2c") == "us-west-2"
    assert region_of_zone("gcp", "us-east1-b") == "us-east1"
    assert region_of_zone("azure", "eastus-2") == "eastus"
    with pytest.raises(InvalidInput):
        region_of_zone("aws", "us-east-1")


def test_a_folder_and_a_git_repository_are_read_with_their_provenance(tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "spot-traces"
    target = root / PATH
    target.parent.mkdir(parents=True)
    target.write_bytes(public_bytes([0, 4, 4, 2]))
    (root / "log.csv").write_bytes(LOG)
    (root / "README.md").write_text("not a trace")
    folder = read_traces(root)
    assert [t.source.path for t in folder] == [
        "log.csv#aws/us-east-1a/p3.2xlarge",
        "log.csv#aws/us-west-2b/g5.xlarge",
        PATH,
    ]
    assert all(t.source.commit is None for t in folder)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "traces"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    repo = read_traces(root)
    public = [t for t in repo if t.source.path == PATH]
    assert public[0].source.commit == head
    assert public[0].counts == (0, 4, 4, 2)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)


def _near_public() -> st.SearchStrategy[object]:
    """Documents shaped like the public format, with any field swapped for anything."""
    data = st.lists(st.integers(-2, 6) | json_values, max_size=20)
    gap = st.integers(-5, 100_000) | st.floats(allow_nan=True) | json_values
    metadata = st.fixed_dictionaries({"gap_seconds": gap}) | json_values
    doc = st.fixed_dictionaries({"metadata": metadata, "data": data})
    return doc | json_values


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(doc=_near_public())
def test_fuzzed_public_traces_are_read_or_refused_never_crash(doc: object) -> None:
    raw = json.dumps(doc, allow_nan=True).encode()
    try:
        trace = read_public(raw, path=PATH)
    except InvalidInput as err:
        assert err.field and "To fix:" in str(err)
    else:
        assert isinstance(trace, SpotTrace) and all(0 <= c <= 4 for c in trace.counts)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(raw=st.binary(max_size=200) | st.text(string.printable, max_size=300).map(str.encode))
def test_fuzzed_bytes_never_crash_either_reader(raw: bytes) -> None:
    for read in (lambda: read_public(raw, path=PATH), lambda: read_log_csv(raw, path="log.csv")):
        try:
            read()
        except InvalidInput as err:
            assert "To fix:" in str(err)


csv_cell = st.text(string.ascii_letters + string.digits + ':-.,T Z"', max_size=12)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(rows=st.lists(st.lists(csv_cell, min_size=0, max_size=7), max_size=8))
def test_fuzzed_logs_are_read_or_refused_naming_a_row(rows: list[list[str]]) -> None:
    body = "\n".join(",".join(r) for r in rows)
    raw = ("time,zone,instance_type,event,count\n" + body).encode()
    try:
        traces = read_log_csv(raw, path="log.csv")
    except InvalidInput as err:
        assert err.field is not None and "To fix:" in str(err)
    else:
        assert all(t.node_count >= 1 and min(t.counts) >= 0 for t in traces)
