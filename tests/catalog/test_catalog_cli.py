"""`srift catalog list|import` end to end, through the real entry point (exit codes included)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from srift.cli import main
from srift.db.session import session_factory
from srift.db.tables import CatalogSnapshot, PriceRow
from srift.settings import get_settings

FIELDS = {
    "provider",
    "name",
    "region",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "network_gbps",
    "network_burst",
    "interconnect",
    "interconnect_gbps",
    "efa",
    "accelerator",
    "snapshot",
}


@pytest.fixture
def cli_db(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("SRIFT_DATABASE_URL", db_url)
    get_settings.cache_clear()
    yield db_url
    get_settings.cache_clear()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_list_json_on_a_fresh_database(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "list", "--provider", "aws", "--region", "us-east-1", "--json")
    assert code == 0
    rows = json.loads(out)
    gpu_rows = [r for r in rows if r["gpu_count"] > 0]
    assert len(gpu_rows) >= 30
    for r in rows:
        assert set(r) >= FIELDS and r["region"] == "us-east-1"
        assert all(r[k] is not None for k in FIELDS - {"gpu_model"})
        assert (r["gpu_model"] is None) == (r["gpu_count"] == 0)
        for market in ("on_demand", "spot"):
            price = r["prices"][market]
            assert price["price_usd_per_hr"] > 0 and price["source"] and price["as_of"], (r["name"], market)
    assert {r["name"] for r in gpu_rows} >= {
        "g4dn.xlarge",
        "g5.48xlarge",
        "g6e.12xlarge",
        "p4de.24xlarge",
        "p5en.48xlarge",
        "g3.16xlarge",
        "p2.xlarge",
    }

    code, table, _ = run(
        capsys, "catalog", "list", "--provider", "aws", "--region", "us-west-2", "--gpu", "A100"
    )
    assert code == 0 and "p4d.24xlarge" in table and "p4de.24xlarge" in table and "g5.xlarge" not in table


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--provider", "oracle"], ["unknown provider 'oracle'", "aws", "azure", "gcp"]),
        (["--provider", "aws", "--region", "mars-1"], ["unknown region 'mars-1'", "us-east-1", "us-west-2"]),
        (["--market", "reserved"], ["unknown market", "spot"]),
    ],
)
def test_unknown_values_exit_2_listing_valid_ones(
    cli_db: str, capsys: pytest.CaptureFixture[str], args: list[str], words: list[str]
) -> None:
    code, out, err = run(capsys, "catalog", "list", *args)
    assert code == 2 and out == ""
    for word in words:
        assert word in err


def test_import_good_then_malformed(cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "lab.yaml"
    good.write_text(
        "provider: onprem\nsnapshot: lab\nsource: rate card\nas_of: 2026-11-01\ninstance_types:\n"
        "  - {name: a100x8, gpu_model: A100, gpu_count: 8, gpu_memory_gib: 40, vcpus: 128,\n"
        "     memory_gib: 1024, network_gbps: 200, interconnect: nvswitch, interconnect_gbps: 2400,\n"
        "     prices: {lab-1: {on_demand: 12.5}}}\n"
    )
    code, out, _ = run(capsys, "catalog", "import", str(good), "--json")
    assert code == 0 and json.loads(out)["types"] == 1
    code, out, _ = run(capsys, "catalog", "list", "--provider", "onprem", "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["a100x8"]

    with session_factory(cli_db)() as s:
        before = (
            s.scalar(select(func.count()).select_from(CatalogSnapshot)),
            s.scalar(select(func.count()).select_from(PriceRow)),
        )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        good.read_text().replace("snapshot: lab", "snapshot: lab2").replace("vcpus: 128", "vcpus: many")
    )
    code, out, err = run(capsys, "catalog", "import", str(bad))
    assert code == 2
    assert str(bad) in err and "line 6" in err and "instance_types[0].vcpus" in err
    with session_factory(cli_db)() as s:
        after = (
            s.scalar(select(func.count()).select_from(CatalogSnapshot)),
            s.scalar(select(func.count()).select_from(PriceRow)),
        )
    assert after == before


def test_list_shows_compute_capability_and_status(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "list", "--provider", "aws", "--region", "us-east-1", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["p2.xlarge"]["compute_capability"] == "3.7" and rows["p2.xlarge"]["status"] == "retired"
    assert rows["p3.2xlarge"]["status"] == "previous" and rows["p5.48xlarge"]["status"] == "current"
    assert rows["c5.large"]["compute_capability"] is None
    where = ("--provider", "aws", "--region", "us-east-1")
    code, out, _ = run(capsys, "catalog", "list", *where, "--gpu", "K80")
    assert code == 0
    assert "CC" in out and "3.7" in out and "status" in out and "retired" in out
    code, out, _ = run(capsys, "catalog", "list", *where, "--gpu", "T4")
    assert "7.5" in out and "status" not in out


@pytest.mark.parametrize(
    ("args", "words", "absent"),
    [
        # The hint listed us-west-2 among the regions to use: every snapshot's regions, not the named one's.
        (
            ["--snapshot", "srift-paper-2020", "--region", "us-west-2"],
            ["snapshot 'srift-paper-2020' has no region 'us-west-2'", "use one of: us-east-1."],
            ["no provider has region"],
        ),
        (["--region", "mars-1"], ["the catalog has no region 'mars-1'", "us-west-2"], []),
        # aws offers V100s elsewhere: the message says where it looked.
        (
            ["--provider", "aws", "--region", "eu-west-1", "--gpu", "V100"],
            ["no instance type of aws in eu-west-1 has GPU 'V100'", "use one of: T4"],
            [],
        ),
    ],
)
def test_a_filter_that_matches_nothing_says_where_it_looked(
    cli_db: str, capsys: pytest.CaptureFixture[str], args: list[str], words: list[str], absent: list[str]
) -> None:
    code, out, err = run(capsys, "catalog", "list", *args)
    assert code == 2 and out == ""
    text = " ".join(err.split())
    for word in words:
        assert word in text, (word, text)
    for word in absent:
        assert word not in text
