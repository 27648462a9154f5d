"""Benchmark: N clients hammer a real `srift serve` on loopback for M seconds; zero errors expected.

Starts the server as a subprocess (the same entry point users run) on a fresh SQLite database with the
shipped catalog, creates a write token, then runs N client threads, each sending the scenario's request in a
loop until the time or the request cap runs out. Reports throughput, p50/p90/p99 latency, errors and the
server's peak resident memory (VmHWM), and writes the section `load` of docs/BENCHMARKS.md.

    .venv/bin/python -m benchmarks.load [--clients 8] [--duration 20] [--scenario plans,predictions]
        [--workers N] [--database sqlite|postgres]

The clients are Python threads in one process, so on a small machine they compete with the server for CPU
(and each other for the GIL); benchmarks/load_wrk.py drives the same scenarios with wrk, a compiled client.

Scenarios: `plans` (POST /v1/plans for a stored profile), `predictions` (POST /v1/predictions),
`instance-types` (GET /v1/instance-types), `health`. `auto` picks the first the server offers.
The short form runs in `make test` (tests/reliability/test_load.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from srift.testing.server import Server, create_write_token, running_server, store_profiles

REPO_ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("plans", "predictions", "instance-types", "health")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any = None


@dataclass
class LoadResult:
    """What N clients saw: every latency, every status, every transport error."""

    scenario: str
    clients: int
    duration_s: float
    workers: int = 1
    database: str = "sqlite"
    latencies_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.latencies_s)

    @property
    def error_count(self) -> int:
        return len(self.errors) + sum(n for code, n in self.statuses.items() if code >= 400)

    def percentile_s(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        if not ordered:
            return float("nan")
        index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
        return ordered[index]

    @property
    def throughput_rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0


def run_load(
    *,
    base_url: str,
    request: Request,
    headers: dict[str, str],
    clients: int,
    duration_s: float,
    max_requests: int,
    scenario: str = "",
) -> LoadResult:
    """Run `clients` threads sending `request` until `duration_s` passes or `max_requests` are sent."""
    lock = threading.Lock()
    result = LoadResult(scenario or request.path, clients, 0.0)
    budget = [max_requests]
    start = time.monotonic()
    deadline = start + duration_s

    def take() -> bool:
        with lock:
            if budget[0] <= 0 or time.monotonic() >= deadline:
                return False
            budget[0] -= 1
            return True

    def client() -> None:
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
            while take():
                t0 = time.perf_counter()
                try:
                    response = http.request(request.method, request.path, json=request.body)
                    status, error = response.status_code, None
                    if status >= 400:
                        error = f"{status}: {response.text[:300]}"
                except httpx.HTTPError as exc:
                    status, error = 0, f"{type(exc).__name__}: {exc}"
                elapsed = time.perf_counter() - t0
                with lock:
                    result.latencies_s.append(elapsed)
                    if status:
                        result.statuses[status] = result.statuses.get(status, 0) + 1
                    if error and (status == 0 or len(result.errors) < 20):
                        result.errors.append(error)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration_s + 120)
    result.duration_s = time.monotonic() - start
    return result


def build_scenario(name: str, *, base_url: str, headers: dict[str, str]) -> tuple[str, Request]:
    """Resolve `name` (or `auto`) against the server's OpenAPI paths and prepare its request body."""
    paths: dict[str, Any] = httpx.get(base_url + "/openapi.json", timeout=30).json()["paths"]
    offered = {
        "plans": "post" in paths.get("/v1/plans", {}),
        "predictions": "post" in paths.get("/v1/predictions", {}),
        "instance-types": "get" in paths.get("/v1/instance-types", {}),
        "health": True,
    }
    if name == "auto":
        name = next(n for n in SCENARIOS if offered[n])
    if not offered.get(name):
        raise SystemExit(f"scenario {name!r} is not offered by this server (has: {sorted(paths)})")
    if name == "health":
        return name, Request("GET", "/v1/health")
    if name == "instance-types":
        return name, Request("GET", "/v1/instance-types")
    profile_ids = store_profiles(base_url=base_url, headers=headers)
    if name == "plans":
        body: dict[str, Any] = {
            "profile_ids": profile_ids,
            "global_batch": 512,
            "iterations": 10_000,
            "objective": "min_cost",
            "provider": "aws",
            "region": "us-east-1",
            "market": "on_demand",
            "availability": {"g4dn.xlarge": 8, "g4dn.12xlarge": 2, "p3.2xlarge": 4},
            "mode": "auto",
            "solve_budget_s": 2.0,
        }
        return name, Request("POST", "/v1/plans", body)
    body = {
        "profile_ids": profile_ids,
        "provider": "aws",
        "region": "us-east-1",
        "iterations": 10_000,
        "config": {
            "choices": [{"instance_type": "g4dn.12xlarge", "market": "on_demand", "count": 2, "batch": 256}]
        },
    }
    return name, Request("POST", "/v1/predictions", body)


