"""The compute band term's pieces for each profile of a `srift validate` run: issue #17, round 15.

    .venv/bin/python -m benchmarks.pass_drift var/validation/20261126-141925 [--batch 32] [--runs 2]

Reads the run's `report.json` (which profiles it used) and `validate.db` (the pooled profiles) and prints,
per model and instance type at `--batch` (interpolated between breakpoints, as the band reads it):

* `robust` — the robust spread of the passes' means, the term before round 15;
* `drift` — the ANOVA's between-pass component on the logs of the passes' steps (the host's drift net of
  the passes' sampling noise), and `steps` — the steps' own spread within a pass (√MSW);
* `term` — `ModelProfile.compute_spread(batch, runs=--runs)`, what the band uses now.

Profiles pooled before round 15 kept no steps per pass; their steps are regrouped from the pooled samples'
order (the profile's own first, then `--timing-repeats` per further pass), which holds for validation's
pooling, and `term` is then computed on the regrouped passes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sqlite3
import sys
from pathlib import Path
from typing import Any

from srift.domain import ModelProfile
from srift.domain.profile import interpolated, pass_spreads, variance_components


def regrouped(extra: dict[str, Any], timing_repeats: int) -> list[dict[str, Any]]:
    """The profile's passes with `compute_samples_s`, regrouped from the pooled samples where missing."""
    passes: list[dict[str, Any]] = [dict(p) for p in extra["measured_passes"]]
    if all("compute_samples_s" in p for p in passes):
        return passes
    measured = extra["measured"]
    later = timing_repeats * (len(passes) - 1)
    for i in range(len(measured["batches"])):
        steps = [f + b for f, b in zip(measured["forward_s"][i], measured["backward_s"][i], strict=False)]
        own = steps[: len(steps) - later]
        rest = steps[len(own) :]
        groups = [own] + [rest[k * timing_repeats : (k + 1) * timing_repeats] for k in range(len(passes) - 1)]
        for p, g in zip(passes, groups, strict=True):
            p.setdefault("compute_samples_s", []).append(g)
    return passes


def pieces(passes: list[dict[str, Any]]) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """Per breakpoint, the drift component and the steps' within-pass spread (both log-scale σ)."""
    drift, steps = [], []
    for i, b in enumerate(passes[0]["batches"]):
        groups = [[math.log(t) for t in p["compute_samples_s"][i] if t > 0] for p in passes]
        between, within = variance_components(groups)
        drift.append((int(b), math.sqrt(between)))
        steps.append((int(b), math.sqrt(within)))
    return drift, steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workdir", type=Path, help="a validation work folder (report.json, validate.db)")
    parser.add_argument("--batch", type=float, default=32.0, help="per-device batch to read the terms at")
    parser.add_argument("--runs", type=int, default=2, help="runs the measured mean averages (quick: 2)")
    parser.add_argument("--timing-repeats", type=int, default=2, help="steps per further pass (quick: 2)")
    args = parser.parse_args(argv)
    report = json.loads((args.workdir / "report.json").read_text())
    wanted = {int(p["profile_id"]): p for p in report["profiles"]}
    rows = []
    with sqlite3.connect(args.workdir / "validate.db") as db:
        for pid, document in db.execute("SELECT id, document FROM model_profiles"):
            if pid not in wanted:
                continue
            profile = ModelProfile.from_dict(json.loads(document))
            extra = dict(profile.extra or {})
            if not extra.get("measured_passes"):
                continue
            passes = regrouped(extra, args.timing_repeats)
            drift, steps = pieces(passes)
            now = dataclasses.replace(profile, extra={**extra, "measured_passes": passes})
            rows.append(
                {
                    "model": wanted[pid]["model"],
                    "instance_type": wanted[pid]["instance_type"],
                    "passes": len(passes),
                    "robust": interpolated(pass_spreads(extra["measured_passes"]), args.batch),
                    "drift": interpolated(drift, args.batch),
                    "steps": interpolated(steps, args.batch),
                    "term": now.compute_spread(args.batch, runs=args.runs),
                }
            )
    for r in sorted(rows, key=lambda r: (r["model"], r["instance_type"])):
        print(
            f"{r['model']:<36} {r['instance_type']:<10} passes {r['passes']:>2}  robust {r['robust']:.3f}  "
            f"drift {r['drift']:.3f}  steps {r['steps']:.3f}  term {r['term']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
