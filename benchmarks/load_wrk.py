"""Benchmark: wrk, a compiled HTTP load generator, drives a real `srift serve` (N workers) on loopback.

benchmarks/load.py's clients are Python threads that share the GIL and the CPUs with the server; here the
client is Debian's `wrk` (C, event-driven, LuaJIT script benchmarks/wrk/srift.lua for the POST body, the
token and optional pacing), and the report says how much CPU the client itself used. For each database
(SQLite file, or PostgreSQL started by scripts/pg.sh on its own folder and port with fsync on) and each
scenario it starts the server on a fresh database with the shipped catalog, warms every worker up, runs wrk
and reports throughput, latency percentiles, errors (non-2xx, socket errors, timeouts), the server's CPU
per request, the client's CPU share and the server's memory. Sections `load (wrk)` and `soak (wrk)` of
docs/BENCHMARKS.md.

    .venv/bin/python -m benchmarks.load_wrk [--scenario plans,instance-types] [--database sqlite,postgres]
        [--connections 8] [--duration 20] [--workers N] [--rate R]
    .venv/bin/python -m benchmarks.load_wrk --soak 10 --rate 100 --scenario plans   # RSS every minute

Run it alone (`cpu heavy ...`): it saturates both cores. Needs `wrk` (apt-get install wrk).
Acceptance (issue #22): plans ≥ 100 req/s with p99 < 250 ms and 0 errors, instance-types ≥ 1,000 req/s
(and, issue #48, p99 < 250 ms), on SQLite and PostgreSQL; soak at 100 plans/s: 0 errors, RSS at minute 10
within 10 % of minute 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.load import DATABASE_LABELS, DATABASES, Request, build_scenario, fresh_database, warm_up
from srift.testing.server import Server, create_write_token, running_server

LUA_SCRIPT = Path(__file__).resolve().parent / "wrk" / "srift.lua"
SCENARIOS = ("plans", "instance-types", "predictions", "health")
PLANS_MIN_RPS = 100.0
PLANS_MAX_P99_MS = 250.0
READS_MIN_RPS = 1000.0
READS_MAX_P99_MS = 250.0
"""Issue 48: catalog reads keep their tail on PostgreSQL too."""
SOAK_RSS_DRIFT = 0.10


@dataclass
class WrkRun:
    """One wrk run against one server: wrk's own report plus CPU and memory read from /proc."""

    scenario: str
    database: str
    workers: int
    connections: int
    wall_s: float
    report: dict[str, Any]
    client_cpu_s: float
    server_cpu_s: float
    server_rss_bytes: int
    worker_peak_rss_bytes: int
    target_rate: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return int(self.report["requests"])

    @property
    def duration_s(self) -> float:
        return float(self.report["duration_us"]) / 1e6

    @property
    def throughput_rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def errors(self) -> int:
        return sum(int(v) for v in self.report["errors"].values())

    def latency_ms(self, key: str) -> float:
        return float(self.report["latency_us"][key]) / 1e3

    @property
    def server_cpu_ms_per_request(self) -> float:
        return 1e3 * self.server_cpu_s / self.requests if self.requests else float("nan")

    @property
    def client_share(self) -> float:
        """The client's CPU as a share of all CPU the test used (client + server)."""
        total = self.client_cpu_s + self.server_cpu_s
        return self.client_cpu_s / total if total > 0 else 0.0

    def machine_share(self, cpus: int) -> float:
        """The client's CPU as a share of the machine's CPU capacity over the run."""
        return self.client_cpu_s / (self.wall_s * cpus) if self.wall_s > 0 else 0.0


def require_wrk() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise SystemExit("wrk not found: install Debian's package (`apt-get install wrk`)")
    return path