PG_SCRIPT = REPO_ROOT / "scripts" / "pg.sh"
BENCH_PG_DIR = "/tmp/srift-pg-bench"
BENCH_PG_PORT = "55433"
DATABASES = ("sqlite", "postgres")
DATABASE_LABELS = {"sqlite": "SQLite, WAL", "postgres": "PostgreSQL, fsync on"}


@contextlib.contextmanager
def fresh_database(kind: str, *, work_dir: Path) -> Iterator[str]:
    """A new, migrated database: a SQLite file in `work_dir`, or a database on a PostgreSQL server that
    scripts/pg.sh starts for benchmarks (its own folder and port, fsync on; stopped afterwards)."""
    from srift.db import migrate
    from srift.db.session import dispose_engines, get_engine

    if kind == "sqlite":
        url = f"sqlite:///{work_dir / 'load.db'}"
        migrate.upgrade(url)
        yield url
        return
    if kind != "postgres":
        raise ValueError(f"unknown database kind {kind!r}; use one of {DATABASES}")
    env = {**os.environ, "SRIFT_PG_DIR": BENCH_PG_DIR, "SRIFT_PG_PORT": BENCH_PG_PORT, "SRIFT_PG_FSYNC": "on"}
    started = subprocess.run(
        ["bash", str(PG_SCRIPT), "start"], env=env, capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        raise RuntimeError(f"scripts/pg.sh start failed: {started.stderr.strip()}")
    base = started.stdout.strip().splitlines()[-1]
    name = f"srift_load_{os.getpid()}_{int(time.time())}"
    from sqlalchemy import text

    try:
        with get_engine(base).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = base.rsplit("/", 1)[0] + "/" + name
        migrate.upgrade(url)
        yield url
    finally:
        dispose_engines()
        with (
            contextlib.suppress(Exception),
            get_engine(base).connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
        ):
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        dispose_engines()
        subprocess.run(["bash", str(PG_SCRIPT), "stop"], env=env, capture_output=True, check=False)


def warm_up(
    server: Server, request: Request, *, headers: dict[str, str], workers: int, rounds: int = 3
) -> None:
    """Send `rounds` waves of 2 × `workers` concurrent requests, so that every worker has answered some."""
    failures: list[str] = []

    def one(http: httpx.Client) -> None:
        response = http.request(request.method, request.path, json=request.body)
        if response.status_code >= 400:
            failures.append(response.text[:500])

    with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as http:
        for _ in range(rounds):
            threads = [threading.Thread(target=one, args=(http,)) for _ in range(2 * workers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    if failures:
        raise RuntimeError(f"warm-up {request.method} {request.path} failed: {failures[0]}")


def measure(
    *,
    scenario: str,
    clients: int,
    duration_s: float,
    max_requests: int,
    work_dir: Path,
    warmup: int = 3,
    workers: int = 1,
    database: str = "sqlite",
) -> tuple[LoadResult, int]:
    """Start a server on a fresh database, run the load, return the result and the server's peak RSS."""
    with fresh_database(database, work_dir=work_dir) as database_url:
        token = create_write_token(database_url, name="load")
        headers = {"Authorization": f"Bearer {token}"}
        with running_server(database_url=database_url, data_dir=work_dir, workers=workers) as server:
            name, request = build_scenario(scenario, base_url=server.base_url, headers=headers)
            warm_up(server, request, headers=headers, workers=workers, rounds=warmup)
            result = run_load(
                base_url=server.base_url,
                request=request,
                headers=headers,
                clients=clients,
                duration_s=duration_s,
                max_requests=max_requests,
                scenario=name,
            )
            if server.process.poll() is not None:
                raise RuntimeError(f"server died under load:\n{server.log_text()[-4000:]}")
            result.workers = workers
            result.database = database
            return result, server.peak_rss_bytes()


def render(result: LoadResult, peak_rss_bytes: int) -> str:
    statuses = ", ".join(f"{code}: {n}" for code, n in sorted(result.statuses.items()))
    return "\n".join(
        [
            f"Scenario `{result.scenario}`: {result.clients} Python client threads on loopback for "
            f"{result.duration_s:.1f} s against `srift serve --workers {result.workers}` "
            f"({DATABASE_LABELS[result.database]}).",
            "",
            "| requests | throughput (req/s) | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | errors | "
            "server peak RSS (MiB) |",
            "|---|---|---|---|---|---|---|---|",
            f"| {result.requests} | {result.throughput_rps:.1f} | {result.percentile_s(50) * 1e3:.1f} | "
            f"{result.percentile_s(90) * 1e3:.1f} | {result.percentile_s(99) * 1e3:.1f} | "
            f"{max(result.latencies_s, default=float('nan')) * 1e3:.1f} | {result.error_count} | "
            f"{peak_rss_bytes / 2**20:.0f} |",
            "",
            f"Status codes: {statuses or 'none'}. Acceptance: zero errors. Clients and server share the "
            f"machine (1-minute load average at the end: {os.getloadavg()[0]:.1f}).",
        ]
    )


def summary(result: LoadResult, peak_rss_bytes: int) -> dict[str, Any]:
    """The figures of one scenario as JSON (`--json`): what tests/reliability/test_load.py checks."""
    return {
        "scenario": result.scenario,
        "clients": result.clients,
        "workers": result.workers,
        "database": result.database,
        "duration_s": result.duration_s,
        "requests": result.requests,
        "statuses": {str(code): n for code, n in sorted(result.statuses.items())},
        "error_count": result.error_count,
        "errors": result.errors[:20],
        "p50_s": result.percentile_s(50),
        "p99_s": result.percentile_s(99),
        "peak_rss_bytes": peak_rss_bytes,
        "markdown": render(result, peak_rss_bytes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per scenario")
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument(
        "--scenario", default="plans,predictions", help=f"comma-separated, from auto, {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="server worker processes (default: one per usable CPU)"
    )
    parser.add_argument("--database", choices=DATABASES, default="sqlite")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write each scenario's figures to PATH"
    )
    args = parser.parse_args(argv)
    from srift.api.server import available_cpus

    workers = args.workers or available_cpus()
    names = [n.strip() for n in args.scenario.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("auto", *SCENARIOS)]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    sections, records, errors = [], [], 0
    for name in names:
        with tempfile.TemporaryDirectory(prefix="srift-load-") as tmp:
            result, peak = measure(
                scenario=name,
                clients=args.clients,
                duration_s=args.duration,
                max_requests=args.max_requests,
                work_dir=Path(tmp),
                workers=workers,
                database=args.database,
            )
        sections.append(render(result, peak))
        records.append(summary(result, peak))
        errors += result.error_count
        for error in result.errors[:5]:
            print("error:", error, file=sys.stderr)
    markdown = "\n\n".join(sections)
    print(markdown)
    if args.json is not None:
        args.json.write_text(json.dumps(records, indent=2))
    if not args.no_write:
        from benchmarks._report import write_section

        command = (
            f".venv/bin/python -m benchmarks.load --clients {args.clients} --duration {args.duration:g} "
            f"--scenario {args.scenario} --workers {workers} --database {args.database}"
        )
        section = "load" if args.database == "sqlite" else f"load ({args.database})"
        write_section(section, markdown, command=command)
    print(json.dumps({"scenarios": names, "errors": errors}))
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
