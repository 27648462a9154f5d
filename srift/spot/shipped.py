"""The shipped interruption model: laws fitted to the fit half of the public spot traces (no raw data).

`srift/spot/data/public-traces.json` (format srift-spot-model/1) holds, per trace period and fleet size, the
fitted Weibull laws of time to interruption and capacity gap, the fleet-size scaling, and the provenance of
every number: the source repository (skypilot-org/spot-traces), its commit and date, every file's path and
SHA-256, the split (alternating 2-day blocks, even ones fitted) and the command that wrote it
(`srift traces fit`). The raw traces are not shipped; benchmarks/spot_traces.py refits them from a mirror
and checks that the shipped laws are what the fit half gives.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from srift.spot.model import SPLIT_BLOCK_S, Half, TraceModel, fit_model, model_from_document
from srift.spot.traces import SpotTrace

SHIPPED_MODEL = Path(__file__).resolve().parent / "data" / "public-traces.json"


@functools.lru_cache(maxsize=1)
def shipped_model() -> TraceModel:
    """The shipped model, parsed once (InvalidInput names the field if the file is damaged)."""
    doc = json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))
    return model_from_document(doc, origin=f"srift/spot/data/{SHIPPED_MODEL.name}")


def provenance(
    traces: Sequence[SpotTrace], *, half: Half, committed: Mapping[str, str | None], command: str
) -> dict[str, Any]:
    """Where a fitted model's numbers come from: repositories, commits and dates, every file, the split."""
    sources = sorted({(t.source.repository, t.source.commit or "") for t in traces})
    return {
        "sources": [
            {"repository": repo, "commit": commit or None, "committed": committed.get(commit)}
            for repo, commit in sources
        ],
        "files": [
            {
                "path": t.source.path,
                "repository": t.source.repository,
                "commit": t.source.commit,
                "sha256": t.source.sha256,
                "kind": t.meta.kind.value,
                "provider": t.provider,
                "zone": t.zone,
                "instance_type": t.instance_type,
                "node_count": t.node_count,
                "gap_s": t.gap_s,
                "ticks": t.ticks,
                "start": t.meta.start.isoformat() if t.meta.start else None,
                "type_note": t.meta.note,
            }
            for t in traces
        ],
        "split": {
            "half": half.value,
            "block_days": SPLIT_BLOCK_S / 86_400.0,
            "rule": "every trace cut into blocks of block_days from its first tick; even blocks are the fit "
            "half, odd blocks the check half",
        },
        "command": command,
    }


def fit_document(
    traces: Sequence[SpotTrace], *, half: Half, committed: Mapping[str, str | None], command: str
) -> dict[str, Any]:
    """Fit the traces' `half` and return the model document with its provenance (srift traces fit)."""
    model = fit_model(
        traces, half=half, provenance=provenance(traces, half=half, committed=committed, command=command)
    )
    return model.to_document()


def dumps(doc: Mapping[str, Any]) -> str:
    """The model document as JSON: indented, with lists of numbers (runs, starts) on one line each."""
    text = json.dumps(doc, indent=1)
    text = re.sub(r"\[\s+([-+\d.eE,\s]+?)\s+\]", lambda m: "[" + re.sub(r"\s+", "", m.group(1)) + "]", text)
    return (
        re.sub(r"\[\s+((?:\[[^\[\]]*\],?\s*)+)\]", lambda m: "[" + re.sub(r"\s+", "", m.group(1)) + "]", text)
        + "\n"
    )
