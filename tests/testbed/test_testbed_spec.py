"""Spec validation: every bad spec names its field; shaping commands for both emulators."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from srift.errors import EnvironmentProblem, InvalidInput
from srift.testbed import Emulator, Testbed, example_spec_path, load_spec, network, parse_spec
from srift.testbed.spec import machine_cores

GOOD: dict[str, Any] = {
    "types": [
        {"name": "tb.small", "cpu_cores": 0.5, "rate_mbit": 100, "delay_ms": 2, "price_usd_per_hr": 0.1},
        {"name": "tb.large", "cpu_cores": 1, "rate_mbit": 400, "price_usd_per_hr": 0.25, "memory_mib": 1024},
    ],
    "hosts": [{"type": "tb.small", "count": 2}, {"name": "big", "type": "tb.large"}],
}


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


def test_good_spec_names_hosts_and_addresses() -> None:
    spec = parse_spec(GOOD, cores=2)
    assert [h.name for h in spec.hosts] == ["small0", "small1", "big"]
    assert [spec.address_of(h.name) for h in spec.hosts] == ["10.213.0.1", "10.213.0.2", "10.213.0.3"]
    assert spec.type_of("big").memory_mib == 1024
    assert spec.emulator is Emulator.AUTO
    assert parse_spec(spec.to_dict(), cores=2) == spec


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["types", 0, "rate_mbit"], -5, "types[0].rate_mbit"),
        (["types", 1, "rate_mbit"], 0, "types[1].rate_mbit"),
        (["types", 0, "delay_ms"], -1, "types[0].delay_ms"),
        (["types", 0, "loss_pct"], 150, "types[0].loss_pct"),
        (["types", 0, "bandwidth"], 10, "types[0].bandwidth"),
        (["types", 0, "cpu_cores"], 3, "types[0].cpu_cores"),
        (["types", 0, "cpu_cores"], 0, "types[0].cpu_cores"),
        (["types", 0, "memory_mib"], 1.5, "types[0].memory_mib"),
        (["types", 0, "price_usd_per_hr"], "cheap", "types[0].price_usd_per_hr"),
        (["hosts", 1, "name"], "small0", "hosts[1].name"),
        (["hosts", 1, "type"], "tb.huge", "hosts[1].type"),
        (["hosts", 1, "name"], "Bad_Name", "hosts[1].name"),
        (["hosts", 0, "count"], -1, "hosts[0].count"),
        (["subnet"], "8.8.8.0/24", "subnet"),
        (["prefix"], "has-dash", "prefix"),
        (["emulator"], "magic", "emulator"),
        (["colour"], "red", "colour"),
    ],
)
def test_bad_spec_names_the_field(path: list[Any], value: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_spec(_with(path, value), cores=2)
    assert info.value.field == field
    assert field in str(info.value)


def test_quota_above_this_machines_cores_is_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_spec(_with(["types", 1, "cpu_cores"], machine_cores() + 0.5))
    assert info.value.field == "types[1].cpu_cores"
    assert "above this machine" in info.value.detail


def test_duplicate_type_names_are_refused() -> None:
    doc = _with(["types", 1, "name"], "tb.small")
    with pytest.raises(InvalidInput) as info:
        parse_spec(doc, cores=2)
    assert info.value.field == "types[1].name"


def test_shipped_example_has_two_types_differing_in_cpu_and_rate() -> None:
    spec = load_spec(example_spec_path(), cores=2)
    small, large = spec.types
    assert small.cpu_cores < large.cpu_cores and small.rate_mbit < large.rate_mbit
    assert len(spec.hosts) >= 4


def test_shaping_halves_delay_per_direction_and_keeps_rate() -> None:
    t = parse_spec(GOOD, cores=2).types[0]
    shape = network.half_shape(t)
    assert shape.rate_mbit == 100 and shape.delay_ms == 1.0
    netem = network.shaping_batch("eth0", shape, mtu=9001, netem=True)
    assert netem[0].startswith("qdisc replace dev eth0 root handle 1: netem") and "delay 1ms" in netem[0]
    assert netem[1].startswith("qdisc replace dev eth0 parent 1:1 handle 10: tbf rate 100000kbit")
    plain = network.shaping_batch("h0", shape, mtu=9001, netem=False)
    assert plain == [f"qdisc replace dev h0 root handle 1: {' '.join(network.tbf_args(100, 9001))}"]
    # GSO super-frames fit the bucket at high rates, so tbf does not split them.
    assert network.tbf_burst_bytes(1000, 9001) >= network.GSO_BYTES


GEO: dict[str, Any] = {
    **GOOD,
    "locations": [{"name": "east", "hosts": ["small0", "big"]}, {"name": "west", "hosts": ["small1"]}],
    "links": [{"between": ["east", "west"], "rate_mbit": 50, "delay_ms": 10}],
}


def test_locations_group_hosts_and_links_join_them() -> None:
    spec = parse_spec(GEO, cores=2)
    assert [spec.location_of(h.name) for h in spec.hosts] == ["east", "west", "east"]
    link = spec.link_between("west", "east")
    assert link is not None and link.rate_mbit == 50 and link.delay_ms == 10
    assert spec.link_between("east", "east") is None
    assert spec.needs_emulation
    assert parse_spec(spec.to_dict(), cores=2) == spec
    assert "locations" not in parse_spec(GOOD, cores=2).to_dict()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"locations": [{"name": "east", "hosts": ["small0", "small1"]}]}, "locations"),
        ({"locations": [{"name": "east", "hosts": ["small0", "nobody"]}]}, "locations[0].hosts"),
        (
            {
                "locations": [
                    {"name": "east", "hosts": ["small0", "small1"]},
                    {"name": "west", "hosts": ["small1"]},
                ]
            },
            "locations[1].hosts",
        ),
        (
            {"locations": [{"name": "East", "hosts": ["small0", "small1", "big"]}], "links": []},
            "locations[0].name",
        ),
        ({"links": [{"between": ["east", "north"], "rate_mbit": 5}]}, "links[0].between"),
        ({"links": [{"between": ["east", "east"], "rate_mbit": 5}]}, "links[0].between"),
        ({"links": [{"between": ["east", "west"], "rate_mbit": 0}]}, "links[0].rate_mbit"),
        ({"links": [{"between": ["east", "west"], "rate_mbit": 5, "delay_ms": -1}]}, "links[0].delay_ms"),
        ({"links": [{"between": ["east", "west"], "rate_mbit": 5, "loss": 1}]}, "links[0].loss"),
    ],
)
def test_bad_locations_and_links_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_spec({**GEO, **change}, cores=2)
    assert info.value.field == field


def test_upload_to_another_location_gets_the_links_rate_by_destination() -> None:
    shape = network.LinkShape(rate_mbit=100, delay_ms=1.0)
    remote = network.RemoteClass(("10.213.0.2", "10.213.0.5"), rate_mbit=500, delay_ms=10)
    plain = network.upload_batch("eth0", shape, [remote], mtu=9001, netem=False)
    assert plain[0] == "qdisc replace dev eth0 root handle 1: htb default 1"
    assert plain[1].startswith("class replace dev eth0 parent 1: classid 1:1 htb rate 100000kbit")
    # The link's rate is capped by the host's own.
    assert plain[3].startswith("class replace dev eth0 parent 1: classid 1:2 htb rate 100000kbit")
    assert [line.split()[-3:] for line in plain if line.startswith("filter")] == [
        ["10.213.0.2/32", "flowid", "1:2"],
        ["10.213.0.5/32", "flowid", "1:2"],
    ]
    assert all("netem" not in line for line in plain)
    netem = network.upload_batch("eth0", shape, [remote], mtu=9001, netem=True)
    assert "delay 1ms" in netem[2] and "delay 11ms" in netem[4]
    assert network.upload_batch("eth0", shape, [], mtu=9001, netem=False) == network.shaping_batch(
        "eth0", shape, mtu=9001, netem=False
    )


def test_without_root_up_stops_before_creating_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    spec = parse_spec(GOOD, cores=2).with_prefix("nonroot")
    with pytest.raises(EnvironmentProblem) as info:
        Testbed.up(spec, root=tmp_path)
    assert "root privileges" in info.value.detail and info.value.exit_code == 3
    assert list(tmp_path.iterdir()) == []
