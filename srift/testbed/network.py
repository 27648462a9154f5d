"""Names, addresses and the ip/tc command batches that wire and shape a testbed (pure functions).

Topology: every host is a network namespace whose `eth0` is one end of a veth pair; the other end
(`h<index>`) sits in the testbed's switch namespace, bridged by a kernel bridge `br0` or forwarded by the
userspace switch. Nothing is created in the caller's namespace, so deleting the namespaces removes every
link. Both directions of a link are shaped: `eth0`'s egress is the host's upload, `h<index>`'s egress its
download.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from srift.testbed.spec import HostTypeSpec

HOST_IFACE = "eth0"
BRIDGE = "br0"
GSO_BYTES = 65536 + 4096
# Queueing a tbf may add before it drops (like a switch buffer).
QUEUE_S = 0.05


def netns_name(prefix: str, host: str) -> str:
    return f"srift-{prefix}-{host}"


def switch_netns(prefix: str) -> str:
    return f"srift-{prefix}-switch"


def cgroup_name(prefix: str, host: str) -> str:
    return f"srift-{prefix}-{host}"


def port_name(index: int) -> str:
    return f"h{index}"


def host_mac(index: int) -> str:
    return f"02:53:52:00:{index >> 8:02x}:{index & 0xFF:02x}"


def port_mac(index: int) -> str:
    return f"02:53:52:01:{index >> 8:02x}:{index & 0xFF:02x}"


@dataclass(frozen=True, slots=True)
class LinkShape:
    """What one direction of one link does: rate, and (netem only) delay, jitter, loss."""

    rate_mbit: float
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0


def half_shape(t: HostTypeSpec) -> LinkShape:
    """One direction of a host's link: the full rate, half the delay, jitter and loss of its type."""
    return LinkShape(
        rate_mbit=t.rate_mbit, delay_ms=t.delay_ms / 2, jitter_ms=t.jitter_ms / 2, loss_pct=t.loss_pct / 2
    )


def tbf_burst_bytes(rate_mbit: float, mtu: int) -> int:
    """Token bucket: 4 ms at line rate, at least four frames, whole GSO super-frames above 50 Mbit/s."""
    rate_bytes = rate_mbit * 1e6 / 8
    burst = max(4 * (mtu + 64), int(rate_bytes * 0.004))
    if rate_mbit >= 50:
        burst = max(burst, 2 * GSO_BYTES)
    return burst


def tbf_args(rate_mbit: float, mtu: int) -> list[str]:
    burst = tbf_burst_bytes(rate_mbit, mtu)
    limit = burst + int(rate_mbit * 1e6 / 8 * QUEUE_S)
    return ["tbf", "rate", f"{round(rate_mbit * 1000)}kbit", "burst", str(burst), "limit", str(limit)]


def netem_args(shape: LinkShape, rate_mbit: float, mtu: int) -> list[str]:
    packets = max(
        1000, int(rate_mbit * 1e6 / 8 * (shape.delay_ms + shape.jitter_ms + 100) / 1000 / max(mtu, 1500))
    )
    args = ["netem", "limit", str(packets * 4)]
    if shape.delay_ms > 0 or shape.jitter_ms > 0:
        args += ["delay", f"{shape.delay_ms:g}ms"]
        if shape.jitter_ms > 0:
            args += [f"{shape.jitter_ms:g}ms"]
    if shape.loss_pct > 0:
        args += ["loss", f"{shape.loss_pct:g}%"]
    return args


def shaping_batch(dev: str, shape: LinkShape, *, mtu: int, netem: bool) -> list[str]:
    """`tc -batch` lines that shape egress of `dev` (replace: running it twice is harmless)."""
    tbf = " ".join(tbf_args(shape.rate_mbit, mtu))
    if netem:
        return [
            f"qdisc replace dev {dev} root handle 1: {' '.join(netem_args(shape, shape.rate_mbit, mtu))}",
            f"qdisc replace dev {dev} parent 1:1 handle 10: {tbf}",
        ]
    return [f"qdisc replace dev {dev} root handle 1: {tbf}"]


