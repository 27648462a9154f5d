"""A member under a CPU quota starts its step on the quota its wait left unused (fresh quota), by hand."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import ModelProfile
from srift.errors import InvalidInput
from srift.optimize.evaluate import SimEvaluator
from srift.sim import simulate

from .kit import P3_2XL, P3_8XL, flat, instance, member, profile, resnet_like

# fw 0.1, bw 0.2; two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s (as in test_overlap).
# Layer 1: 0.1 GB ready at a quarter of backward, layer 2: 0.25 GB at its end.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def _quota(
    prof: ModelProfile,
    cores: float,
    period_s: float,
    threads: int | None = None,
    burst_cpu_s: float | None = None,
) -> ModelProfile:
    quota: dict[str, float] = {"cores": cores, "period_s": period_s}
    if burst_cpu_s is not None:
        quota["burst_cpu_s"] = burst_cpu_s
    return replace(prof, threads=threads, extra={"cpu_quota": quota})


def test_saving_by_hand() -> None:
    prof = _quota(profile(layers=LAYERS), 0.25, 0.1)
    assert prof.cpu_share() == (0.25, 0.1)
    # (1 − q) · min(idle, period, compute)
    assert prof.fresh_quota_saving_s(idle_s=0.25, compute_s=0.3) == pytest.approx(0.075, abs=1e-15)
    assert prof.fresh_quota_saving_s(idle_s=0.04, compute_s=0.3) == pytest.approx(0.03, abs=1e-15)
    assert prof.fresh_quota_saving_s(idle_s=0.25, compute_s=0.02) == pytest.approx(0.015, abs=1e-15)
    assert prof.fresh_quota_saving_s(idle_s=0.0, compute_s=0.3) == 0.0
    assert prof.compute_floor_s(64) == pytest.approx(0.3 - 0.075, abs=1e-15)
    # two threads share the quarter core: each runs at an eighth
    two = _quota(profile(layers=LAYERS), 0.25, 0.1, threads=2)
    assert two.fresh_quota_saving_s(idle_s=1.0, compute_s=0.3) == pytest.approx(0.875 * 0.1, abs=1e-15)
    # a core per thread or more: no quota binds
    for unbound in (_quota(profile(), 1.0, 0.1), _quota(profile(), 4.0, 0.1, threads=4), profile()):
        assert unbound.cpu_share() is None
        assert unbound.fresh_quota_saving_s(idle_s=1.0, compute_s=0.3) == 0.0
        assert unbound.compute_floor_s(64) == unbound.compute_s(64)


def test_two_members_that_wait_start_on_fresh_quota_by_hand() -> None:
    # First pass (as without a quota): layer 1 ready at 0.15, reduced [0.15, 0.25]; layer 2 ready at 0.3,
    # reduced [0.3, 0.55]; iteration 0.55. Each member computes 0.3 and waits 0.25 of it, so its step saves
    # (1 − 0.25) · min(0.25, 0.1, 0.3) = 0.075: compute 0.225 (fw 0.075, bw 0.15). Second pass: layer 1
    # ready at 0.1125, reduced [0.1125, 0.2125]; layer 2 ready at 0.225, reduced [0.225, 0.475].
    plain = simulate([member(P3_2XL, 2, 64, profile(layers=LAYERS))], bandwidth=flat(8.0))
    assert plain.iteration_s == pytest.approx(0.55, abs=1e-9)
    est = simulate([member(P3_2XL, 2, 64, _quota(profile(layers=LAYERS), 0.25, 0.1))], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.475, abs=1e-9)
    assert est.breakdown.compute_s == pytest.approx(0.225, abs=1e-9)
    assert est.breakdown.forward_s == pytest.approx(0.075, abs=1e-9)


def test_a_measured_burst_is_kept_but_does_not_change_the_saving() -> None:
    # round 12's dev check: a window of burst / q predicted worse; the saving stays (1 − q)·min(idle, P)
    with_burst = _quota(profile(layers=LAYERS), 0.25, 0.1, burst_cpu_s=0.05)
    assert with_burst.extra["cpu_quota"]["burst_cpu_s"] == 0.05
    assert with_burst.fresh_quota_saving_s(idle_s=0.25, compute_s=0.3) == pytest.approx(0.075, abs=1e-15)
    plain = simulate([member(P3_2XL, 2, 64, _quota(profile(layers=LAYERS), 0.25, 0.1))], bandwidth=flat(8.0))
    burst = simulate([member(P3_2XL, 2, 64, with_burst)], bandwidth=flat(8.0))
    assert burst.iteration_s == plain.iteration_s == pytest.approx(0.475, abs=1e-9)


def test_one_vm_never_waits_so_saves_nothing() -> None:
    est = simulate([member(P3_2XL, 1, 64, _quota(profile(layers=LAYERS), 0.25, 0.1))], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.3, abs=1e-12)


def test_the_faster_member_waits_longer_but_the_slower_decides() -> None:
    # Member a computes 0.3, member b 0.15 (fw 0.05, bw 0.1); the exchange waits for a. a waits 0.25
    # (saves 0.075 as above), b waits 0.4 (saves 0.75 · 0.1 = 0.075 of its 0.15: 0.075 left). a decides:
    # the same timeline as two copies of a, 0.475.
    a = _quota(profile(layers=LAYERS), 0.25, 0.1)
    b = _quota(profile(layers=LAYERS, fw_s=0.05, bw_s=0.1), 0.25, 0.1)
    other = instance("p3.2xlarge-b", gpus=1, network_gbps=10.0)
    est = simulate([member(P3_2XL, 1, 64, a), member(other, 1, 64, b)], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.475, abs=1e-9)


def test_bounds_stay_below_the_simulator_under_a_quota() -> None:
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    checked = 0
    for cores, period_s in ((0.25, 0.01), (0.5, 0.1), (0.9, 0.5)):
        prof = _quota(resnet_like(cv=0.1), cores, period_s)
        for inst in (P3_2XL, P3_8XL):
            for count in (1, 2, 5):
                fleet = [member(inst, count, 64 * inst.gpu_count, prof)]
                pred = evaluator(fleet, iterations=10, usd_per_s=1.0)
                floor = max(m.profile.compute_floor_s(m.per_device_batch) for m in fleet)
                assert pred.iteration_s >= floor * (1 - 1e-12)
                assert pred.iteration_s >= evaluator.iteration_bound_s(fleet) * (1 - 1e-12)
                checked += 1
    assert checked == 18


@pytest.mark.parametrize(
    "bad",
    [
        {"cores": 0.0, "period_s": 0.01},
        {"cores": -1, "period_s": 0.01},
        {"cores": 0.25, "period_s": 2.0},
        {"cores": 0.25},
        {"cores": 0.25, "period_s": 0.01, "burst_s": 0.0},
        {"cores": 0.25, "period_s": 0.01, "burst_cpu_s": 0.0},
        {"cores": 0.25, "period_s": 0.01, "burst_cpu_s": -0.005},
        {"cores": 0.25, "period_s": 0.01, "burst_cpu_s": 61.0},
        {"cores": 0.25, "period_s": 0.01, "burst_cpu_s": "5 ms"},
        {"cores": True, "period_s": 0.01},
        {"cores": float("nan"), "period_s": 0.01},
        "0.25",
    ],
)
def test_a_malformed_quota_is_refused_with_its_field(bad: Any) -> None:
    doc = _quota(profile(), 0.25, 0.01, burst_cpu_s=0.005).to_dict()
    assert ModelProfile.from_dict(doc).cpu_share() == (0.25, 0.01)
    assert ModelProfile.from_dict(doc).extra["cpu_quota"]["burst_cpu_s"] == 0.005
    doc["extra"]["cpu_quota"] = bad
    with pytest.raises(InvalidInput) as err:
        ModelProfile.from_dict(doc)
    assert err.value.field == "extra.cpu_quota"