def run_wrk(
    server: Server,
    request: Request,
    *,
    token: str,
    connections: int,
    threads: int,
    duration_s: float,
    rate: float,
    work_dir: Path,
) -> tuple[dict[str, Any], float, float, float]:
    """Run wrk once; return its report, its CPU seconds, the server's CPU seconds and the wall time."""
    body_file = work_dir / "body.json"
    body_file.write_text("" if request.body is None else json.dumps(request.body))
    report_file = work_dir / "wrk-report.json"
    report_file.unlink(missing_ok=True)
    env = {
        **os.environ,
        "SRIFT_WRK_METHOD": request.method,
        "SRIFT_WRK_PATH": request.path,
        "SRIFT_WRK_BODY_FILE": str(body_file) if request.body is not None else "",
        "SRIFT_WRK_TOKEN": token,
        "SRIFT_WRK_THREAD_RATE": f"{rate / threads:.6f}" if rate > 0 else "",
        "SRIFT_WRK_REPORT": str(report_file),
    }
    args = [
        require_wrk(),
        f"--connections={connections}",
        f"--threads={threads}",
        f"--duration={max(1, round(duration_s))}s",
        "--timeout=30s",
        f"--script={LUA_SCRIPT}",
        server.base_url + request.path,
    ]
    server_cpu_before = server.cpu_seconds()
    start = time.monotonic()
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(process.pid, 0)
    wall_s = time.monotonic() - start
    server_cpu_s = server.cpu_seconds() - server_cpu_before
    output = process.stdout.read().decode(errors="replace") if process.stdout else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or not report_file.exists():
        raise RuntimeError(f"wrk failed (exit {process.returncode}):\n{output[-3000:]}")
    report: dict[str, Any] = json.loads(report_file.read_text())
    return report, usage.ru_utime + usage.ru_stime, server_cpu_s, wall_s


def _check_server(server: Server) -> None:
    if server.process.poll() is not None:
        raise RuntimeError(f"server died under load:\n{server.log_text()[-4000:]}")


def measure(
    *,
    scenario: str,
    database: str,
    workers: int,
    connections: int,
    threads: int,
    duration_s: float,
    rate: float,
    work_dir: Path,
    source: Path | None = None,
) -> WrkRun:
    """Fresh database and server, warm-up, one wrk run."""
    with fresh_database(database, work_dir=work_dir) as url:
        token = create_write_token(url, name="load")
        headers = {"Authorization": f"Bearer {token}"}
        with running_server(database_url=url, data_dir=work_dir, workers=workers, source=source) as server:
            name, request = build_scenario(scenario, base_url=server.base_url, headers=headers)
            warm_up(server, request, headers=headers, workers=workers)
            report, client_cpu, server_cpu, wall = run_wrk(
                server,
                request,
                token=token,
                connections=connections,
                threads=threads,
                duration_s=duration_s,
                rate=rate,
                work_dir=work_dir,
            )
            _check_server(server)
            return WrkRun(
                scenario=name,
                database=database,
                workers=workers,
                connections=connections,
                wall_s=wall,
                report=report,
                client_cpu_s=client_cpu,
                server_cpu_s=server_cpu,
                server_rss_bytes=server.rss_bytes(),
                worker_peak_rss_bytes=server.peak_rss_bytes(),
                target_rate=rate,
            )


@dataclass
class SoakMinute:
    minute: int
    run: WrkRun


def soak(
    *,
    scenario: str,
    database: str,
    workers: int,
    connections: int,
    threads: int,
    minutes: int,
    rate: float,
    work_dir: Path,
    progress: bool = True,
) -> list[SoakMinute]:
    """`minutes` back-to-back one-minute wrk runs at `rate` on one server; RSS read after each minute."""
    out: list[SoakMinute] = []
    with fresh_database(database, work_dir=work_dir) as url:
        token = create_write_token(url, name="load")
        headers = {"Authorization": f"Bearer {token}"}
        with running_server(database_url=url, data_dir=work_dir, workers=workers) as server:
            name, request = build_scenario(scenario, base_url=server.base_url, headers=headers)
            warm_up(server, request, headers=headers, workers=workers)
            for minute in range(1, minutes + 1):
                report, client_cpu, server_cpu, wall = run_wrk(
                    server,
                    request,
                    token=token,
                    connections=connections,
                    threads=threads,
                    duration_s=60,
                    rate=rate,
                    work_dir=work_dir,
                )
                _check_server(server)
                run = WrkRun(
                    scenario=name,
                    database=database,
                    workers=workers,
                    connections=connections,
                    wall_s=wall,
                    report=report,
                    client_cpu_s=client_cpu,
                    server_cpu_s=server_cpu,
                    server_rss_bytes=server.rss_bytes(),
                    worker_peak_rss_bytes=server.peak_rss_bytes(),
                    target_rate=rate,
                )
                out.append(SoakMinute(minute, run))
                if progress:
                    print(
                        f"soak minute {minute}/{minutes}: {run.throughput_rps:.1f} req/s, "
                        f"p99 {run.latency_ms('p99'):.0f} ms, errors {run.errors}, "
                        f"RSS {run.server_rss_bytes / 2**20:.1f} MiB",
                        file=sys.stderr,
                        flush=True,
                    )
    return out


def _load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"load average at the end {one:.2f} (1 min), {five:.2f} (5 min)"


