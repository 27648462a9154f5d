"""The terminal and markdown views of plan quality say the same thing about each policy's choice."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from srift.validation.render import plan_table


def _plan() -> dict[str, object]:
    ranked = {"fleet": "2×a@32", "rank": 1, "of": 4, "ratio_to_best": 1.0, "feasible": True}
    late = {"fleet": "1×b@64", "rank": None, "of": None, "ratio_to_best": 0.8, "feasible": False}
    block = {"objective": "min_cost", "best": "2×a@32", "srift": ranked, "cap": late, "tap": None}
    return {"model": "cnn", "global_batch": 64, "configurations": 4, "primary": block, "secondary": block}


def test_plan_table_ranks_and_names_a_missed_deadline() -> None:
    out = StringIO()
    Console(file=out, width=200).print(plan_table(_plan()))
    text = out.getvalue()
    assert "1/4" in text and "misses deadline" in text and "n/a" in text
