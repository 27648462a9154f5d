"""The shipped interruption model: laws fitted to the fit half of the public spot traces (no raw data).

`srift/spot/data/public-traces.json` (format srift-spot-model/1) holds, per trace period and fleet size, the
fitted Weibull laws of time to interruption and capacity gap, the fleet-size scaling, and the provenance of
every number: the source repository (skypilot-org/spot-traces), its commit and date, every file's path and
SHA-256, the split (alternating 2-day blocks, even ones fitted) and the command that wrote it
(`srift traces fit --registered`). The raw traces are not shipped; the measurement registry
(srift/data/measurements.yaml, set `skypilot-spot-traces`) lists every file the fit read with its SHA-256,
and `registered_traces` refuses a trace set that is not exactly those files (benchmarks/spot_traces.py and
`srift traces fit --registered` read the traces through it; refitting them gives the shipped file).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from srift.errors import ConfigurationError
from srift.measurements import Registry, shipped_registry
from srift.spot.model import SPLIT_BLOCK_S, Half, TraceModel, fit_model, model_from_document
from srift.spot.traces import SpotTrace

SHIPPED_MODEL = Path(__file__).resolve().parent / "data" / "public-traces.json"
REGISTRY_SET = "skypilot-spot-traces"
"""The measurement registry's set of the public traces the shipped model is fitted on."""


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


def registered_traces(
    traces: Sequence[SpotTrace], *, registry: Registry | None = None
) -> tuple[SpotTrace, ...]:
    """`traces`, once they are exactly the registry's set of public traces: each from its repository and
    commit, with a path and SHA-256 the registry lists, and every listed file present (ConfigurationError
    naming the first file that differs)."""
    entry = (registry or shipped_registry()).get(REGISTRY_SET)
    listed = {f.path: f.sha256 for f in entry.source.files}
    hint = "fit on the registry's traces, or record the new traces in srift/data/measurements.yaml"
    for t in traces:
        where = t.source.describe()
        if t.source.repository != entry.source.repository or t.source.commit != entry.source.commit:
            origin = f"{entry.source.repository}@{entry.source.commit}"
            raise ConfigurationError(f"{where}: not from {origin}", hint=hint, field="traces")
        if t.source.path not in listed:
            raise ConfigurationError(f"{where}: not in the measurement registry", hint=hint, field="traces")
        if listed[t.source.path] != t.source.sha256:
            raise ConfigurationError(
                f"{where}: sha256 {t.source.sha256} is not the registry's {listed[t.source.path]}",
                hint=hint,
                field="traces",
            )
    missing = sorted(set(listed) - {t.source.path for t in traces})
    if missing:
        listed_missing = ", ".join(missing[:3])
        raise ConfigurationError(
            f"{len(missing)} registered trace(s) not read: {listed_missing}", hint=hint, field="traces"
        )
    return tuple(traces)
