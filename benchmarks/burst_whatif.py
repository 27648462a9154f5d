"""Offline checks behind rounds 16 and 17 of docs/validation.md (issue #17): no testbed, no model change.

`quota`: the mean wall time of a rank's compute step of `--cpu-ms` CPU under a quota of `--share` of a
core per `--period-ms`, when each step follows `--idle-ms` of idle time (the exchange, with a uniform
jitter of ± half a period, so that steps meet the period at every phase as a run's varying exchanges
make them), over `--iters` iterations: the per-rank quota timeline (unused quota expires with its
period; a step runs while its period's quota lasts, then waits for the next period).

`whatif`: the quick reports of given commits re-scored with each multi-host prediction less the testbed
link's burst saving (`--small-ms` when the fleet has a tbv.small host, else `--large-ms`; measured by
`benchmarks.causes gap`), bounded by the case's exposed exchange. Prints MAPE, underestimates, the p90 of
underestimates, p90 coverage and the mean z = ln(measured / p50) / σ before and after, per report.

`exact`: the same reports re-scored with one case (`--model`, `--fleet` as the reports name them)
predicted exactly and every other as it was: how much of a report's figures that one case decides.

    .venv/bin/python -m benchmarks.burst_whatif quota --cpu-ms 8.9 --share 0.5 --idle-ms 7.8
    .venv/bin/python -m benchmarks.burst_whatif whatif 3c87378 4c4785d
    .venv/bin/python -m benchmarks.burst_whatif exact --model cnn --fleet 2xtbv.large@32 3c87378 4c4785d
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from srift.validation import stats

Z90 = 1.2815515655446004
REPORTS = ("docs/images/validation-quick.json", "docs/images/validation-quick-yours.json")


def mean_step_ms(
    cpu_ms: float, share: float, period_ms: float, idle_ms: float, iters: int, seed: int
) -> float:
    """Mean wall time of the compute steps (the first tenth dropped as warm-up)."""
    quota = share * period_ms
    rng = random.Random(seed)
    t = rng.random() * period_ms
    period, used = math.floor(t / period_ms), 0.0
    walls = []
    for _ in range(iters):
        start, need = t, cpu_ms
        while need > 1e-12:
            if math.floor(t / period_ms + 1e-12) != period:
                period, used = math.floor(t / period_ms + 1e-12), 0.0
            end = (period + 1) * period_ms
            if quota - used <= 1e-12:
                t = end
                continue
            ran = min(need, quota - used, end - t)
            t, used, need = t + ran, used + ran, need - ran
        walls.append(t - start)
        t += max(0.0, idle_ms + (rng.random() - 0.5) * period_ms)
    kept = walls[iters // 10 :]
    return sum(kept) / len(kept)


def rescore(commit: str, path: str, adjust: Callable[[dict[str, Any], float], float]) -> dict[str, Any]:
    """A report at `commit` scored as it is ("before") and with each case's p50 replaced by
    `adjust(case, measured)` ("after"), its band's σ kept."""
    report = json.loads(subprocess.check_output(["git", "show", f"{commit}:{path}"]))
    out: dict[str, list[float]] = {"before": [], "after": []}
    z: dict[str, list[float]] = {"before": [], "after": []}
    covered = {"before": 0, "after": 0}
    for case in report["cases"]:
        means = [r["mean_iter_s"] for r in case["runs"] if r.get("ok")]
        if not means:
            continue
        measured = sum(means) / len(means)
        predicted = case["predicted"]
        for key, p50 in (("before", predicted["iteration_s"]), ("after", adjust(case, measured))):
            out[key].append(stats.relative_error(p50, measured))
            z[key].append(math.log(measured / p50) / predicted["band"]["sigma"])
            covered[key] += measured <= p50 * math.exp(Z90 * predicted["band"]["sigma"])
    result: dict[str, Any] = {}
    for key, errors in out.items():
        summary = stats.summarize(errors)
        result[key] = {
            "mape": summary.mape,
            "under": summary.underestimates,
            "p90_under": summary.underestimate_p90,
            "below_p90": covered[key],
            "mean_z": sum(z[key]) / len(z[key]),
            "cases": summary.cases,
        }
    return result


def burst_saving(small_s: float, large_s: float) -> Callable[[dict[str, Any], float], float]:
    """A multi-host case's p50 less the link's burst (small when the fleet has a tbv.small host), bounded
    by its exposed exchange."""

    def adjust(case: dict[str, Any], _measured: float) -> float:
        predicted = case["predicted"]
        if case["hosts"] == 1:
            return float(predicted["iteration_s"])
        burst = small_s if any("small" in t for t in case["types"]) else large_s
        return float(predicted["iteration_s"] - min(burst, predicted["breakdown"]["exposed_network_s"]))

    return adjust


def exact(model: str, fleet: str) -> Callable[[dict[str, Any], float], float]:
    """One case (model and fleet as the report names them) predicted exactly, every other as it was."""

    def adjust(case: dict[str, Any], measured: float) -> float:
        if case["model"] == model and case["fleet"].replace("×", "x") == fleet.replace("×", "x"):
            return measured
        return float(case["predicted"]["iteration_s"])

    return adjust


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    quota = sub.add_parser("quota", help="a rank's mean compute step under a CPU quota")
    quota.add_argument("--cpu-ms", type=float, required=True)
    quota.add_argument("--share", type=float, required=True)
    quota.add_argument("--period-ms", type=float, default=10.0)
    quota.add_argument("--idle-ms", type=float, required=True)
    quota.add_argument("--iters", type=int, default=4000)
    quota.add_argument("--seed", type=int, default=0)
    whatif = sub.add_parser("whatif", help="reports re-scored with the link's burst saving")
    whatif.add_argument("commits", nargs="+")
    whatif.add_argument("--small-ms", type=float, default=4.9)
    whatif.add_argument("--large-ms", type=float, default=3.4)
    one = sub.add_parser("exact", help="reports re-scored with one case predicted exactly")
    one.add_argument("commits", nargs="+")
    one.add_argument("--model", required=True, help="as the report names it, e.g. cnn")
    one.add_argument("--fleet", required=True, help="as the report names it, e.g. 2xtbv.large@32")
    args = parser.parse_args(argv)
    if args.command == "quota":
        step = mean_step_ms(args.cpu_ms, args.share, args.period_ms, args.idle_ms, args.iters, args.seed)
        print(f"mean step {step:.2f} ms (back to back {args.cpu_ms / args.share:.2f} ms)")
        return 0
    if args.command == "whatif":
        adjust = burst_saving(args.small_ms / 1e3, args.large_ms / 1e3)
    else:
        adjust = exact(args.model, args.fleet)
    for commit in args.commits:
        for path in REPORTS:
            found = rescore(commit, path, adjust)
            line = " | ".join(
                f"{key}: MAPE {100 * v['mape']:.1f} %, {v['under']}/{v['cases']} under, "
                f"p90 under {100 * v['p90_under']:.1f} %, {v['below_p90']}/{v['cases']} below p90, "
                f"mean z {v['mean_z']:+.2f}"
                for key, v in found.items()
            )
            print(f"{commit} {'unseen' if 'yours' in path else 'shipped'}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
