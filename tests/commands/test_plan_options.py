"""`srift plan FILE` options that act only beside another (--script, --master-addr and --out with --emit,
--replay-nowcast with --replay-traces, --json not with --emit) are refused without it, naming the option,
before the search; with their companion they act as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from srift.cli import build_app
from srift.errors import InvalidInput

REQUEST = """\
model: resnet50
global_batch: 128
iterations: 50
objective: min_cost
market: on_demand
availability: {g4dn.xlarge: 4}
"""


@pytest.fixture
def request_file(local: None, tmp_path: Path) -> Path:
    path = tmp_path / "request.yaml"
    path.write_text(REQUEST)
    return path


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        # Each printed the plan's table and dropped the option without a word.
        (["--script", "mine.py"], "--script", "--script only acts with --emit"),
        (["--master-addr", "10.0.0.5", "--out", "L"], "--master-addr", "--master-addr, --out only act"),
        (["--out", "L"], "--out", "To fix: add --emit torchrun"),
        # The launch files were printed; --json was dropped.
        (["--emit", "torchrun", "--json"], "--json", "--emit and --json exclude each other"),
        # The plan was printed; nothing was replayed.
        (["--replay-nowcast"], "--replay-nowcast", "--replay-nowcast only acts with --replay-traces"),
    ],
)
def test_an_option_without_its_companion_is_refused(
    request_file: Path, extra: list[str], field: str, words: str
) -> None:
    out_dir = request_file.parent / "L"
    argv = ["plan", str(request_file), *[str(out_dir) if a == "L" else a for a in extra]]
    result = CliRunner().invoke(build_app(), argv)
    assert isinstance(result.exception, InvalidInput), result.output
    assert result.exception.field == field and words in str(result.exception), str(result.exception)
    assert result.stdout == "" and not out_dir.exists()


def test_with_emit_the_launch_options_still_shape_the_files(request_file: Path) -> None:
    out_dir = request_file.parent / "launch"
    emit = ["plan", str(request_file), "--emit", "torchrun"]
    result = CliRunner().invoke(
        build_app(), [*emit, "--script", "mine.py", "--master-addr", "10.0.0.5", "--out", str(out_dir)]
    )
    assert result.exit_code == 0, result.output
    written = {p.name: p.read_text() for p in out_dir.iterdir()}
    assert any(name.startswith("plan-") and name.endswith(".json") for name in written)
    launch = "".join(text for name, text in written.items() if not name.endswith(".json"))
    assert "mine.py" in launch and "10.0.0.5" in launch
    result = CliRunner().invoke(build_app(), emit)
    assert result.exit_code == 0 and "train.py" in result.stdout, result.output
