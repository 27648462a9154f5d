"""Fleets across locations: hand-computed timelines for the flat ring and the hierarchical pattern, egress."""

from __future__ import annotations

import pytest

from srift.catalog.geo import parse_network
from srift.domain import FleetMember, ModelProfile
from srift.domain.geo import AllreducePattern, Location, Route
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.optimize.evaluate import SimEvaluator
from srift.sim import simulate
from srift.sim.bounds import Extension, iteration_lower_bound_s
from srift.sim.geo import GeoContext, egress_flows, egress_usd_per_iteration, gradient_bytes, ring_order
from srift.sim.layers import layer_arrays
from tests.sim.kit import P3_2XL, flat, instance, member, profile

A = Location("cloud", "a")
B = Location("cloud", "b")
C = Location("cloud", "c")


def geo_doc(**links: tuple[float, float]) -> dict[str, object]:
    """A srift-geo/1 document with regions a, b, c on one continent and the given (Gbit/s, RTT ms) links."""
    return {
        "format": "srift-geo/1",
        "as_of": "2026-01-01",
        "sources": {"t": {"text": "test table", "as_of": "2026-01-01"}},
        "regions": {"cloud": {r: {"continent": "na"} for r in ("a", "b", "c")}},
        "egress": {
            "cloud": {
                "intra_zone": {"usd_per_gb": 0.0, "source": "t"},
                "inter_zone": {"usd_per_gb": 0.01, "source": "t"},
                "inter_region": {"default": 0.02, "source": "t"},
                "inter_continent": {"usd_per_gb": 0.05, "source": "t"},
                "to_oceania": {"usd_per_gb": 0.1, "source": "t"},
                "internet": {"usd_per_gb": 0.09, "source": "t"},
            }
        },
        "links": [
            {
                "from": f"cloud/{k[0]}",
                "to": f"cloud/{k[1]}",
                "bandwidth_gbps": v[0],
                "rtt_ms": v[1],
                "source": "t",
            }
            for k, v in links.items()
        ],
        "link_priors": {
            "other_zone_same_region": {"bandwidth_gbps": 5, "rtt_ms": 1, "source": "t"},
            "same_continent": {"bandwidth_gbps": 0.5, "rtt_ms": 50, "source": "t"},
            "continents": {},
            "unmeasured_continents": {"bandwidth_gbps": 0.05, "rtt_ms": 300, "source": "t"},
        },
    }


# 1 Gbit/s and 100 ms one way (200 ms round trip) between a and b.
GEO = parse_network(geo_doc(ab=(1.0, 200.0)), origin="test")
ONE_GB = profile(fw_s=0.1, bw_s=0.2, layers=((1_000_000_000, 0.5),))


def test_two_vms_in_two_locations_cross_the_link_twice_with_its_latency() -> None:
    # N = L = 2: step = L·α/N + s/(N·β) = 0.1 + 8e9/2e9 = 4.1 s (the 10 Gbit/s in-location step is 0.4 s);
    # t = 2(N−1)·step = 8.2 s after the layer is ready at fw + ½·bw = 0.05 + 0.05 s (batch 32 of 64).
    fleet = [
        FleetMember(instance=P3_2XL, count=1, batch=32, profile=ONE_GB, location=A),
        FleetMember(instance=P3_2XL, count=1, batch=32, profile=ONE_GB, location=B),
    ]
    est = simulate(fleet, bandwidth=flat(10.0), geo=GeoContext(GEO), config=PER_LAYER)
    assert est.iteration_s == pytest.approx(0.1 + 8.2)
    assert est.breakdown.exposed_location_s == pytest.approx(est.breakdown.exposed_network_s)
    assert any("link cloud/a→cloud/b: test table" in s for s in est.sources)


