"""The FSDP timeline by hand (all-gather, prefetch, reduce-scatter overlap), and sharded fleets end to end."""

from __future__ import annotations

from dataclasses import replace

import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import FleetMember
from srift.domain.sharding import Segment, Setup, Strategy
from srift.sim import simulate
from srift.sim.sharded import (
    OVERHEAD_KEY,
    MemberCompute,
    UnitComm,
    merged,
    simulate_sharded,
    strategy_overhead_s,
    stretched_end,
    timeline,
)

from . import kit

SEGMENTS = (Segment(2, 0.5), Segment(1, 0.5))
"""Two block units (1 and 2) and an empty root (0); backward runs unit 2 then unit 1."""
MEMBER = MemberCompute(forward_s=2.0, backward_s=4.0, update_s=0.5)
COMM = (UnitComm(0.0, 0.0), UnitComm(1.0, 1.5), UnitComm(1.0, 1.5))


def test_two_units_full_shard_by_hand() -> None:
    """Forward: AG1 0–1, F1 1–2 while the prefetched AG2 runs 1–2, F2 2–3. Backward: AG2 again 3–4 (not
    prefetched: forward had just freed it), B2 4–6 while the prefetched AG1 runs 4–5; RS2 6–7.5 under
    B1 6–8; RS1 8–9.5 exposed; the step on the shard 9.5–10."""
    log: list[tuple[float, str, int]] = []
    found = timeline(SEGMENTS, [MEMBER], COMM, reshard_after_forward=True, log=log)
    assert found.iteration_s == pytest.approx(10.0)
    assert found.backward_end_s == pytest.approx(8.0)
    events = [(t, what, u) for t, what, u in log if what.endswith(("start", "done")) and u >= 0]
    assert events == [
        (0.0, "ag_start", 1),
        (1.0, "ag_done", 1),
        (1.0, "ag_start", 2),
        (1.0, "fw_start", 1),
        (2.0, "ag_done", 2),
        (2.0, "fw_start", 2),
        (3.0, "ag_bw_start", 2),
        (4.0, "ag_bw_done", 2),
        (4.0, "ag_bw_start", 1),
        (4.0, "bw_start", 2),
        (5.0, "ag_bw_done", 1),
        (6.0, "rs_start", 2),
        (6.0, "bw_start", 1),
        (7.5, "rs_done", 2),
        (8.0, "rs_start", 1),
        (9.5, "rs_done", 1),
    ]
    assert found.busy["shard"] == [(0.0, 1.0), (1.0, 2.0), (3.0, 4.0), (4.0, 5.0), (6.0, 7.5), (8.0, 9.5)]


def test_zero2_gathers_once_per_iteration() -> None:
    """No all-gather before backward: B2 3–5, RS2 5–6.5 under B1 5–7, RS1 7–8.5, step 8.5–9."""
    found = timeline(SEGMENTS, [MEMBER], COMM, reshard_after_forward=False)
    assert found.iteration_s == pytest.approx(9.0)
    assert found.busy["shard"] == [(0.0, 1.0), (1.0, 2.0), (5.0, 6.5), (7.0, 8.5)]


def test_checkpointing_recomputes_each_blocks_forward_inside_its_backward() -> None:
    """Each block's forward (1 s) runs again: B2 4–7, RS2 7–8.5, B1 7–10, RS1 10–11.5, step to 12."""
    member = MemberCompute(forward_s=2.0, backward_s=4.0, recompute_s=2.0, update_s=0.5)
    found = timeline(SEGMENTS, [member], COMM, reshard_after_forward=True, recompute_units=frozenset({1, 2}))
    assert found.iteration_s == pytest.approx(12.0)


def test_hybrid_allreduces_each_shard_after_its_reduce_scatter() -> None:
    """As full sharding, with a 1 s allreduce after each reduce-scatter on the replicate group's stream:
    AR2 7.5–8.5, AR1 9.5–10.5, step 10.5–11."""
    comm = (UnitComm(0.0, 0.0), UnitComm(1.0, 1.5, 1.0), UnitComm(1.0, 1.5, 1.0))
    found = timeline(SEGMENTS, [MEMBER], comm, reshard_after_forward=True)
    assert found.iteration_s == pytest.approx(11.0)
    assert found.busy["replicate"] == [(7.5, 8.5), (9.5, 10.5)]


def test_a_slower_member_holds_every_collective() -> None:
    """Collectives start when the last rank issued them: a member twice as slow sets the pace."""
    slow = MemberCompute(forward_s=4.0, backward_s=8.0, update_s=0.5)
    both = timeline(SEGMENTS, [MEMBER, slow], COMM, reshard_after_forward=True)
    alone = timeline(SEGMENTS, [slow], COMM, reshard_after_forward=True)
    assert both.iteration_s == pytest.approx(alone.iteration_s)


def _fleet(profile, instance, count: int, batch: int) -> list[FleetMember]:
    return [FleetMember(instance=instance, count=count, batch=batch, profile=profile)]


@pytest.fixture(scope="module")
def gpt2():
    from srift.refmodels.shipped import reference_profiles

    profile = next(
        p
        for p in reference_profiles()
        if p.model == "gpt2-small" and p.accelerator == "A10G" and p.precision.value == "bf16"
    )
    # g5.12xlarge: 4 A10G on PCIe, 40 Gbit/s (AWS's instance page).
    g5 = kit.instance("g5.12xlarge", gpus=4, gpu_model="A10G", network_gbps=40.0, interconnect_gbps=64.0)
    return profile, g5


