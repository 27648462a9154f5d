"""α-β prior for allreduce bus bandwidth, from catalog facts, for instance types no learned model covers.

Model (NCCL-style: the faster of a ring and a tree/low-latency schedule, n ranks on N nodes of g ranks):

    t_ring(s) = α0 + 2(n−1)·α + c(s)            t_tree(s) = α0 + 2⌈log2 n⌉·α + c(s)/κ
    c(s)      = k · s·2(n−1)/n / B,   B = η · B_peak
    busbw     = s·2(n−1)/n / min(t_ring, t_tree)              (bits: ×8, Gbit/s)

with k concurrent transfers (`async_count`) sharing the links. B_peak is the bus-bandwidth ceiling of the
slowest level: across nodes, the node's rated network (`network_gbps`) scaled by the hierarchical-ring factor
[(n−1)/n] / [(N−1)/N] (each node's NIC carries 2(N−1)/N of the buffer, while busbw is normalised by
n ranks); inside a node, the per-GPU `interconnect_gbps`. The smaller applies.

Calibration (`calibrate`, reproduced by tests/bandwidth/test_prior.py) against the public nccl-tests run
of 2 × p5.48xlarge (16 × H100, 3200 Gbit/s EFA, NVSwitch; aws-samples/awsome-distributed-training,
micro-benchmarks/nccl-tests/README.md; out-of-place busbw 8 B .. 16 GiB), least squares on log busbw:
α0 = 15.3 µs, α = 8.7 µs per hop, η = 0.612, κ = 0.204. On that run the prior is within 10 % of every size
≥ 64 MiB (3 % mean error ≥ 1 GiB; 14 % mean over all 32 sizes).

Non-EFA (TCP sockets) networks: η = 0.81, the lowest ratio of measured to rated bandwidth in Srift Table 2
(g4dn.4xlarge: 20.3 of 25 Gbit/s over 24 h; p3.8xl and g3.8xl exceed their rating), and α = 150 µs per hop,
half of the 0.3 ms VM-to-VM latency measured by Erben et al. (seed 002, §3). Intra-node links use the EFA
calibration's α and η (no public single-node figure in the reference set). Every estimate says
"prior:alpha-beta": it is a prior, not a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srift.domain import BandwidthEstimate, InstanceType
from srift.errors import InvalidInput

SOURCE = "prior:alpha-beta"


@dataclass(frozen=True, slots=True)
class LinkParams:
    """Latency and efficiency of one kind of link: α0 and α in seconds, η and κ unitless."""

    base_s: float
    hop_s: float
    efficiency: float
    tree_fraction: float


# Fitted by `calibrate` on the p5.48xlarge reference run (see the module docstring).
EFA = LinkParams(base_s=15.3e-6, hop_s=8.7e-6, efficiency=0.612, tree_fraction=0.204)
TCP = LinkParams(base_s=15.3e-6, hop_s=150e-6, efficiency=0.81, tree_fraction=0.204)
INTRA = EFA
# Spread of the calibration's relative errors (all sizes), used by Monte Carlo callers.
RESIDUAL_CV = 0.19


def peak_busbw_gbps(*, instance: InstanceType, world_size: int, nodes: int) -> float:
    """The bus-bandwidth ceiling (Gbit/s) of the slowest level before efficiency losses."""
    per_node = max(1, world_size // max(nodes, 1))
    limits: list[float] = []
    if nodes >= 2:
        scale = ((world_size - 1) / world_size) / ((nodes - 1) / nodes)
        limits.append(instance.network_gbps * scale)
    if per_node >= 2:
        limits.append(instance.interconnect_gbps if instance.interconnect_gbps > 0 else instance.network_gbps)
    return min(limits) if limits else max(instance.network_gbps, instance.interconnect_gbps, 1e-3)


def predict_busbw_gbps(
    sizes: np.ndarray, *, world_size: int, peak_gbps: float, link: LinkParams, async_count: int = 1
) -> np.ndarray:
    """Vectorised α-β bus bandwidth (Gbit/s) for buffer sizes in bytes."""
    n = world_size
    if n < 2:
        return np.full(sizes.shape, peak_gbps * link.efficiency)
    bus_bits = sizes.astype(np.float64) * 8 * 2 * (n - 1) / n
    c = async_count * bus_bits / (link.efficiency * peak_gbps * 1e9)
    ring = link.base_s + 2 * (n - 1) * link.hop_s + c
    tree = link.base_s + 2 * math.ceil(math.log2(n)) * link.hop_s + c / link.tree_fraction
    return np.asarray(bus_bits / np.minimum(ring, tree) / 1e9)


class AlphaBetaPrior:
    """BusBandwidthModel from catalog facts only (network Gbit/s, interconnect, GPUs per node)."""

    source = SOURCE

    def __init__(self, *, efa: LinkParams = EFA, tcp: LinkParams = TCP, intra: LinkParams = INTRA) -> None:
        self.efa = efa
        self.tcp = tcp
        self.intra = intra

    def link_for(self, instance: InstanceType, *, nodes: int) -> LinkParams:
        if nodes < 2:
            return self.intra
        return self.efa if instance.efa else self.tcp

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate:
        """Predicted busbw (Gbit/s) per size; world_size 1 gets the link's rate (nothing moves anyway)."""
        sizes = check_request(
            world_size=world_size, nodes=nodes, buffer_bytes=buffer_bytes, async_count=async_count
        )
        peak = peak_busbw_gbps(instance=instance, world_size=world_size, nodes=nodes)
        busbw = predict_busbw_gbps(
            sizes,
            world_size=world_size,
            peak_gbps=peak,
            link=self.link_for(instance, nodes=nodes),
            async_count=async_count,
        )
        return BandwidthEstimate(
            busbw_gbps=tuple(float(b) for b in busbw), source=SOURCE, residual_cv=RESIDUAL_CV
        )


