"""`srift predict` with a strategy in the request file: the answer says how the fleet runs and how the
setups compared, as `srift plan` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srift.catalog.shipped import load_shipped_catalog
from srift.cli import main
from srift.refmodels.shipped import load_reference_profiles
from srift.settings import get_settings


@pytest.fixture
def cli_db(cli_db: str) -> str:
    """The commands' test database (tests/commands/conftest.py) with the shipped catalog and reference
    profiles in it."""
    load_shipped_catalog(get_settings())
    load_reference_profiles(get_settings())
    return cli_db


def _predict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, *options: str, exit_code: int = 0, **extra: object
) -> str:
    """`srift predict` of 4 × p4d.24xlarge (llama-1b, bf16) with `extra` in the file and `options`: its
    output (stdout, or stderr when it exits with a non-zero `exit_code`), on one line."""
    request = tmp_path / "r.json"
    request.write_text(
        json.dumps(
            {
                "model": "llama-1b",
                "precision": "bf16",
                "region": "us-east-1",
                "iterations": 100,
                "config": {"choices": [{"instance_type": "p4d.24xlarge", "count": 4, "batch": 64}]},
                **extra,
            }
        )
    )
    with pytest.raises(SystemExit) as exited:
        main(["predict", str(request), *options])
    out, err = capsys.readouterr()
    assert int(exited.value.code or 0) == exit_code, err
    return " ".join((err if exit_code else out).split())


def test_predict_with_a_strategy_says_how_to_run_the_fleet(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _predict(capsys, tmp_path, strategy="full_shard")
    assert "how to run it:" in out and "fully_shard" in out
    assert "full_shard+ckpt is the fastest setup that fits this fleet" in out
    assert "setups on this fleet" in out and "memory per GPU on p4d.24xlarge" in out


def test_predict_without_a_strategy_prints_no_setup(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _predict(
        capsys, tmp_path, config={"choices": [{"instance_type": "p4d.24xlarge", "count": 4, "batch": 8}]}
    )
    assert "how to run it" not in out and "setups on this fleet" not in out
    out = _predict(
        capsys,
        tmp_path,
        config={"choices": [{"instance_type": "p4d.24xlarge", "count": 4, "batch": 8}]},
        strategy="ddp",
        checkpointing=False,
    )
    assert "how to run it:" in out and "only DDP was allowed by the request" in out


def test_predict_auto_with_monte_carlo_samples_predicts_plain_ddp_and_says_why(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = {"choices": [{"instance_type": "p4d.24xlarge", "count": 4, "batch": 8}]}
    out = _predict(capsys, tmp_path, "--mc-samples", "20", config=small, strategy="auto")
    assert "only DDP without checkpointing was compared: mc_samples 20" in out, out
    assert "give mc_samples 0 to compare every setup strategy auto allows" in out, out


def test_predict_a_sharded_strategy_with_monte_carlo_samples_names_the_field_and_the_fix(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _predict(capsys, tmp_path, "--mc-samples", "20", exit_code=2, strategy="full_shard")
    assert "mc_samples 20 is not modelled under strategy full_shard" in err, err
    assert "error: --mc-samples: " in err, err  # the flag typed, and in the hint too
    assert (
        "To fix: leave --mc-samples at 0 to predict strategy full_shard, or give strategy ddp or auto" in err
    )
