"""The srift-catalog/1 format: shipped files are complete and sourced; bad files name file, line, field."""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path

import pytest

from srift.catalog.document import load_catalog_file, parse_catalog_document
from srift.catalog.shipped import DATA_DIR
from srift.domain.catalog import Interconnect, Market
from srift.errors import InvalidInput
from srift.jobs.spec import parse_probe_job
from srift.limits import MAX_SOURCE_CHARS, MAX_UNITS_PER_INSTANCE

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
            "on_demand must be > 0, got -1",
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


def test_every_problem_of_a_file_is_reported_in_file_order_with_its_line_field_and_fix(
    tmp_path: Path,
) -> None:
    bad = (
        GOOD.replace("as_of: 2026-11-01", "as_of: soon")
        .replace("gpu_count: 8", "gpu_count: eight")
        .replace("{on_demand: 12.5}", "{on_demand: -1}")
        .replace("    vcpus: 128\n", "    vcpus: 128\n    colour: red\n")
    )
    path = _write(tmp_path, bad)
    with pytest.raises(InvalidInput) as info:
        load_catalog_file(path)
    error = info.value
    assert error.field == "as_of" and error.hint == "write it as YYYY-MM-DD"
    assert error.detail.startswith(f"{path}, line 4: 'soon' is not a date; and 3 more problems: ")
    others = re.split(r"; \[\d\] ", error.detail.split("; and 3 more problems: [2] ", 1)[1])
    known = (
        "efa, extra, gpu_count, gpu_memory_gib, gpu_model, interconnect, interconnect_gbps, memory_gib, "
        "name, network_burst, network_gbps, price_source, prices, vcpus"
    )
    assert others == [
        "line 8, instance_types[0].gpu_count: gpu_count 'eight' is not a whole number (an integer) "
        "(give gpu_count as an integer)",
        "line 11, instance_types[0].colour: 'colour' is not a known field "
        f"(remove it or correct the spelling; known fields: {known})",
        "line 17, instance_types[0].prices.lab-1.on_demand: on_demand must be > 0, got -1.0 "
        "(give a number > 0)",
    ]
    assert str(error).endswith("To fix: write it as YYYY-MM-DD.")


def _doc(**type_fields: object) -> dict[str, object]:
    box = {
        "name": "box",
        "gpu_model": "A100",
        "gpu_count": 8,
        "gpu_memory_gib": 40,
        "vcpus": 128,
        "memory_gib": 1024,
        "network_gbps": 200,
        "interconnect": "nvswitch",
        "interconnect_gbps": 2400,
        "prices": {"lab-1": {"on_demand": 12.5}},
    }
    box.update(type_fields)
    return {"provider": "onprem", "source": "rate card", "as_of": "2026-11-01", "instance_types": [box]}


def _problem(doc: dict[str, object]) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        parse_catalog_document(doc, origin="doc")
    return info.value


@pytest.mark.parametrize("value", [8, 8.0, 8.5, "8", True, None, float("inf")])
def test_integers_follow_the_one_rule_of_every_document(value: object) -> None:
    """gpu_count and vcpus accept exactly what a job spec's integers accept (srift.documents.WHOLE)."""
    try:
        parse_probe_job({"provider": "local", "instance_type": "x", "node_counts": [2], "repeats": value})
        job_accepts = True
    except InvalidInput:
        job_accepts = False
    for name in ("gpu_count", "vcpus"):
        try:
            snap = parse_catalog_document(_doc(**{name: value}), origin="doc")
        except InvalidInput as exc:
            assert not job_accepts and exc.field == f"instance_types[0].{name}", exc
            assert "To fix:" in str(exc)
        else:
            assert job_accepts and getattr(snap.types[0].instance, name) == 8
            assert type(getattr(snap.types[0].instance, name)) is int
    assert job_accepts is (value in (8, 8.0) and value is not True)


