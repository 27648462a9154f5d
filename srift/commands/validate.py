"""CLI command `srift validate`: predicted vs measured DDP training on the emulated testbed."""

from __future__ import annotations

import json
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from srift.validation.pipeline import ValidationOptions

console = Console()
err_console = Console(stderr=True)

Quick = Annotated[
    bool,
    typer.Option(
        "--quick",
        help="the quick matrix (about 17 minutes on 2 cores, measured: docs/BENCHMARKS.md, end-to-end "
        "accuracy) instead of the full one (about an hour)",
    ),
]
Spec = Annotated[
    Path | None,
    typer.Option(
        "--spec", exists=True, dir_okay=False, help="testbed spec (default: srift/validation/testbed.yaml)"
    ),
]
ReportOut = Annotated[Path | None, typer.Option("--out", help="also write the report JSON here")]
Plot = Annotated[Path | None, typer.Option("--plot", help="write the predicted-vs-measured plot (PNG) here")]
Models = Annotated[
    str | None,
    typer.Option(
        "--models",
        help="comma-separated subset of the shipped cnn, wide_mlp, transformer (default: all of them, "
        "or none when --model is given)",
    ),
]
MODEL_OPTION = typer.Option(
    [],
    "--model",
    help="your own model: MODULE:FACTORY (or FILE.py:FACTORY) returning an nn.Module; repeatable. "
    "It takes one training step here first: every trainable parameter must get a gradient (DDP "
    "needs that)",
)
INPUT_OPTION = typer.Option(
    [], "--input", help="MODULE:FACTORY taking the batch size and returning one input batch; one per --model"
)
LOSS_OPTION = typer.Option(
    [],
    "--loss",
    help="MODULE:FUNCTION of the model's output returning the scalar loss; once for all --model or "
    "once per --model (default: the profiler's, the sum of the output's means)",
)
"""The repeatable options default to an empty list, declared in the default style (an `Annotated` one
would put a mutable default in the signature)."""
Repeats = Annotated[int | None, typer.Option("--repeats", min=1, max=10, help="DDP runs per case")]
MaxCores = Annotated[
    float | None,
    typer.Option(
        "--max-cores", min=0.1, help="CPU quota that may run at once (default ¾ of this machine's cores)"
    ),
]
Bandwidth = Annotated[
    str, typer.Option("--bandwidth", help="probe (probe the testbed and train a model), shipped, or prior")
]
PlanQuality = Annotated[
    bool,
    typer.Option("--plan-quality/--no-plan-quality", help="run every configuration of a planning problem"),
]
KeepTestbed = Annotated[bool, typer.Option("--keep-testbed", help="leave a testbed it brought up running")]
AcrossOnly = Annotated[
    bool,
    typer.Option(
        "--across-only",
        help="only the fleets that span locations (a spec with linked locations, e.g. "
        "srift/validation/testbed-geo.yaml)",
    ),
]
Workdir = Annotated[
    Path | None, typer.Option("--workdir", help="work folder (default <data dir>/validation/<time>)")
]
Benchmarks = Annotated[
    bool, typer.Option("--benchmarks", help="write the end-to-end section of docs/BENCHMARKS.md")
]
Sharded = Annotated[
    bool | None,
    typer.Option(
        "--sharded/--no-sharded",
        help="also the sharded cases: FSDP2 zero2 and full_shard of a 57.5 MB model on two hosts "
        "(srift.validation.sharded), time and each rank's peak memory (default: with the shipped "
        "models, not for your models alone)",
    ),
]
ShardedOnly = Annotated[
    bool,
    typer.Option("--sharded-only", help="only the sharded cases (with --no-plan-quality for a short run)"),
]
ReportJson = Annotated[bool, typer.Option("--json", help="print the report JSON instead of tables")]


