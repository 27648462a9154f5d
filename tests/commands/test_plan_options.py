"""`srift plan FILE` options that act only beside another (--script, --master-addr and --out with --emit,
--replay-nowcast with --replay-traces, --json not with --emit) are refused without it, naming the option,
before the search; with their companion they act as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from srift.cli import main
from srift.optimize.synthetic import synthetic_profile
from srift.settings import get_settings


@pytest.fixture
def request_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    request: dict[str, Any] = {
        "profiles": [synthetic_profile("resnet50", "T4").to_dict()],
        "global_batch": 128,
        "iterations": 50,
        "objective": "min_cost",
        "provider": "aws",
        "region": "us-east-1",
        "market": "on_demand",
        "availability": {"g4dn.xlarge": 4},
    }
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request))
    yield path
    get_settings.cache_clear()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, " ".join(err.split())


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
    request_file: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    field: str,
    words: str,
) -> None:
    code, out, err = run(
        capsys, "plan", str(request_file), *[str(request_file.parent / a) if a == "L" else a for a in extra]
    )
    assert code == 2 and out == "", err
    assert err.startswith(f"error: {field}: ") and words in err, err
    assert not (request_file.parent / "L").exists()


def test_with_emit_the_launch_options_still_shape_the_files(
    request_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = request_file.parent / "launch"
    code, _, err = run(
        capsys, "plan", str(request_file), "--emit", "torchrun", "--script", "mine.py",
        "--master-addr", "10.0.0.5", "--out", str(out_dir),
    )  # fmt: skip
    assert code == 0, err
    written = {p.name: p.read_text() for p in out_dir.iterdir()}
    assert any(name.startswith("plan-") and name.endswith(".json") for name in written)
    launch = "".join(text for name, text in written.items() if not name.endswith(".json"))
    assert "mine.py" in launch and "10.0.0.5" in launch
    code, printed, err = run(capsys, "plan", str(request_file), "--emit", "torchrun")
    assert code == 0 and "train.py" in printed, err
