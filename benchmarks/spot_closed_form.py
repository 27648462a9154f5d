"""Spot closed form against the Monte Carlo: does the search's cheap expectation price the run it models?

The optimizer compares spot fleets on `srift.optimize.spot.expected_run` (the closed form: restart in place,
per traced period of the fleet's market); `monte_carlo` with `ReplanPolicy.RESTART` runs the same model by
drawing each relaunch's time to interruption and each capacity gap from the fitted laws. Both read the
shipped trace model (srift/spot/data/public-traces.json). For p3.2xlarge fleets of 1, 4 and 16 VMs in
us-east-1, us-east-2 and us-west-2 (wherever the model has laws for that many VMs), 1, 4, 12 and 24 h of
work (10 s iterations), checkpoints every 60, 600 and 3,600 s and a 150 s restart (Srift §5.4), it prints the
closed form's expected time against the Monte Carlo's mean, in the Monte Carlo's standard errors, twice:
as the closed form prices it now (each period under its own law, `renewal_run`) and as it priced it until
2026-12-07 (an exponential of rate 1 / E[up], the same periods with their law left out). Nothing is fitted.

    .venv/bin/python benchmarks/spot_closed_form.py                  # rewrites its BENCHMARKS section
    .venv/bin/python benchmarks/spot_closed_form.py --quick          # 4 VMs, 600 s checkpoints; no section
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._report import write_section  # noqa: E402
from srift.optimize.spot import ReplanPolicy, SpotOffer, SpotPolicy, expected_run, monte_carlo  # noqa: E402
from srift.spot.shipped import shipped_model  # noqa: E402
from srift.testing.spot import one_offer_fleet  # noqa: E402

SECTION = "spot closed form against the Monte Carlo"
TYPE = "p3.2xlarge"
USD_PER_HR = 3.06
ITERATION_S = 10.0
RESTART_S = 150.0
REGIONS = ("us-east-1", "us-east-2", "us-west-2")


def _row(offer: SpotOffer, *, nodes: int, hours: float, every_s: float, samples: int) -> dict[str, float]:
    iterations = int(hours * 3600 / ITERATION_S)
    rates, alts = one_offer_fleet(
        offer, nodes=nodes, iteration_s=ITERATION_S, usd_per_s=nodes * USD_PER_HR / 3600
    )
    policy = SpotPolicy(checkpoint_interval_s=every_s, restart_s=RESTART_S, samples=samples, seed=1)
    now = expected_run(rates, iterations=iterations, policy=policy)
    exponential = dataclasses.replace(
        rates, regimes=tuple(dataclasses.replace(r, up=None) for r in rates.regimes)
    )
    before = expected_run(exponential, iterations=iterations, policy=policy)
    mc = monte_carlo(alts, start=0, iterations=iterations, policy=policy, replan=ReplanPolicy.RESTART)
    return {
        "mc_h": mc.mean_time_s / 3600,
        "se_h": mc.stderr_time_s / 3600,
        "now_h": now.time_s / 3600,
        "before_h": before.time_s / 3600,
        "z_now": (now.time_s - mc.mean_time_s) / mc.stderr_time_s,
        "z_before": (before.time_s - mc.mean_time_s) / mc.stderr_time_s,
        "cost_now": now.cost_usd / mc.mean_cost_usd - 1,
        "cost_before": before.cost_usd / mc.mean_cost_usd - 1,
    }


def _summary(name: str, z: np.ndarray, rel: np.ndarray) -> str:
    return (
        f"| {name} | {np.median(np.abs(z)):.1f} | {z.min():+.1f} to {z.max():+.1f} | "
        f"{int(np.sum(np.abs(z) > 2))} / {int(np.sum(np.abs(z) > 3))} | {rel.min() * 100:+.1f} to "
        f"{rel.max() * 100:+.1f} % |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=4000, help="Monte Carlo runs per plan (default 4000)")
    parser.add_argument("--quick", action="store_true", help="4 VMs and 600 s checkpoints only; no section")
    args = parser.parse_args(argv)
    model = shipped_model()
    nodes_grid = (4,) if args.quick else (1, 4, 16)
    every_grid = (600.0,) if args.quick else (60.0, 600.0, 3600.0)
    lines = [
        "| region | VMs | work | checkpoint | Monte Carlo (± s.e.) | closed form now | z now | "
        "closed form before | z before |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for region in REGIONS:
        offer = SpotOffer(model=model, provider="aws", region=region, instance_type=TYPE)
        for nodes in nodes_grid:
            if not offer.laws(nodes):
                continue
            for hours in (1.0, 4.0, 12.0, 24.0):
                for every_s in every_grid:
                    r = _row(offer, nodes=nodes, hours=hours, every_s=every_s, samples=args.samples)
                    rows.append(r)
                    line = (
                        f"| {region} | {nodes} | {hours:.0f} h | {every_s:.0f} s | {r['mc_h']:.3f} ± "
                        f"{r['se_h']:.3f} h | {r['now_h']:.3f} h | {r['z_now']:+.1f} | "
                        f"{r['before_h']:.3f} h | {r['z_before']:+.1f} |"
                    )
                    lines.append(line)
                    print(line, flush=True)
    z_now = np.array([r["z_now"] for r in rows])
    z_before = np.array([r["z_before"] for r in rows])
    summary = [
        "Expected time, closed form against the Monte Carlo as it runs now (restart in place, "
        f"{args.samples} runs per plan, seed 1), over {len(rows)} plans: z = (closed form − Monte Carlo "
        "mean) / its standard error; |z| ≤ 2 in about 95 % of plans is what sampling noise alone gives. "
        "'before': the closed form as it priced the laws until 2026-12-07 (an exponential of rate "
        "1 / E[up] per period), against the same Monte Carlo.",
        "",
        "| closed form | median abs z | z range | plans beyond 2 / 3 s.e. | cost, closed / Monte Carlo − 1 |",
        "|---|---:|---|---:|---:|",
        _summary("now (each period's law)", z_now, np.array([r["cost_now"] for r in rows])),
        _summary("before (exponential of 1 / E[up])", z_before, np.array([r["cost_before"] for r in rows])),
        "",
        *lines,
    ]
    body = "\n".join(summary)
    print("\n".join(summary[:7]))
    if not args.quick:
        write_section(SECTION, body, command="python benchmarks/spot_closed_form.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
