"""simulate(): one iteration on a fleet = compute (with stragglers) + overlapped gradient exchange."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from srift.domain import Breakdown, BusBandwidthModel, FleetMember
from srift.errors import InvalidInput
from srift.sim.result import CommMode, IterationEstimate


def simulate(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int = 0,
    straggler_iters: int = 100,
    mc_samples: int = 0,
    comm: CommMode = CommMode.ALLREDUCE,
) -> IterationEstimate:
    """Predict one iteration's time on `fleet` (provisional: a first cut while the event simulation lands)."""
    if not fleet:
        raise InvalidInput(
            "the fleet is empty", hint="give at least one instance type with count ≥ 1", field="config"
        )
    rng = np.random.default_rng(seed)
    slowest = max(fleet, key=lambda m: m.profile.compute_s(m.per_device_batch))
    fw = slowest.profile.forward.time_s(slowest.per_device_batch)
    bw = slowest.profile.backward.time_s(slowest.per_device_batch)
    draws = np.concatenate(
        [
            rng.normal(
                m.profile.compute_s(m.per_device_batch),
                m.profile.straggler_cv * m.profile.compute_s(m.per_device_batch),
                size=(straggler_iters, m.count),
            )
            for m in fleet
        ],
        axis=1,
    ).clip(min=0.0)
    per_iter = draws.max(axis=1)
    compute = fw + bw
    wait = float(per_iter.mean()) - compute
    nodes = sum(m.count for m in fleet)
    world = sum(m.count * m.instance.devices for m in fleet)
    sizes = [max(1, layer.grad_bytes) for layer in slowest.profile.layers]
    est = bandwidth.predict(instance=slowest.instance, world_size=world, nodes=nodes, buffer_bytes=sizes)
    comm_s = sum(
        2 * s * 8 * (world - 1) / (world * b * 1e9) for s, b in zip(sizes, est.busbw_gbps, strict=True)
    )
    exposed = max(0.0, comm_s - bw)
    it = compute + wait + exposed
    spread = per_iter - per_iter.mean() + it
    p10, p50, p90 = (float(x) for x in np.quantile(spread, [0.1, 0.5, 0.9]))
    breakdown = Breakdown(
        forward_s=fw,
        backward_s=bw,
        compute_s=compute,
        straggler_wait_s=wait,
        exposed_intra_s=0.0,
        exposed_network_s=exposed,
        communication_s=comm_s,
        granularity=compute / comm_s if comm_s > 0 else float("inf"),
    )
    sources = (*sorted({f"{m.profile.model}@{m.profile.accelerator}" for m in fleet}), est.source)
    return IterationEstimate(it, p10, p50, p90, breakdown, sources)
