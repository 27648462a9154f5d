"""`srift predict` and `srift plan` take the DDP settings a user can change: --bucket-cap-mb, --per-layer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from srift.cli import main
from tests.sim.kit import profile as toy_profile

# 60 layers of 2 MB: DDP's buckets group them, so the three exchanges differ.
PROFILE = toy_profile(fw_s=0.05, bw_s=0.1, layers=[(2_000_000, (i + 1) / 60) for i in range(60)], cv=0.03)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    assert int(exited.value.code or 0) == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def test_predict_takes_the_ddp_settings(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = tmp_path / "r.json"
    request.write_text(
        json.dumps(
            {
                "profiles": [PROFILE.to_dict()],
                "provider": "aws",
                "region": "us-east-1",
                "iterations": 100,
                "config": {"choices": [{"instance_type": "p3.2xlarge", "count": 4, "batch": 32}]},
            }
        )
    )
    answers = {
        name: _run(capsys, "predict", str(request), "--json", *flags)
        for name, flags in (
            ("served", ()),
            ("small", ("--bucket-cap-mb", "4")),
            ("paper", ("--per-layer",)),
        )
    }
    sources = {name: a["sources"] for name, a in answers.items()}
    assert "exchange:ddp_buckets(25 MiB, first 1 MiB)" in sources["served"]
    assert "exchange:ddp_buckets(4 MiB, first 1 MiB)" in sources["small"]
    assert "exchange:per_layer" in sources["paper"]
