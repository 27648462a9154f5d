"""Imported spot traces as a service: the user's trace set in the data folder (srift traces import|list).

The set is one versioned document, `<data_dir>/spot-traces.json` (srift.spot.traceset), written whole
through a temporary file so that a refused or interrupted import leaves the previous set as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from srift.settings import Settings
from srift.spot.traces import SpotTrace, describe_traces
from srift.spot.traceset import merge_traces, read_traceset, traceset_document

TRACESET_FILE = "spot-traces.json"


def traceset_path(settings: Settings) -> Path:
    """Where the imported traces live."""
    return settings.data_dir / TRACESET_FILE


def stored_traces(settings: Settings) -> list[SpotTrace]:
    """The imported traces (none before the first import)."""
    path = traceset_path(settings)
    if not path.exists():
        return []
    return read_traceset(json.loads(path.read_text(encoding="utf-8")), origin=str(path))


def import_traces(*, settings: Settings, traces: Sequence[SpotTrace]) -> dict[str, Any]:
    """Add `traces` to the set (a trace of the same name is replaced): what was stored and the rows."""
    merged, stored, unchanged = merge_traces(stored_traces(settings), traces)
    path = traceset_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(traceset_document(merged)) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return {"stored": stored, "unchanged": unchanged, "path": str(path), "traces": describe_traces(traces)}


def list_traces(*, settings: Settings) -> list[dict[str, Any]]:
    """One row per imported trace (name, zone, type, kind, fleet size, span, provenance)."""
    return describe_traces(stored_traces(settings))
