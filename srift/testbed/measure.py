"""Measure a testbed's links from inside its hosts: TCP throughput and round-trip time (stdlib only).

The helpers run as `python -P .../srift/testbed/measure.py recv|send|echo|ping ...` inside hosts (the file
as a script: see `_py`); the functions below start them with `Testbed.exec_in`/`popen_in` and return the
figures. Every run is bounded in bytes and in time, and talks only to testbed addresses.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srift.testbed.core import Testbed

CHUNK_BYTES = 256 * 1024
MAX_BYTES = 4 * 2**30
CONNECT_TIMEOUT_S = 10.0
USAGE = (
    "usage: python -P measure.py recv PORT MAX_S WARMUP_S | send HOST PORT SECONDS MAX_BYTES"
    " | echo PORT COUNT | ping HOST PORT COUNT"
)


@dataclass(frozen=True, slots=True)
class Throughput:
    """Received bytes over the measured window (after `warmup_s`), and over the whole transfer."""

    rate_mbit: float
    overall_mbit: float
    bytes_received: int
    duration_s: float


def _connect(host: str, port: int) -> socket.socket:
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            return socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _listen(port: int) -> socket.socket:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(CONNECT_TIMEOUT_S + 5)
    print("listening", flush=True)
    return srv


def recv_main(port: int, max_s: float, warmup_s: float) -> None:
    """Accept one sender, count bytes until it closes; print a Throughput as JSON."""
    srv = _listen(port)
    conn, _ = srv.accept()
    conn.settimeout(max_s + 5)
    buf = bytearray(CHUNK_BYTES)
    total = 0
    start = time.monotonic()
    mark_t, mark_bytes = 0.0, 0
    first = None
    deadline = start + max_s
    while time.monotonic() < deadline:
        n = conn.recv_into(buf)
        if n == 0:
            break
        now = time.monotonic()
        if first is None:
            first = now
        total += n
        if not mark_t and now - first >= warmup_s:
            mark_t, mark_bytes = now, total
    end = time.monotonic()
    first = first or end
    window = end - mark_t if mark_t else 0.0
    rate = (total - mark_bytes) * 8 / window / 1e6 if window > 0 else 0.0
    overall = total * 8 / (end - first) / 1e6 if end > first else 0.0
    print(json.dumps({"rate_mbit": rate, "overall_mbit": overall, "bytes": total, "duration_s": end - first}))


def send_main(host: str, port: int, seconds: float, max_bytes: int) -> None:
    conn = _connect(host, port)
    payload = b"\0" * CHUNK_BYTES
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and sent < max_bytes:
        conn.sendall(payload)
        sent += len(payload)
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)
    conn.close()


def echo_main(port: int, count: int) -> None:
    srv = _listen(port)
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(count):
        data = conn.recv(64)
        if not data:
            break
        conn.sendall(data)


def ping_main(host: str, port: int, count: int) -> None:
    conn = _connect(host, port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(count):
        t0 = time.perf_counter()
        conn.sendall(b"x")
        if not conn.recv(64):
            break
        rtts.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"rtt_ms": rtts}))


def _py(args: list[str]) -> list[str]:
    """The argv that runs this file's `main` with `args`. As a script (standard library only), not as
    `-m srift.testbed.measure`: that imported the srift.testbed package (pydantic, the spec, the network
    code), 0.15 CPU-seconds a start with byte-code caches and 0.6 without (PYTHONDONTWRITEBYTECODE), against
    0.03 here, and a host's CPU quota stretches each start (four times on a quarter core). `-P` keeps this
    file's folder off sys.path, so none of its neighbours can shadow a standard-library module."""
    return [sys.executable, "-P", __file__, *args]


def throughput(
    testbed: Testbed, src: str, dst: str, *, seconds: float = 3.0, warmup_s: float = 0.5, port: int = 5301
) -> Throughput:
    """Send from host `src` to host `dst` for `seconds` (at most 4 GiB) and measure at the receiver."""
    receiver = testbed.popen_in(
        dst, _py(["recv", str(port), str(seconds + 10), str(warmup_s)]), stdout=subprocess.PIPE, text=True
    )
    try:
        assert receiver.stdout is not None
        receiver.stdout.readline()
        testbed.exec_in(
            src,
            _py(["send", testbed.host(dst).address, str(port), str(seconds), str(MAX_BYTES)]),
            timeout_s=seconds + 30,
            check=True,
        )
        out, _ = receiver.communicate(timeout=30)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    data = json.loads(out.strip().splitlines()[-1])
    return Throughput(
        rate_mbit=data["rate_mbit"],
        overall_mbit=data["overall_mbit"],
        bytes_received=data["bytes"],
        duration_s=data["duration_s"],
    )


def rtt_ms(testbed: Testbed, src: str, dst: str, *, count: int = 20, port: int = 5302) -> list[float]:
    """Round trips of a 1-byte TCP message from `src` to an echo server on `dst`, in milliseconds."""
    server = testbed.popen_in(dst, _py(["echo", str(port), str(count)]), stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()
        done = testbed.exec_in(
            src, _py(["ping", testbed.host(dst).address, str(port), str(count)]), timeout_s=60, check=True
        )
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    rtts: list[float] = json.loads(done.stdout.strip().splitlines()[-1])["rtt_ms"]
    return rtts


def median_rtt_ms(testbed: Testbed, src: str, dst: str, *, count: int = 20) -> float:
    return statistics.median(rtt_ms(testbed, src, dst, count=count))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cmd, rest = (args[0], args[1:]) if args else ("", [])
    if cmd == "recv" and len(rest) == 3:
        recv_main(int(rest[0]), float(rest[1]), float(rest[2]))
    elif cmd == "send" and len(rest) == 4:
        send_main(rest[0], int(rest[1]), float(rest[2]), int(rest[3]))
    elif cmd == "echo" and len(rest) == 2:
        echo_main(int(rest[0]), int(rest[1]))
    elif cmd == "ping" and len(rest) == 3:
        ping_main(rest[0], int(rest[1]), int(rest[2]))
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