def check_request(
    *, world_size: int, nodes: int, buffer_bytes: Sequence[int], async_count: int
) -> np.ndarray:
    """Validate a predict() request; return the sizes as an array."""
    if world_size < 1:
        raise InvalidInput(
            f"world size must be ≥ 1, got {world_size}", hint="count the ranks", field="world_size"
        )
    if nodes < 1 or nodes > world_size:
        raise InvalidInput(
            f"nodes must be between 1 and the world size {world_size}, got {nodes}",
            hint="give the number of hosts",
            field="nodes",
        )
    if async_count < 1:
        raise InvalidInput(
            f"async_count must be ≥ 1, got {async_count}", hint="use 1 or more", field="async_count"
        )
    sizes = np.asarray(list(buffer_bytes), dtype=np.float64)
    if sizes.size and (not np.all(np.isfinite(sizes)) or sizes.min() <= 0):
        raise InvalidInput("buffer sizes must be positive bytes", hint="give sizes ≥ 1", field="buffer_bytes")
    return sizes


@dataclass(frozen=True, slots=True)
class Calibration:
    """Result of fitting one LinkParams to measured (size, busbw) points."""

    link: LinkParams
    mape_all: float
    mape_large: float
    max_error_large: float


def calibrate(
    sizes_bytes: Sequence[int],
    busbw_gbps: Sequence[float],
    *,
    world_size: int,
    peak_gbps: float,
    large_bytes: int = 64 << 20,
) -> Calibration:
    """Fit α0, α, η, κ to measured bus bandwidths (least squares on log busbw)."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    sizes = np.asarray(sizes_bytes, dtype=np.float64)
    measured = np.asarray(busbw_gbps, dtype=np.float64)

    def link_of(p: np.ndarray) -> LinkParams:
        base, hop, eff, frac = np.exp(p)
        return LinkParams(
            base_s=float(base), hop_s=float(hop), efficiency=float(eff), tree_fraction=float(frac)
        )

    def residuals(p: np.ndarray) -> np.ndarray:
        pred = predict_busbw_gbps(sizes, world_size=world_size, peak_gbps=peak_gbps, link=link_of(p))
        return np.asarray(np.log(pred) - np.log(measured))

    start = np.log([30e-6, 5e-6, 0.6, 0.3])
    fit = least_squares(residuals, start)
    link = link_of(fit.x)
    pred = predict_busbw_gbps(sizes, world_size=world_size, peak_gbps=peak_gbps, link=link)
    err = np.abs(pred - measured) / measured
    large = sizes >= large_bytes
    return Calibration(
        link=link,
        mape_all=float(err.mean()),
        mape_large=float(err[large].mean()) if large.any() else float("nan"),
        max_error_large=float(err[large].max()) if large.any() else float("nan"),
    )