def located(count_a: int, count_b: int, prof: ModelProfile = ONE_GB) -> list[FleetMember]:
    return [
        FleetMember(instance=P3_2XL, count=count_a, batch=32, profile=prof, location=A),
        FleetMember(instance=P3_2XL, count=count_b, batch=32, profile=prof, location=B),
    ]


def test_flat_ring_of_four_pays_the_link_on_every_step_and_its_latency_on_half() -> None:
    # N = 4, L = 2: in-location step = 1.2 s / 6 = 0.2 s (payload 10·4/6 Gbit/s); link step =
    # 2·0.1/4 + 8e9/(4·1e9) = 2.05 s, so t = 6 · 2.05 = 12.3 s.
    est = simulate(located(2, 2), bandwidth=flat(10.0), geo=GeoContext(GEO), config=PER_LAYER)
    assert est.iteration_s == pytest.approx(0.1 + 12.3)


def test_hierarchical_reduces_inside_each_location_then_rings_the_leaders() -> None:
    # In-location ring of 2 at 10 Gbit/s: 0.8 s; leaders: 2(L−1)·(α + s/(L·β)) = 2·(0.1 + 4) = 8.2 s.
    est = simulate(
        located(2, 2),
        bandwidth=flat(10.0),
        geo=GeoContext(GEO, AllreducePattern.HIERARCHICAL),
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(0.1 + 0.8 + 8.2)
    assert est.breakdown.exposed_location_s == pytest.approx(8.2)


def test_one_location_is_the_plain_simulator() -> None:
    plain = simulate([member(P3_2XL, 4, 32, ONE_GB)], bandwidth=flat(10.0), config=PER_LAYER)
    here = simulate(
        [FleetMember(instance=P3_2XL, count=4, batch=32, profile=ONE_GB, location=A)],
        bandwidth=flat(10.0),
        geo=GeoContext(GEO),
        config=PER_LAYER,
    )
    assert here.iteration_s == plain.iteration_s


def test_egress_follows_the_ring_and_the_hierarchy() -> None:
    grad = gradient_bytes(layer_arrays(ONE_GB))
    ring = egress_flows(located(2, 2), grad_bytes=grad, geo=GeoContext(GEO))
    # Each of the two crossings carries 2(N−1)/N = 1.5 GB per iteration at 0.02 $/GB (inter-region).
    assert [(f.source, f.destination) for f in ring] == [(A, B), (B, A)]
    assert all(f.bytes_per_iteration == pytest.approx(1.5e9) for f in ring)
    assert all(f.route is Route.INTER_REGION for f in ring)
    assert egress_usd_per_iteration(ring) == pytest.approx(2 * 1.5 * 0.02)
    hier = egress_flows(located(2, 2), grad_bytes=grad, geo=GeoContext(GEO, AllreducePattern.HIERARCHICAL))
    assert [f.bytes_per_iteration for f in hier] == pytest.approx([1e9, 1e9])


def test_ring_order_puts_the_slow_pair_apart_when_three_locations_allow_it() -> None:
    # a–b and b–c fast, a–c slow: in a ring of three every pair is adjacent, so every order has the
    # slow hop; with four locations the slow pair can be kept apart.
    geo = parse_network(geo_doc(ab=(1.0, 2.0), bc=(1.0, 2.0), ac=(0.01, 400.0)), origin="test")
    fleet = [
        FleetMember(instance=P3_2XL, count=1, batch=32, profile=ONE_GB, location=loc) for loc in (A, C, B)
    ]
    assert set(ring_order(fleet, geo)) == {A, B, C}


def test_mixed_located_and_unlocated_members_are_refused() -> None:
    fleet = [
        FleetMember(instance=P3_2XL, count=1, batch=32, profile=ONE_GB, location=A),
        FleetMember(instance=P3_2XL, count=1, batch=32, profile=ONE_GB, location=B),
        FleetMember(instance=P3_2XL, count=1, batch=32, profile=ONE_GB),
    ]
    with pytest.raises(InvalidInput) as info:
        simulate(fleet, bandwidth=flat(10.0), geo=GeoContext(GEO), config=PER_LAYER)
    assert info.value.field == "fleet.location"


@pytest.mark.parametrize("pattern", list(AllreducePattern))
def test_the_optimizers_bounds_stay_below_the_simulator_across_locations(pattern: AllreducePattern) -> None:
    # 100 Gbit/s NICs and link, 10 Gbit/s bus bandwidth. One ring of 4: 8e9 / (10·4/6 Gbit/s) = 1.2 s.
    # Hierarchical: in-location ring of 2 at 10 Gbit/s, 0.8 s, then leaders 2·(1e-4 + 8e9/2e11) = 0.0802 s:
    # faster than the one ring that srift.sim.bounds models, so its network stage is no bound there.
    nic = instance("p3dn.24xlarge", gpus=1, network_gbps=100.0)
    geo = GeoContext(parse_network(geo_doc(ab=(100.0, 0.2)), origin="test"), pattern)
    fleet = [
        FleetMember(instance=nic, count=2, batch=32, profile=ONE_GB, location=A),
        FleetMember(instance=nic, count=2, batch=32, profile=ONE_GB, location=B),
    ]
    simulated = simulate(fleet, bandwidth=flat(10.0), geo=geo, band=False, config=PER_LAYER).iteration_s
    one_ring = iteration_lower_bound_s(fleet, bandwidth=flat(10.0))
    if pattern is AllreducePattern.HIERARCHICAL:
        assert simulated == pytest.approx(0.1 + 0.8 + 0.0802)
        assert one_ring > simulated
    else:
        assert one_ring == pytest.approx(simulated)
    evaluator = SimEvaluator(bandwidth=flat(10.0), geo=geo, config=PER_LAYER)
    assert evaluator.iteration_bound_s(fleet) <= simulated * (1 + 1e-9)
    partial = evaluator.grow(None, fleet[0])
    reach = Extension(min_nodes=4, max_nodes=4, later=(nic,))
    assert evaluator.partial_bound_s(partial, extension=reach) <= simulated * (1 + 1e-9)


def test_bounds_told_the_locations_see_the_link_and_stay_below_the_simulator() -> None:
    """With the fastest link among the allowed locations (use_locations), a fleet across them is bounded
    by that link: tighter than the one-location bound, never above the simulator, whatever extends it."""
    import random

    geo = GeoContext(parse_network(geo_doc(ab=(1.0, 200.0), bc=(2.0, 60.0), ac=(0.5, 300.0)), origin="test"))
    nic = instance("p3dn.24xlarge", gpus=1, network_gbps=100.0)
    rng = random.Random(7)
    tighter = 0
    for _ in range(30):
        where = rng.sample([A, B, C], rng.randint(2, 3))
        fleet = [
            FleetMember(instance=nic, count=rng.randint(1, 3), batch=32, profile=ONE_GB, location=loc)
            for loc in where
        ]
        simulated = simulate(fleet, bandwidth=flat(10.0), geo=geo, band=False).iteration_s
        plain = SimEvaluator(bandwidth=flat(10.0), geo=geo)
        told = SimEvaluator(bandwidth=flat(10.0), geo=geo)
        told.use_locations([A, B, C])
        bound = told.iteration_bound_s(fleet)
        assert bound <= simulated * (1 + 1e-9)
        assert bound >= plain.iteration_bound_s(fleet) * (1 - 1e-12)
        tighter += bound > plain.iteration_bound_s(fleet) * 1.01
        partial = told.grow(None, fleet[0])
        partial = told.grow(partial, fleet[1])
        nodes = sum(m.count for m in fleet)
        reach = Extension(min_nodes=nodes, max_nodes=nodes + 2, later=(nic,))
        if len(fleet) > 2:
            assert told.partial_bound_s(partial, extension=reach) <= simulated * (1 + 1e-9)
    assert tighter >= 20
