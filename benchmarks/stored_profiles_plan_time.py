"""POST /v1/plans for a user's own model by name, with 1 and with 50 stored profiles of that model.

A plan request that names a `model` (not profile ids, not inline documents) is planned with every stored
profile of that model the token sees (srift.services.profiles.resolve_profiles). This benchmark stores the
README's CNN profile (srift/testing/data/cnn_t4_structured_profile.json, a CPU profile labelled T4) under a
write token, plus `--stored - 1` earlier runs of it (the same document with other times and dates, as a
user who re-profiles the model keeps uploading), on a fresh embedded database with the shipped catalog and
models, then times `--requests` POST /v1/plans {model: cnn} in the process (FastAPI's TestClient):
min_time within $0.50, spot, CPU profiles allowed, exhaustive, global batch 256. The server keeps prepared
problems per request, so each request asks for one more iteration (20,000, 20,001, ...) and is prepared
afresh, as a new request is; request 1 is also the process's first plan. With `--write` the 1- and
50-profile runs go into docs/BENCHMARKS.md, each in a process of its own, also with the code of another
source tree (`--baseline DIR`, e.g. a worktree of main holding a copy of this script), and the section
quotes files of whole-process figures (`--whole-process FILE`) as they are.

    python -m benchmarks.stored_profiles_plan_time [--stored 50] [--requests 10] [--json F]
    python -m benchmarks.stored_profiles_plan_time --write [--baseline DIR] [--whole-process FILE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from srift.testing.plans import DATA

PROFILE = DATA / "cnn_t4_structured_profile.json"
ITERATIONS = 20_000
STORED = (1, 50)
REQUEST: dict[str, Any] = {
    "model": "cnn",
    "global_batch": 256,
    "objective": "min_time",
    "budget_usd": 0.5,
    "market": "spot",
    "allow_cpu_profiles": True,
    "mode": "exhaustive",
}


def earlier_run(document: dict[str, Any], k: int) -> dict[str, Any]:
    """The profile as an earlier run `k` (1, 2, ...) would have stored it: k days older, each time 0.2·k %
    longer (a new document, so a row of its own)."""
    scale = 1.0 + 0.002 * k

    def curve(c: dict[str, Any]) -> dict[str, Any]:
        return {**c, "times_s": [t * scale for t in c["times_s"]]}

    day = 27 - k % 27
    return {
        **document,
        "forward": curve(document["forward"]),
        "backward": curve(document["backward"]),
        "created_at": f"2026-{11 - k // 27:02d}-{day:02d}T03:58:52+00:00",
    }


def measure(stored: int, requests: int) -> dict[str, Any]:
    """Store `stored` profiles of the CNN under one token, then time `requests` plans of it by model."""
    from fastapi.testclient import TestClient

    from srift.api.app import create_app
    from srift.testing.plans import shipped_settings
    from srift.testing.server import create_write_token

    profile = json.loads(PROFILE.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        settings = shipped_settings(Path(tmp))
        token = create_write_token(settings.resolved_database_url, name="stored-profiles-plan-time")
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(settings)) as client:
            # Oldest first, the user's current profile last (the newest, which plans prefer).
            for k in range(stored - 1, -1, -1):
                document = earlier_run(profile, k) if k else profile
                response = client.post("/v1/profiles", json=document, headers=headers)
                response.raise_for_status()
            times_s = []
            answer: dict[str, Any] = {}
            for i in range(requests):
                body = {**REQUEST, "iterations": ITERATIONS + i}
                start = time.perf_counter()
                response = client.post("/v1/plans", json=body, headers=headers)
                times_s.append(time.perf_counter() - start)
                answer = response.json()
                if response.status_code != 201:
                    raise RuntimeError(f"POST /v1/plans failed ({response.status_code}): {answer}")
    fleet = " + ".join(f"{c['count']}×{c['instance_type']}@{c['batch']}" for c in answer["choices"])
    return {"stored": stored, "requests_s": times_s, "plan": fleet, "solve_time_s": answer["solve_time_s"]}


def render(results: list[dict[str, Any]], *, load: tuple[float, float, float]) -> str:
    """The section's text: one row per (code, stored profiles) run."""
    lines = [
        "POST /v1/plans {model: cnn} for a user's own profile (the README's CNN, a CPU profile labelled T4; "
        "every other GPU type estimated from it) in one process (FastAPI's TestClient) on a fresh embedded "
        "database with the shipped catalog: min_time within $0.50, spot, CPU profiles allowed, exhaustive, "
        "global batch 256. The token stored the current profile and `stored - 1` earlier runs of it (other "
        "times and dates); a plan by model reads every one. Each request asks one more iteration so the "
        "server's cache of prepared problems does not answer it; request 1 is the process's first plan "
        "(it reads every stored profile, and what the plan needs once, e.g. the catalog).",
        "",
        "| code | stored profiles | requests | first | median of the rest | min | max | plan |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        first, rest = r["requests_s"][0], r["requests_s"][1:] or r["requests_s"]
        lines.append(
            f"| {r.get('code', 'this tree')} | {r['stored']} | {len(r['requests_s'])} | "
            f"{first * 1000:.0f} ms | {statistics.median(rest) * 1000:.0f} ms | {min(rest) * 1000:.0f} ms | "
            f"{max(rest) * 1000:.0f} ms | {r['plan']} |"
        )
    lines += ["", f"Load average (1/5/15 min) when it ran: {' '.join(f'{x:.2f}' for x in load)}."]
    return "\n".join(lines)


def run_in(tree: Path, stored: int, requests: int, out: Path) -> dict[str, Any]:
    """One measurement in a process of its own, with the srift (and this script) of source tree `tree`."""
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    command = [sys.executable, "-m", "benchmarks.stored_profiles_plan_time", "--stored", str(stored)]
    subprocess.run(
        [*command, "--requests", str(requests), "--json", str(out)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    result: dict[str, Any] = json.loads(out.read_text())
    result["code"] = f"{tree.name} at {head}" + (" (changed)" if dirty else "")
    return result


def whole_process(paths: list[Path]) -> str:
    """The section's paragraph quoting the rows of whole-process timings (`--whole-process FILE`), or ""."""
    if not paths:
        return ""
    lines = [
        "Whole-process figures, measured from outside the process (user, sys, CPU and wall seconds, peak "
        "memory; five counted runs of each after one warm-up, A and B in turn), of `python -m "
        "benchmarks.stored_profiles_plan_time --stored N --requests 10`, A with this branch's code and B "
        "with the baseline's, as the files named by `--whole-process` give them:",
    ]
    for path in paths:
        rows = [line.rstrip() for line in path.read_text().splitlines() if line.strip()]
        lines += ["", "```", *rows, "```"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=50, help="stored profiles of the model (at least 1)")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write the run's figures to this file")
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"run {' and '.join(map(str, STORED))} stored profiles, each in a process of its own, and "
        "write docs/BENCHMARKS.md",
    )
    parser.add_argument(
        "--baseline", type=Path, help="with --write: also run the code of this source tree (a checkout)"
    )
    parser.add_argument(
        "--whole-process",
        type=Path,
        action="append",
        default=[],
        help="with --write: a file of whole-process figures to quote in the section (repeatable)",
    )
    args = parser.parse_args()
    if args.stored < 1:
        parser.error("--stored must be at least 1")
    if not args.write:
        result = measure(args.stored, args.requests)
        print(render([result], load=os.getloadavg()))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return
    trees = [Path(__file__).resolve().parent.parent, *([args.baseline.resolve()] if args.baseline else [])]
    with tempfile.TemporaryDirectory() as tmp:
        results = [
            run_in(tree, stored, args.requests, Path(tmp) / f"{k}-{stored}.json")
            for stored in STORED
            for k, tree in enumerate(trees)
        ]
    body = "\n\n".join(
        filter(None, [render(results, load=os.getloadavg()), whole_process(args.whole_process)])
    )
    print(body)
    from benchmarks._report import write_section

    baseline = f" --baseline {args.baseline}" if args.baseline else ""
    quoted = "".join(f" --whole-process {p}" for p in args.whole_process)
    write_section(
        "plan by model with many stored profiles",
        body,
        command=f"python -m benchmarks.stored_profiles_plan_time --write --requests {args.requests}"
        + baseline
        + quoted,
    )


if __name__ == "__main__":
    main()