@dataclass(frozen=True, slots=True)
class RemoteClass:
    """Upload to another location: its hosts' addresses, the link's rate and its one-way delay."""

    addresses: tuple[str, ...]
    rate_mbit: float
    delay_ms: float = 0.0


def _htb_class(dev: str, classid: str, rate_mbit: float, mtu: int) -> str:
    burst = tbf_burst_bytes(rate_mbit, mtu)
    rate = f"{round(rate_mbit * 1000)}kbit"
    quantum = min(200_000, max(mtu + 64, GSO_BYTES))
    return (
        f"class replace dev {dev} parent 1: classid {classid} htb rate {rate} ceil {rate} "
        f"burst {burst} cburst {burst} quantum {quantum}"
    )


def _leaf(dev: str, parent: str, handle: str, shape: LinkShape, *, mtu: int, netem: bool) -> str:
    if netem:
        netem_line = " ".join(netem_args(shape, shape.rate_mbit, mtu))
        return f"qdisc replace dev {dev} parent {parent} handle {handle} {netem_line}"
    packets = max(64, int(shape.rate_mbit * 1e6 / 8 * QUEUE_S / max(mtu, 1500)))
    return f"qdisc replace dev {dev} parent {parent} handle {handle} pfifo limit {packets}"


def upload_batch(
    dev: str, shape: LinkShape, remotes: Sequence[RemoteClass], *, mtu: int, netem: bool
) -> list[str]:
    """`tc -batch` lines for a host's upload: `shaping_batch` when it has no other location to reach, else
    an htb with a class at the host's rate (the default) and one per other location at the link's rate
    (capped by the host's), chosen by u32 filters on the destination address. Under netem each class's
    leaf adds the host's half delay plus, for another location, the link's delay; the userspace switch
    adds the link's delay itself, so there the leaves are plain FIFOs."""
    if not remotes:
        return shaping_batch(dev, shape, mtu=mtu, netem=netem)
    lines = [
        f"qdisc replace dev {dev} root handle 1: htb default 1",
        _htb_class(dev, "1:1", shape.rate_mbit, mtu),
        _leaf(dev, "1:1", "10:", shape, mtu=mtu, netem=netem),
    ]
    for k, remote in enumerate(remotes, start=2):
        rate = min(remote.rate_mbit, shape.rate_mbit)
        leaf = LinkShape(
            rate_mbit=rate,
            delay_ms=shape.delay_ms + (remote.delay_ms if netem else 0.0),
            jitter_ms=shape.jitter_ms,
            loss_pct=shape.loss_pct,
        )
        lines.append(_htb_class(dev, f"1:{k}", rate, mtu))
        lines.append(_leaf(dev, f"1:{k}", f"{k * 10}:", leaf, mtu=mtu, netem=netem))
        lines.extend(
            f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dst {address}/32 flowid 1:{k}"
            for address in remote.addresses
        )
    return lines


def host_ip_batch(
    *, address: str, prefix_len: int, neighbours: list[tuple[str, str]], gso_off: bool, mtu: int
) -> list[str]:
    """`ip -batch` lines run inside a host namespace: bring links up, address, static neighbours."""
    lines = ["link set lo up", f"link set {HOST_IFACE} up"]
    if gso_off:
        lines.append(f"link set dev {HOST_IFACE} gso_max_size {mtu}")
    lines.append(f"addr replace {address}/{prefix_len} dev {HOST_IFACE}")
    for ip, mac in neighbours:
        lines.append(f"neigh replace {ip} lladdr {mac} dev {HOST_IFACE} nud permanent")
    return lines


def switch_ip_batch(ports: list[str], *, bridge: bool) -> list[str]:
    """`ip -batch` lines in the switch namespace: ports up, and (kernel mode) the bridge."""
    lines = ["link set lo up"]
    if bridge:
        lines.append(f"link add {BRIDGE} type bridge stp_state 0 forward_delay 0")
        lines.extend(f"link set {p} master {BRIDGE}" for p in ports)
        lines.append(f"link set {BRIDGE} up")
    lines.extend(f"link set {p} up" for p in ports)
    return lines


NO_IPV6 = (
    "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"
)
