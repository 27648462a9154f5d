"""`srift plan FILE --recent-trace NAME | --recent-log FILE.csv [--as-of-s S]`: the help teaches the
options with an example, the flags become the request's `recent_market` (over the file's), and the spot
section says which model produced its figures."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from srift.cli import build_app
from srift.commands import plan as plan_cli
from srift.domain.requests import RecentMarket
from srift.errors import InvalidInput
from srift.services.replays import nowcast_spot
from tests.services.test_replays import _plan, _trace


def test_the_help_teaches_the_recent_market_with_examples() -> None:
    result = CliRunner().invoke(build_app(), ["plan", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").replace("\\", " ").split())  # long examples fold at \\
    for words in (
        "--recent-trace",
        "--recent-log",
        "--as-of-s",
        "srift plan request.yaml --recent-trace user:log.csv#aws/us-east-1a/p3.2xlarge --as-of-s 86400",
        "srift plan request.yaml --recent-log my-interruptions.csv",
        "spot_model: nowcast(look-back H h, K ended runs) instead of fitted law",
    ):
        assert words in text, words
    example = CliRunner().invoke(build_app(), ["plan", "--example"]).output
    assert "# recent_market:" in example and "as_of_s" in example


def test_the_flags_become_the_requests_recent_market(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("time,zone,instance_type,event,count\n", encoding="utf-8")
    body: dict[str, object] = {"recent_market": {"trace": "from-the-file", "as_of_s": 60.0}}
    plan_cli.put_recent_market(body, trace=None, log=log, as_of_s=None)
    assert body["recent_market"] == {"log_csv": "time,zone,instance_type,event,count\n", "as_of_s": 60.0}
    plan_cli.put_recent_market(body, trace="mine", log=None, as_of_s=7200.0)
    assert body["recent_market"] == {"trace": "mine", "as_of_s": 7200.0}
    untouched: dict[str, object] = {}
    plan_cli.put_recent_market(untouched, trace=None, log=None, as_of_s=None)
    assert untouched == {}
    with pytest.raises(InvalidInput) as caught:
        plan_cli.put_recent_market(body, trace=None, log=tmp_path / "missing.csv", as_of_s=None)
    missing = caught.value
    assert (missing.field, missing.hint) == ("--recent-log", "check the path")  # was: "[Errno 2] No such ..."
    assert missing.detail == f"cannot read {tmp_path / 'missing.csv'}: the file does not exist"
    log.write_bytes(codecs.BOM_UTF16_LE + "time,zone\n".encode("utf-16-le"))  # PowerShell's `>`, as FILE
    plan_cli.put_recent_market(body, trace=None, log=log, as_of_s=None)
    assert body["recent_market"] == {"log_csv": "time,zone\n", "as_of_s": 7200.0}


def test_replay_traces_that_are_missing_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        plan_cli._replay({}, {}, tmp_path / "nothere")
    assert caught.value.field == "--replay-traces" and "does not exist" in caught.value.detail


def test_as_of_s_without_a_log_names_the_option(tmp_path: Path) -> None:
    """`srift plan FILE --as-of-s 5` with no log anywhere said "recent_market.trace: give exactly one of
    trace, log_csv", a field of a file that has none; the flag is what wants a log."""
    body: dict[str, object] = {}
    with pytest.raises(InvalidInput) as caught:
        plan_cli.put_recent_market(body, trace=None, log=None, as_of_s=5.0)
    assert caught.value.field == "--as-of-s" and "--recent-trace" in caught.value.hint
    assert body == {}
    # A log named in the file, or by the other flag, is the one --as-of-s cuts.
    in_file: dict[str, object] = {"recent_market": {"trace": "mine"}}
    plan_cli.put_recent_market(in_file, trace=None, log=None, as_of_s=5.0)
    assert in_file["recent_market"] == {"trace": "mine", "as_of_s": 5.0}
    by_flag: dict[str, object] = {}
    plan_cli.put_recent_market(by_flag, trace="mine", log=None, as_of_s=5.0)
    assert by_flag["recent_market"] == {"trace": "mine", "as_of_s": 5.0}


def test_the_spot_section_says_which_model_made_its_figures(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_cli, "console", Console(width=400))
    plan_cli._spot_model_line({"spot_model": "fitted law"})
    assert capsys.readouterr().out.strip() == "spot model: fitted law"
    trace = _trace(1)
    spot = nowcast_spot(
        _plan(),
        RecentMarket(trace=trace.name),
        stored=[trace],
        provider="aws",
        region="us-east-1",
        seed=0,
        samples=50,
    )
    assert spot is not None
    plan_cli._spot_model_line(spot)
    out = capsys.readouterr().out
    assert out.startswith(f"spot model: {spot['spot_model']} — {trace.name} at 144 h into the log: ")
    for words in ("in the look-back", "Srift's deadline policy", "Without the look-back:", "Monte Carlo"):
        assert words in out, words
    # The plan's one P(budget) and P(deadline) read the nowcast's shares, not the fitted law's.
    spot = {
        **spot,
        "p_within_budget": 0.25,
        "nowcast": {**spot["nowcast"], "fitted_law": {"p_within_budget": 0.9}},
    }
    plan = {"probability": {"meets_time_limit": None, "within_budget": 0.5}, "spot": spot}
    assert plan_cli.chances(plan) == (spot["p_meets_time_limit"], 0.25)
