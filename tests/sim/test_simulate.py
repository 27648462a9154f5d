"""simulate(): hand-checked iterations, hierarchy (Stash's ordering), stragglers, Monte Carlo, bad input."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain.simulation import PER_LAYER
from srift.errors import InvalidInput
from srift.sim import CommMode, MemoBandwidth, simulate, to_prediction
from srift.sim.compute import max_of_normals, member_keys, straggler_rows
from srift.sim.network import CAP_PROBE_BYTES
from srift.sim.node_scaling import shipped_node_efficiency

from .kit import P3_2XL, P3_8XL, TableBandwidth, flat, instance, member, profile, resnet_like


def _adds_up(est_iteration: float, b: object) -> float:
    return b.compute_s + b.straggler_wait_s + b.exposed_intra_s + b.exposed_network_s - est_iteration


def test_one_vm_has_no_communication() -> None:
    est = simulate(
        [member(P3_2XL, 1, 64, profile(fw_s=0.1, bw_s=0.2))], bandwidth=flat(10.0), config=PER_LAYER
    )
    assert est.iteration_s == pytest.approx(0.3, abs=1e-12)
    assert est.breakdown.communication_s == 0.0
    assert math.isinf(est.breakdown.granularity)
    assert est.sources == ("profile:toy@V100",)
    assert (est.iteration_p10_s, est.iteration_p90_s) == pytest.approx((0.3, 0.3))


def test_two_vms_one_layer_by_hand() -> None:
    # fw 0.1, bw 0.2; a 1 GB layer ready at half of backward (0.2 s); ring of 2 at 8 Gbit/s:
    # 2·s·(n−1)/(n·busbw) = 8e9 bits / 8e9 = 1.0 s → done at 1.2; exposed 0.9, all network.
    est = simulate([member(P3_2XL, 2, 64, profile())], bandwidth=flat(8.0), config=PER_LAYER)
    b = est.breakdown
    assert est.iteration_s == pytest.approx(1.2, abs=1e-9)
    assert b.exposed_network_s == pytest.approx(0.9, abs=1e-9)
    assert b.exposed_intra_s == pytest.approx(0.0, abs=1e-9)
    assert b.communication_s == pytest.approx(1.0, abs=1e-9)
    assert b.granularity == pytest.approx(0.3, abs=1e-9)
    assert any("granularity 0.30 < 1" in w for w in b.warnings)
    assert _adds_up(est.iteration_s, b) == pytest.approx(0.0, abs=1e-12)


def test_layers_that_run_half_the_time_send_half_their_bytes() -> None:
    est = simulate(
        [member(P3_2XL, 2, 64, profile(layers=((1_000_000_000, 0.5, 0.5),)))],
        bandwidth=flat(8.0),
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(0.2 + 0.5, abs=1e-9)


def test_ring_factor_and_compute_bound_overlap() -> None:
    # 4 VMs: 2s(n−1)/n = 1.5e9 bytes·8 at 80 Gbit/s = 0.15 s, from 0.1 + 0.2·0.1 = 0.12: hidden by backward.
    est = simulate(
        [member(P3_2XL, 4, 64, profile(layers=((1_000_000_000, 0.1),)))],
        bandwidth=flat(80.0),
        config=PER_LAYER,
    )
    assert est.iteration_s == pytest.approx(0.3, abs=1e-9)
    assert est.breakdown.communication_s == pytest.approx(0.15, abs=1e-9)
    assert est.breakdown.exposed_network_s == 0.0


def test_asks_the_model_once_per_stage_with_sizes_rounded_up_to_powers_of_two() -> None:
    model = TableBandwidth({1: 10.0})
    prof = profile(layers=((3000, 0.2), (4096, 0.4), (5000, 0.6), (0, 0.8), (700, 0.9, 0.0)))
    simulate([member(P3_8XL, 2, 64, prof)], bandwidth=model, band=False, config=PER_LAYER)
    assert sorted(model.calls) == sorted(
        [
            ("p3.8xlarge", 4, 1, (4096, 8192, CAP_PROBE_BYTES)),
            ("p3.8xlarge", 2, 2, (4096, 8192, CAP_PROBE_BYTES)),
        ]
    )


def test_memo_bandwidth_answers_repeats_without_asking_again() -> None:
    model = TableBandwidth({1: 10.0})
    memo = MemoBandwidth(model)
    fleet = [member(P3_2XL, 3, 64, profile())]
    first = simulate(fleet, bandwidth=memo, config=PER_LAYER)
    second = simulate(fleet, bandwidth=memo, config=PER_LAYER)
    assert first == second
    assert len(model.calls) == 1
    assert memo.calls == 1


def test_stash_ordering_one_big_node_beats_the_same_gpus_over_the_network() -> None:
    """Stash (Table I, §V): 4 V100s over NVLink in one p3.8xlarge beat 4 p3.2xlarge over 10 Gbit/s, whose
    extra time is network stall; the single node's only stall is the interconnect."""
    prof = resnet_like(fw_s=0.02, bw_s=0.04)
    for model in (AlphaBetaPrior(), TableBandwidth({1: 8.0, 1 << 20: 9.0}, {1: 100.0, 1 << 20: 250.0})):
        one_node = simulate([member(P3_8XL, 1, 4 * 64, prof)], bandwidth=model, config=PER_LAYER)
        networked = simulate([member(P3_2XL, 4, 64, prof)], bandwidth=model, config=PER_LAYER)
        assert one_node.iteration_s < networked.iteration_s
        assert one_node.breakdown.exposed_network_s == 0.0
        assert networked.breakdown.exposed_network_s > 0.5 * (
            networked.iteration_s - networked.breakdown.compute_s
        )
        assert networked.breakdown.exposed_intra_s == pytest.approx(0.0, abs=1e-12)
        two_nodes = simulate([member(P3_8XL, 2, 4 * 64, prof)], bandwidth=model, config=PER_LAYER)
        assert two_nodes.iteration_s > one_node.iteration_s
        assert two_nodes.breakdown.exposed_network_s > 0.0


