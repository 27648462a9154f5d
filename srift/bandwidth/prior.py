"""α-β prior for allreduce bus bandwidth from catalog facts, the transport and public measurements.

For instance types no learned model covers. An allreduce of s bytes over n ranks on N nodes of g = n/N
ranks runs at the pace of its slowest level:

    ceiling_net   = R_node · [(n−1)/n] / [(N−1)/N]      (N ≥ 2; each node's NIC carries 2s(N−1)/N)
    ceiling_intra = R_gpu  · [(n−1)/n] / [(g−1)/g]      (g ≥ 2; each GPU's link carries 2s(g−1)/g)
    B             = min(ceilings)                        (bus bandwidth, Gbit/s)
    t_ring(s) = α0 + 2(n−1)·(α + q/B) + c(s),      c(s) = k·s·2(n−1)/n / B
    t_tree(s) = α0 + 2⌈log2 n⌉·(α + q/B) + c(s)/κ
    busbw     = s·2(n−1)/n / min(t_ring, t_tree)

(k concurrent transfers share the links; α0, α, κ and q come from the slowest level's link: the network
when N ≥ 2, else the intra-node link. q/B is the pipeline's fill: NCCL moves a buffer in fixed steps, and
a hop cannot forward before its first step arrived. Fitted on p4de, q came out at 0.54 MB, next to NCCL's
512 KiB step, NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8; its fill is why slower links need larger buffers.)

Node rate R_node by transport (`srift.domain.network.NetworkSpec`):

- EFA (aws-ofi-nccl): η_EFA × the rated network.
- TCP sockets (plain PyTorch DDP over NCCL or gloo): min(η_NIC × rated network, η_flow × flows ×
  per-flow limit). AWS limits one flow (a 5-tuple) to 5 Gbit/s between instances outside a cluster
  placement group and 10 Gbit/s inside one (`FLOW_LIMIT_GBPS`). NCCL's socket transport opens
  NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS sockets per peer connection: 8 × 2 = 16 when it reads
  the AWS ENA's PCI vendor id from /sys/class/net/<dev>/device/vendor, else none beyond the connection's
  own socket (1 flow) — which is what it gets in a container with its own network namespace (a veth has
  no PCI device) and wherever the request does not say (`NetworkSpec.ena_visible` None): the deadline-safe
  end. gloo keeps one TCP connection per peer pair.
  The fast end (`NodeRate.high_gbps`): NCCL duplicates its ring channels, so at least 2 connections per
  peer carry data, each with the ENA-detected 16 sockets when the ENA visibility is not known. Estimates
  carry it as `upside_cvs` (the band's fast side) and answers show both ends.
- a measured rate (request `measured_gbps`, or a probe job's samples) replaces R_node as it is.

GPU rate R_gpu: η_link × the per-GPU interconnect; NVSwitch types get their own link
(fitted on a single-node p5 run). GPUs on PCIe share the host with the
socket transport's staging copies: `shares_host_pcie` tells the simulator to add the intra-node and network
times instead of overlapping them (no new constant).

Calibration (`calibrate`; the data are in `srift/bandwidth/data/public_allreduce.json`, read through the
measurement registry, srift/data/measurements.yaml, which lists each run's source and use; the figures and
the out-of-sample errors in docs/BENCHMARKS.md, `benchmarks/public_network.py`):

- EFA link (α0, α, η_EFA, κ): least squares on log busbw of the 2 × p4de.24xlarge nccl-tests run
  (aws-samples/awsome-distributed-training@39c17d60, micro-benchmarks/nccl-tests/README.md).
- NVSwitch link (α0, α, η_NVS, κ): the single-node p5.48xlarge run of the same repository's AWS Batch
  example (@0fbac547, micro-benchmarks/nccl-tests/aws-batch/README.md; `mpirun -np 8 -N 8`).
- Not fitted on, only checked: the 2 × p5.48xlarge run (the shared reference run) and every row of the
  public AWS gloo/NCCL table (BinhangYuan/tc_cluster_setting@21a012d4, results/allreduce.md).

TCP constants are public facts, not fits: η_NIC = 0.81 (Srift Table 2: g4dn.4xlarge measured 20.3 of its
rated 25 Gbit/s over 24 h, the lowest ratio of the table; p3.8xlarge and g3.8xlarge exceeded their 10),
η_flow = 0.99 (TCP/IPv4 with timestamps carries 8949 payload bytes per 9001-byte jumbo frame, AWS's VPC
MTU, plus 38 bytes of Ethernet framing: 8949 / 9039), α = 150 µs per hop (half the 0.3 ms VM-to-VM
round trip measured by Erben et al., seed 002, §3), and the EFA fit's α0 and κ.

Band. Estimates carry `residual_cvs`: per requested size, the spread of the prior's out-of-sample errors in
its size class (below / at or above 1 MiB). EFA: the RMS of log(pred/measured) on the 2 × p5 run
(never fitted on). TCP: for ≥ 1 MiB, the spread of measured/rated across Srift Table 2's three
types (how far a catalog rating misleads out of sample) combined with its temporal spread; below 1 MiB
no public TCP run exists, so the EFA small-size spread is used. When the rate left a public default open
(NCCL's socket count on AWS, its ring channels), `upside_cvs` widen the fast side only: per size, the spread
whose p90 rate 1 + Z90·cv reaches the fast end's own p90 (`upside_cvs()`). Prediction bands (srift.sim.band)
guard limits on the slow side and use `residual_cvs` only; answers show the fast end in `network.rates`.
Every estimate says "prior:alpha-beta".

All-gather and reduce-scatter (`predict_collective`, for sharded data parallelism). Bus bandwidth as
nccl-tests defines it for each (busbw = algbw·(n−1)/n; doc/PERFORMANCE.md) reaches the same link ceiling
B as allreduce's, so the ceilings, efficiencies and link parameters above are shared. NCCL runs both as a
ring (its tree algorithm is allreduce's only; NVLS and PAT, newer NCCL's other choices, are not modelled),
in n−1 steps where allreduce's ring takes 2(n−1):

    t_ring(s) = α0 + (n−1)·(α + q/B) + k·s·(n−1)/n / B,      busbw = s·(n−1)/n / t_ring

(s the whole gathered or reduced buffer). Nothing here was fitted on all-gather or reduce-scatter runs: no
public AWS run of `all_gather_perf` / `reduce_scatter_perf` with its topology was found; imported logs of
them (`srift probe import`) are the way to measured figures.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from srift.domain import BandwidthEstimate, InstanceType, Interconnect
from srift.domain.bandwidth import AnswersBusbw, BusbwQuery, Collective
from srift.domain.network import DEFAULT_NETWORK, Library, NetworkSpec, Transport
from srift.errors import ConfigurationError, InvalidInput
from srift.measurements import Registry, Use, shipped_registry

SOURCE = "prior:alpha-beta"


@dataclass(frozen=True, slots=True)
class LinkParams:
    """Latency and efficiency of one kind of link: α0 and α in seconds, η and κ unitless, and the bytes one
    pipeline step of a hop carries before the next hop can start (`step_bytes`, q)."""

    base_s: float
    hop_s: float
    efficiency: float
    tree_fraction: float
    step_bytes: float = 0.0


# -- constants: each from a public fact or a fit on a named public run (module docstring) --------------------

EFA = LinkParams(base_s=40.3e-6, hop_s=10.2e-6, efficiency=0.783, tree_fraction=0.185, step_bytes=498e3)
"""Fitted by `calibrate` on the 2 × p4de.24xlarge nccl-tests run (tests/bandwidth/test_prior.py refits)."""

NVSWITCH = LinkParams(base_s=0.0, hop_s=2.47e-6, efficiency=0.968, tree_fraction=0.327, step_bytes=123e3)
"""Fitted on the single-node p5.48xlarge run (its α0 came out at 1e-12 s: rounded to 0)."""

TCP_NIC_EFFICIENCY = 0.81
"""Srift Table 2: g4dn.4xlarge measured 20.3 of its rated 25 Gbit/s (the lowest measured/rated ratio)."""

TCP_FLOW_EFFICIENCY = 8949 / 9039
"""TCP payload per 9001-byte jumbo frame (AWS VPC MTU) with 52 B of TCP/IP headers and 38 B of framing."""

TCP_HOP_S = 150e-6
"""Half the 0.3 ms VM-to-VM round trip measured by Erben et al. (seed 002, §3)."""

TCP = LinkParams(
    base_s=EFA.base_s,
    hop_s=TCP_HOP_S,
    efficiency=TCP_NIC_EFFICIENCY,
    tree_fraction=EFA.tree_fraction,
    step_bytes=EFA.step_bytes,
)

GLOO_TCP = dataclasses.replace(TCP, step_bytes=0.0)
"""gloo over TCP: the same link without NCCL's pipeline step (q belongs to NCCL's 512 KiB buffer steps)."""

LINK = LinkParams(
    base_s=NVSWITCH.base_s,
    hop_s=NVSWITCH.hop_s,
    efficiency=EFA.efficiency,
    tree_fraction=NVSWITCH.tree_fraction,
    step_bytes=NVSWITCH.step_bytes,
)
"""NVLink and PCIe links: NVSwitch latency, and the point-to-point efficiency of the EFA fit (no public
single-node PCIe or NVLink run in the reference set; an assumption, stated in the prediction's sources)."""

FLOW_LIMIT_GBPS = {False: 5.0, True: 10.0}
"""AWS EC2 user guide, "Amazon EC2 instance network bandwidth": single-flow traffic is limited to 5 Gbps
outside a cluster placement group, up to 10 Gbps inside one (key: in a cluster placement group)."""

NCCL_AWS_FLOWS = 8 * 2
"""NCCL environment docs: on AWS NCCL_NSOCKS_PERTHREAD defaults to 8 and NCCL_SOCKET_NTHREADS to 2, when
NCCL reads the ENA's PCI vendor id 0x1d0f from /sys/class/net/<dev>/device/vendor
(NVIDIA/nccl@5067397c src/transport/net_socket.cc, ncclNetSocketGetNsockNthread; since 2.4.8, 7c72dee6)."""

NCCL_FALLBACK_FLOWS = 1
"""NVIDIA/nccl@5067397c src/transport/net_socket.cc, ncclNetSocketGetNsockNthread: when the vendor file cannot
be opened ("handled silently") auto-detection keeps 0 threads × 1 socket, i.e. no data sockets; the data then
goes over the connection's one control socket (same file, `nSocks > 0` else `ctrlSock`). In a container with
its own network namespace the interface is a veth with no PCI device: NVIDIA/nccl#367 shows "Could not find
real path of /sys/class/net/eth0/device" from a container."""

NCCL_DEFAULT_FLOWS = 1 * 1
"""NCCL environment docs: both default to 1 outside AWS and Google Cloud gVNIC."""

NCCL_MIN_CHANNELS = 2
"""NVIDIA/nccl@5067397c src/graph/connect.cc (ncclTopoPostset): "nChannels = std::min(MAXCHANNELS,
nChannels * 2)" — ring channels are duplicated, each with its own connection per peer, so at least 2
connections carry a large allreduce. Only the band's fast end counts it (the point counts one connection:
the deadline-safe end)."""

GLOO_FLOWS = 1
"""gloo's TCP transport: one connection (a `Pair`) per pair of ranks (gloo/transport/tcp/pair.h)."""

Z90 = 1.2815515655446004
"""The standard normal's 90th percentile (p10–p90 of a band of spread σ: 1 ∓ Z90·σ)."""

SMALL_BYTES = 1 << 20
"""Size classes of the band: below 1 MiB (latency-bound) and at or above it (bandwidth-bound)."""

EFA_RESIDUAL_CV = {"small": 0.485, "large": 0.188}
"""RMS of log(pred/measured), bias included, on the 2 × p5.48xlarge run, never fitted on
(recomputed by benchmarks/public_network.py)."""

TCP_RESIDUAL_CV = {"small": EFA_RESIDUAL_CV["small"], "large": 0.21}
"""≥ 1 MiB: Srift Table 2 — std of log(measured/rated) across p3.8xl, g3.8xl, g4dn.4xl (0.207) combined
with their mean temporal std/mean (0.050): √(0.207² + 0.050²). Below 1 MiB: the EFA figure (no public TCP)."""

RESIDUAL_CV = max(TCP_RESIDUAL_CV.values())
"""One number for callers that take a single spread (the widest class)."""


def flows_per_peer(network: NetworkSpec, *, provider: str) -> int:
    """TCP flows the prior assumes per peer: the request's override, else the library's default, with NCCL
    on AWS at its one-socket fallback unless the request says NCCL sees the ENA (`ena_visible`)."""
    if network.flows_per_peer is not None:
        return network.flows_per_peer
    if network.library is Library.GLOO:
        return GLOO_FLOWS
    if provider != "aws":
        return NCCL_DEFAULT_FLOWS
    return NCCL_AWS_FLOWS if network.ena_visible else NCCL_FALLBACK_FLOWS


HIGH_END_TEXT = "NCCL seeing the ENA, 2 ring channels per peer"
"""What the fast end of the band assumes (NCCL_AWS_FLOWS per connection, NCCL_MIN_CHANNELS connections)."""


def flows_per_peer_high(network: NetworkSpec, *, provider: str) -> int:
    """The most TCP flows per peer the public facts allow under the request (the band's fast end)."""
    if network.library is Library.GLOO:
        return network.flows_per_peer or GLOO_FLOWS
    if network.flows_per_peer is not None:
        return NCCL_MIN_CHANNELS * network.flows_per_peer
    if provider != "aws":
        return NCCL_MIN_CHANNELS * NCCL_DEFAULT_FLOWS
    per_connection = NCCL_FALLBACK_FLOWS if network.ena_visible is False else NCCL_AWS_FLOWS
    return NCCL_MIN_CHANNELS * per_connection


@dataclass(frozen=True, slots=True)
class NodeRate:
    """A node's achievable one-direction rate to the network, what limits it, and the fastest rate the public
    facts allow under the same request (`high_gbps`, equal to `gbps` when nothing is left open)."""

    gbps: float
    limit: str
    flows: int | None = None
    high_gbps: float | None = None

    @property
    def high(self) -> float:
        return self.gbps if self.high_gbps is None else max(self.gbps, self.high_gbps)


def _tcp_rate(instance: InstanceType, network: NetworkSpec, flows: int) -> tuple[float, str]:
    rated = max(instance.network_gbps, 1e-3)
    nic = TCP_NIC_EFFICIENCY * rated
    per_flow = FLOW_LIMIT_GBPS[network.placement_group] if instance.provider == "aws" else math.inf
    flow_bound = TCP_FLOW_EFFICIENCY * flows * per_flow
    if flow_bound < nic:
        return flow_bound, (
            f"TCP: {flows} flow(s) × {per_flow:g} Gbit/s per flow"
            + (" (cluster placement group)" if network.placement_group else " (no placement group)")
        )
    return nic, f"TCP: {TCP_NIC_EFFICIENCY:g} × rated {rated:g} Gbit/s"


def node_rate(instance: InstanceType, network: NetworkSpec) -> NodeRate:
    """R_node in Gbit/s for `instance` under `network` (see the module docstring)."""
    measured = network.measured_gbps.get(instance.name)
    if measured is not None:
        where = network.measured_sources.get(instance.name, "given in the request")
        return NodeRate(measured, f"measured ({where})")
    rated = max(instance.network_gbps, 1e-3)
    if network.transport is Transport.EFA:
        return NodeRate(EFA.efficiency * rated, f"EFA: {EFA.efficiency:.3g} × rated {rated:g} Gbit/s")
    flows = flows_per_peer(network, provider=instance.provider)
    gbps, limit = _tcp_rate(instance, network, flows)
    high, _ = _tcp_rate(instance, network, flows_per_peer_high(network, provider=instance.provider))
    if (
        network.library is Library.NCCL
        and network.flows_per_peer is None
        and network.ena_visible is None
        and instance.provider == "aws"
    ):
        limit += " — NCCL's one-socket fallback, assumed: the request does not say whether NCCL sees the ENA"
    return NodeRate(gbps, limit, flows=flows, high_gbps=high if high > gbps * (1 + 1e-9) else None)


def gpu_link(instance: InstanceType) -> tuple[float, LinkParams]:
    """R_gpu in Gbit/s and the intra-node link parameters of a multi-GPU type."""
    raw = instance.interconnect_gbps if instance.interconnect_gbps > 0 else instance.network_gbps
    link = NVSWITCH if instance.interconnect is Interconnect.NVSWITCH else LINK
    return link.efficiency * max(raw, 1e-3), link


def shares_host_pcie(instance: InstanceType, network: NetworkSpec) -> bool:
    """True when intra-node reduction and socket staging both cross the host's PCIe (TCP, PCIe GPUs)."""
    return (
        network.transport is Transport.TCP
        and instance.devices >= 2
        and instance.interconnect in (Interconnect.PCIE, Interconnect.NONE)
        and instance.name not in network.measured_gbps
    )


def ceilings(
    *,
    instance: InstanceType,
    world_size: int,
    nodes: int,
    network: NetworkSpec = DEFAULT_NETWORK,
    high: bool = False,
    rate: NodeRate | None = None,
) -> tuple[float, LinkParams]:
    """The bus-bandwidth ceiling (Gbit/s, after efficiencies) and the latency link of one request; `high`
    takes the node rate's fast end (`NodeRate.high`); `rate`, when given, is `node_rate(instance, network)`
    already found."""
    n, big_n = world_size, max(nodes, 1)
    g = max(1, n // big_n)
    limits: list[float] = []
    link: LinkParams | None = None
    if big_n >= 2:
        found = rate if rate is not None else node_rate(instance, network)
        gbps = found.high if high else found.gbps
        limits.append(gbps * ((n - 1) / n) / ((big_n - 1) / big_n))
        link = EFA if network.transport is Transport.EFA else TCP
        if network.library is Library.GLOO:
            link = GLOO_TCP
    if g >= 2:
        r_gpu, intra = gpu_link(instance)
        limits.append(r_gpu * ((n - 1) / n) / ((g - 1) / g))
        link = link or intra
    if not limits:
        return max(instance.network_gbps, instance.interconnect_gbps, 1e-3), LINK
    assert link is not None
    return min(limits), link


def peak_busbw_gbps(*, instance: InstanceType, world_size: int, nodes: int) -> float:
    """The bus-bandwidth ceiling (Gbit/s) of the slowest level under the default network, efficiencies in."""
    return ceilings(instance=instance, world_size=world_size, nodes=nodes)[0]


def predict_busbw_gbps(
    sizes: np.ndarray, *, world_size: int, peak_gbps: float, link: LinkParams, async_count: int = 1
) -> np.ndarray:
    """Vectorised α-β bus bandwidth (Gbit/s) for buffer sizes in bytes under a ceiling `peak_gbps`."""
    n = world_size
    if n < 2:
        return np.full(sizes.shape, peak_gbps)
    return _alpha_beta_gbps(
        sizes.astype(np.float64),
        n=n,
        depth=math.ceil(math.log2(n)),
        peak_gbps=peak_gbps,
        link=link,
        async_count=async_count,
    )


def ring_busbw_rows_gbps(
    sizes: np.ndarray, *, nodes: Sequence[int], node_gbps: float, link: LinkParams
) -> np.ndarray:
    """`predict_busbw_gbps` for rings of n = N nodes with one rank each (the inter-node stage), a row per n in
    `nodes` (each ≥ 2), under a node rate `node_gbps`: the same arithmetic on arrays, so every value equals
    the one `predict(world_size=n, nodes=n)` gives."""
    n = np.asarray(nodes, dtype=np.int64).reshape(-1, 1)
    share = (n - 1) / n
    depth = np.asarray([math.ceil(math.log2(int(k))) for k in n[:, 0]], dtype=np.int64).reshape(-1, 1)
    return _alpha_beta_gbps(
        sizes.astype(np.float64).reshape(1, -1),
        n=n,
        depth=depth,
        peak_gbps=node_gbps * share / share,
        link=link,
        async_count=1,
    )


def _alpha_beta_gbps(
    sizes: np.ndarray, *, n: Any, depth: Any, peak_gbps: Any, link: LinkParams, async_count: int
) -> np.ndarray:
    """The α-β model's bus bandwidth: the faster of a ring and a tree allreduce of `sizes` bytes over `n`
    ranks (scalars, or columns broadcast against a row of sizes)."""
    bus_bits = sizes * 8 * 2 * (n - 1) / n
    rate = peak_gbps * 1e9
    c = async_count * bus_bits / rate
    hop = link.hop_s + link.step_bytes * 8 / rate
    ring = link.base_s + 2 * (n - 1) * hop + c
    tree = link.base_s + 2 * depth * hop + c / link.tree_fraction
    return np.asarray(bus_bits / np.minimum(ring, tree) / 1e9)


def ring_collective_gbps(
    sizes: np.ndarray, *, world_size: int, peak_gbps: float, link: LinkParams, async_count: int = 1
) -> np.ndarray:
    """Bus bandwidth (Gbit/s) of a ring all-gather or reduce-scatter of `sizes` bytes (the whole buffer)
    over `world_size` ranks under a ceiling `peak_gbps` (module docstring)."""
    n = world_size
    if n < 2:
        return np.full(sizes.shape, peak_gbps)
    bus_bits = sizes.astype(np.float64) * 8 * (n - 1) / n
    rate = peak_gbps * 1e9
    hop = link.hop_s + link.step_bytes * 8 / rate
    t = link.base_s + (n - 1) * hop + async_count * bus_bits / rate
    return np.asarray(bus_bits / t / 1e9)


def residual_cvs(sizes: np.ndarray, network: NetworkSpec) -> tuple[float, ...]:
    """Per size: the out-of-sample spread of its size class under the request's transport."""
    table = EFA_RESIDUAL_CV if network.transport is Transport.EFA else TCP_RESIDUAL_CV
    return tuple(table["small"] if s < SMALL_BYTES else table["large"] for s in sizes.tolist())


class AlphaBetaPrior(AnswersBusbw):
    """BusBandwidthModel from catalog facts, the request's network assumptions and public measurements."""

    source = SOURCE

    def __init__(self, *, network: NetworkSpec = DEFAULT_NETWORK) -> None:
        self.network = network
        self._rates: dict[InstanceType, NodeRate] = {}

    def node_rate(self, instance: InstanceType) -> NodeRate:
        """`node_rate(instance, self.network)`, found once per instance type: the search asks `answer`
        thousands of times per plan, for a handful of types."""
        found = self._rates.get(instance)
        if found is None:
            found = self._rates[instance] = node_rate(instance, self.network)
        return found

    def shares_host_pcie(self, instance: InstanceType) -> bool:
        return shares_host_pcie(instance, self.network)

    def describe(self, instance: InstanceType) -> str:
        """What the prior assumes between nodes of `instance` (for a prediction's sources)."""
        rate = node_rate(instance, self.network)
        text = f"{instance.name}: {rate.gbps:.3g} Gbit/s per node ({rate.limit})"
        if rate.high_gbps is not None:
            text += f"; band's fast end {rate.high_gbps:.3g} Gbit/s ({HIGH_END_TEXT})"
        return text

    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        """Predicted busbw (Gbit/s) per size; world_size 1 gets the link's rate (nothing moves anyway)."""
        instance, world_size, nodes = query.instance, query.world_size, query.nodes
        async_count = query.async_count
        sizes = check_request(
            world_size=world_size, nodes=nodes, buffer_bytes=query.buffer_bytes, async_count=async_count
        )
        rate = self.node_rate(instance) if nodes >= 2 else None
        peak, link = ceilings(
            instance=instance, world_size=world_size, nodes=nodes, network=self.network, rate=rate
        )
        busbw = predict_busbw_gbps(
            sizes, world_size=world_size, peak_gbps=peak, link=link, async_count=async_count
        )
        cvs = residual_cvs(sizes, self.network if nodes >= 2 else NetworkSpec(transport=Transport.EFA))
        upside: tuple[float, ...] = ()
        if rate is not None and rate.high_gbps is not None:
            top, _ = ceilings(
                instance=instance,
                world_size=world_size,
                nodes=nodes,
                network=self.network,
                high=True,
                rate=rate,
            )
            fast = predict_busbw_gbps(
                sizes, world_size=world_size, peak_gbps=top, link=link, async_count=async_count
            )
            upside = upside_cvs(busbw, fast, cvs)
        return BandwidthEstimate(
            busbw_gbps=tuple(busbw.tolist()),
            source=SOURCE,
            residual_cv=max(cvs, default=RESIDUAL_CV),
            residual_cvs=cvs,
            upside_cv=max(upside, default=0.0),
            upside_cvs=upside,
        )

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        """Bus bandwidth (Gbit/s) per size of `collective` (allreduce: `predict`; all-gather and
        reduce-scatter: the ring of the module docstring, with allreduce's error spreads)."""
        if collective is Collective.ALLREDUCE:
            return self.answer(query)
        instance, world_size, nodes = query.instance, query.world_size, query.nodes
        sizes = check_request(
            world_size=world_size, nodes=nodes, buffer_bytes=query.buffer_bytes, async_count=1
        )
        peak, link = ceilings(instance=instance, world_size=world_size, nodes=nodes, network=self.network)
        busbw = ring_collective_gbps(sizes, world_size=world_size, peak_gbps=peak, link=link)
        cvs = residual_cvs(sizes, self.network if nodes >= 2 else NetworkSpec(transport=Transport.EFA))
        return BandwidthEstimate(
            busbw_gbps=tuple(float(b) for b in busbw),
            source=f"{SOURCE}:{collective.value}",
            residual_cv=max(cvs, default=RESIDUAL_CV),
            residual_cvs=cvs,
        )

    def predict_rings(
        self, *, instance: InstanceType, nodes: Sequence[int], buffer_bytes: Sequence[int]
    ) -> np.ndarray:
        """Bus bandwidths (Gbit/s) of `predict(world_size=n, nodes=n, buffer_bytes)` for every n in `nodes`,
        a row per n, in one vectorised pass: what the search's bounds table over VM counts
        (srift.sim.bounds) asks, thousands of times per plan when asked n by n."""
        counts = [int(n) for n in nodes]
        if any(n < 2 for n in counts):
            raise InvalidInput(
                "predict_rings answers rings of two or more nodes", hint="ask predict()", field="nodes"
            )
        sizes = check_request(world_size=2, nodes=2, buffer_bytes=buffer_bytes, async_count=1)
        _, link = ceilings(instance=instance, world_size=2, nodes=2, network=self.network)
        rate = self.node_rate(instance).gbps
        return ring_busbw_rows_gbps(sizes, nodes=counts, node_gbps=rate, link=link)


def upside_cvs(busbw: np.ndarray, fast: np.ndarray, cvs: Sequence[float]) -> tuple[float, ...]:
    """Per size, the fast-side spread whose p90 (1 + Z90·cv) reaches the fast end's own p90: the band then
    covers both the assumed and the fast public default (`BandwidthEstimate.upside_cvs`)."""
    out = []
    for b, f, cv in zip(busbw.tolist(), fast.tolist(), cvs, strict=True):
        ratio = f / b if b > 0 else 1.0
        out.append(max(cv, (ratio * (1 + Z90 * cv) - 1) / Z90))
    return tuple(out)


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
    # Checked on Python floats: the same test as numpy's isfinite and min, without its per-call overhead on
    # the handful of sizes a request asks (the search asks thousands of requests per plan).
    if not all(math.isfinite(s) and s > 0 for s in sizes.tolist()):
        raise InvalidInput("buffer sizes must be positive bytes", hint="give sizes ≥ 1", field="buffer_bytes")
    return sizes


# -- calibration against public runs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PublicRun:
    """One public allreduce run: where it ran, how, and its (size, seconds) rows."""

    id: str
    instance_type: str
    nodes: int
    gpus_per_node: int
    transport: str
    library: str
    sizes_bytes: tuple[int, ...]
    times_s: tuple[float, ...]
    source: dict[str, Any]
    shaped: dict[str, float] | None = None
    ena_visible: bool | None = None
    """Whether NCCL saw the ENA in this run, where its source says (None: not stated)."""

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def busbw_gbps(self) -> np.ndarray:
        n = self.world_size
        s = np.asarray(self.sizes_bytes, dtype=np.float64)
        return np.asarray(s * 8 * 2 * (n - 1) / n / np.asarray(self.times_s) / 1e9)


RUNS_COPY = "bandwidth/data/public_allreduce.json"
"""The public runs as the measurement registry names them (relative to the srift package)."""


def read_runs(*, registry: Registry | None = None) -> tuple[PublicRun, ...]:
    """Every public run of the shipped file, read through the measurement registry: the file's hash must be
    the registry's and its runs exactly those the registry lists (ConfigurationError otherwise)."""
    reg = registry or shipped_registry()
    doc = json.loads(reg.read(RUNS_COPY))
    runs = tuple(
        PublicRun(
            id=r["id"],
            instance_type=r["instance_type"],
            nodes=int(r["nodes"]),
            gpus_per_node=int(r["gpus_per_node"]),
            transport=r["transport"],
            library=r["library"],
            sizes_bytes=tuple(int(x[0]) for x in r["rows"]),
            times_s=tuple(float(x[1]) * 1e-6 for x in r["rows"]),
            source=dict(r["source"]),
            shaped=r.get("shaped"),
            ena_visible=r.get("ena_visible"),
        )
        for r in doc["runs"]
    )
    reg.rows(RUNS_COPY, Use.FIT, (r.id for r in runs))
    return runs


@lru_cache(maxsize=1)
def public_runs() -> tuple[PublicRun, ...]:
    """The public runs shipped in srift/bandwidth/data/public_allreduce.json (with their sources)."""
    return read_runs()


def registered_runs(use: Use, *, registry: Registry | None = None) -> tuple[PublicRun, ...]:
    """The public runs the registry lists for `use` (FIT: the runs the links were fitted on; SPREAD: the
    run the band constants were measured on; CHECK: runs that only check the prior)."""
    reg = registry or shipped_registry()
    runs = read_runs(registry=reg) if registry is not None else public_runs()
    wanted = reg.listed(RUNS_COPY, use)  # read_runs has checked the runs against the registry's rows
    return tuple(r for r in runs if r.id in wanted)


FIT_RUNS = {"efa": "p4de-2x8-efa", "nvswitch": "p5-1x8-nvswitch"}
"""The public run each fitted link was calibrated on (the registry's `fit` runs; every other run only
checks the prior or, the 2 × p5 run, measures its band). `calibrate_link` refuses a run the registry does
not list as a fit run."""


@dataclass(frozen=True, slots=True)
class LinkCalibration:
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
) -> LinkCalibration:
    """Fit α0, α, η, κ, q to measured bus bandwidths (least squares on log busbw); η scales `peak_gbps`."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    sizes = np.asarray(sizes_bytes, dtype=np.float64)
    measured = np.asarray(busbw_gbps, dtype=np.float64)

    def link_of(p: np.ndarray) -> LinkParams:
        base, hop, eff, frac, step = np.exp(p)
        return LinkParams(
            base_s=float(base),
            hop_s=float(hop),
            efficiency=float(eff),
            tree_fraction=float(frac),
            step_bytes=float(step),
        )

    def predicted(link: LinkParams) -> np.ndarray:
        return predict_busbw_gbps(
            sizes, world_size=world_size, peak_gbps=peak_gbps * link.efficiency, link=link
        )

    def residuals(p: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(predicted(link_of(p))) - np.log(measured))

    start = np.log([30e-6, 5e-6, 0.7, 0.3, 128e3])
    fit = least_squares(residuals, start)
    link = link_of(fit.x)
    err = np.abs(predicted(link) - measured) / measured
    large = sizes >= large_bytes
    return LinkCalibration(
        link=link,
        mape_all=float(err.mean()),
        mape_large=float(err[large].mean()) if large.any() else float("nan"),
        max_error_large=float(err[large].max()) if large.any() else float("nan"),
    )


def calibrate_link(
    link: str, *, peak_gbps: float, registry: Registry | None = None, large_bytes: int = 64 << 20
) -> LinkCalibration:
    """Fit `link` ("efa", "nvswitch") to its public run (FIT_RUNS) as the measurement registry lists it:
    the run must be one of the registry's fit runs, read from the file whose hash the registry pins."""
    reg = registry or shipped_registry()
    run_id = FIT_RUNS[link]
    fit_runs = {r.id: r for r in registered_runs(Use.FIT, registry=reg)}
    if run_id not in fit_runs:
        raise ConfigurationError(
            f"the {link} link is fitted on {run_id}, which the measurement registry lists as no fit run",
            hint="list the run in a fit set of srift/data/measurements.yaml with its provenance",
            field="rows",
        )
    run = fit_runs[run_id]
    measured = run.busbw_gbps().tolist()
    return calibrate(
        run.sizes_bytes, measured, world_size=run.world_size, peak_gbps=peak_gbps, large_bytes=large_bytes
    )
