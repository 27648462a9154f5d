"""Time `srift plan --example` on a fresh data directory, as a new user runs it after `make run`.

Steps, each in its own process with SRIFT_DATA_DIR pointing at a new temporary directory:
1. the start-up work `make run` (`srift serve`) does before it listens: migrations, the shipped catalog,
   bandwidth models and reference profiles (`srift.bootstrap.bootstrap`);
2. `srift plan --example > r.yaml`;
3. `srift plan r.yaml` (local database), timed end to end as the user sees it (process start, imports,
   the start-up check, solving, printing), `--repeats` times.

Acceptance (issue #19): step 3 answers in under 2 s with a plan across the catalog's GPU types that marks
its estimated numbers.
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

from benchmarks._report import write_section

SRIFT = [str(Path(sys.executable).with_name("srift"))]


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed `srift plan r.yaml` runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="srift-plan-example-") as tmp:
        env = {**os.environ, "SRIFT_DATA_DIR": tmp, "COLUMNS": "160"}
        env.pop("SRIFT_DATABASE_URL", None)
        boot_s, _ = _run(
            [
                sys.executable,
                "-c",
                "from srift.bootstrap import bootstrap; from srift.settings import get_settings; "
                "bootstrap(get_settings())",
            ],
            env,
        )
        _, example = _run([*SRIFT, "plan", "--example"], env)
        request = Path(tmp) / "r.yaml"
        request.write_text(example)
        times = []
        out = ""
        for _ in range(args.repeats):
            elapsed, out = _run([*SRIFT, "plan", str(request)], env)
            times.append(elapsed)
        _, as_json = _run([*SRIFT, "plan", str(request), "--json"], env)
    plan = json.loads(as_json)
    estimated = plan.get("estimated") or {}
    gpus = sorted({e["accelerator"] for e in (estimated.get("candidates") or {}).values()})
    median = statistics.median(times)
    lines = [
        "A fresh data directory (new SQLite database), the start-up work of `make run` "
        f"(migrations, shipped catalog, bandwidth models, reference profiles): {boot_s:.1f} s, once.",
        "",
        f"`srift plan r.yaml` (the example: {plan['choices'][0]['instance_type']} …, precision "
        f"{plan.get('precision')}), whole process as the user sees it, {args.repeats} runs: median "
        f"{median:.2f} s, max {max(times):.2f} s (target < 2 s: {'met' if max(times) < 2 else 'NOT met'}).",
        "",
        f"Candidates with estimated compute: {len(estimated.get('candidates') or {})} instance types on "
        f"{len(gpus)} GPU models ({', '.join(gpus)}); estimated in the plan: "
        f"{', '.join(estimated.get('in_plan') or []) or 'none'}.",
        "",
        "The plan as printed:",
        "",
        "```",
        out.rstrip(),
        "```",
    ]
    load = os.getloadavg()
    lines.append(f"\nLoad average when it ran: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.")
    text = "\n".join(lines)
    print(text)
    write_section(
        "plan --example on a fresh clone (reference models)",
        text,
        command="python -m benchmarks.plan_example",
    )


if __name__ == "__main__":
    main()