def validate(
    quick: Quick = False,
    spec: Spec = None,
    out: ReportOut = None,
    plot: Plot = None,
    models: Models = None,
    model: list[str] = MODEL_OPTION,
    input_factory: list[str] = INPUT_OPTION,
    loss: list[str] = LOSS_OPTION,
    repeats: Repeats = None,
    max_cores: MaxCores = None,
    bandwidth: Bandwidth = "probe",
    plan_quality: PlanQuality = True,
    keep_testbed: KeepTestbed = False,
    across_only: AcrossOnly = False,
    workdir: Workdir = None,
    benchmarks: Benchmarks = False,
    sharded: Sharded = None,
    sharded_only: ShardedOnly = False,
    as_json: ReportJson = False,
) -> None:
    """Check Srift's predictions against real PyTorch DDP training on the emulated testbed.

    Brings up the testbed (two instance types that differ in CPU quota and link
    rate), profiles each model inside a host of each type (`srift profile`),
    probes allreduce bandwidth there and trains a bandwidth model, predicts the
    iteration time of every case (models × fleets of 1..4 hosts, mixed types
    included), trains each case for real with DDP (gloo) on synthetic data,
    repeated to measure noise, and reports predicted vs measured: MAPE overall
    and by model, host count and type, the share of underestimates and their
    90th percentile. With plan quality on, every configuration of a small
    planning problem is run for real and the optimizer's choice, CAP and TAP
    are ranked by what was measured.

    Needs root (namespaces, tc, cgroups). Keep the machine otherwise idle:
    the hosts' CPU quotas must be real while runs are timed. Ctrl-C or SIGTERM
    stop it cleanly (exit code 130): every process it started in the hosts is
    stopped and a testbed it brought up is taken down.

    Examples:

      sudo srift validate --quick --out report.json --plot validate.png

      sudo srift validate --models cnn --no-plan-quality --repeats 1 --quick

      # your own model (alongside: add --models cnn,...)
      sudo srift validate --quick --model mymodels:build --input mymodels:batch \\
          --loss mymodels:loss

      sudo srift validate --benchmarks   # the full matrix, about an hour

      # fleets split over two linked locations
      sudo srift validate --quick --spec srift/validation/testbed-geo.yaml \\
          --across-only --no-plan-quality

      # FSDP2 cases alone
      sudo srift validate --quick --sharded-only --no-plan-quality
    """
    from dataclasses import replace

    from srift.errors import parse_choice
    from srift.validation.matrix import MODELS, user_models
    from srift.validation.pipeline import BandwidthSource, ValidationOptions
    from srift.validation.render import terminal_view

    mine = user_models(model, input_factory, loss)
    if models:
        chosen = tuple(m.strip() for m in models.split(",") if m.strip())
    else:
        chosen = () if mine else tuple(MODELS)
    options = ValidationOptions(
        full=not quick,
        spec_path=spec,
        models=chosen,
        user_models=mine,
        max_cores=max_cores,
        workdir=workdir,
        bandwidth=parse_choice(BandwidthSource, bandwidth, what="bandwidth source", field="bandwidth"),
        plan_quality=plan_quality,
        keep_testbed=keep_testbed,
        across_only=across_only,
        sharded=bool(chosen) if sharded is None else sharded,
        sharded_only=sharded_only,
        command="srift " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
    )
    if repeats is not None:
        options = replace(options, effort=replace(options.resolved_effort(), repeats=repeats))
    report = _run_with_progress(options)
    _save_report(report, plot=plot, out=out, benchmarks=benchmarks)
    if as_json:
        typer.echo(json.dumps(report, indent=1))
        return
    console.print(terminal_view(report))
    console.print(f"report: {out or Path(report['workdir']) / 'report.json'}", highlight=False)


def _run_with_progress(options: ValidationOptions) -> dict[str, Any]:
    """Run the validation with a progress bar per stage on stderr; Ctrl-C or SIGTERM exit 130."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from srift.validation.pipeline import run_validation

    with Progress(
        TextColumn("[bold]{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = int(bar.add_task(stage, total=total))
            bar.update(tasks[stage], completed=done, total=total)  # type: ignore[arg-type]

        def log(message: str) -> None:
            bar.console.print(f"[dim]{message}[/]", highlight=False)

        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            return run_validation(options, log=log, progress=progress)
        except KeyboardInterrupt:
            bar.stop()
            err_console.print(
                "stopped: the hosts' processes were stopped and a testbed this run brought up was taken "
                "down; the work folder keeps the profiles and probes stored so far (no report)."
            )
            raise typer.Exit(130) from None


def _save_report(report: dict[str, Any], *, plot: Path | None, out: Path | None, benchmarks: bool) -> None:
    """Write what was asked for: the plot (its path goes into the report), the report JSON, the benchmark
    section of docs/BENCHMARKS.md."""
    if plot is not None:
        from srift.validation.plot import plot_predicted_vs_measured

        plot_predicted_vs_measured(
            report["cases"],
            plot,
            title=f"srift validate ({report['level']}): predicted vs measured DDP iteration time",
            summary=report["summary"],
        )
        report["plot"] = str(plot)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n")
    if benchmarks:
        from srift.validation.benchmarks import write_benchmark_section
        from srift.validation.render import markdown

        write_benchmark_section(report, markdown(report))


def register(app: typer.Typer) -> None:
    """Add the `validate` command."""
    app.command("validate")(validate)
