"""The network settings a launch must carry so that the run talks the way its plan was priced.

A plan records its network assumption (srift.domain.network.NetworkSpec, rendered in the plan's `network`
block): the transport (TCP sockets or EFA), the collective library, the TCP flows per peer connection that
the bandwidth prior assumed for each instance type, whether NCCL sees the AWS ENA, and whether the VMs sit in
a cluster placement group. Left to defaults, NCCL picks its own socket counts (16 flows when it reads the
ENA's PCI vendor id, one otherwise, see srift.bandwidth.prior) and may load an EFA plugin the AMI ships, so
a run can differ from its plan for reasons Srift knows. Every launch file sets these explicitly, each with
the assumption it carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from srift.launch.layout import FleetPart, Layout

NCCL_MAX_SOCKET_THREADS = 16
"""NCCL environment docs: NCCL_SOCKET_NTHREADS takes 1 to 16."""

NCCL_MAX_SOCKETS = 64
"""NCCL environment docs: NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD cannot exceed 64."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One environment variable of the launch and the plan assumption it carries."""

    name: str
    value: str
    why: str


@dataclass(frozen=True, slots=True)
class PlacementNote:
    """Whether the plan assumed a cluster placement group: no environment variable can create one, so every
    launch format says it in its own way (a comment, a label) and the user launches the VMs into one."""

    required: bool
    text: str


def socket_split(flows: int) -> tuple[int, int]:
    """(NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD) whose product is `flows`: NCCL's AWS default 2 × 8 for
    16, otherwise the fewest threads (at most 16) that keep the sockets per thread whole."""
    if not 1 <= flows <= NCCL_MAX_SOCKETS:
        raise ValueError(f"{flows} flows per peer is outside NCCL's 1..{NCCL_MAX_SOCKETS}")
    if flows == 16:
        return 2, 8
    for threads in range(1, NCCL_MAX_SOCKET_THREADS + 1):
        if flows % threads == 0 and flows // threads <= NCCL_MAX_SOCKETS // threads:
            return threads, flows // threads
    return 1, flows


def _flows(network: Mapping[str, Any], instance_type: str) -> int | None:
    flows = network.get("flows_per_peer")
    if isinstance(flows, Mapping):
        value = flows.get(instance_type)
        return int(value) if value is not None else None
    return int(flows) if isinstance(flows, int) else None


def network_settings(layout: Layout, part: FleetPart) -> tuple[Setting, ...]:
    """The environment one VM of `part` needs to run as the plan assumed."""
    network = layout.network
    transport = str(network.get("transport") or "tcp")
    label = str(network.get("label") or transport)
    out = [
        Setting(
            "SRIFT_BACKEND",
            layout.backend,
            f"collective library: {layout.backend}"
            + ("" if layout.backend == network.get("library", "nccl") else " (CPU ranks cannot use NCCL)"),
        )
    ]
    if layout.backend == "gloo":
        return tuple(out)
    if transport == "efa":
        out.append(Setting("FI_PROVIDER", "efa", f"the plan assumed EFA through aws-ofi-nccl ({label})"))
        return tuple(out)
    out.append(Setting("NCCL_NET", "Socket", f"the plan assumed NCCL over TCP sockets ({label}), no plugin"))
    flows = _flows(network, part.instance_type)
    if flows is not None:
        threads, socks = socket_split(flows)
        seen = network.get("ena_visible")
        why = f"{flows} TCP flow(s) per peer, as the plan's bandwidth for {part.instance_type} assumed" + (
            " (NCCL seeing the ENA)"
            if seen
            else " (NCCL's one-socket fallback: ENA hidden or not stated)"
            if flows == 1
            else ""
        )
        out += [
            Setting("NCCL_SOCKET_NTHREADS", str(threads), why),
            Setting("NCCL_NSOCKS_PERTHREAD", str(socks), why),
        ]
    return tuple(out)


def placement(layout: Layout) -> PlacementNote:
    """What the plan assumed about a cluster placement group."""
    if layout.network.get("placement_group"):
        return PlacementNote(
            True,
            "the plan assumed one cluster placement group (10 Gbit/s per TCP flow instead of 5): launch "
            "every VM into it, or re-plan with network.placement_group: false",
        )
    return PlacementNote(False, "the plan assumed no placement group (5 Gbit/s per TCP flow)")


def env_lines(settings: tuple[Setting, ...]) -> list[str]:
    """`# NAME: why` comment lines, one per setting, for a file header."""
    return [f"#   {s.name}={s.value}: {s.why}" for s in settings]
