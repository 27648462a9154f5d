"""Measured compute without the profiler, and sweeps: how long the user's commands take, end to end.

1. `srift profile MODEL --layers-only` on the BERT-base-sized test model (`testmodels.bert_base`,
   ≈110 M parameters): gradient sizes and readiness order, no timing sweep (target: under a minute).
2. `srift profile import TABLE --layers ...` followed by `srift predict SWEEP --profile ...` with a sweep
   of 10 fleets (g4dn T4 types, whole and partial nodes): wall time of both processes together (target:
   under 3 s), the service's own time for the sweep (`elapsed_s`) and per fleet. The first round runs on a
   fresh data folder (it migrates the database and loads the shipped catalog); the rest reuse it.

    .venv/bin/python -m benchmarks.import_sweep            # prints and writes docs/BENCHMARKS.md
    .venv/bin/python -m benchmarks.import_sweep --rounds 5 --no-write
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

SRIFT = [sys.executable, "-c", "from srift.cli import main; main()"]
TABLE = "batch,step_s\n8,0.21\n16,0.39\n16,0.41\n32,0.76\n"
"""Step times of a T4 at per-GPU batches 8–32 (the shape of a BERT-base fine-tuning step; illustrative)."""
FLEETS = [
    ("g4dn.xlarge", 1, 32, None),
    ("g4dn.xlarge", 2, 32, None),
    ("g4dn.xlarge", 4, 32, None),
    ("g4dn.12xlarge", 1, 128, None),
    ("g4dn.12xlarge", 2, 128, None),
    ("g4dn.12xlarge", 3, 128, None),
    ("g4dn.12xlarge", 4, 128, None),
    ("g4dn.12xlarge", 2, 64, 2),
    ("g4dn.12xlarge", 4, 64, 2),
    ("g4dn.metal", 2, 256, None),
]


def _run(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([*SRIFT, *args], env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"srift {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return took, done.stdout


def _sweep_file(path: Path) -> None:
    configs = []
    for name, count, batch, gpus in FLEETS:
        choice: dict[str, object] = {"instance_type": name, "count": count, "batch": batch}
        if gpus is not None:
            choice["gpus"] = gpus
        configs.append({"choices": [choice]})
    path.write_text(
        json.dumps({"provider": "aws", "region": "us-east-1", "iterations": 1000, "configs": configs})
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="import + predict rounds (first: fresh data dir)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="srift-bench-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "SRIFT_DATA_DIR": str(work / "data")}
        env.pop("SRIFT_DATABASE_URL", None)
        layers = work / "bert.layers.json"
        layers_s, _ = _run(
            [
                "profile",
                "srift.profiling.testmodels:bert_base",
                "--input",
                "srift.profiling.testmodels:bert_base_input",
                "--layers-only",
                "--out",
                str(layers),
            ],
            env,
        )
        doc = json.loads(layers.read_text())
        (work / "t4.csv").write_text(TABLE)
        sweep = work / "sweep.json"
        _sweep_file(sweep)
        rounds = []
        for _ in range(args.rounds):
            import_s, _ = _run(
                [
                    "profile",
                    "import",
                    str(work / "t4.csv"),
                    "--layers",
                    str(layers),
                    "--accelerator",
                    "T4",
                    "--out",
                    str(work / "bert-t4.json"),
                ],
                env,
            )
            predict_s, out = _run(
                ["predict", str(sweep), "--profile", str(work / "bert-t4.json"), "--json"], env
            )
            answer = json.loads(out)
            assert answer["count"] == len(FLEETS)
            rounds.append((import_s, predict_s, float(answer["elapsed_s"])))
    load_after = os.getloadavg()
    warm = rounds[1:] or rounds
    total = [i + p for i, p, _ in warm]
    lines = [
        f"`srift profile srift.profiling.testmodels:bert_base --input ...:bert_base_input --layers-only`: "
        f"**{layers_s:.1f} s** wall ({len(doc['layers'])} layers, "
        f"{sum(x['grad_bytes'] for x in doc['layers']) / 1e6:.0f} MB of gradients; target < 60 s).",
        "",
        "`srift profile import t4.csv --layers ... --accelerator T4` + "
        f"`srift predict sweep.json --profile ...` with {len(FLEETS)} fleets "
        "(g4dn.xlarge ×1/2/4, g4dn.12xlarge ×1–4, 2 of its 4 GPUs ×2/4, "
        "g4dn.metal ×2), two processes end to end:",
        "",
        "| round | import s | predict s | total s | service time for the sweep s | per fleet ms |",
        "|---|---|---|---|---|---|",
    ]
    for k, (i, p, e) in enumerate(rounds):
        lines.append(
            f"| {k}{' (fresh data dir)' if k == 0 else ''} | {i:.2f} | {p:.2f} | {i + p:.2f} | {e:.3f} | "
            f"{1000 * e / len(FLEETS):.1f} |"
        )
    lines += [
        "",
        f"Warm rounds: median total **{statistics.median(total):.2f} s**, worst {max(total):.2f} s "
        f"(target < 3 s); the service answers each fleet in "
        f"{1000 * statistics.median(e for *_, e in warm) / len(FLEETS):.1f} ms after start-up.",
        f"Load average before / after: {load_before[0]:.2f} / {load_after[0]:.2f} (1 min).",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        from benchmarks._report import write_section

        write_section("profile import + sweep", body, command="python -m benchmarks.import_sweep")
    return 0


if __name__ == "__main__":
    sys.exit(main())