def test_intra_node_stall_is_reported_as_intra() -> None:
    # One p3.8xlarge with a slow interconnect: 4 GPUs, 1 GB at 8 Gbit/s intra: 2·(3/4)·8e9/8e9 = 1.5 s. The
    # exchange starts when the gradients are ready (forward 0.1 s + half the 0.2 s backward), compute divided
    # by the shipped node efficiency η of its NVLink node (srift.sim.node_scaling).
    est = simulate(
        [member(P3_8XL, 1, 256, profile())], bandwidth=TableBandwidth({1: 8.0}, {1: 8.0}), config=PER_LAYER
    )
    eta = shipped_node_efficiency().of(P3_8XL)
    assert eta < 1.0
    assert est.iteration_s == pytest.approx(0.2 / eta + 1.5, abs=1e-9)
    # It overlaps the backward's last 0.1 s / η.
    assert est.breakdown.exposed_intra_s == pytest.approx(1.5 - 0.1 / eta, abs=1e-9)
    assert est.breakdown.exposed_network_s == 0.0


def test_mixed_fleet_is_bounded_by_its_slowest_member_and_slowest_network() -> None:
    fast, slow = profile(fw_s=0.05, bw_s=0.1), profile(accelerator="T4", fw_s=0.2, bw_s=0.4)
    g4 = instance("g4dn.xlarge", gpu_model="T4", network_gbps=5.0)
    model = TableBandwidth({1: 8.0})
    mixed = simulate(
        [member(P3_2XL, 2, 64, fast), member(g4, 1, 64, slow)], bandwidth=model, config=PER_LAYER
    )
    assert mixed.breakdown.compute_s == pytest.approx(0.6)
    assert mixed.breakdown.forward_s == pytest.approx(0.2)
    alone = simulate([member(g4, 3, 64, slow)], bandwidth=model, config=PER_LAYER)
    assert mixed.iteration_s == pytest.approx(alone.iteration_s, rel=1e-12)
    assert {c[0] for c in model.calls} == {"p3.2xlarge", "g4dn.xlarge"}


def test_stragglers_wait_for_the_expected_maximum() -> None:
    # E[max of 16 standard normals] ≈ 1.7660: the wait is about 1.766 · cv · mean.
    prof = profile(fw_s=0.1, bw_s=0.2, cv=0.05)
    est = simulate(
        [member(P3_2XL, 16, 64, prof)], bandwidth=flat(1000.0), straggler_iters=4000, config=PER_LAYER
    )
    assert est.breakdown.straggler_wait_s == pytest.approx(1.766 * 0.05 * 0.3, rel=0.05)
    assert est.iteration_p10_s < est.iteration_p50_s < est.iteration_p90_s
    no_noise = simulate([member(P3_2XL, 16, 64, profile(cv=0.0))], bandwidth=flat(1000.0), config=PER_LAYER)
    assert no_noise.breakdown.straggler_wait_s == 0.0


@pytest.mark.parametrize("cv", [0.02, 0.043, 0.1])
def test_one_vm_waits_for_nobody_but_its_iterations_still_spread(cv: float) -> None:
    """One VM's mean compute is its mean, whatever its draws average (their excess is sampling error, which
    made a 1-GPU node up to 1.6 % slower than its profile); its draws still spread one iteration (the band),
    and a second VM of the type still waits for the slower of two."""
    prof = profile(fw_s=0.1, bw_s=0.2, cv=cv)
    for model in (f"model-{k}" for k in range(12)):  # each name keys other draws: some average above the mean
        one = simulate([member(P3_2XL, 1, 64, replace(prof, model=model))], bandwidth=flat(1000.0))
        assert one.breakdown.straggler_wait_s == pytest.approx(0.0, abs=1e-12)
        assert one.iteration_p10_s < one.iteration_p50_s < one.iteration_p90_s
        two = simulate([member(P3_2XL, 2, 64, replace(prof, model=model))], bandwidth=flat(1000.0))
        assert two.breakdown.straggler_wait_s > 0.3 * cv * 0.3


