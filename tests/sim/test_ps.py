"""Parameter-server mode (Li et al., Algorithm 3.1): shared links, greedy placement, hand-checked steps."""

from __future__ import annotations

import pytest

from srift.domain.simulation import PER_LAYER
from srift.sim import CommMode, simulate
from srift.sim.engine import Engine
from srift.sim.ps import SharedLink, place_layers

from .kit import P3_2XL, flat, member, profile, resnet_like


def test_shared_link_is_processor_sharing() -> None:
    # 8 bit/s. A (16 bits) alone from 0; B (4 bits) joins at 1: 4 each → B done 2.0; A has 4 left → 2.5.
    engine = Engine()
    link = SharedLink(engine, 8.0)
    log: list[tuple[float, str]] = []
    link.start(16.0, lambda: log.append((engine.now, "A")))
    engine.schedule(1.0, lambda: link.start(4.0, lambda: log.append((engine.now, "B"))))
    engine.run()
    assert [name for _, name in log] == ["B", "A"]
    assert [t for t, _ in log] == pytest.approx([2.0, 2.5], abs=1e-12)


def test_layers_go_to_the_least_loaded_server() -> None:
    assert place_layers([5, 4, 3, 3], 2) == [0, 1, 1, 0]
    assert place_layers([1, 1, 1], 1) == [0, 0, 0]


def test_one_worker_one_server_by_hand() -> None:
    # 1 GB of parameters at 8 Gbit/s: download 1 s; compute 0.1 + 0.2; the layer is ready at 1.2 and its
    # upload takes 1 s → a step is 2.2 s, of which 0.3 compute.
    est = simulate(
        [member(P3_2XL, 1, 64, profile())],
        bandwidth=flat(8.0),
        comm=CommMode.PARAMETER_SERVER,
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(2.2, abs=1e-9)
    assert est.breakdown.compute_s == pytest.approx(0.3, abs=1e-9)
    assert est.breakdown.exposed_network_s == pytest.approx(1.9, abs=1e-9)
    assert est.sources == ("profile:toy@V100", "table:test", "parameter_server:1")


def test_two_workers_share_the_server_links() -> None:
    # Both download at 4 Gbit/s (2 s); the layer is ready at 2.2 and both upload it at 4 Gbit/s (2 s): 4.2 s.
    est = simulate(
        [member(P3_2XL, 2, 64, profile())],
        bandwidth=flat(8.0),
        comm=CommMode.PARAMETER_SERVER,
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(4.2, abs=1e-9)
    assert est.iteration_p10_s == pytest.approx(4.2, abs=1e-9)
    assert est.iteration_p90_s == pytest.approx(4.2, abs=1e-9)


def test_more_servers_relieve_a_communication_bound_model() -> None:
    fleet = [member(P3_2XL, 8, 64, resnet_like())]
    one = simulate(
        fleet, bandwidth=flat(10.0), comm=CommMode.PARAMETER_SERVER, ps_servers=1, config=PER_LAYER
    )
    four = simulate(
        fleet, bandwidth=flat(10.0), comm=CommMode.PARAMETER_SERVER, ps_servers=4, config=PER_LAYER
    )
    assert four.iteration_s < 0.5 * one.iteration_s
    assert four.iteration_p10_s <= four.iteration_p50_s <= four.iteration_p90_s
    again = simulate(
        fleet, bandwidth=flat(10.0), comm=CommMode.PARAMETER_SERVER, ps_servers=4, config=PER_LAYER
    )
    assert again == four
    b = four.breakdown
    assert b.compute_s + b.exposed_network_s == pytest.approx(four.iteration_s)