def render_runs(runs: list[WrkRun], *, cpus: int, threads: int, duration_s: float) -> str:
    lines = [
        f"wrk ({threads} thread{'s' if threads > 1 else ''}, keep-alive connections, --timeout 30s) against "
        f"`srift serve --workers N` on loopback, {duration_s:g} s per run, fresh database and server per run "
        f"(shipped catalog, a T4 and a V100 profile stored). Client and server share the machine's {cpus} "
        "CPUs; *client CPU* is wrk's own CPU time as a share of all CPU the run used (client + server) and "
        "of the machine. Errors count non-2xx answers, socket errors and timeouts.",
        "",
        "| scenario | database | workers | connections | requests | throughput (req/s) | p50 (ms) | p90 (ms) "
        "| p99 (ms) | max (ms) | errors | server CPU per request (ms) | client CPU (of used / of machine) "
        "| server RSS, all processes (MiB) | acceptance |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r.scenario} | {DATABASE_LABELS[r.database]} | {r.workers} | {r.connections} | {r.requests} "
            f"| {r.throughput_rps:,.1f} | {r.latency_ms('p50'):.1f} | {r.latency_ms('p90'):.1f} "
            f"| {r.latency_ms('p99'):.1f} | {r.latency_ms('max'):.1f} | {r.errors} "
            f"| {r.server_cpu_ms_per_request:.2f} | {100 * r.client_share:.0f} % / "
            f"{100 * r.machine_share(cpus):.0f} % | {r.server_rss_bytes / 2**20:.0f} | {acceptance(r)} |"
        )
    lines += ["", f"Machine: {_load_note()}."]
    return "\n".join(lines)


def acceptance(run: WrkRun) -> str:
    if run.scenario == "plans":
        ok = (
            run.throughput_rps >= PLANS_MIN_RPS
            and run.latency_ms("p99") < PLANS_MAX_P99_MS
            and run.errors == 0
        )
        return f"≥ {PLANS_MIN_RPS:g}/s, p99 < {PLANS_MAX_P99_MS:g} ms, 0 errors: {'met' if ok else 'NOT met'}"
    if run.scenario == "instance-types":
        ok = (
            run.throughput_rps >= READS_MIN_RPS
            and run.latency_ms("p99") < READS_MAX_P99_MS
            and run.errors == 0
        )
        return (
            f"≥ {READS_MIN_RPS:,.0f}/s, p99 < {READS_MAX_P99_MS:g} ms, 0 errors: {'met' if ok else 'NOT met'}"
        )
    return "0 errors: " + ("met" if run.errors == 0 else "NOT met")


def summary(run: WrkRun) -> dict[str, Any]:
    """The figures of one run as JSON (`--json`): what tests/reliability/test_load.py checks."""
    return {
        "scenario": run.scenario,
        "database": run.database,
        "workers": run.workers,
        "connections": run.connections,
        "target_rate": run.target_rate,
        "requests": run.requests,
        "errors": run.errors,
        "throughput_rps": run.throughput_rps,
        "p99_ms": run.latency_ms("p99"),
        "server_cpu_s": run.server_cpu_s,
        "client_cpu_s": run.client_cpu_s,
        "client_share": run.client_share,
        "acceptance": acceptance(run),
        "report": run.report,
    }


def soak_verdict(minutes: list[SoakMinute]) -> tuple[bool, str]:
    errors = sum(m.run.errors for m in minutes)
    if len(minutes) < 10:
        return errors == 0, f"{errors} errors; fewer than 10 minutes, so no RSS verdict"
    rss2 = minutes[1].run.server_rss_bytes
    rss10 = minutes[9].run.server_rss_bytes
    drift = (rss10 - rss2) / rss2
    ok = errors == 0 and abs(drift) <= SOAK_RSS_DRIFT
    return ok, (
        f"{errors} errors; RSS minute 10 vs minute 2: {drift:+.1%} (limit ±{SOAK_RSS_DRIFT:.0%}): "
        f"{'met' if ok else 'NOT met'}"
    )


