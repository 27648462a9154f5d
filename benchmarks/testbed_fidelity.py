"""Testbed fidelity: measured TCP throughput, round trip and CPU slowdown against what the spec asks (root).

Run: `sudo .venv/bin/python -m benchmarks.testbed_fidelity` (about a minute). Brings up one testbed with
links from 100 to 1000 Mbit/s and delays from 0.5 to 20 ms, measures each pair one at a time, then four
1 Gbit/s transfers at once (a ring, as an allreduce loads it), and a CPU loop in 0.5- and 1-core hosts.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

from benchmarks._report import write_section
from srift.testbed import Testbed, measure, parse_spec

SPEC = {
    "description": "fidelity benchmark",
    "types": [
        {"name": "tb.a", "cpu_cores": 0.5, "rate_mbit": 100, "delay_ms": 2, "price_usd_per_hr": 0.1},
        {"name": "tb.b", "cpu_cores": 1.0, "rate_mbit": 400, "delay_ms": 20, "price_usd_per_hr": 0.2},
        {"name": "tb.c", "cpu_cores": 1.0, "rate_mbit": 1000, "delay_ms": 0.5, "price_usd_per_hr": 0.3},
    ],
    "hosts": [{"type": "tb.a", "count": 2}, {"type": "tb.b", "count": 2}, {"type": "tb.c", "count": 4}],
}

LOOP = textwrap.dedent(
    """
    import json, time
    w, c = time.perf_counter(), time.process_time()
    x = 0
    for i in range(3_000_000):
        x += i * i
    print(json.dumps({"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c}))
    """
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tb = Testbed.up(parse_spec(SPEC), root=Path(tmp), prefix="bf" + secrets.token_hex(2))
        try:
            for a, b in [("a0", "a1"), ("b0", "b1"), ("c0", "c1"), ("a0", "b0"), ("b0", "c0")]:
                ha, hb = tb.host(a), tb.host(b)
                tput = measure.throughput(tb, a, b, seconds=3.0)
                rtt = statistics.median(measure.rtt_ms(tb, a, b, count=20))
                rate, want_rtt = min(ha.rate_mbit, hb.rate_mbit), ha.delay_ms + hb.delay_ms
                rate_err, rtt_err = 100 * (tput.rate_mbit / rate - 1), 100 * (rtt / want_rtt - 1)
                rows.append(
                    f"| {a} → {b} | {rate:g} | {tput.rate_mbit:.1f} | {rate_err:+.1f} % "
                    f"| {want_rtt:g} | {rtt:.2f} | {rtt_err:+.1f} % |"
                )
            ring: dict[str, float] = {}

            def send(i: int) -> None:
                src, dst = f"c{i}", f"c{(i + 1) % 4}"
                ring[f"{src} → {dst}"] = measure.throughput(
                    tb, src, dst, seconds=3.0, port=5400 + i
                ).rate_mbit

            threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            load = " / ".join(Path("/proc/loadavg").read_text().split()[:3])
            free = json.loads(
                subprocess.run([sys.executable, "-c", LOOP], capture_output=True, text=True).stdout
            )
            cpu = {}
            for host in ("a0", "b0"):
                out = tb.exec_in(host, [sys.executable, "-c", LOOP], check=True).stdout
                cpu[host] = json.loads(out)
        finally:
            tb.down()
    body = [
        f"Emulator: {tb.emulator}. One transfer at a time, TCP, 3 s after a 0.5 s warm-up; round trip is the",
        "median of 20 one-byte TCP echoes.",
        "",
        "| path | Mbit/s asked | measured | error | RTT ms asked | measured | error |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Four 1000 Mbit/s transfers at once (ring c0→c1→c2→c3→c0): "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(ring.items()))
        + " Mbit/s.",
        "",
        "CPU loop (3 M iterations), wall time against the loop's CPU time outside the testbed "
        f"({free['cpu_s']:.2f} s): 0.5-core host {cpu['a0']['wall_s'] / free['cpu_s']:.2f}× slower, "
        f"1-core host {cpu['b0']['wall_s'] / free['cpu_s']:.2f}×; cores the loop got (CPU time / wall time): "
        f"{cpu['a0']['cpu_s'] / cpu['a0']['wall_s']:.2f} and {cpu['b0']['cpu_s'] / cpu['b0']['wall_s']:.2f} "
        f"(quota 0.5 and 1). Load average while measuring: {load}; other work on the machine lowers both.",
    ]
    text = "\n".join(body)
    print(text)
    if not args.no_write:
        write_section(
            "Testbed fidelity", text, command="sudo .venv/bin/python -m benchmarks.testbed_fidelity"
        )


if __name__ == "__main__":
    main()
