"""`srift plan FILE --replay-traces PATH`: the replay of a plan's spot run is read from the traces at PATH
(here a folder of public-format files the test writes) and printed per policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from srift.commands import plan as plan_cli
from tests.services.test_replays import _plan, _trace


def test_the_replay_reads_a_trace_folder_and_prints_every_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_cli, "console", Console(width=200))
    folder = tmp_path / "preemption" / "4-node" / "aws-01-01-2024"
    folder.mkdir(parents=True)
    for seed, zone in ((1, "us-east-1a"), (2, "us-east-1b")):
        counts = list(_trace(seed, zone=zone).counts)
        doc = {"metadata": {"gap_seconds": 300}, "data": counts}
        (folder / f"{zone}_v100_1.json").write_text(json.dumps(doc))
    body = {"provider": "aws", "region": "us-east-1", "seed": 0}
    rep = plan_cli._replay(_plan(), body, tmp_path)
    assert rep["traces"] == 2 and {r["trace"].split(":")[-1] for r in rep["policies"][0]["traces"]} == {
        "preemption/4-node/aws-01-01-2024/us-east-1a_v100_1.json",
        "preemption/4-node/aws-01-01-2024/us-east-1b_v100_1.json",
    }
    plan_cli.render_replay(rep)
    out = capsys.readouterr().out
    for words in (
        "Uniform Progress (Can't Be Late)",
        "Srift (plan-aware)",
        "on-demand only",
        "0/",
        "p3.2xlarge × 4",
    ):
        assert words in out


def test_the_replay_with_a_nowcast_says_what_conditioned_its_prediction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_cli, "console", Console(width=200))
    folder = tmp_path / "preemption" / "4-node" / "aws-01-01-2024"
    folder.mkdir(parents=True)
    doc = {"metadata": {"gap_seconds": 300}, "data": list(_trace(1).counts)}
    (folder / "us-east-1a_v100_1.json").write_text(json.dumps(doc))
    rep = plan_cli._replay(_plan(), {"provider": "aws", "region": "us-east-1"}, tmp_path, nowcast=True)
    plan_cli.render_replay(rep)
    assert "predicted: each window from the traces before its start (look-back" in capsys.readouterr().out