@pytest.mark.parametrize(
    ("where", "field", "known"),
    [
        (
            {"colour": "red"},
            "colour",
            "active, as_of, format, instance_types, price_source, provider, snapshot",
        ),
        (
            {"sources": {"q": {"text": "quote", "as_of": "2026-01-01", "url": "x"}}},
            "sources.q.url",
            "as_of, text",
        ),
        (
            {
                "instance_types": [
                    _doc(prices={"lab-1": {"spot": {"price_usd_per_hr": 1, "currency": "EUR"}}})[
                        "instance_types"
                    ][0]
                ]
            },  # type: ignore[index]
            "instance_types[0].prices.lab-1.spot.currency",
            "price_usd_per_hr, source",
        ),
    ],
)
def test_unknown_fields_are_refused_with_the_known_ones_listed(
    where: dict[str, object], field: str, known: str
) -> None:
    error = _problem({**_doc(), **where})
    assert error.field == field and "is not a known field" in error.detail and known in error.hint


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"gpu_count": 0}, "instance_types[0].gpu_model", "gpu_model is set but gpu_count is 0"),
        ({"gpu_count": 0, "gpu_model": None}, "instance_types[0].gpu_memory_gib", "set but gpu_count is 0"),
        ({"gpu_memory_gib": None}, "instance_types[0].gpu_memory_gib", "gpu_memory_gib is missing"),
        ({"gpu_memory_gib": 0}, "instance_types[0].gpu_memory_gib", "must be > 0 for a GPU type"),
        ({"gpu_count": 1}, "instance_types[0].interconnect", "is nvswitch but the type has 1 GPU(s)"),
        ({"interconnect": None}, "instance_types[0].interconnect", "missing for a multi-GPU type"),
        ({"interconnect": "none"}, "instance_types[0].interconnect", "none for a multi-GPU type"),
        ({"interconnect_gbps": 0}, "instance_types[0].interconnect_gbps", "must be > 0 with nvswitch"),
        ({"price_source": "quote"}, "instance_types[0].price_source", "'quote' is not a key of `sources`"),
        (
            {"prices": {"lab-1": {"spot": {"price_usd_per_hr": 1, "source": "quote"}}}},
            "instance_types[0].prices.lab-1.spot.source",
            "'quote' is not a key of `sources`",
        ),
        (
            {"prices": {"Lab 1": {"spot": 1}}},
            "instance_types[0].prices.Lab 1",
            "'Lab 1' is not a region name",
        ),
        ({"prices": {"lab-1": {}}}, "instance_types[0].prices.lab-1", "lab-1 is empty"),
        ({"prices": {}}, "instance_types[0].prices", "prices is empty"),
        ({"efa": "yes"}, "instance_types[0].efa", "efa 'yes' is not true or false"),
        ({"vcpus": 100_001}, "instance_types[0].vcpus", f"vcpus must be ≤ {MAX_UNITS_PER_INSTANCE}"),
        ({"gpu_model": " \t"}, "instance_types[0].gpu_model", "gpu_model is blank"),
    ],
)
def test_rules_across_fields_name_the_field_at_fault(
    change: dict[str, object], field: str, words: str
) -> None:
    error = _problem(_doc(**change))
    assert error.field == field and words in error.detail and error.hint, error


def test_document_rules_sources_names_dates_and_bounds() -> None:
    doc = _doc()
    types = doc["instance_types"]
    doc["instance_types"] = [*types, *types]  # type: ignore[misc]
    error = _problem(doc)
    assert error.field == "instance_types[1].name" and "'box' appears twice" in error.detail
    assert _problem({**_doc(), "price_source": "q"}).field == "price_source"
    assert _problem({**_doc(), "source": "x" * (MAX_SOURCE_CHARS + 1)}).field == "source"
    assert _problem({**_doc(), "source": "rate\x00card"}).field == "source"
    assert _problem({**_doc(), "as_of": "2026-13-01"}).field == "as_of"
    assert _problem({**_doc(), "format": "srift-catalog/2"}).field == "format"
    assert _problem({**_doc(), "instance_types": []}).field == "instance_types"
    assert _problem({**_doc(), "instance_types": ["box"]}).field == "instance_types[0]"
    assert _problem({**_doc(), "active": 1}).field == "active"


def test_sources_give_each_price_its_text_and_date() -> None:
    doc = _doc(
        price_source="card",
        prices={"lab-1": {"on_demand": 12.5, "spot": {"price_usd_per_hr": 4, "source": "quote"}}},
        extra={"installed": date(2024, 5, 1), "racks": [3, 4]},
    )
    doc |= {
        "as_of": datetime(2026, 11, 1, 9, 30),
        "snapshot": "lab",
        "active": False,
        "sources": {
            "card": {"text": "  rate card v3  ", "as_of": date(2026, 10, 1)},
            "quote": {"text": "vendor quote", "as_of": "2026-09-15"},
        },
    }
    snap = parse_catalog_document(doc, origin="doc")
    assert (snap.name, snap.as_of, snap.active) == ("lab", date(2026, 11, 1), False)
    assert snap.types[0].extra == {"installed": "2024-05-01", "racks": [3, 4]}
    by_market = {p.market: (p.price_usd_per_hr, p.source, p.as_of) for p in snap.prices}
    assert by_market == {
        Market.ON_DEMAND: (12.5, "rate card v3", date(2026, 10, 1)),
        Market.SPOT: (4.0, "vendor quote", date(2026, 9, 15)),
    }
    doc["price_source"] = "card"
    del doc["instance_types"][0]["price_source"]  # type: ignore[index]
    on_demand = next(
        p for p in parse_catalog_document(doc, origin="doc").prices if p.market is Market.ON_DEMAND
    )
    assert on_demand.source == "rate card v3"


def test_odd_yaml_shapes_are_named_by_field_and_line(tmp_path: Path) -> None:
    cases = [
        ("snapshot: lab\n", "snapshot: lab\n5: x\n", "5", 3, "'5' is not a known field"),
        ("snapshot: lab\n", "snapshot: lab\nsources: {q: 3}\n", "sources.q", 3, "q is not a mapping"),
        ("snapshot: lab\n", "snapshot: lab\nactive: null\n", "active", 3, "active None is not true or false"),
        (
            "    gpu_count: 8\n",
            "    gpu_count: 8\n    price_source: 3\n",
            "instance_types[0].price_source",
            9,
            "price_source 3 is not text",
        ),
    ]
    for old, new, field, line, words in cases:
        path = _write(tmp_path, GOOD.replace(old, new, 1))
        with pytest.raises(InvalidInput) as info:
            load_catalog_file(path)
        assert info.value.field == field and f"{path}, line {line}: {words}" in info.value.detail, info.value
