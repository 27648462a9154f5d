"""CLI command `srift validate`: predicted vs measured DDP training on the emulated testbed."""

from __future__ import annotations

import json
import shlex
import signal
import sys
from pathlib import Path

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add the `validate` command."""

    @app.command("validate")
    def validate(
        quick: bool = typer.Option(
            False,
            "--quick",
            help="the quick matrix (about 10 minutes) instead of the full one (about an hour)",
        ),
        spec: Path | None = typer.Option(
            None,
            "--spec",
            exists=True,
            dir_okay=False,
            help="testbed spec (default: srift/validation/testbed.yaml)",
        ),
        out: Path | None = typer.Option(None, "--out", help="also write the report JSON here"),
        plot: Path | None = typer.Option(
            None, "--plot", help="write the predicted-vs-measured plot (PNG) here"
        ),
        models: str | None = typer.Option(
            None,
            "--models",
            help="comma-separated subset of the shipped cnn, wide_mlp, transformer (default: all of them, "
            "or none when --model is given)",
        ),
        model: list[str] = typer.Option(
            [],
            "--model",
            help="your own model: MODULE:FACTORY (or FILE.py:FACTORY) returning an nn.Module; repeatable. "
            "It takes one training step here first: every trainable parameter must get a gradient (DDP "
            "needs that)",
        ),
        input_factory: list[str] = typer.Option(
            [],
            "--input",
            help="MODULE:FACTORY taking the batch size and returning one input batch; one per --model",
        ),
        loss: list[str] = typer.Option(
            [],
            "--loss",
            help="MODULE:FUNCTION of the model's output returning the scalar loss; once for all --model or "
            "once per --model (default: the profiler's, the sum of the output's means)",
        ),
        repeats: int | None = typer.Option(None, "--repeats", min=1, max=10, help="DDP runs per case"),
        max_cores: float | None = typer.Option(
            None,
            "--max-cores",
            min=0.1,
            help="CPU quota that may run at once (default ¾ of this machine's cores)",
        ),
        bandwidth: str = typer.Option(
            "probe", "--bandwidth", help="probe (probe the testbed and train a model), shipped, or prior"
        ),
        plan_quality: bool = typer.Option(
            True, "--plan-quality/--no-plan-quality", help="run every configuration of a planning problem"
        ),
        keep_testbed: bool = typer.Option(
            False, "--keep-testbed", help="leave a testbed it brought up running"
        ),
        across_only: bool = typer.Option(
            False,
            "--across-only",
            help="only the fleets that span locations (a spec with linked locations, e.g. "
            "srift/validation/testbed-geo.yaml)",
        ),
        workdir: Path | None = typer.Option(
            None, "--workdir", help="work folder (default <data dir>/validation/<time>)"
        ),
        benchmarks: bool = typer.Option(
            False, "--benchmarks", help="write the end-to-end section of docs/BENCHMARKS.md"
        ),
        sharded: bool | None = typer.Option(
            None,
            "--sharded/--no-sharded",
            help="also the sharded cases: FSDP2 zero2 and full_shard of a 57.5 MB model on two hosts "
            "(srift.validation.sharded), time and each rank's peak memory (default: with the shipped "
            "models, not for your models alone)",
        ),
        sharded_only: bool = typer.Option(
            False, "--sharded-only", help="only the sharded cases (with --no-plan-quality for a short run)"
        ),
        as_json: bool = typer.Option(False, "--json", help="print the report JSON instead of tables"),
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

          sudo srift validate --quick --model mymodels:build --input mymodels:batch \
              --loss mymodels:loss          # your own model (alongside: add --models cnn,...)

          sudo srift validate --benchmarks          # the full matrix, about an hour

          sudo srift validate --quick --spec srift/validation/testbed-geo.yaml \
              --across-only --no-plan-quality    # fleets split over two linked locations

          sudo srift validate --quick --sharded-only --no-plan-quality   # FSDP2 cases alone
        """
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from srift.errors import parse_choice
        from srift.validation.matrix import MODELS, user_models
        from srift.validation.pipeline import BandwidthSource, ValidationOptions, run_validation
        from srift.validation.render import markdown, terminal_view

        mine = user_models(model, input_factory, loss)
        if models:
            chosen = tuple(m.strip() for m in models.split(",") if m.strip())
        else:
            chosen = () if mine else tuple(MODELS)
        source = parse_choice(BandwidthSource, bandwidth, what="bandwidth source", field="bandwidth")
        options = ValidationOptions(
            full=not quick,
            spec_path=spec,
            models=chosen,
            user_models=mine,
            max_cores=max_cores,
            workdir=workdir,
            bandwidth=source,
            plan_quality=plan_quality,
            keep_testbed=keep_testbed,
            across_only=across_only,
            sharded=bool(chosen) if sharded is None else sharded,
            sharded_only=sharded_only,
            command="srift " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        )
        if repeats is not None:
            from dataclasses import replace

            options = replace(options, effort=replace(options.resolved_effort(), repeats=repeats))
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
                report = run_validation(options, log=log, progress=progress)
            except KeyboardInterrupt:
                bar.stop()
                err_console.print(
                    "stopped: the hosts' processes were stopped and a testbed this run brought up was taken "
                    "down; the work folder keeps the profiles and probes stored so far (no report)."
                )
                raise typer.Exit(130) from None
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

            write_benchmark_section(report, markdown(report))
        if as_json:
            typer.echo(json.dumps(report, indent=1))
            return
        console.print(terminal_view(report))
        console.print(f"report: {out or Path(report['workdir']) / 'report.json'}", highlight=False)
