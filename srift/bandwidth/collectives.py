"""Bus bandwidth of any collective from any bandwidth model: its own answer, or allreduce's as a stand-in.

Sharded data parallelism all-gathers parameters and reduce-scatters gradients. A model that answers for
those (`predict_collective`: the α-β prior, the learned model for the types it leaves to the prior) is
asked directly. Otherwise the model's allreduce bus bandwidth at the same buffer size stands in, and the
estimate's source says so: with nccl-tests' bus-bandwidth definitions (busbw = algbw·2(n−1)/n for
allreduce, algbw·(n−1)/n for all-gather and reduce-scatter; NVIDIA/nccl-tests doc/PERFORMANCE.md) a ring
allreduce is a reduce-scatter followed by an all-gather of the same buffer, each moving half its bytes in
half its steps, so the α-β ring model gives all three the same bus bandwidth at a given size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from srift.bandwidth.records import ProbeRecord
from srift.domain import BandwidthEstimate, BusBandwidthModel
from srift.domain.bandwidth import STAND_IN, BusbwQuery, Collective, WrappedBandwidth

__all__ = ["STAND_IN", "MeasuredCollectives", "collective_time_s"]


def collective_time_s(
    *, collective: Collective, buffer_bytes: float, world_size: int, busbw_gbps: float
) -> float:
    """Seconds of one `collective` on a buffer of `buffer_bytes` (the whole buffer) at `busbw_gbps`:
    algbw = busbw / factor, t = S / algbw (0 for one rank or an empty buffer)."""
    factor = collective.bus_factor(world_size)
    if factor <= 0 or buffer_bytes <= 0:
        return 0.0
    return buffer_bytes * 8 * factor / (busbw_gbps * 1e9)


def _table(sizes: dict[int, list[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log2 sizes, median bus bandwidths and their spread (the samples' standard deviation of log busbw:
    what a prediction band takes as this answer's error) at each measured size."""
    order = sorted(sizes)
    xs = np.log2(np.asarray(order, dtype=float))
    ys = np.asarray([float(np.median(sizes[s])) for s in order])
    cvs = np.asarray([float(np.std(np.log(sizes[s]))) if len(sizes[s]) > 1 else 0.0 for s in order])
    return xs, ys, cvs


class MeasuredCollectives(WrappedBandwidth):
    """A bandwidth model that answers all-gather and reduce-scatter from measured probe samples.

    For an (instance type, world size, nodes) the samples cover, a collective's bus bandwidth at a size is
    the median of its samples at the measured sizes around it, interpolated in log size between the two
    nearest (held beyond the ends), with the samples' spread as its error (`residual_cvs`): collectives
    are library code (gloo's all-gather and reduce-scatter are not NCCL's ring, and their bus bandwidth
    need not reach allreduce's), so what was measured stands where it exists. Elsewhere, and for
    allreduce, the wrapped model answers (`BusbwQuery.ask_collective`).
    """

    def __init__(self, model: BusBandwidthModel, records: Sequence[ProbeRecord]) -> None:
        super().__init__(model)
        self.source = getattr(model, "source", "bandwidth model")
        grouped: dict[tuple[str, str, int, int], dict[int, list[float]]] = {}
        for r in records:
            if r.collective == Collective.ALLREDUCE.value:
                continue
            key = (r.collective, r.instance_type, r.world_size, r.nodes)
            grouped.setdefault(key, {}).setdefault(r.buffer_bytes, []).append(r.busbw_gbps)
        self.tables = {key: _table(sizes) for key, sizes in grouped.items()}

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        instance = query.instance
        table = self.tables.get((collective.value, instance.name, query.world_size, query.nodes))
        if table is None:
            return super().answer_collective(collective, query)
        xs, ys, cvs = table
        sizes = np.log2(np.maximum(np.asarray(query.buffer_bytes, dtype=float), 1.0))
        spreads = tuple(float(v) for v in np.interp(sizes, xs, cvs))
        return BandwidthEstimate(
            busbw_gbps=tuple(float(v) for v in np.interp(sizes, xs, ys)),
            source=f"measured:{collective.value}@{instance.name}×{query.world_size}",
            residual_cv=max(spreads, default=0.0),
            residual_cvs=spreads,
        )