def render_soak(minutes: list[SoakMinute], *, rate: float, cpus: int) -> str:
    first = minutes[0].run
    total = sum(m.run.requests for m in minutes)
    lines = [
        f"Soak: `{first.scenario}` paced at {rate:g} req/s by wrk ({first.connections} connections) against "
        f"`srift serve --workers {first.workers}` ({DATABASE_LABELS[first.database]}), {len(minutes)} "
        "back-to-back one-minute wrk runs on one server; the server's resident memory (VmRSS summed over "
        f"the supervisor and its workers) read after each minute. {total} requests in all.",
        "",
        "| minute | requests | throughput (req/s) | p50 (ms) | p99 (ms) | max (ms) | errors "
        "| server CPU per request (ms) | client CPU (of machine) | server RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in minutes:
        r = m.run
        lines.append(
            f"| {m.minute} | {r.requests} | {r.throughput_rps:.1f} | {r.latency_ms('p50'):.1f} "
            f"| {r.latency_ms('p99'):.1f} | {r.latency_ms('max'):.1f} | {r.errors} "
            f"| {r.server_cpu_ms_per_request:.2f} | {100 * r.machine_share(cpus):.1f} % "
            f"| {r.server_rss_bytes / 2**20:.1f} |"
        )
    _, verdict = soak_verdict(minutes)
    lines += ["", f"Acceptance: 0 errors, RSS at minute 10 within 10 % of minute 2 — {verdict}.", ""]
    lines.append(f"Machine: {_load_note()}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from srift.api.server import available_cpus

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="plans,instance-types", help=f"comma-separated: {SCENARIOS}")
    parser.add_argument("--database", default="sqlite,postgres", help=f"comma-separated: {DATABASES}")
    parser.add_argument("--workers", type=int, default=None, help="default: one per usable CPU")
    parser.add_argument("--connections", type=int, default=8, help="concurrent keep-alive connections")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (one keeps the client lean)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per run")
    parser.add_argument("--rate", type=float, default=0.0, help="pace to this many req/s (0: flat out)")
    parser.add_argument("--soak", type=int, default=0, metavar="MINUTES", help="soak for MINUTES at --rate")
    parser.add_argument(
        "--source", type=Path, default=None, help="run the server from another checkout (before/after)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write each run's figures to PATH"
    )
    args = parser.parse_args(argv)
    require_wrk()
    scenarios = [s.strip() for s in args.scenario.split(",") if s.strip()]
    databases = [d.strip() for d in args.database.split(",") if d.strip()]
    bad = [s for s in scenarios if s not in SCENARIOS] + [d for d in databases if d not in DATABASES]
    if bad:
        parser.error(f"unknown scenario or database: {', '.join(bad)}")
    cpus = os.cpu_count() or 1
    workers = args.workers or available_cpus()
    if args.soak:
        if args.rate <= 0 or len(scenarios) != 1 or len(databases) != 1:
            parser.error("--soak needs --rate > 0, one --scenario and one --database")
        with tempfile.TemporaryDirectory(prefix="srift-soak-") as tmp:
            minutes = soak(
                scenario=scenarios[0],
                database=databases[0],
                workers=workers,
                connections=args.connections,
                threads=args.threads,
                minutes=args.soak,
                rate=args.rate,
                work_dir=Path(tmp),
            )
        markdown = render_soak(minutes, rate=args.rate, cpus=cpus)
        ok, _ = soak_verdict(minutes)
        records = [summary(m.run) for m in minutes]
        section = "soak (wrk)"
        command = (
            f"cpu heavy .venv/bin/python -m benchmarks.load_wrk --soak {args.soak} --rate {args.rate:g} "
            f"--scenario {scenarios[0]} --database {databases[0]} --workers {workers} "
            f"--connections {args.connections}"
        )
    else:
        runs = []
        for database in databases:
            for scenario in scenarios:
                with tempfile.TemporaryDirectory(prefix="srift-wrk-") as tmp:
                    run = measure(
                        scenario=scenario,
                        database=database,
                        workers=workers,
                        connections=args.connections,
                        threads=args.threads,
                        duration_s=args.duration,
                        rate=args.rate,
                        work_dir=Path(tmp),
                        source=args.source,
                    )
                print(
                    f"{database} {run.scenario}: {run.throughput_rps:.1f} req/s, "
                    f"p99 {run.latency_ms('p99'):.1f} ms, errors {run.errors}",
                    file=sys.stderr,
                    flush=True,
                )
                runs.append(run)
        markdown = render_runs(runs, cpus=cpus, threads=args.threads, duration_s=args.duration)
        ok = all(acceptance(r).endswith(": met") for r in runs)
        records = [summary(r) for r in runs]
        section = "load (wrk)" if args.source is None else f"load (wrk, server from {args.source.name})"
        command = (
            f"cpu heavy .venv/bin/python -m benchmarks.load_wrk --scenario {args.scenario} "
            f"--database {args.database} --workers {workers} --connections {args.connections} "
            f"--duration {args.duration:g}"
            + (f" --rate {args.rate:g}" if args.rate else "")
            + (f" --source {args.source}" if args.source else "")
        )
    print(markdown)
    if args.json is not None:
        args.json.write_text(json.dumps(records, indent=2))
    if not args.no_write:
        from benchmarks._report import write_section

        write_section(section, markdown, command=command)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
