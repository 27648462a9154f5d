"""DDP gradient buckets and the optimizer step in simulate(): hand-checked against the per-layer model."""

from __future__ import annotations

import dataclasses

import pytest

from srift.domain.simulation import PER_LAYER, SimConfig
from srift.errors import InvalidInput
from srift.sim import simulate
from srift.sim.layers import bucket_groups, bucketed

from .kit import P3_2XL, flat, member, profile

MIB = 1 << 20


def test_buckets_fill_in_ready_order_first_one_small() -> None:
    prof = profile(layers=((MIB // 2, 0.1), (MIB // 2 + 8, 0.2), (10 * MIB, 0.5), (20 * MIB, 0.9), (4, 0.95)))
    groups = bucket_groups(prof, cap_bytes=25 * MIB)
    # the first bucket closes at ≥ 1 MiB, the second at ≥ 25 MiB; the last holds what is left
    assert groups == (("l0", "l1"), ("l2", "l3"), ("l4",))
    merged = bucketed(prof, groups)
    assert [(x.grad_bytes, x.ready_frac) for x in merged.layers] == [
        (MIB + 8, 0.2),
        (30 * MIB, 0.9),
        (4, 0.95),
    ]
    assert bucketed(prof, groups) is merged  # cached per profile


def test_a_bucket_waits_for_its_last_gradient() -> None:
    # fw 0.1, bw 0.2; two 400 kB layers ready at 25 % and 100 % of backward; 2 VMs at 8 Mbit/s: 0.4 s each.
    prof = profile(layers=((400_000, 0.25), (400_000, 1.0)))
    per_layer = simulate([member(P3_2XL, 2, 64, prof)], bandwidth=flat(0.008), config=PER_LAYER)
    # per layer: the first starts at 0.15; the link is busy until 0.15 + 0.8 = 0.95
    assert per_layer.iteration_s == pytest.approx(0.95, abs=1e-9)
    buckets = simulate(
        [member(P3_2XL, 2, 64, prof)], bandwidth=flat(0.008), config=SimConfig(bucket_cap_mb=25)
    )
    # both fit DDP's first bucket (< 1 MiB): reduced together once the last is ready at 0.3 → 0.3 + 0.8
    assert buckets.iteration_s == pytest.approx(1.1, abs=1e-9)
    big = profile(layers=((600_000, 0.25), (600_000, 1.0)))
    split = simulate([member(P3_2XL, 2, 64, big)], bandwidth=flat(0.008), config=SimConfig(bucket_cap_mb=25))
    # 600 kB + 600 kB passes 1 MiB only with the second layer: still one bucket, ready at 0.3, 1.2 s
    assert split.iteration_s == pytest.approx(0.3 + 1.2, abs=1e-9)


def test_mixed_fleets_share_the_first_members_buckets() -> None:
    a = profile(layers=((600_000, 0.3), (600_000, 0.6)), accelerator="V100")
    b = dataclasses.replace(
        a, layers=tuple(dataclasses.replace(x, ready_frac=x.ready_frac / 2) for x in a.layers)
    )
    est = simulate(
        [member(P3_2XL, 1, 64, a), member(P3_2XL, 1, 32, b)],
        bandwidth=flat(8.0),
        config=SimConfig(bucket_cap_mb=25),
    )
    assert est.iteration_s > 0.3
    with pytest.raises(InvalidInput) as info:
        simulate([member(P3_2XL, 2, 64, a)], bandwidth=flat(8.0), config=SimConfig(bucket_cap_mb=0.0))
    assert info.value.field == "bucket_cap_mb"


def test_the_optimizer_step_follows_the_exchange() -> None:
    prof = dataclasses.replace(profile(), update_s=0.05)
    one = simulate([member(P3_2XL, 1, 64, prof)], bandwidth=flat(8.0), config=PER_LAYER)
    assert one.iteration_s == pytest.approx(0.35, abs=1e-12)
    two = simulate([member(P3_2XL, 2, 64, prof)], bandwidth=flat(8.0), config=PER_LAYER)
    b = two.breakdown
    assert two.iteration_s == pytest.approx(1.25, abs=1e-9)  # test_two_vms_one_layer_by_hand + 0.05
    assert b.update_s == pytest.approx(0.05)
    assert b.compute_s == pytest.approx(0.35)
    total = b.compute_s + b.straggler_wait_s + b.exposed_intra_s + b.exposed_network_s
    assert total == pytest.approx(two.iteration_s, abs=1e-12)
    assert two.iteration_p90_s >= two.iteration_s - 1e-12


def test_the_optimizers_exchange_bound_holds_for_buckets() -> None:
    from srift.optimize.evaluate import SimEvaluator

    from .kit import P3_8XL, resnet_like

    evaluator = SimEvaluator(bandwidth=flat(10.0), config=SimConfig(bucket_cap_mb=25))
    for fleet in (
        [member(P3_2XL, 4, 64, resnet_like())],
        [member(P3_8XL, 2, 128, resnet_like()), member(P3_2XL, 3, 32, resnet_like())],
        [member(P3_2XL, 2, 16, profile(layers=((400_000, 0.25), (30 << 20, 0.5), (400_000, 1.0))))],
    ):
        bound = evaluator.iteration_bound_s(fleet)
        assert bound <= evaluator(fleet, iterations=1, usd_per_s=0.0).iteration_s + 1e-12


def test_the_served_default_is_ddp_buckets_and_per_layer_is_an_explicit_choice() -> None:
    from srift.domain.simulation import SERVED

    small = profile(layers=[(2_000_000, (i + 1) / 40) for i in range(40)])
    fleet = [member(P3_2XL, 4, 64, small)]
    default = simulate(fleet, bandwidth=flat(8.0))
    assert default == simulate(fleet, bandwidth=flat(8.0), config=SERVED)
    assert default == simulate(fleet, bandwidth=flat(8.0), config=SimConfig(bucket_cap_mb=25))
    assert default.iteration_s != simulate(fleet, bandwidth=flat(8.0), config=PER_LAYER).iteration_s
    assert "exchange:ddp_buckets(25 MiB, first 1 MiB)" in default.sources
