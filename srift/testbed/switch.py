"""Userspace switch: forwards frames between the testbed's links, adding delay, jitter and loss.

Used where the kernel has no netem. Runs in the switch namespace as `python -m srift.testbed.switch
CONFIG.json`, one AF_PACKET socket per port with virtio-net headers, so GSO super-frames (and their
checksum offload) cross it whole: at 1 Gbit/s that is a few thousand frames a second. select() gives
microsecond timeouts. Rates stay in the
kernel (tbf on both ends of every link); this process only holds frames for the path's delay. The path
between ports a and b gets the mean of their delays, jitter (uniform ±) and loss; frames on one path
never overtake each other. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import heapq
import json
import os
import random
import select
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
VNET_HDR_BYTES = 10
FRAME_BYTES = 65536 + 4096
SOCKET_BUFFER_BYTES = 16 << 20
# select() sleeps with microsecond resolution; frames due this close are sent now.
EARLY_S = 0.00002
STATS_EVERY_S = 2.0


class Switch:
    """The forwarding loop; `ports` from the config: iface, mac, delay_ms, jitter_ms, loss_pct and
    location; `links` between locations: {between: [a, b], delay_ms} added one way to their paths."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.ports: list[dict[str, Any]] = list(config["ports"])
        self.rng = random.Random(int(config.get("seed", 0)))
        self.stats_file = Path(config["stats_file"]) if config.get("stats_file") else None
        self.socks: list[socket.socket] = []
        self.by_fd: dict[int, int] = {}
        self.mac_port: dict[bytes, int] = {}
        for i, port in enumerate(self.ports):
            self.socks.append(self._open(str(port["iface"])))
            self.by_fd[self.socks[-1].fileno()] = i
            self.mac_port[bytes.fromhex(str(port["mac"]).replace(":", ""))] = i
        n = len(self.ports)
        link_delay_ms = {
            frozenset(link["between"]): float(link["delay_ms"]) for link in config.get("links", ())
        }
        self.delay_s = [[0.0] * n for _ in range(n)]
        self.jitter_s = [[0.0] * n for _ in range(n)]
        self.loss = [[0.0] * n for _ in range(n)]
        for a in range(n):
            for b in range(n):
                pa, pb = self.ports[a], self.ports[b]
                self.delay_s[a][b] = (float(pa["delay_ms"]) + float(pb["delay_ms"])) / 2000
                across = frozenset((pa.get("location"), pb.get("location")))
                if len(across) == 2:
                    self.delay_s[a][b] += link_delay_ms.get(across, 0.0) / 1000
                self.jitter_s[a][b] = (float(pa["jitter_ms"]) + float(pb["jitter_ms"])) / 2000
                self.loss[a][b] = (float(pa["loss_pct"]) + float(pb["loss_pct"])) / 200
        self.last_departure = [[0.0] * n for _ in range(n)]
        self.heap: list[tuple[float, int, int, bytes]] = []
        self.seq = 0
        self.counts = {"frames_in": 0, "frames_out": 0, "dropped_loss": 0, "dropped_queue": 0}
        self.running = True

    @staticmethod
    def _open(iface: str) -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        for opt, fallback in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:
                s.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER_BYTES)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, fallback, SOCKET_BUFFER_BYTES)
        s.bind((iface, ETH_P_ALL))
        s.setblocking(False)
        return s

    def _schedule(self, src: int, frame: bytes, now: float) -> None:
        dst_mac = frame[VNET_HDR_BYTES : VNET_HDR_BYTES + 6]
        dst = self.mac_port.get(dst_mac)
        if dst is not None and not dst_mac[0] & 1:
            targets = [] if dst == src else [dst]
        else:
            targets = [i for i in range(len(self.ports)) if i != src]
        for d in targets:
            if self.loss[src][d] > 0 and self.rng.random() < self.loss[src][d]:
                self.counts["dropped_loss"] += 1
                continue
            due = now + self.delay_s[src][d]
            if self.jitter_s[src][d] > 0:
                due += self.rng.uniform(-self.jitter_s[src][d], self.jitter_s[src][d])
            due = max(due, self.last_departure[src][d], now)
            self.last_departure[src][d] = due
            self.seq += 1
            heapq.heappush(self.heap, (due, self.seq, d, frame))

    def _send_due(self) -> None:
        now = time.monotonic() + EARLY_S
        heap = self.heap
        while heap and heap[0][0] <= now:
            _, _, d, frame = heapq.heappop(heap)
            try:
                self.socks[d].send(frame)
                self.counts["frames_out"] += 1
            except OSError as exc:
                if exc.errno not in (
                    errno.ENOBUFS,
                    errno.EAGAIN,
                    errno.EMSGSIZE,
                    errno.ENETDOWN,
                    errno.ENXIO,
                ):
                    raise
                self.counts["dropped_queue"] += 1

    def _write_stats(self) -> None:
        if self.stats_file is None:
            return
        tmp = self.stats_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "queued": len(self.heap), **self.counts}))
        tmp.replace(self.stats_file)

    def run(self) -> None:
        fds = [s.fileno() for s in self.socks]
        next_stats = time.monotonic() + STATS_EVERY_S
        while self.running:
            now = time.monotonic()
            timeout = min(max(0.0, self.heap[0][0] - now - EARLY_S), 0.5) if self.heap else 0.5
            try:
                readable, _, _ = select.select(fds, [], [], timeout)
            except InterruptedError:
                continue
            now = time.monotonic()
            for fd in readable:
                src = self.by_fd[fd]
                sock = self.socks[src]
                for _ in range(256):
                    try:
                        frame = sock.recv(FRAME_BYTES)
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        if exc.errno in (errno.ENETDOWN, errno.ENXIO):
                            break
                        raise
                    self.counts["frames_in"] += 1
                    self._schedule(src, frame, now)
            self._send_due()
            if now >= next_stats:
                self._write_stats()
                next_stats = now + STATS_EVERY_S


def _realtime() -> None:
    """Ask for a modest real-time priority so delays hold on a busy machine; ignore if refused."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(5))
    except (AttributeError, OSError):
        with contextlib.suppress(OSError):
            os.nice(-10)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m srift.testbed.switch CONFIG.json", file=sys.stderr)
        return 2
    config = json.loads(Path(args[0]).read_text())
    switch = Switch(config)

    def stop(_signum: int, _frame: object) -> None:
        switch.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _realtime()
    gc.disable()
    ready = Path(config["ready_file"])
    ready.write_text(str(os.getpid()))
    switch._write_stats()
    switch.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
