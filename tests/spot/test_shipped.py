"""The shipped interruption model rests on exactly the measurement registry's public traces: its provenance
lists the registry's files, a trace set that differs is refused, and refitting the registered traces (where
the public repository's mirror is at hand) gives the shipped file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from srift.errors import ConfigurationError
from srift.measurements import shipped_registry
from srift.spot.model import Half
from srift.spot.shipped import REGISTRY_SET, SHIPPED_MODEL, dumps, fit_document, registered_traces
from srift.spot.traces import SpotTrace, TraceSource
from srift.testing.spot import drawn_traces

MIRROR = Path("/work/.mirror/skypilot-org+spot-traces/repo")
"""A bare mirror of skypilot-org/spot-traces, as benchmarks/spot_traces.py reads it (absent in CI)."""


def _provenance() -> dict[str, object]:
    provenance: dict[str, object] = json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))["provenance"]
    return provenance


def test_the_shipped_model_lists_exactly_the_registered_traces() -> None:
    entry = shipped_registry().get(REGISTRY_SET)
    files = _provenance()["files"]
    assert isinstance(files, list)
    assert {(f["path"], f["sha256"]) for f in files} == {(f.path, f.sha256) for f in entry.source.files}
    assert {f["commit"] for f in files} == {entry.source.commit}
    assert {f["repository"] for f in files} == {entry.source.repository}
    assert sorted(entry.rows) == sorted(f.path for f in entry.source.files)


def _drawn(*, seed: int) -> list[SpotTrace]:
    return drawn_traces(
        provider="aws", region="us-east-1", instance_type="p3.2xlarge", nodes=1, days=1, seed=seed
    )


def _registered_stand_ins() -> list[SpotTrace]:
    """One SpotTrace per registered file, with that file's source (counts drawn: only provenance is read)."""
    entry = shipped_registry().get(REGISTRY_SET)
    drawn = drawn_traces(
        provider="aws", region="us-east-1", instance_type="p3.2xlarge", nodes=1, days=1, seed=0
    )
    assert entry.source.repository and entry.source.commit
    return [
        dataclasses.replace(
            drawn[0], source=TraceSource(entry.source.repository, f.path, entry.source.commit, f.sha256 or "")
        )
        for f in entry.source.files
    ]


def test_a_trace_set_other_than_the_registered_one_is_refused() -> None:
    traces = _registered_stand_ins()
    assert len(registered_traces(traces)) == len(traces)
    with pytest.raises(ConfigurationError, match="registered trace\\(s\\) not read") as caught:
        registered_traces(traces[1:])
    assert traces[0].source.path in str(caught.value) and "To fix:" in str(caught.value)
    changed = dataclasses.replace(traces[0], source=dataclasses.replace(traces[0].source, sha256="0" * 64))
    with pytest.raises(ConfigurationError, match="is not the registry's"):
        registered_traces([changed, *traces[1:]])
    other = drawn_traces(
        provider="aws", region="us-east-1", instance_type="p3.2xlarge", nodes=1, days=1, seed=1
    )
    with pytest.raises(ConfigurationError, match="not from skypilot-org/spot-traces"):
        registered_traces([*traces, *other])


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"no mirror of skypilot-org/spot-traces at {MIRROR}")
def test_refitting_the_registered_traces_gives_the_shipped_model() -> None:
    from srift.spot.sources import read_traces

    entry = shipped_registry().get(REGISTRY_SET)
    assert entry.source.commit
    traces = registered_traces(read_traces(MIRROR, commit=entry.source.commit))
    document = fit_document(
        traces,
        half=Half.FIT,
        committed={entry.source.commit: "2024-03-31"},
        command="srift traces fit <skypilot-org/spot-traces> --half fit",
    )
    refit = json.loads(dumps(document))
    shipped = json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))
    assert _same_up_to_rounding(refit, shipped)


def _same_up_to_rounding(a: object, b: object, *, rel: float = 1e-6) -> bool:
    """Equal documents, where numbers may differ in their last digits: a refit's maximum-likelihood optimum
    moves in about the 8th significant digit with the BLAS build and thread count (0.30193072 against
    0.30193071), which says nothing about the law. Keys, strings and list lengths must match exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_up_to_rounding(a[k], b[k], rel=rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        pairs = zip(a, b, strict=True)
        return len(a) == len(b) and all(_same_up_to_rounding(x, y, rel=rel) for x, y in pairs)
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return bool(a == pytest.approx(b, rel=rel, abs=1e-12))
    return a == b
