"""How the ranks of a fleet talk across nodes: the transport, the collective library and their options.

Plain PyTorch DistributedDataParallel over NCCL (or gloo) sends between nodes over TCP sockets; only with
the aws-ofi-nccl plugin (and EFA-capable types) does NCCL use EFA. Every prediction and plan names the
`NetworkSpec` it assumed, because the same fleet is several times faster or slower depending on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Transport(StrEnum):
    """What carries the bytes between nodes."""

    TCP = "tcp"
    """TCP sockets: NCCL's socket transport or gloo (the default of plain PyTorch DDP)."""
    EFA = "efa"
    """AWS Elastic Fabric Adapter through the aws-ofi-nccl plugin (EFA-capable types only)."""


class Library(StrEnum):
    """The collective library of the training job."""

    NCCL = "nccl"
    GLOO = "gloo"


@dataclass(frozen=True, slots=True)
class NetworkSpec:
    """The network assumptions of one request.

    `flows_per_peer` overrides the TCP flows per peer connection (NCCL: NCCL_NSOCKS_PERTHREAD ×
    NCCL_SOCKET_NTHREADS; gloo: 1); None takes the library's default for the provider.
    `ena_visible` says whether NCCL can read the AWS ENA's PCI vendor id (/sys/class/net/<dev>/device/vendor
    = 0x1d0f) and so opens 2 threads × 8 sockets per connection: True on a bare VM or a container on the host
    network, False in a container with its own network namespace (NCCL then falls back to one socket),
    None (the default) when the request does not say: the prior then assumes the fallback and widens its
    band up to the detected rate.
    `measured_gbps` maps instance type → a measured node-to-node rate in Gbit/s (one direction), which
    replaces the prior's rate for that type; `measured_sources` says where each came from (e.g. a probe job).
    """

    transport: Transport = Transport.TCP
    library: Library = Library.NCCL
    placement_group: bool = False
    flows_per_peer: int | None = None
    ena_visible: bool | None = None
    measured_gbps: dict[str, float] = field(default_factory=dict, hash=False, compare=True)
    measured_sources: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    def key(self) -> tuple[object, ...]:
        """A hashable identity (for caches keyed by the assumptions)."""
        return (
            self.transport.value,
            self.library.value,
            self.placement_group,
            self.flows_per_peer,
            self.ena_visible,
            tuple(sorted(self.measured_gbps.items())),
        )

    def label(self) -> str:
        """Short text, e.g. 'tcp/nccl, no placement group'."""
        parts = [f"{self.transport.value}/{self.library.value}"]
        if self.transport is Transport.TCP:
            parts.append("cluster placement group" if self.placement_group else "no placement group")
            if self.flows_per_peer is not None:
                parts.append(f"{self.flows_per_peer} flows per peer")
            elif self.library is Library.NCCL and self.ena_visible is not None:
                parts.append("ENA visible to NCCL" if self.ena_visible else "ENA hidden from NCCL")
        if self.measured_gbps:
            parts.append(
                "measured: " + ", ".join(f"{k} {v:g} Gbit/s" for k, v in sorted(self.measured_gbps.items()))
            )
        return ", ".join(parts)


DEFAULT_NETWORK = NetworkSpec()
