"""The srift-catalog/1 format: shipped files are complete and sourced; bad files name file, line, field."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from srift.catalog.document import load_catalog_file, parse_catalog_document
from srift.catalog.shipped import DATA_DIR
from srift.domain.catalog import Interconnect, Market
from srift.errors import InvalidInput

AWS = DATA_DIR / "aws.yaml"
PAPER = DATA_DIR / "srift-paper-2020.yaml"

SIZES = {
    "g4dn": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"],
    "g5": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"],
    "g6": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"],
    "g6e": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"],
    "p3": ["2xlarge", "8xlarge", "16xlarge"],
    "p3dn": ["24xlarge"],
    "p4d": ["24xlarge"],
    "p4de": ["24xlarge"],
    "p5": ["48xlarge"],
    "p5en": ["48xlarge"],
    "g3": ["4xlarge", "8xlarge", "16xlarge"],
    "p2": ["xlarge", "8xlarge", "16xlarge"],
    "c5": ["large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge", "metal"],
}


def test_shipped_aws_file_covers_every_size_with_both_markets_in_both_regions() -> None:
    snap = load_catalog_file(AWS)
    names = {t.instance.name for t in snap.types}
    expected = {f"{fam}.{size}" for fam, sizes in SIZES.items() for size in sizes}
    assert names == expected
    gpu_types = [t.instance for t in snap.types if t.instance.gpu_count > 0]
    assert len(gpu_types) == 45
    assert all(
        t.instance.gpu_count == 0 and t.instance.gpu_model is None
        for t in snap.types
        if t.instance.name.startswith("c5.")
    )
    keys = {(p.instance_type, p.region, p.market) for p in snap.prices}
    for name in names:
        for region in ("us-east-1", "us-west-2"):
            for market in Market:
                assert (name, region, market) in keys, (name, region, market)
    for p in snap.prices:
        assert p.price_usd_per_hr > 0 and p.source and p.as_of <= date(2025, 5, 31)
        if p.market is Market.SPOT:
            on_demand = next(
                q
                for q in snap.prices
                if (q.instance_type, q.region, q.market) == (p.instance_type, p.region, Market.ON_DEMAND)
            )
            assert p.price_usd_per_hr < on_demand.price_usd_per_hr, p


def test_shipped_specs_are_consistent() -> None:
    snap = load_catalog_file(AWS)
    by_name = {t.instance.name: t.instance for t in snap.types}
    for inst in by_name.values():
        if inst.gpu_count > 1:
            assert inst.interconnect is not Interconnect.NONE and inst.interconnect_gbps > 0, inst.name
        else:
            assert inst.interconnect is Interconnect.NONE and inst.interconnect_gbps == 0, inst.name
    assert by_name["p4d.24xlarge"].interconnect is Interconnect.NVSWITCH
    assert by_name["p3.16xlarge"].interconnect is Interconnect.NVLINK
    assert by_name["g5.48xlarge"].interconnect is Interconnect.PCIE
    assert by_name["p5.48xlarge"].network_gbps == 3200 and by_name["p5.48xlarge"].efa
    assert by_name["g4dn.xlarge"].network_burst and not by_name["g4dn.8xlarge"].network_burst
    assert by_name["p3dn.24xlarge"].gpu_memory_gib == 32 and by_name["p5en.48xlarge"].gpu_model == "H200"
    # The reference extract's minimum spot price over us-east-1 zones for p3.8xlarge.
    price = next(
        p
        for p in snap.prices
        if (p.instance_type, p.region, p.market) == ("p3.8xlarge", "us-east-1", Market.SPOT)
    )
    assert price.price_usd_per_hr == pytest.approx(1.7535) and "001367d2" in price.source


def test_paper_snapshot_has_table4_prices_and_the_same_specs() -> None:
    paper = load_catalog_file(PAPER)
    aws = {t.instance.name: t.instance for t in load_catalog_file(AWS).types}
    assert paper.name == "srift-paper-2020" and paper.provider == "aws" and not paper.active
    for t in paper.types:
        assert t.instance == aws[t.instance.name]
    spot = {p.instance_type: p.price_usd_per_hr for p in paper.prices if p.market is Market.SPOT}
    assert spot == {"p3.8xlarge": 3.68, "g3.8xlarge": 0.69, "g4dn.8xlarge": 0.72}
    assert {p.region for p in paper.prices} == {"us-east-1"}
    assert all("Table 4" in p.source for p in paper.prices if p.market is Market.SPOT)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cat.yaml"
    path.write_text(text)
    return path


GOOD = """\
provider: onprem
snapshot: lab
source: rate card
as_of: 2026-11-01
instance_types:
  - name: box
    gpu_model: A100
    gpu_count: 8
    gpu_memory_gib: 40
    vcpus: 128
    memory_gib: 1024
    network_gbps: 200
    interconnect: nvswitch
    interconnect_gbps: 2400
    prices:
      lab-1: {on_demand: 12.5}
