"""The README Quick start's commands render within 80 columns with nothing cut off, and the plan's tables
print durations and costs precisely enough to tell rows apart."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from srift.cli import main
from srift.commands.plan import dollars, durations
from srift.optimize.synthetic import synthetic_profile
from srift.settings import get_settings

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 80


def quick_start_catalog_command() -> list[str]:
    """The Quick start's `srift catalog list ...` line, as the README writes it."""
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if re.search(r"srift catalog list ", x))
    return line.split("srift ", 1)[1].split("#")[0].split()


@pytest.fixture
def narrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh SQLite database and every CLI console 80 columns wide."""
    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    for module in ("catalog", "plan", "models"):
        monkeypatch.setattr(f"srift.commands.{module}.console", Console(width=COLUMNS))
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
    assert "…" not in out, out


def test_quick_start_catalog_list_fits_80_columns_and_wide_shows_all(
    narrow: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = quick_start_catalog_command()
    assert argv[:2] == ["catalog", "list"] and "--gpu" in argv
    out = run(capsys, argv)
    table = out.split("source ")[0]
    assert_fits(table)
    for name in ("g4dn.xlarge", "g4dn.12xlarge", "g4dn.metal"):
        assert name in table
    assert "in aws/us-east-1" in table and "spot $/h" in table and "1x T4 16 GiB" in table
    wide = run(capsys, [*argv, "--wide"])
    assert "vCPU" in wide and "EFA" in wide and "vCPU" not in table


def test_catalog_list_of_every_location_fits_80_columns(
    narrow: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Unfiltered, the listing spans providers and regions: one table per location, titled with it, so no
    provider and region columns squeeze the prices to "…"."""
    out = run(capsys, ["catalog", "list", "--gpu", "T4"])
    assert_fits(out.split("source ")[0])
    titles = re.findall(r"(\d+) instance types? in (\S+)", out)
    assert ("7", "aws/us-east-1") in titles and ("1", "gcp/us-central1") in titles
    assert len({where for _, where in titles}) == len(titles) > 4
    assert "1x T4 16 GiB" in out and "n1-standard-8-1xt4" in out and "spot $/h" in out


def test_quick_start_plan_fits_80_columns(
    narrow: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    request = {
        "profiles": [synthetic_profile("inception_v3", "T4").to_dict()],
        "global_batch": 1024,
        "iterations": 1000,
        "objective": "min_time",
        "budget_usd": 5,
        "provider": "aws",
        "region": "us-east-1",
        "market": "spot",
        "availability": {"g4dn.8xlarge": 8, "g4dn.12xlarge": 4, "g4dn.xlarge": 8},
    }
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request))
    out = run(capsys, ["plan", str(path)])
    tables = out.split("sources: ")[0].split("network: ")[0].split("warning: ")[0]
    assert_fits(tables)
    assert "Pareto front" in tables
    front = tables.split("Pareto front")[1]
    lines = [line for line in front.splitlines() if line.count("│") == 5]
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
    rows = [(time, cost) for _, time, cost, _ in cells[1:] if time]
    assert len(rows) >= 3, front
    assert len(set(rows)) == len(rows), f"rows of the Pareto front read alike: {rows}"


def covered_names_whole(table: str, versions: list[dict[str, object]]) -> None:
    """Each name a version covers (that its row shows) stands whole on a line of the table, and no cell of
    the table is a stranded "," (the covers cell once folded "a, b" into "a" / ",")."""
    cells = [c.strip() for line in table.splitlines() for c in line.split("│")[1:-1]]
    assert "," not in cells, table
    for version in versions:
        covers = [str(c) for c in version["covers"]]  # type: ignore[attr-defined]
        for name in covers[:2]:
            assert name.split("/", 1)[1] in cells, (name, table)
        if len(covers) > 2:
            assert f"+{len(covers) - 2} more" in cells, table


def test_models_train_and_list_fit_80_columns_with_whole_names(
    narrow: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift models list` folded its covers column ("testbed/bw.r100.d2, testbed/bw.r1000.d05 +2") into
    pieces of names, and at some widths a lone "," on a line of its own."""
    import json

    rings = ["bw.r100.d2", "bw.r1000.d05", "bw.r250.d1"]
    trained = run(capsys, ["models", "train", "--no-tune", *[f"--instance-type={r}" for r in rings]])
    listed = run(capsys, ["models", "list"])
    versions = json.loads(run(capsys, ["models", "list", "--json"]))
    assert len(versions) == 2
    for table in (trained, listed):
        assert_fits(table.split("warning: ")[0])
        assert "covers (testbed)" in table and "MAPE<MTU" in table and "MAPE≥MTU" in table
    covered_names_whole(trained.split("warning: ")[0], [v for v in versions if not v["is_active"]])
    covered_names_whole(listed, versions)
    active = next(v["version"] for v in versions if v["is_active"])
    assert re.search(rf"│ {re.escape(active)} +│.*\n│ \(active\) +│", listed), listed


def test_columns_tell_rows_apart() -> None:
    assert durations([180.0, 185.3, 190.9]) == ["3.0 min", "3.1 min", "3.2 min"]
    assert durations([50.6, 55.7]) == ["51 s", "56 s"]
    assert len(set(durations([3600.0, 3660.0, 7300.0]))) == 3
    assert durations([180.0]) == ["3.0 min"]  # two significant digits, always
    assert durations([2.4 * 3600]) == ["2.4 h"]  # never "2 h"
    assert durations([30 * 60.0, 2.4 * 3600]) == ["0.50 h", "2.40 h"]
    assert dollars([0.4, 0.45, 0.5]) == ["$0.40", "$0.45", "$0.50"]
    assert dollars([0.401, 0.4049, 0.5]) == ["$0.401", "$0.405", "$0.500"]
    assert len(set(dollars([0.40001, 0.40002]))) == 1