def test_max_of_normals_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    exact = max_of_normals(2.0, 0.1, 8, np.clip(rng.random(40_000), 1e-300, 1 - 2**-53))
    brute = (2.0 * (1 + 0.1 * rng.standard_normal((40_000, 8)))).max(axis=1)
    for q in (0.1, 0.5, 0.9, 0.99):
        assert np.quantile(exact, q) == pytest.approx(np.quantile(brute, q), rel=0.01)
    assert exact.mean() == pytest.approx(brute.mean(), rel=0.003)


def test_draws_do_not_depend_on_other_members_or_order() -> None:
    a, b = member(P3_2XL, 3, 64, profile(cv=0.1)), member(P3_8XL, 2, 64, profile(cv=0.1))
    keys_ab, keys_ba = member_keys([a, b]), member_keys([b, a])
    assert keys_ab == keys_ba[::-1]
    both = straggler_rows([0.3, 0.3], [0.1, 0.1], [3, 2], keys_ab, seed=1, iters=50)
    alone = straggler_rows([0.3], [0.1], [3], keys_ab[:1], seed=1, iters=50)
    np.testing.assert_array_equal(both[0], alone[0])
    twins = member_keys([a, a])
    assert twins[0] != twins[1]


def test_same_seed_same_answer_and_seed_matters() -> None:
    fleet = [member(P3_2XL, 8, 64, resnet_like())]
    model = AlphaBetaPrior()
    assert simulate(fleet, bandwidth=model, seed=3, config=PER_LAYER) == simulate(
        fleet, bandwidth=model, seed=3, config=PER_LAYER
    )
    assert simulate(fleet, bandwidth=model, seed=3, config=PER_LAYER) != simulate(
        fleet, bandwidth=model, seed=4, config=PER_LAYER
    )


def test_monte_carlo_widens_with_the_model_residual() -> None:
    fleet = [member(P3_2XL, 4, 64, profile(cv=0.02))]
    tight = simulate(
        fleet, bandwidth=TableBandwidth({1: 8.0}, residual_cv=0.0), mc_samples=200, config=PER_LAYER
    )
    wide = simulate(
        fleet, bandwidth=TableBandwidth({1: 8.0}, residual_cv=0.3), mc_samples=200, config=PER_LAYER
    )
    assert tight.iteration_s == wide.iteration_s
    assert wide.iteration_p10_s <= wide.iteration_p50_s <= wide.iteration_p90_s
    assert wide.iteration_p90_s - wide.iteration_p10_s > 5 * (tight.iteration_p90_s - tight.iteration_p10_s)
    again = simulate(
        fleet, bandwidth=TableBandwidth({1: 8.0}, residual_cv=0.3), mc_samples=200, config=PER_LAYER
    )
    assert again == wide


def test_to_prediction_bills_per_second() -> None:
    est = simulate([member(P3_2XL, 2, 64, profile())], bandwidth=flat(8.0), config=PER_LAYER)
    usd_per_s = 2 * 3.06 / 3600
    pred = to_prediction(est, iterations=1000, usd_per_s=usd_per_s)
    assert pred.total_time_s == pytest.approx(1200.0)
    assert pred.cost_usd == pytest.approx(1200.0 * usd_per_s)
    assert pred.breakdown == est.breakdown
    with pytest.raises(InvalidInput) as err:
        to_prediction(est, iterations=0, usd_per_s=1.0)
    assert err.value.field == "iterations"


@pytest.mark.parametrize(
    ("fleet_member", "field", "words"),
    [
        (member(P3_2XL, 0, 64, profile()), "fleet[0].count", "below 1"),
        (member(P3_2XL, 1, 0, profile()), "fleet[0].batch", "below 1"),
        (member(P3_2XL, 1, 65, profile()), "fleet[0].batch", "max_batch 64"),
        (member(P3_8XL, 1, 4 * 65, profile()), "fleet[0].batch", "65 per device"),
        (member(P3_2XL, 1, 64, profile(accelerator="T4")), "fleet[0].profile", "'T4'"),
    ],
)
def test_bad_fleets_name_the_field(fleet_member: object, field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as err:
        simulate([fleet_member], bandwidth=flat(10.0), config=PER_LAYER)  # type: ignore[list-item]
    assert err.value.field == field
    assert words in str(err.value)
    assert "To fix:" in str(err.value)


def test_bad_options_name_the_field() -> None:
    fleet = [member(P3_2XL, 1, 64, profile())]
    for kwargs, field in (
        ({"straggler_iters": 0}, "straggler_iters"),
        ({"mc_samples": -1}, "mc_samples"),
        ({"comm": CommMode.PARAMETER_SERVER, "ps_servers": 0}, "ps_servers"),
    ):
        with pytest.raises(InvalidInput) as err:
            simulate(fleet, bandwidth=flat(10.0), **kwargs, config=PER_LAYER)  # type: ignore[arg-type]
        assert err.value.field == field
    with pytest.raises(InvalidInput) as empty:
        simulate([], bandwidth=flat(10.0), config=PER_LAYER)
    assert empty.value.field == "fleet"