"""


def test_minimal_custom_file_parses_with_defaults(tmp_path: Path) -> None:
    snap = load_catalog_file(_write(tmp_path, GOOD))
    (t,) = snap.types
    assert (snap.name, snap.provider, snap.active) == ("lab", "onprem", True)
    assert t.instance.efa is False and t.instance.network_burst is False
    (p,) = snap.prices
    assert (p.region, p.market, p.price_usd_per_hr, p.source, p.as_of) == (
        "lab-1",
        Market.ON_DEMAND,
        12.5,
        "rate card",
        date(2026, 11, 1),
    )


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "words"),
    [
        ("    vcpus: 128\n", "", 6, "instance_types[0].vcpus", "is missing"),
        ("gpu_count: 8", "gpu_count: eight", 8, "instance_types[0].gpu_count", "not a whole number"),
        (
            "interconnect: nvswitch",
            "interconnect: infiniband",
            13,
            "instance_types[0].interconnect",
            "not an interconnect",
        ),
        (
            "{on_demand: 12.5}",
            "{on_demand: -1}",
            16,
            "instance_types[0].prices.lab-1.on_demand",
            "out of range",
        ),
        ("{on_demand: 12.5}", "{reserved: 3}", 16, "instance_types[0].prices.lab-1.reserved", "not a market"),
        (
            "    network_gbps: 200\n",
            "    network_gbps: 200\n    netwrok: 1\n",
            13,
            "instance_types[0].netwrok",
            "not a known field",
        ),
        ("as_of: 2026-11-01", "as_of: last tuesday", 4, "as_of", "not a date"),
        ("source: rate card\n", "", 1, "source", "is missing"),
        ("    gpu_model: A100\n", "", 6, "instance_types[0].gpu_model", "is missing"),
        (
            "    memory_gib: 1024\n",
            "    memory_gib: 1024\n    vcpus: 64\n",
            12,
            "instance_types[0].vcpus",
            "appears twice",
        ),
    ],
)
def test_bad_files_name_file_line_and_field(
    tmp_path: Path, old: str, new: str, line: int, field: str, words: str
) -> None:
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(InvalidInput) as info:
        load_catalog_file(path)
    message = str(info.value)
    assert info.value.field == field
    assert f"{path}, line {line}" in message and field in message and words in message, message


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("  - name: box\n", "  - name: [box\n"))
    with pytest.raises(InvalidInput) as info:
        load_catalog_file(path)
    assert (
        str(path) in str(info.value) and "line 7" in str(info.value) and "not valid YAML" in str(info.value)
    )


def test_documents_without_a_file_name_the_field() -> None:
    doc = {
        "provider": "testbed",
        "source": "emulated",
        "as_of": "2026-11-22",
        "instance_types": [
            {
                "name": "tb.small",
                "gpu_count": 0,
                "vcpus": 2,
                "memory_gib": 4,
                "network_gbps": 1,
                "prices": {"local": {"spot": 0}},
            }
        ],
    }
    with pytest.raises(InvalidInput) as info:
        parse_catalog_document(doc, origin="testbed document")
    assert info.value.field == "instance_types[0].prices.local.spot"
    assert "testbed document" in str(info.value)
    doc["instance_types"][0]["prices"] = {"local": {"on_demand": 0.1}}  # type: ignore[index]
    snap = parse_catalog_document(doc, origin="testbed document")
    assert snap.types[0].instance.accelerator == "tb.small" and snap.name == "testbed-import"
