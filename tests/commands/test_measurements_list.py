"""`srift measurements list`: every registry set, as a table and as JSON with its use, source and hash."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from srift.cli import build_app
from srift.measurements import shipped_registry


def test_the_json_lists_every_set_with_its_use_and_copy_hash() -> None:
    result = CliRunner().invoke(build_app(), ["measurements", "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = {s["id"]: s for s in json.loads(result.output)["sets"]}
    registry = shipped_registry()
    assert set(listed) == set(registry.sets)
    single = listed["lambdal-single-gpu"]
    assert single["use"] == "fit" and single["rows"] == 64
    assert single["copy"] == "estimate/data/lambdal_throughput.csv"
    copy = registry.get("lambdal-single-gpu").copy
    assert copy is not None and single["copy_sha256"] == copy.sha256
    assert listed["h200-gpu-check"]["use"] == "check" and listed["h200-gpu-check"]["constants"] == []


def test_the_table_names_every_set() -> None:
    result = CliRunner().invoke(build_app(), ["measurements", "list"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for set_id in shipped_registry().sets:
        assert set_id in result.output
