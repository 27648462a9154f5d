"""Benchmark: end-to-end accuracy of Srift's predictions against real DDP training on the testbed.

Runs `srift validate` (srift.validation.pipeline.run_validation) — quick matrix by default, `--full` for the
full one — and writes its section of docs/BENCHMARKS.md ("end-to-end accuracy (quick|full matrix,
testbed)": MAPE overall and by model, host count, type and batch mix, underestimates and their 90th
percentile, the prediction band's coverage, measurement noise, plan quality, run time), plus the
predicted-vs-measured plot as docs/images/validation-<level>.png and the report as
docs/images/validation-<level>.json.

With `--model MODULE:FACTORY --input MODULE:FACTORY [--loss MODULE:FUNCTION]` (repeatable) it runs twice:
the shipped models first (with plan quality), then your models (without; `--only-yours` skips the first),
and writes each run's own section ("..., your models" for the second) with its plot and report, so one
command puts both runs side by side in docs/BENCHMARKS.md.

Needs root (the testbed). Keep the machine otherwise quiet while it runs.

    sudo .venv/bin/python -m benchmarks.end_to_end [--full] [--no-write]
    sudo .venv/bin/python -m benchmarks.end_to_end --model pkg.mod:build --input pkg.mod:batch ...
    .venv/bin/python -m benchmarks.end_to_end --report REPORT.json   # the section of an earlier run
    .venv/bin/python -m benchmarks.end_to_end --pool RUN1 RUN2 RUN3    # the protocol's pooled section

`--pool` takes three or more runs, each a folder of report JSONs (`srift validate --out`) or one report,
and writes "end-to-end accuracy (protocol, pooled quick runs)": the pooled figures against the targets,
each run's own figures, their spread, and the shipped and held-out models apart
(srift.validation.protocol; docs/validation.md says how the runs are made).

The section's command is the one that produced the figures (the report's own `command`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmarks._report import BENCHMARKS_MD, write_section

IMAGES = BENCHMARKS_MD.parent / "images"


def write(report: dict[str, Any], *, command: str) -> None:
    """The report's section of docs/BENCHMARKS.md, its plot and its JSON in docs/images/."""
    from srift.validation.benchmarks import section_name
    from srift.validation.plot import plot_predicted_vs_measured
    from srift.validation.render import markdown

    level = report["level"]
    stem = f"validation-{level}" + ("-yours" if report.get("user_models") else "")
    IMAGES.mkdir(parents=True, exist_ok=True)
    png = plot_predicted_vs_measured(
        report["cases"],
        IMAGES / f"{stem}.png",
        title=f"srift validate ({level}): predicted vs measured DDP iteration time",
        summary=report["summary"],
    )
    (IMAGES / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    body = (
        markdown(report) + f"\n\n![predicted vs measured](images/{png.name}) · report: `images/{stem}.json`"
    )
    started = report.get("started_at")
    write_section(
        section_name(report),
        body,
        command=command,
        measured_at=dt.datetime.fromisoformat(started) if started else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="the full matrix (about an hour)")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--model", action="append", default=[], help="your model's MODULE:FACTORY")
    parser.add_argument("--input", action="append", default=[], help="its input MODULE:FACTORY")
    parser.add_argument("--loss", action="append", default=[], help="its loss MODULE:FUNCTION")
    parser.add_argument("--only-yours", action="store_true", help="skip the shipped models' run")
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="write the section from this report of an earlier `srift validate` run instead of running",
    )
    parser.add_argument(
        "--pool",
        nargs="+",
        type=Path,
        default=None,
        help="pool these runs (folders of reports, or single reports) instead of running",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="with --pool: also predict every stored case again with this code, from each run's work "
        "folder, and print the pooled figures before and after (writes nothing)",
    )
    args = parser.parse_args(argv)
    if args.pool is not None:
        return pool_section(args.pool, write_doc=not args.no_write, rescored=args.rescore)

    from rich.console import Console

    from srift.validation.matrix import user_models
    from srift.validation.pipeline import ValidationOptions, run_validation
    from srift.validation.render import terminal_view

    if args.report is not None:
        report = json.loads(args.report.read_text())
        Console().print(terminal_view(report))
        if not args.no_write:
            write(report, command=str(report.get("command") or f"srift validate (report {args.report})"))
        return 0
    mine = user_models(args.model, args.input, args.loss)
    base = "sudo .venv/bin/python -m benchmarks.end_to_end" + (" --full" if args.full else "")
    runs: list[ValidationOptions] = []
    if not (mine and args.only_yours):
        runs.append(ValidationOptions(full=args.full, workdir=args.workdir, command=base))
    if mine:
        given = " ".join(
            f"--{flag} {shlex.quote(v)}"
            for flag, values in (("model", args.model), ("input", args.input), ("loss", args.loss))
            for v in values
        )
        runs.append(
            ValidationOptions(
                full=args.full,
                models=(),
                user_models=mine,
                plan_quality=False,
                workdir=None if args.workdir is None else args.workdir / "yours",
                command=f"{base} {given}" + (" --only-yours" if args.only_yours else ""),
            )
        )
    console = Console(stderr=True)
    for options in runs:
        report = run_validation(options, log=lambda m: console.print(f"[dim]{m}[/]", highlight=False))
        Console().print(terminal_view(report))
        if not args.no_write:
            write(report, command=options.command)
    return 0


