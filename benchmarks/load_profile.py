"""Benchmark: where a loaded server's CPU goes — py-spy samples `srift serve` while wrk drives one scenario.

Starts the server (all its workers) on a fresh SQLite database, warms it up, then runs wrk (as
benchmarks/load_wrk.py does) while `py-spy record --subprocesses --format raw` samples every worker. Each
sample's stack is put in the first category whose rule matches one of its frames (table order), and each
category's share of the samples is turned into milliseconds of server CPU per request with the CPU time
/proc reports for the run. `--source DIR` runs the server from another checkout, for before/after figures.
Writes the section `load profile (py-spy, LABEL)` of docs/BENCHMARKS.md.

    .venv/bin/python -m benchmarks.load_profile [--scenario plans,instance-types] [--duration 20]
        [--workers N] [--source ../before-checkout --label before]

Needs `wrk` (apt-get install wrk) and `py-spy` (pip; in the dev extra); run it alone (`cpu heavy ...`).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.load import build_scenario, fresh_database, warm_up
from benchmarks.load_wrk import WrkRun, run_wrk
from srift.testing.server import create_write_token, running_server

# (category, frame patterns): a sample goes to the first category with a pattern in one of its frames.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("catalog reads (srift/catalog/store.py)", ("srift/catalog/",)),
    ("compute-profile reads", ("srift/profiling/store.py",)),
    ("bandwidth model lookup and answers", ("srift/bandwidth/",)),
    ("optimizer and simulator", ("srift/optimize/", "srift/sim/")),
    ("cache keys and data revisions", ("srift/db/revisions.py", "srift/services/cache.py")),
    ("token check (srift/api/auth.py)", ("srift/api/auth.py",)),
    (
        "plan row insert and commit",
        ("Session.flush", "Session.commit", "Session.close", "get_db", "session_factory"),
    ),
    ("building the plan document", ("plan_result", "plan_view", "srift/services/plans.py")),
    (
        "request parsing and validation",
        ("request_body_to_args", "Request.json", "Request.body", "_validate_value", "model_validate_json"),
    ),
    (
        "response validation and JSON",
        ("serialize_response", "jsonable_encoder", "JSONResponse", "render", "model_validate", "dump"),
    ),
    ("HTTP server, routing and event loop", ("uvicorn/", "starlette/", "fastapi/", "asyncio/", "uvloop")),
    ("thread-pool hand-off", ("anyio/", "threading.py", "queue.py", "concurrent/")),
)
OTHER = "other"


@dataclass(frozen=True)
class Profile:
    total_samples: int
    by_category: dict[str, int]
    top_self: list[tuple[str, int]]


def _frames(stack: str) -> list[str]:
    return [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]


def categorize(raw_text: str) -> Profile:
    """Aggregate py-spy's raw (collapsed) stacks into CATEGORIES and the top functions by own samples."""
    by_category: collections.Counter[str] = collections.Counter()
    self_counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw_text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = _frames(stack)
        total += count
        self_counts[frames[-1]] += count
        for name, patterns in CATEGORIES:
            if any(p in f for f in frames for p in patterns):
                by_category[name] += count
                break
        else:
            by_category[OTHER] += count
    return Profile(total, dict(by_category), self_counts.most_common(10))


def require_py_spy() -> str:
    path = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(path).exists():
        raise SystemExit("py-spy not found: `pip install py-spy` (it is in srift's dev extra)")
    return path


