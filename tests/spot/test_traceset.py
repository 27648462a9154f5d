"""The versioned trace set (srift.spot.traceset) and `srift traces import|list`: a user's log round-trips
through the stored set, a damaged set is refused naming the trace and row, fuzzed sets never crash."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from srift.cli import build_app
from srift.errors import InvalidInput
from srift.settings import get_settings
from srift.spot.sources import read_traces
from srift.spot.traces import read_log_csv, read_public
from srift.spot.traceset import TRACESET_FORMAT, merge_traces, read_traceset, traceset_document

LOG = (
    b"time,zone,instance_type,event,count\n"
    b"2024-05-01T10:00:00Z,us-east-1a,p3.2xlarge,launched,4\n"
    b"2024-05-01T10:05:00Z,us-east-1a,p3.2xlarge,interrupted,2\n"
    b"2024-05-01T10:09:00Z,us-east-1a,p3.2xlarge,launched,2\n"
    b"2024-05-01T10:00:00Z,us-west-2b,g5.xlarge,launched,1\n"
    b"2024-05-01T10:03:00Z,us-west-2b,g5.xlarge,interrupted,1\n"
)
PUBLIC_PATH = "preemption/4-node/aws-08-03-2023/us-east-1f_v100_1.json"


def _set() -> dict[str, Any]:
    traces = read_log_csv(LOG, path="log.csv", tick_s=60.0)
    public = json.dumps({"metadata": {"gap_seconds": 300}, "data": [4, 3, 0, 4], "prices": [1.0] * 4})
    traces.append(read_public(public.encode(), path=PUBLIC_PATH, commit="c" * 40))
    return traceset_document(traces)


def test_a_set_round_trips_every_trace_with_its_meta_source_and_prices() -> None:
    doc = _set()
    assert doc["format"] == TRACESET_FORMAT
    back = read_traceset(json.loads(json.dumps(doc)), origin="set.json")
    assert traceset_document(back) == doc
    public = next(t for t in back if t.source.repository != "user")
    assert public.counts == (4, 3, 0, 4) and public.prices_usd_per_hr == (1.0,) * 4
    assert public.source.commit == "c" * 40 and public.node_count == 4


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        (lambda d: d["traces"][1]["trace"]["data"].__setitem__(2, 9), "traces[1].trace: is 9"),
        (lambda d: d["traces"][0].__setitem__("node_count", 0), "traces[0].node_count"),
        (lambda d: d["traces"][2].__setitem__("kind", "maybe"), "traces[2].kind"),
        (lambda d: d["traces"][0]["source"].pop("sha256"), "traces[0].source.sha256"),
        (lambda d: d.__setitem__("format", "srift-spot-traces/0"), "format"),
    ],
)
def test_a_damaged_set_is_refused_naming_the_trace_and_row(damage: Any, field: str) -> None:
    doc = _set()
    damage(doc)
    with pytest.raises(InvalidInput) as caught:
        read_traceset(doc, origin="set.json")
    assert field in str(caught.value) and "To fix:" in str(caught.value)


def test_merging_replaces_a_trace_of_the_same_name_and_counts_the_unchanged() -> None:
    first = read_log_csv(LOG, path="log.csv", tick_s=60.0)
    again = read_log_csv(LOG, path="log.csv", tick_s=60.0)
    merged, stored, unchanged = merge_traces(first, again)
    assert (len(merged), stored, unchanged) == (2, 0, 2)
    longer = read_log_csv(LOG + b"2024-05-01T10:20:00Z,us-west-2b,g5.xlarge,launched,1\n", path="log.csv")
    merged, stored, unchanged = merge_traces(first, longer)
    assert (len(merged), stored, unchanged) == (2, 2, 0)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    path=st.lists(
        st.sampled_from(["traces", 0, 1, 2, "trace", "data", "source", "metadata", "kind"]), max_size=4
    ),
    value=st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5), st.just([])),
)
@example(path=["traces", 0, "kind"], value=[])  # found 2026-12-06: an unhashable kind was a TypeError
def test_fuzzed_sets_are_read_or_refused_never_crash(path: list[object], value: object) -> None:
    doc: Any = _set()
    node = doc
    for key in path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
    with contextlib.suppress(KeyError, IndexError, TypeError):
        node[path[-1] if path else "format"] = value
    try:
        read_traceset(doc, origin="set.json")
    except InvalidInput as exc:
        assert "To fix:" in str(exc)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def test_the_cli_imports_a_log_into_the_set_lists_it_and_refuses_a_bad_row(
    data_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log.csv"
    log.write_bytes(LOG)
    runner = CliRunner()
    first = runner.invoke(build_app(), ["traces", "import", str(log), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["stored"] == 2
    again = json.loads(runner.invoke(build_app(), ["traces", "import", str(log), "--json"]).output)
    assert (again["stored"], again["unchanged"]) == (0, 2)
    listed = json.loads(runner.invoke(build_app(), ["traces", "list", "--json"]).output)
    assert sorted(r["zone"] for r in listed) == ["us-east-1a", "us-west-2b"]
    # The stored set is itself importable: it is read back through the same validation.
    assert len(read_traces(data_dir / "spot-traces.json")) == 2

    bad = tmp_path / "bad.csv"
    bad.write_bytes(LOG.replace(b"interrupted,2", b"interrupted,two"))
    refused = runner.invoke(build_app(), ["traces", "import", str(bad)])
    assert refused.exit_code != 0
    assert isinstance(refused.exception, InvalidInput)
    assert "rows[1].count" in str(refused.exception) and "To fix:" in str(refused.exception)
    assert len(json.loads(runner.invoke(build_app(), ["traces", "list", "--json"]).output)) == 2
