"""The simulator's model-error band term, recomputed from `srift validate` reports (srift.sim.model_error).

    python -m benchmarks.model_error docs/images/causes/validate-quick-devmodels.json \
        docs/images/validation-quick-yours.json

Reads each report's cases (ln measured/p50 and the band's own σ), writes σ per fleet group with its
provenance (which runs, when, which commit) to srift/sim/shipped/model_error.json, and the table to
docs/BENCHMARKS.md ("model error (band term)"). Use only reports of models that are neither the shipped
ones nor an unseen set still to be validated: the term must not be fitted on the data it is judged on.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks._report import write_section
from srift.sim.band import Z90
from srift.sim.model_error import SHIPPED, FleetGroup, ModelError, cases_from_report

SECTION = "model error (band term)"
OUT = Path(__file__).resolve().parents[1] / "srift" / "sim" / SHIPPED


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reports", nargs="+", type=Path, help="srift validate report JSON files")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT})")
    parser.add_argument("--no-benchmarks", action="store_true", help="do not write docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    cases = []
    runs: list[dict[str, Any]] = []
    for path in args.reports:
        report = json.loads(path.read_text())
        found = cases_from_report(report)
        cases += found
        runs.append(
            {
                "report": str(path),
                "started_at": report.get("started_at"),
                "models": report.get("models"),
                "cases": len(found),
                "load_avg": [
                    report.get("machine", {}).get("load_avg_before"),
                    report.get("machine", {}).get("load_avg_after"),
                ],
            }
        )
    provenance = {
        "runs": runs,
        "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "method": "sigma^2 = max(0, mean(ln(measured/p50)^2) - mean(band sigma^2 without this term)), "
        "per fleet group (srift.sim.model_error)",
    }
    found_error = ModelError.fit(cases, provenance=provenance)
    args.out.write_text(json.dumps(found_error.to_dict(), indent=1) + "\n")
    rows = [
        "| fleets | cases | mean ln(measured/p50) | rms ln(measured/p50) | rms band σ (own) | model σ "
        "| measured ≤ p90, own band | with the model term (in sample) |"
    ]
    rows.append("|---|---|---|---|---|---|---|---|")
    for name in [g.value for g in FleetGroup] + ["all"]:
        members = [c for c in cases if name == "all" or c.group.value == name]
        if not members:
            continue
        n = len(members)
        mean = sum(c.log_ratio for c in members) / n
        rms = (sum(c.log_ratio**2 for c in members) / n) ** 0.5
        own = (sum(c.band_sigma**2 for c in members) / n) ** 0.5
        s = found_error.sigma[name]
        inside = sum(c.log_ratio <= Z90 * c.band_sigma for c in members)
        widened = sum(c.log_ratio <= Z90 * (c.band_sigma**2 + s**2) ** 0.5 for c in members)
        rows.append(
            f"| {name} | {n} | {mean:+.3f} | {rms:.3f} | {own:.3f} | {s:.3f} | {inside}/{n} | {widened}/{n} |"
        )
    sources = "\n".join(
        f"- `{r['report']}`: {', '.join(r['models'] or [])} ({r['cases']} cases, started {r['started_at']}, "
        f"load {r['load_avg'][0]} → {r['load_avg'][1]})"
        for r in runs
    )
    body = (
        "The simulator's own error on the testbed, carried by every prediction's band as the `model` term "
        "(srift/sim/model_error.py; the file: srift/sim/shipped/model_error.json). Calibration data:\n\n"
        f"{sources}\n\n" + "\n".join(rows) + "\n"
    )
    print(body)
    if not args.no_benchmarks:
        write_section(SECTION, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
