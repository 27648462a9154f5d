"""At COLUMNS=100 no line of the example plan, `catalog list` or the example prediction is wider than 100
columns: long lists (sources) fold into a summary, details wait behind --verbose, and the example request
files themselves fit too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from srift.cli import main
from srift.settings import get_settings
from tests.commands.test_eighty_columns import covered_names_whole

COLUMNS = 100


@pytest.fixture
def hundred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh data folder and every CLI console made as `srift` makes it under COLUMNS=100."""
    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    get_settings.cache_clear()
    for module in ("catalog", "plan", "predict", "models"):
        monkeypatch.setattr(f"srift.commands.{module}.console", Console())
    yield
    get_settings.cache_clear()


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert done.value.code in (0, None), err
    return out


def assert_fits(out: str) -> None:
    lines = out.splitlines()
    assert lines and max(len(x) for x in lines) <= COLUMNS, max(lines, key=len)


def test_the_example_plan_prediction_and_catalog_fit_100_columns(
    hundred: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("plan", "predict"):
        example = run(capsys, [command, "--example"])
        assert_fits(example)
        path = tmp_path / f"{command}.yaml"
        path.write_text(example)
        out = run(capsys, [command, str(path)])
        assert_fits(out)
        assert "sources: " in out and "(--verbose lists each)" in out
        verbose = run(capsys, [command, str(path), "--verbose"])
        assert_fits(verbose)
        assert len(verbose.splitlines()) > len(out.splitlines())
    assert_fits(run(capsys, ["catalog", "list", "--provider", "aws", "--region", "us-east-1", "--gpu", "T4"]))


def test_models_list_fits_100_columns_with_each_covered_name_on_its_line(
    hundred: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    listed = run(capsys, ["models", "list"])
    assert_fits(listed)
    assert "MAPE<MTU (floor)" in listed  # room enough: the headers stay on one line
    covered_names_whole(listed, json.loads(run(capsys, ["models", "list", "--json"])))