def profile_scenario(
    *,
    scenario: str,
    workers: int,
    connections: int,
    duration_s: float,
    rate_hz: int,
    work_dir: Path,
    source: Path | None,
) -> tuple[WrkRun, Profile]:
    with fresh_database("sqlite", work_dir=work_dir) as url:
        token = create_write_token(url, name="load")
        headers = {"Authorization": f"Bearer {token}"}
        with running_server(database_url=url, data_dir=work_dir, workers=workers, source=source) as server:
            name, request = build_scenario(scenario, base_url=server.base_url, headers=headers)
            warm_up(server, request, headers=headers, workers=workers)
            raw = work_dir / "py-spy.txt"
            spy = subprocess.Popen(
                [
                    require_py_spy(),
                    "record",
                    "--pid",
                    str(server.pid),
                    "--subprocesses",
                    "--nonblocking",
                    "--format",
                    "raw",
                    "--rate",
                    str(rate_hz),
                    "--duration",
                    str(round(duration_s)),
                    "--output",
                    str(raw),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            report, client_cpu, server_cpu, wall = run_wrk(
                server,
                request,
                token=token,
                connections=connections,
                threads=1,
                duration_s=duration_s,
                rate=0.0,
                work_dir=work_dir,
            )
            _, err = spy.communicate(timeout=duration_s + 120)
            if spy.returncode != 0 or not raw.exists():
                detail = err.decode(errors="replace")[-2000:]
                raise RuntimeError(f"py-spy failed ({spy.returncode}): {detail}")
            run = WrkRun(
                scenario=name,
                database="sqlite",
                workers=workers,
                connections=connections,
                wall_s=wall,
                report=report,
                client_cpu_s=client_cpu,
                server_cpu_s=server_cpu,
                server_rss_bytes=server.rss_bytes(),
                worker_peak_rss_bytes=server.peak_rss_bytes(),
            )
            return run, categorize(raw.read_text())


def render(results: list[tuple[WrkRun, Profile]], *, label: str, duration_s: float, rate_hz: int) -> str:
    lines = [
        f"Server: {label}. py-spy at {rate_hz} Hz on every server process (threads on CPU only) while wrk "
        f"drives the scenario for {duration_s:g} s; the server's CPU per request (from /proc, with "
        "py-spy's small sampling cost) is split by each category's share of the samples.",
    ]
    for run, prof in results:
        ms = run.server_cpu_ms_per_request
        lines += [
            "",
            f"`{run.scenario}`: {run.throughput_rps:,.1f} req/s, p50 {run.latency_ms('p50'):.1f} ms, "
            f"p99 {run.latency_ms('p99'):.1f} ms, {run.errors} errors, {run.workers} worker(s), "
            f"{run.connections} connections; server CPU {ms:.2f} ms per request; "
            f"{prof.total_samples} samples.",
            "",
            "| where the server's CPU goes | share of samples | ms of server CPU per request |",
            "|---|---|---|",
        ]
        names = [n for n, _ in CATEGORIES] + [OTHER]
        for name in names:
            count = prof.by_category.get(name, 0)
            if count == 0:
                continue
            share = count / prof.total_samples if prof.total_samples else 0.0
            lines.append(f"| {name} | {100 * share:.1f} % | {share * ms:.2f} |")
        lines += [
            "",
            "Top functions by own samples: "
            + "; ".join(
                f"{frame} {100 * n / max(1, prof.total_samples):.1f} %" for frame, n in prof.top_self[:6]
            )
            + ".",
        ]
    one, five, _ = os.getloadavg()
    lines += ["", f"Machine: load average at the end {one:.2f} (1 min), {five:.2f} (5 min)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from srift.api.server import available_cpus

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="plans,instance-types")
    parser.add_argument("--workers", type=int, default=None, help="default: one per usable CPU")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--rate-hz", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--source", type=Path, default=None, help="run the server from another checkout")
    parser.add_argument("--label", default=None, help="names the server in the section (default: this code)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    require_py_spy()
    workers = args.workers or (1 if args.source is not None else available_cpus())
    label = args.label or ("this checkout" if args.source is None else str(args.source))
    results = []
    for scenario in [s.strip() for s in args.scenario.split(",") if s.strip()]:
        with tempfile.TemporaryDirectory(prefix="srift-prof-") as tmp:
            results.append(
                profile_scenario(
                    scenario=scenario,
                    workers=workers,
                    connections=args.connections,
                    duration_s=args.duration,
                    rate_hz=args.rate_hz,
                    work_dir=Path(tmp),
                    source=args.source,
                )
            )
    markdown = render(results, label=label, duration_s=args.duration, rate_hz=args.rate_hz)
    print(markdown)
    if not args.no_write:
        from benchmarks._report import write_section

        command = (
            f"cpu heavy .venv/bin/python -m benchmarks.load_profile --scenario {args.scenario} "
            f"--workers {workers} --connections {args.connections} --duration {args.duration:g}"
            + (f" --source {args.source} --label {args.label}" if args.source else "")
        )
        write_section(f"load profile (py-spy, {args.label or 'after'})", markdown, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
