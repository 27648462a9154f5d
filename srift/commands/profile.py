"""CLI command `srift profile`: measure a torch model's compute profile and write (or upload) it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from srift.domain.profile import ModelProfile

console = Console()
err_console = Console(stderr=True)

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(text: str) -> int:
    """'8GiB', '512MB', '1.5e9' or a plain byte count → bytes."""
    from srift.errors import InvalidInput

    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in _UNITS:
        raise InvalidInput(
            f"{text!r} is not a size",
            hint="write e.g. 8GiB, 512MiB, 2GB or a byte count",
            field="memory_budget",
        )
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value < 1:
        raise InvalidInput(f"{text!r} is not positive", hint="give a positive size", field="memory_budget")
    return value


def result_table(profile: ModelProfile, *, out: Path | None) -> Table:
    extra = profile.extra
    table = Table(title=f"profile of {profile.model}", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    limited = extra.get("max_batch_limited_by")
    table.add_row("accelerator", profile.accelerator)
    table.add_row("max batch", f"{profile.max_batch}" + (f" (limited by {limited})" if limited else ""))
    per_sample_ms = 1000.0 * profile.compute_s(profile.max_batch) / profile.max_batch
    table.add_row("ms per sample", f"{per_sample_ms:.3f} at batch {profile.max_batch} (forward+backward)")
    table.add_row(
        "forward / backward",
        " · ".join(
            f"b={b}: {1000 * f:.2f}/{1000 * w:.2f} ms"
            for b, f, w in zip(
                profile.forward.batches, profile.forward.times_s, profile.backward.times_s, strict=True
            )
        ),
    )
    splits = [c for c in extra.get("bend_checks") or [] if c.get("split")]
    segments = len(profile.forward.batches) - 1
    table.add_row(
        "curve",
        f"{segments} segment{'s' if segments != 1 else ''}"
        + (
            ", split at "
            + ", ".join(f"b={c['batch']} ({100 * c['deviation']:+.0f} % off the line)" for c in splits)
            if splits
            else ""
        ),
    )
    conditional = sum(1 for x in profile.layers if x.exec_prob < 1.0)
    table.add_row(
        "layers",
        f"{len(profile.layers)} trainable, {profile.total_grad_bytes / 1e6:.2f} MB of gradients"
        + (f", {conditional} conditional" if conditional else ""),
    )
    table.add_row("straggler cv", f"{profile.straggler_cv:.3f}")
    if "profile_s" in extra:
        table.add_row("took", f"{extra['profile_s']:.1f} s")
    if out is not None:
        table.add_row("written to", str(out))
    return table


def register(app: typer.Typer) -> None:
    """Add the `profile` command."""

    @app.command("profile")
    def profile(
        model: str = typer.Argument(
            ..., metavar="MODULE:FACTORY", help="callable returning the torch.nn.Module"
        ),
        input_: str = typer.Option(
            ...,
            "--input",
            metavar="MODULE:FACTORY",
            help="callable of the batch size returning the input batch",
        ),
        out: Path = typer.Option(..., "--out", help="where to write the profile JSON"),
        loss: str | None = typer.Option(
            None,
            "--loss",
            metavar="MODULE:FN",
            help="callable of the model output returning the scalar loss (default: sum of output means)",
        ),
        device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N"),
        threads: int | None = typer.Option(None, "--threads", min=1, help="torch intra-op threads (CPU)"),
        max_batch: int | None = typer.Option(
            None,
            "--max-batch",
            min=1,
            help="cap of the largest-batch search (default 256 on CPU, 4096 on CUDA)",
        ),
        accelerator: str | None = typer.Option(
            None,
            "--accelerator",
            help="record this accelerator name (e.g. an instance type) instead of the device's",
        ),
        memory_budget: str | None = typer.Option(
            None,
            "--memory-budget",
            help="memory a step may use, e.g. 8GiB (CPU default: ¾ of available memory or cgroup headroom)",
        ),
        model_name: str | None = typer.Option(
            None, "--model-name", help="name profiles are grouped under (default: the factory's name)"
        ),
        repeats: int = typer.Option(7, "--repeats", min=1, help="timed runs per curve point (median kept)"),
        warmup: int = typer.Option(2, "--warmup", min=0, help="untimed warm-up rounds before timing"),
        iterations: int = typer.Option(
            30,
            "--iterations",
            min=2,
            help="iterations for readiness, exec_prob and straggler_cv (≥ 30 advised)",
        ),
        clock: str = typer.Option(
            "wall",
            "--clock",
            help="wall (elapsed time) or thread (CPU time of the one profiling thread; for shared machines)",
        ),
        paper_curve: bool = typer.Option(
            False,
            "--paper-curve",
            help="keep exactly the four breakpoints 1, ⅓, ⅔, max even where the curve bends between them",
        ),
        upload: str | None = typer.Option(
            None,
            "--upload",
            metavar="URL",
            help="also POST the profile to URL/v1/profiles (a running srift serve)",
        ),
        token: str | None = typer.Option(
            None,
            "--token",
            envvar="SRIFT_TOKEN",
            help="API token for --upload (env SRIFT_TOKEN)",
            show_default=False,
        ),
        as_json: bool = typer.Option(False, "--json", help="print the profile JSON instead of the table"),
    ) -> None:
        """Profile a model's forward/backward time, largest batch and gradient readiness.

        The method of Srift §4.1: binary-search the largest batch that fits (CUDA
        out-of-memory is caught; on CPU a memory budget is honoured), time forward
        and backward separately at 1, ⅓, ⅔ and the largest batch, fit 3-segment
        piecewise-linear curves, and record when each layer's gradients become
        ready, how often each layer runs and the spread of iteration time.
        Each segment's (geometric) midpoint is timed too; where it is more than 8 % off the
        straight line the segment is split there (e.g. a CPU's small-batch knee),
        unless --paper-curve.
        Nothing is downloaded: bring your own model.

        Examples:

          srift profile srift.profiling.testmodels:cnn \\
              --input srift.profiling.testmodels:cnn_input --threads 1 --out cnn.json

          srift profile mymodels.py:build --input mymodels.py:batch \\
              --loss mymodels.py:loss --device cuda:0 --out m.json

          srift profile train:model --input train:inputs --threads 4 \\
              --accelerator c5.4xlarge --out m.json \\
              --upload http://srift:8000 --token $SRIFT_TOKEN

        A factory that fails to import, returns the wrong type, or an input the
        model rejects exits with code 2, naming the factory and the error.
        """
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from srift.profiling.loading import resolve_callable
        from srift.profiling.profiler import profile_model
        from srift.profiling.upload import upload_profile

        model_factory = resolve_callable(model, what="model factory", field="model_factory")
        input_factory = resolve_callable(input_, what="input factory", field="input_factory")
        loss_fn = resolve_callable(loss, what="loss", field="loss_fn") if loss else None
        budget = parse_bytes(memory_budget) if memory_budget else None
        name = model_name or model.rpartition(":")[2]

        with Progress(
            TextColumn("[bold]profiling[/] {task.description:<10}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        ) as bar:
            task = bar.add_task("check", total=1.0)

            def progress(stage: str, fraction: float) -> None:
                bar.update(task, completed=fraction, description=stage)

            result = profile_model(
                model_factory,
                input_factory,
                loss_fn=loss_fn,
                device=device,
                threads=threads,
                max_batch=max_batch,
                accelerator=accelerator,
                memory_budget_bytes=budget,
                repeats=repeats,
                warmup=warmup,
                iterations=iterations,
                model_name=name,
                clock=clock,
                refine=not paper_curve,
                progress=progress,
            )
        document: dict[str, Any] = result.to_dict()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=2) + "\n")
        answer = upload_profile(result, url=upload, token=token) if upload else None
        if as_json:
            typer.echo(json.dumps(document if answer is None else {**document, "uploaded": answer}, indent=2))
            return
        console.print(result_table(result, out=out))
        if answer is not None:
            state = "stored" if answer.get("created") else "already stored"
            console.print(f"{state} on {upload} as profile {answer.get('id')}", highlight=False)
