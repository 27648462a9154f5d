"""Mixed rings: factors measured from probe records, kept by a model version, used by the network stage."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
from sim.kit import member, resnet_like

from srift.bandwidth import registry
from srift.bandwidth.mixed import (
    MixedRing,
    MixedRingTable,
    measure_mixed_rings,
    ring_members,
    ring_name,
    rings_from_metrics,
    rings_to_metrics,
)
from srift.bandwidth.records import ProbeRecord, SampleQuery, busbw_gbps
from srift.bandwidth.samples import load_samples, store_samples
from srift.db.session import session_factory, transaction
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.settings import Settings
from srift.sim import simulate
from srift.sim.bounds import Bounder, Extension
from srift.sim.network import CAP_PROBE_BYTES, MemoBandwidth, network_stage_at

from .test_registry import tb_instance


def _rec(name: str, *, nodes: int, size: int, time_s: float, repeat: int = 0, **kw: object) -> ProbeRecord:
    fields: dict[str, object] = {
        "run_id": "r",
        "provider": "testbed",
        "instance_type": name,
        "backend": "gloo",
        "buffer_bytes": size,
        "world_size": nodes,
        "nodes": nodes,
        "ranks_per_node": 1,
        "time_s": time_s,
        "algbw_gbps": 0.0,
        "busbw_gbps": busbw_gbps(buffer_bytes=size, world_size=nodes, time_s=time_s),
        "repeat": repeat,
    }
    fields.update(kw)
    return ProbeRecord(**fields)  # type: ignore[arg-type]


def test_ring_names_are_sorted_distinct_types_and_need_two() -> None:
    assert ring_name(["tb.small", "tb.large", "tb.small"]) == "tb.large+tb.small"
    assert ring_members("tb.large+tb.small") == ("tb.large", "tb.small")
    assert ring_members("tb.large") == ("tb.large",)
    with pytest.raises(InvalidInput, match="two or more") as err:
        ring_name(["tb.small", "tb.small"])
    assert err.value.field == "instance_type"


def test_factor_is_slowest_alone_over_mixed_median_per_node_count_and_size() -> None:
    ring = "tb.large+tb.small"
    records = [
        # 1 MiB: small is the slower alone (median 1.0 s on 2 nodes, 1.5 s on 4), large 0.5 s / 0.7 s
        *(_rec("tb.small", nodes=2, size=1 << 20, time_s=t, repeat=i) for i, t in enumerate((0.9, 1.0, 1.4))),
        _rec("tb.large", nodes=2, size=1 << 20, time_s=0.5),
        _rec("tb.small", nodes=4, size=1 << 20, time_s=1.5),
        _rec("tb.large", nodes=4, size=1 << 20, time_s=0.7),
        *(_rec(ring, nodes=2, size=1 << 20, time_s=t, repeat=i) for i, t in enumerate((1.25, 1.0, 2.0))),
        _rec(ring, nodes=4, size=1 << 20, time_s=2.0),
        # 4 KiB on 2 nodes: large is the slower alone (latency), and the ring is faster than it
        _rec("tb.small", nodes=2, size=4096, time_s=0.010),
        _rec("tb.large", nodes=2, size=4096, time_s=0.012),
        _rec(ring, nodes=2, size=4096, time_s=0.008),
        # a ring without any type alone on as many nodes, and concurrent allreduces: neither counts
        _rec(ring, nodes=3, size=1 << 20, time_s=9.0),
        _rec(ring, nodes=2, size=1 << 22, time_s=9.0, async_count=2),
        _rec("tb.small", nodes=2, size=1 << 22, time_s=1.0, async_count=2),
        _rec("tb.large", nodes=2, size=1 << 22, time_s=1.0, async_count=2),
    ]
    (found,) = measure_mixed_rings(records)
    assert found.types == ("tb.large", "tb.small") and found.provider == "testbed"
    assert found.nodes == (2, 4)
    assert [(n, size) for n, size, _ in found.factors] == [(2, 4096), (2, 1 << 20), (4, 1 << 20)]
    assert [f for *_, f in found.factors] == pytest.approx([0.012 / 0.008, 1.0 / 1.25, 1.5 / 2.0])


def test_a_type_not_probed_on_as_many_hosts_is_compared_where_all_were() -> None:
    ring = "tb.large+tb.small"
    records = [
        # on 2 nodes small is the slower alone; large was never probed on 4 (too big for the cores)
        _rec("tb.small", nodes=2, size=1 << 20, time_s=1.0),
        _rec("tb.large", nodes=2, size=1 << 20, time_s=0.3),
        _rec("tb.small", nodes=4, size=1 << 20, time_s=1.5),
        _rec(ring, nodes=4, size=1 << 20, time_s=1.6),
        # at 4 KiB large is the slower on 2 nodes, and it has no time on 4: no factor there
        _rec("tb.small", nodes=2, size=4096, time_s=0.01),
        _rec("tb.large", nodes=2, size=4096, time_s=0.02),
        _rec("tb.small", nodes=4, size=4096, time_s=0.01),
        _rec(ring, nodes=4, size=4096, time_s=0.01),
    ]
    (found,) = measure_mixed_rings(records)
    assert [(n, size) for n, size, _ in found.factors] == [(4, 1 << 20)]
    assert found.factors[0][2] == pytest.approx(1.5 / 1.6)


def test_a_ring_without_its_types_alone_gives_no_factor() -> None:
    ring = "tb.large+tb.small"
    records = [_rec(ring, nodes=2, size=4096, time_s=0.01), _rec("tb.small", nodes=2, size=4096, time_s=0.01)]
    assert measure_mixed_rings(records) == []


def test_factor_at_takes_the_nearest_node_count_then_the_nearest_size_on_a_log_scale() -> None:
    cells = ((2, 1024, 1.1), (2, 1 << 24, 0.98), (4, 1024, 1.0), (4, 1 << 20, 0.9), (4, 1 << 24, 0.8))
    ring = MixedRing("testbed", ("a", "b"), cells)
    assert ring.nodes == (2, 4)
    assert ring.factor_at(2, 1 << 30) == 0.98
    assert ring.factor_at(3, 1 << 24) == 0.8  # a tie between 2 and 4 nodes: the larger
    assert ring.factor_at(16, 1) == 1.0
    assert ring.factor_at(4, 1 << 14) == 1.0  # 4 octaves from 1 KiB, 6 from 1 MiB
    assert ring.factor_at(4, 1 << 15) == 1.0  # halfway: the smaller size
    assert ring.factor_at(4, 1 << 16) == 0.9
    assert ring.factor_at(4, CAP_PROBE_BYTES) == 0.8


def test_rings_survive_the_metrics_round_trip_and_foreign_entries_are_skipped() -> None:
    ring = MixedRing("testbed", ("a", "b"), ((2, 1024, 1.0), (4, 1 << 20, 0.9)))
    data = rings_to_metrics([ring])
    assert data == {"testbed/a+b": {"factor_by_nodes": {"2": {"1024": 1.0}, "4": {"1048576": 0.9}}}}
    broken = {
        "testbed/a": {"factor_by_nodes": {"2": {"1": 1.0}}},
        "x/c+d": {"factor_by_nodes": {"2": {"1": -1}}},
        "y/e+f": 3,
        "z/g+h": {"factor_by_size": {"1": 0.5}},
        "w/i+j": {"factor_by_nodes": {"1": {"1": 0.5}}},
    }
    assert rings_from_metrics({**data, **broken}) == [ring]
    assert rings_from_metrics({"testbed/b+a": data["testbed/a+b"]}) == [ring], (
        "a version stored before names were sorted"
    )


def test_table_answers_exact_rings_then_the_worst_probed_subset_never_above_one() -> None:
    ab = MixedRing("testbed", ("a", "b"), ((2, 1024, 0.9), (4, 1024, 0.8)))
    bc = MixedRing("testbed", ("b", "c"), ((4, 1024, 0.7), (4, 1 << 20, 1.3)))
    table = MixedRingTable([ab, bc])
    assert table.factors("testbed", ["b", "a"], 2, [1, 1 << 30]) == [0.9, 0.9]
    assert table.factors("testbed", ["b", "a"], 8, [1024]) == [0.8]
    assert table.factors("testbed", ["a", "b", "c"], 4, [1024]) == [0.7]
    assert table.factors("testbed", ["b", "c"], 4, [1 << 20]) == [1.0]
    assert table.factors("testbed", ["a", "c"], 4, [1024]) is None
    assert table.factors("testbed", ["a"], 4, [1024]) is None
    assert table.factors("aws", ["a", "b"], 4, [1024]) is None
    assert not MixedRingTable([]) and table


@pytest.fixture
def mixed_records(testbed_records: list[ProbeRecord]) -> list[ProbeRecord]:
    """The two measured types alone on 2 hosts, and a ring of both 1.25× slower than the slower one."""
    types = ("bw.r100.d2", "bw.r500.d5")
    alone = [r for r in testbed_records if r.world_size == 2 and r.instance_type in types]
    ring = ring_name(types)
    times: dict[tuple[str, int], list[float]] = {}
    for r in alone:
        times.setdefault((r.instance_type, r.buffer_bytes), []).append(r.time_s)
    both = {size for _, size in times if all((t, size) in times for t in types)}
    slowest = {size: max(statistics.median(times[(t, size)]) for t in types) for size in both}
    mixed = [
        _rec(ring, nodes=2, size=s, time_s=t * 1.25, run_id="mixed", rated_gbps=0.1)
        for s, t in slowest.items()
    ]
    return [*alone, *mixed]


def test_a_trained_version_carries_its_rings_to_the_network_stage(
    db_url: str, settings: Settings, mixed_records: list[ProbeRecord]
) -> None:
    with session_factory(db_url)() as session:
        store_samples(session=session, records=mixed_records, origin="jsonl")
        session.commit()
    query = SampleQuery(instance_types=("bw.r100.d2", "bw.r500.d5"))
    with transaction(db_url) as session:
        loaded = load_samples(session=session, query=query)
        assert len(loaded) == len(mixed_records)
        narrow = load_samples(session=session, query=SampleQuery(instance_types=("bw.r100.d2",)))
        assert {r.instance_type for r in narrow} == {"bw.r100.d2"}
        version = registry.train_version(
            session=session, settings=settings, query=query, activate_it=True, tune=False
        )
        model = registry.active_model(session=session, settings=settings)
    (key,) = version.metrics["mixed_rings"]
    assert key == "testbed/bw.r100.d2+bw.r500.d5"
    stored = version.metrics["mixed_rings"][key]["factor_by_nodes"]
    assert list(stored) == ["2"] and all(f == pytest.approx(0.8) for f in stored["2"].values())
    assert version.training_query["n_mixed_samples"] == sum("+" in r.instance_type for r in mixed_records)
    assert version.covers == ["testbed/bw.r100.d2", "testbed/bw.r500.d5"]

    slow, fast = tb_instance("bw.r100.d2", 100), tb_instance("bw.r500.d5", 500)
    sizes = [1 << 12, 1 << 20, 1 << 24]
    alone = [network_stage_at((t,), 2, sizes, model) for t in (slow, fast)]
    both = network_stage_at((slow, fast), 2, sizes, model)
    assert both is not None and all(p is not None for p in alone)
    for k in range(len(sizes)):
        slowest = min(p.stage.rates_bps[k] for p in alone if p is not None)
        assert both.stage.rates_bps[k] == pytest.approx(0.8 * slowest)
    assert both.sources[-1] == "mixed-ring:bw.r100.d2+bw.r500.d5"
    memo = MemoBandwidth(model)
    assert network_stage_at((slow, fast), 2, sizes, memo) == both
    assert model.mixed_ring_factors(instances=(slow, fast), nodes=5, buffer_bytes=[1 << 20]) == [
        pytest.approx(0.8)
    ]


def test_a_ring_measured_faster_keeps_the_slowest_rate_and_the_bounds_stay_bounds(
    db_url: str, settings: Settings, mixed_records: list[ProbeRecord]
) -> None:
    faster = [replace(r, time_s=r.time_s / 1.5) if "+" in r.instance_type else r for r in mixed_records]
    with session_factory(db_url)() as session:
        store_samples(session=session, records=faster, origin="jsonl")
        session.commit()
    with transaction(db_url) as session:
        version = registry.train_version(session=session, settings=settings, activate_it=True, tune=False)
        model = registry.active_model(session=session, settings=settings)
    stored = version.metrics["mixed_rings"]["testbed/bw.r100.d2+bw.r500.d5"]["factor_by_nodes"]["2"]
    assert all(f == pytest.approx(1.5 / 1.25) for f in stored.values())
    slow, fast = tb_instance("bw.r100.d2", 100), tb_instance("bw.r500.d5", 500)
    alone = [network_stage_at((t,), 2, [1 << 20], model) for t in (slow, fast)]
    both = network_stage_at((slow, fast), 2, [1 << 20], model)
    assert both is not None
    assert both.stage.rates_bps[0] == pytest.approx(min(p.stage.rates_bps[0] for p in alone if p))
    prof = resnet_like(cv=0.0)
    one = member(slow, 1, 32, replace(prof, accelerator=slow.name))
    other = member(fast, 1, 32, replace(prof, accelerator=fast.name))
    simulated = simulate([one, other], bandwidth=model, band=False, config=PER_LAYER).iteration_s
    bounder = Bounder(bandwidth=model)
    assert bounder.bound_s(bounder.add(bounder.add(None, one), other)) <= simulated * (1 + 1e-12)
    ahead = Extension(min_nodes=2, max_nodes=2, later=(fast,))
    assert bounder.bound_s(bounder.add(None, one), ahead) <= simulated * (1 + 1e-12)
