"""The overlap slowdowns on hand-computed timelines: backward slowed while the exchange is busy, and the
exchange slowed while members compute."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from srift.domain import ModelProfile
from srift.domain.profile_document import read_profile
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.sim import simulate
from srift.sim.overlap import CommWarp

from .kit import P3_2XL, flat, member, profile

# fw 0.1, bw 0.2 (backward from 0.1 to 0.3); two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s.
# Layer 1: 0.1 GB ready at a quarter of backward (0.15), reduced over [0.15, 0.25].
# Layer 2: 0.25 GB ready at the end of backward (0.3), reduced over [0.3, 0.55]: iteration 0.55.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def _measured(slowdown: float, spread: float = 0.0) -> ModelProfile:
    return replace(
        profile(layers=LAYERS),
        extra={"overlap_slowdown": slowdown, "overlap_slowdown_spread": spread},
    )


def test_backward_slowed_while_the_exchange_is_busy_by_hand() -> None:
    plain = simulate([member(P3_2XL, 2, 64, profile(layers=LAYERS))], bandwidth=flat(8.0), config=PER_LAYER)
    assert plain.iteration_s == pytest.approx(0.55, abs=1e-9)
    # Slowdown 1.5: the exchange is busy 0.1 s of backward before layer 2 is ready ([0.15, 0.25]), so
    # backward ends 0.5·0.1 = 0.05 s later (0.35); layer 1 is ready before anything is busy (0.15, as
    # before); layer 2 is reduced over [0.35, 0.60].
    est = simulate([member(P3_2XL, 2, 64, _measured(1.5))], bandwidth=flat(8.0), config=PER_LAYER)
    b = est.breakdown
    assert est.iteration_s == pytest.approx(0.60, abs=1e-9)
    assert b.compute_s == pytest.approx(0.35, abs=1e-9)
    assert b.straggler_wait_s == pytest.approx(0.0, abs=1e-9)
    assert b.exposed_network_s == pytest.approx(0.25, abs=1e-9)
    assert b.compute_s + b.straggler_wait_s + b.exposed_network_s + b.exposed_intra_s == pytest.approx(
        est.iteration_s
    )


def test_one_vm_has_no_exchange_to_overlap() -> None:
    est = simulate([member(P3_2XL, 1, 64, _measured(1.5))], bandwidth=flat(8.0), config=PER_LAYER)
    assert est.iteration_s == pytest.approx(0.3, abs=1e-12)


def test_overlap_spread_is_a_band_term() -> None:
    # One spread σ larger slowdown 1.5·e^σ: T' = 0.55 + (1.5·e^σ − 1)·0.1 and the term is ln(T' / 0.60).
    sigma = 0.1
    est = simulate([member(P3_2XL, 2, 64, _measured(1.5, sigma))], bandwidth=flat(8.0), config=PER_LAYER)
    assert est.band is not None
    (term,) = [t for t in est.band.terms if t.source == "overlap"]
    assert term.spread == sigma
    assert term.sigma == pytest.approx(math.log((0.55 + (1.5 * math.exp(sigma) - 1) * 0.1) / 0.60))
    plain = simulate([member(P3_2XL, 2, 64, _measured(1.5))], bandwidth=flat(8.0), config=PER_LAYER)
    assert plain.band is not None and not [t for t in plain.band.terms if t.source == "overlap"]


@pytest.mark.parametrize(("key", "value"), [("overlap_slowdown", 0.8), ("overlap_slowdown_spread", -0.1)])
def test_a_profile_with_an_impossible_overlap_measurement_is_refused(key: str, value: float) -> None:
    doc = _measured(1.2, 0.05).to_dict()
    doc["extra"][key] = value
    with pytest.raises(InvalidInput) as err:
        read_profile(doc)
    assert err.value.field == f"extra.{key}"
    assert read_profile(_measured(1.2, 0.05).to_dict()).overlap_slowdown() == (1.2, 0.05)


# -- the exchange slowed while members compute (srift.sim.overlap) ------------------------------------------


def _comm_measured(comm_slowdown: float, compute_slowdown: float = 1.0) -> ModelProfile:
    return replace(
        profile(layers=LAYERS),
        extra={"overlap_slowdown": compute_slowdown, "comm_overlap_slowdown": comm_slowdown},
    )


def test_exchange_slowed_while_compute_runs_by_hand() -> None:
    # Slowdown 2 until backward ends (0.3): layer 1 (0.1 s of work from 0.15) does 0.075 s of it by 0.3;
    # layer 2 arrives at 0.3 and the two share the link, so the 0.275 s of work left all runs at full rate
    # after 0.3 (the stage is work-conserving): the exchange ends at 0.575, all of it after compute exposed.
    est = simulate([member(P3_2XL, 2, 64, _comm_measured(2.0))], bandwidth=flat(8.0), config=PER_LAYER)
    b = est.breakdown
    assert est.iteration_s == pytest.approx(0.575, abs=1e-9)
    assert b.compute_s == pytest.approx(0.3, abs=1e-9)
    assert b.exposed_network_s == pytest.approx(0.275, abs=1e-9)
    assert b.communication_s == pytest.approx(0.575 - 0.15, abs=1e-9)


def test_compute_stretched_first_then_the_exchange_slowed_by_hand() -> None:
    # Compute ×1.5 while busy: backward ends at 0.35 (first test above). Then the exchange ×2 until 0.35:
    # layer 1's 0.1 s of work over [0.15, 0.35], layer 2 (ready 0.35) over [0.35, 0.60].
    est = simulate([member(P3_2XL, 2, 64, _comm_measured(2.0, 1.5))], bandwidth=flat(8.0), config=PER_LAYER)
    assert est.iteration_s == pytest.approx(0.60, abs=1e-9)
    assert est.breakdown.compute_s == pytest.approx(0.35, abs=1e-9)
    assert est.breakdown.exposed_network_s == pytest.approx(0.25, abs=1e-9)


def test_an_exchange_after_compute_is_not_slowed() -> None:
    # Everything ready at the end of backward: nothing overlaps compute, so the slowdown changes nothing.
    late = replace(profile(layers=((350_000_000, 1.0),)), extra={"comm_overlap_slowdown": 3.0})
    plain = replace(late, extra={})
    got = simulate([member(P3_2XL, 2, 64, late)], bandwidth=flat(8.0), config=PER_LAYER).iteration_s
    assert got == pytest.approx(
        simulate([member(P3_2XL, 2, 64, plain)], bandwidth=flat(8.0), config=PER_LAYER).iteration_s
    )
    assert got == pytest.approx(0.3 + 0.35, abs=1e-9)


def test_the_warp_takes_the_slowest_member_still_computing() -> None:
    # Members end at 0.2 (×2) and 0.4 (×1.5): τ advances 0.1 by 0.2, then 0.2/1.5 more by 0.4, then 1:1.
    warp = CommWarp.of([0.2, 0.4], [2.0, 1.5])
    assert warp is not None
    t = np.asarray([-0.1, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    tau = np.asarray([-0.1, 0.0, 0.05, 0.1, 0.1 + 0.1 / 1.5, 0.1 + 0.2 / 1.5, 0.2 + 0.2 / 1.5])
    assert warp.to_work(t) == pytest.approx(tau, abs=1e-12)
    assert warp.to_wall(tau) == pytest.approx(t, abs=1e-12)
    assert CommWarp.of([0.2, 0.4], [1.0, 1.0]) is None


def test_a_profile_with_an_impossible_comm_slowdown_is_refused() -> None:
    doc = _comm_measured(2.0).to_dict()
    assert read_profile(doc).comm_overlap_slowdown() == 2.0
    doc["extra"]["comm_overlap_slowdown"] = 0.5
    with pytest.raises(InvalidInput) as err:
        read_profile(doc)
    assert err.value.field == "extra.comm_overlap_slowdown"
    assert profile(layers=LAYERS).comm_overlap_slowdown() == 1.0
