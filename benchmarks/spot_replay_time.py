"""Spot replay in the request path: how long GET /v1/plans/{id}/replay takes to replay a plan.

Times srift.services.replays.replay_fleet — what the endpoint runs on a cache miss, with the endpoint's
window bound (view_stride_s) — through the public spot traces of "Can't Be Late" (Wu et al., NSDI '24;
github.com/skypilot-org/spot-traces, read from the local mirror at its HEAD commit) for p3.2xlarge
fleets of 1, 4 and 16 VMs in us-east-1 and us-west-2 and 4 h or 12 h of work, with a deadline of 1.3×
the on-demand time and the catalog-like prices of benchmarks/spot_traces.py's grid (the price does not
change the time). Each case is timed `--repeat` times (the replay is deterministic), and the median is
reported with the windows and traces it replayed. The figures say whether the replay may run inside a
plan request (it does not: the dashboard asks for it after showing the plan).

    .venv/bin/python benchmarks/spot_replay_time.py            # rewrites its BENCHMARKS section
    .venv/bin/python benchmarks/spot_replay_time.py --quick    # one repeat, no section written
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._report import write_section  # noqa: E402
from srift.services.replays import NotReplayed, replay_fleet, spot_fleet, view_stride_s  # noqa: E402
from srift.spot.sources import read_traces  # noqa: E402

MIRROR = Path("/work/.mirror/skypilot-org+spot-traces/repo")
SECTION = "spot replay in the request path"
TYPE = "p3.2xlarge"
CASES = (("us-east-1", 4, 4.0), ("us-east-1", 1, 4.0), ("us-west-2", 16, 12.0), ("us-west-2", 1, 12.0))
SLACK = 1.3
RESTART_S = 150.0
SPOT_USD_PER_HR, OD_USD_PER_HR = 0.918, 3.06


def plan_document(nodes: int, work_h: float) -> dict[str, Any]:
    """The fields of a stored plan a replay reads: `nodes` spot VMs for `work_h` hours, the same fleet on
    demand as the fallback, a time limit of SLACK × the on-demand time and one restart."""
    work_s = work_h * 3600.0
    return {
        "choices": [
            {"instance_type": TYPE, "market": "spot", "count": nodes, "price_usd_per_hr": SPOT_USD_PER_HR}
        ],
        "predicted": {"total_time_s": work_s, "cost_usd": nodes * SPOT_USD_PER_HR * work_h},
        "limits": {"time_limit_s": SLACK * (work_s + RESTART_S)},
        "spot": {"uninterrupted_time_s": work_s, "checkpoint_interval_s": 600.0, "restart_s": RESTART_S},
        "fallback": {"predicted": {"total_time_s": work_s, "cost_usd": nodes * OD_USD_PER_HR * work_h}},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", type=Path, default=MIRROR, help=f"the public traces (default {MIRROR})")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repeat; writes no section")
    args = parser.parse_args(argv)
    traces = read_traces(args.traces)
    repeat = 1 if args.quick else max(1, args.repeat)
    lines = [
        "| fleet | region | work | traces | windows | replay s (median) | runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for region, nodes, work_h in CASES:
        plan = plan_document(nodes, work_h)
        fleet = spot_fleet(plan, traces, provider="aws", region=region)
        if isinstance(fleet, NotReplayed):
            lines.append(f"| {nodes} × {TYPE} | {region} | {work_h:.0f} h | — | — | {fleet.reason} | |")
            continue
        seconds, out = [], None
        for _ in range(repeat):
            started = time.perf_counter()
            out = replay_fleet(plan, fleet, stride_s=view_stride_s(fleet.traces))
            seconds.append(time.perf_counter() - started)
        assert out is not None and not isinstance(out, NotReplayed)
        row = (
            f"| {nodes} × {TYPE} | {region} | {work_h:.0f} h | {out['traces']} | {out['windows']:,} | "
            f"{statistics.median(seconds):.2f} | {', '.join(f'{s:.2f}' for s in seconds)} |"
        )
        print(row, flush=True)
        lines.append(row)
    body = "\n".join(
        [
            "What GET /v1/plans/{id}/replay runs on a cache miss (srift.services.replays.replay_fleet): "
            "every window of every public trace covering the fleet, under the five deadline policies, and "
            "the in-sample prediction per trace. Deadline 1.3× the on-demand time. The time goes into the "
            "tick-by-tick simulation per trace and policy, so it grows with the traces and the deadline's "
            "ticks more than with the windows; the dashboard asks for the replay after showing the plan, "
            "and the server keeps each answer per plan and trace set.",
            "",
            *lines,
        ]
    )
    print(body)
    if not args.quick:
        write_section(SECTION, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
