"""Benchmark: end-to-end accuracy of Srift's predictions against real DDP training on the testbed.

Runs `srift validate` (srift.validation.pipeline.run_validation) — quick matrix by default, `--full` for the
full one — and writes its section of docs/BENCHMARKS.md ("end-to-end accuracy (quick|full matrix,
testbed)": MAPE overall and by model, host count, type and batch mix, underestimates and their 90th
percentile, measurement noise, plan quality, run time), plus the predicted-vs-measured plot as
docs/images/validation-<level>.png and the report as docs/images/validation-<level>.json.

Needs root (the testbed). Keep the machine otherwise quiet while it runs.

    sudo .venv/bin/python -m benchmarks.end_to_end [--full] [--no-write]
    .venv/bin/python -m benchmarks.end_to_end --report REPORT.json   # the section of an earlier run

The section's command is the one that produced the figures (the report's own `command`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from benchmarks._report import BENCHMARKS_MD, write_section

IMAGES = BENCHMARKS_MD.parent / "images"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="the full matrix (about an hour)")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="write the section from this report of an earlier `srift validate` run instead of running",
    )
    args = parser.parse_args(argv)

    from rich.console import Console

    from srift.validation.benchmarks import section_name
    from srift.validation.pipeline import ValidationOptions, run_validation
    from srift.validation.plot import plot_predicted_vs_measured
    from srift.validation.render import markdown, terminal_view

    if args.report is not None:
        report = json.loads(args.report.read_text())
        command = str(report.get("command") or f"srift validate (report {args.report})")
    else:
        command = "sudo .venv/bin/python -m benchmarks.end_to_end" + (" --full" if args.full else "")
        options = ValidationOptions(full=args.full, workdir=args.workdir, command=command)
        console = Console(stderr=True)
        report = run_validation(options, log=lambda m: console.print(f"[dim]{m}[/]", highlight=False))
    level = report["level"]
    Console().print(terminal_view(report))
    if args.no_write:
        return 0
    IMAGES.mkdir(parents=True, exist_ok=True)
    png = plot_predicted_vs_measured(
        report["cases"],
        IMAGES / f"validation-{level}.png",
        title=f"srift validate ({level}): predicted vs measured DDP iteration time",
        summary=report["summary"],
    )
    (IMAGES / f"validation-{level}.json").write_text(json.dumps(report, indent=1) + "\n")
    body = (
        markdown(report)
        + f"\n\n![predicted vs measured](images/{png.name}) · report: `images/validation-{level}.json`"
    )
    started = report.get("started_at")
    write_section(
        section_name(report),
        body,
        command=command,
        measured_at=dt.datetime.fromisoformat(started) if started else None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