def test_sharded_strategies_on_a_real_fleet(gpt2) -> None:
    """gpt2-small (bf16) on two g5.12xlarge (4 A10G each): every sharded strategy costs at least DDP's
    compute; full sharding gathers again in backward, so it is no faster than ZeRO-2; ZeRO-1 adds its
    parameter all-gather to DDP's iteration."""
    profile, g5 = gpt2
    fleet = _fleet(profile, g5, 2, 16)
    model = AlphaBetaPrior()
    ddp = simulate(fleet, bandwidth=model, band=False)
    got = {
        s: simulate_sharded(fleet, bandwidth=model, setup=Setup(s), band=False)
        for s in (Strategy.ZERO1, Strategy.ZERO2, Strategy.FULL_SHARD, Strategy.HYBRID)
    }
    compute = profile.forward.time_s(4) + profile.backward.time_s(4)
    for estimate in got.values():
        assert estimate.iteration_s >= compute
        b = estimate.breakdown
        total = b.compute_s + b.straggler_wait_s + b.exposed_intra_s + b.exposed_network_s
        assert total == pytest.approx(estimate.iteration_s, rel=1e-9)
    assert got[Strategy.FULL_SHARD].iteration_s >= got[Strategy.ZERO2].iteration_s
    assert got[Strategy.ZERO1].iteration_s > ddp.iteration_s - ddp.breakdown.update_s
    ckpt = simulate_sharded(
        fleet, bandwidth=model, setup=Setup(Strategy.FULL_SHARD, checkpointing=True), band=False
    )
    # Checkpointing recomputes the forward in backward; on this fleet the collectives outlast compute
    # several times, so the recompute may hide under them, never shorten the iteration.
    assert ckpt.breakdown.backward_s > got[Strategy.FULL_SHARD].breakdown.backward_s
    assert ckpt.iteration_s >= got[Strategy.FULL_SHARD].iteration_s
    assert any("all_gather" in s for s in got[Strategy.FULL_SHARD].sources)


def test_work_runs_slower_inside_the_other_sides_spans() -> None:
    """3 s of work from t = 0, twice as slow inside [1, 2] and [4, 10]: 1 s done by t = 1, 0.5 s by 2,
    1 s by 3 ... done at 3.5; starting inside a span it first crawls; with no slowdown, start + work."""
    spans = merged([(4.0, 10.0), (1.0, 2.0), (5.0, 6.0)])
    assert spans == [(1.0, 2.0), (4.0, 10.0)]
    assert stretched_end(0.0, 3.0, spans, 2.0) == pytest.approx(3.5)
    assert stretched_end(5.0, 1.0, spans, 2.0) == pytest.approx(7.0)
    assert stretched_end(9.0, 1.0, spans, 2.0) == pytest.approx(10.5)
    assert stretched_end(0.0, 3.0, spans, 1.0) == 3.0


def test_measured_overlap_slows_the_timeline_and_none_leaves_it_as_it_was() -> None:
    plain = timeline(SEGMENTS, [MEMBER], COMM, reshard_after_forward=True)
    same = timeline(
        SEGMENTS, [MEMBER], COMM, reshard_after_forward=True, comm_slowdown=1.0, compute_slowdowns=[1.0]
    )
    slowed = timeline(
        SEGMENTS, [MEMBER], COMM, reshard_after_forward=True, comm_slowdown=2.0, compute_slowdowns=[1.2]
    )
    assert same.iteration_s == plain.iteration_s == pytest.approx(10.0)
    # every collective and compute stretch is at least as long; compute alone (6.5 s) stays a floor
    assert 10.0 < slowed.iteration_s < 10.0 + (1 + 1 + 1 + 1 + 1.5 + 1.5) + 0.2 * 6.0


def test_a_strategys_own_cpu_work_runs_within_the_units_compute() -> None:
    """2 s of overhead, half over the forward, half over the backward, by share: F1 1–2.5 (AG2 1–2), F2
    2.5–4; AG2 again 4–5, B2 5–7.5 (AG1 5–6), RS2 7.5–9 under B1 7.5–10, RS1 10–11.5, step to 12."""
    member = MemberCompute(forward_s=2.0, backward_s=4.0, update_s=0.5, overhead_s=2.0)
    found = timeline(SEGMENTS, [member], COMM, reshard_after_forward=True)
    assert found.iteration_s == pytest.approx(12.0)
    assert found.backward_end_s == pytest.approx(10.0)
    profile = kit.profile()
    assert strategy_overhead_s(profile, Strategy.ZERO2) == 0.0
    measured = replace(profile, extra={OVERHEAD_KEY: {"zero2": 0.25, "full_shard": -1}})
    assert strategy_overhead_s(measured, Strategy.ZERO2) == 0.25
    assert strategy_overhead_s(measured, Strategy.FULL_SHARD) == 0.0


@pytest.mark.parametrize("straggler_iters", [0, -3])
def test_no_straggler_iterations_is_refused_with_the_field(gpt2, straggler_iters: int) -> None:
    """Found 2026-12-06: 0 straggler iterations was a ZeroDivisionError (IndexError before) in the sharded
    simulator; the served one refuses it by field, and so does this one now."""
    from srift.errors import InvalidInput

    profile, g5 = gpt2
    with pytest.raises(InvalidInput, match="straggler_iters") as caught:
        simulate_sharded(
            _fleet(profile, g5, 2, 8),
            bandwidth=AlphaBetaPrior(),
            setup=Setup(Strategy.FULL_SHARD),
            straggler_iters=straggler_iters,
            band=False,
        )
    assert caught.value.field == "straggler_iters" and "To fix:" in str(caught.value)
