"""`srift predict` with a strategy in the request file: the answer says how the fleet runs and how the
setups compared, as `srift plan` does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.catalog.shipped import load_shipped_catalog
from srift.cli import main
from srift.refmodels.shipped import load_reference_profiles
from srift.settings import get_settings


@pytest.fixture
def cli_db(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("SRIFT_DATABASE_URL", db_url)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    load_shipped_catalog(get_settings())
    load_reference_profiles(get_settings())
    yield db_url
    get_settings.cache_clear()


def _predict(capsys: pytest.CaptureFixture[str], tmp_path: Path, **extra: object) -> str:
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
        main(["predict", str(request)])
    out, err = capsys.readouterr()
    assert int(exited.value.code or 0) == 0, err
    return " ".join(out.split())


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
