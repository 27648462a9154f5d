"""`srift plan` options that cannot go together are refused, naming both, before anything is planned or
read."""

from __future__ import annotations

from pathlib import Path

import pytest

from srift.cli import main


def test_a_request_file_beside_plan_id_is_refused_naming_both(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plan-id N --emit FORMAT emits stored plan N as it is: a request FILE given too would be read by
    nothing, so the user would get plan N's launch files believing they came from FILE."""
    request = tmp_path / "request.yaml"
    request.write_text("model: resnet50\nglobal_batch: 256\niterations: 100\n")
    out_dir = tmp_path / "launch"
    for emit in (["--emit", "torchrun", "--out", str(out_dir)], []):
        with pytest.raises(SystemExit) as exited:
            main(["plan", str(request), "--plan-id", "3", *emit])
        out, err = capsys.readouterr()
        flat = " ".join(err.split())
        assert exited.value.code == 2 and out == "", err
        assert f"--plan-id: both a request FILE ({request}) and --plan-id 3 given" in flat
        assert "To fix: drop FILE to emit plan 3" in flat and f"or drop --plan-id to plan {request}" in flat
    assert not out_dir.exists()