SHIPPED_MODELS = ("cnn", "wide_mlp", "transformer")
POOLED_SECTION = "end-to-end accuracy (protocol, pooled quick runs)"


def _workdir(report: dict[str, Any]) -> Path:
    """The run's work folder: where it ran, or var/validation/protocol/<its name> in this checkout (the
    protocol's folders, unpacked from docs/images/protocol/workdirs.tar.gz)."""
    ran = Path(report["workdir"])
    return ran if ran.is_dir() else Path("var/validation/protocol") / ran.name


def pool_section(paths: list[Path], *, write_doc: bool, rescored: bool = False) -> int:
    """Print (and write) the protocol's pooled section for the runs at `paths`; with `rescored`, print the
    pooled figures of the stored predictions and of this code's predictions of the same cases."""
    from srift.validation.protocol import SHARDED_TARGETS, Run, markdown, sharded, subset
    from srift.validation.rescore import rescore

    runs = []
    for path in paths:
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        runs.append(Run(path.name, tuple(json.loads(f.read_text()) for f in files)))
    sets = {
        "shipped (DDP)": lambda c: c.get("model") in SHIPPED_MODELS and not sharded(c),
        "held-out (DDP)": lambda c: c.get("model") not in SHIPPED_MODELS and not sharded(c),
        "sharded (FSDP2)": sharded,
    }
    ddp = subset(runs, lambda c: not sharded(c))
    body = markdown(ddp, sets={k: v for k, v in sets.items() if "DDP" in k})
    if any(run.cases for run in subset(runs, sharded)):
        body += "\n\n**Sharded cases** (issue 45) of the same runs:\n\n" + markdown(
            subset(runs, sharded), sets={"sharded (FSDP2)": sharded}, targets=SHARDED_TARGETS
        )
    if rescored:
        again = subset(
            [Run(run.name, tuple(rescore(r, workdir=_workdir(r)) for r in run.reports)) for run in runs],
            lambda c: not sharded(c),
        )
        print("## stored predictions\n\n" + body + "\n\n## this code's predictions\n\n")
        print(markdown(again, sets={k: v for k, v in sets.items() if "DDP" in k}))
        return 0
    print(body)
    if write_doc:
        command = "python -m benchmarks.end_to_end --pool " + " ".join(shlex.quote(str(p)) for p in paths)
        write_section(POOLED_SECTION, body, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
