"""The `srift` command line: assembles each area's commands and turns SriftError (and click's usage errors)
into one error line and an exit code."""

from __future__ import annotations

import importlib

import typer

from srift.commands.usage import SriftGroup, report
from srift.errors import SriftError
from srift.redaction import install_log_redaction

COMMAND_MODULES = (
    "service",
    "catalog",
    "testbed",
    "profile",
    "probe",
    "models",
    "predict",
    "plan",
    "validate",
    "tokens",
    "jobs",
    "runs",
    "traces",
    "measurements",
)


def build_app() -> typer.Typer:
    """Create the Typer app; each srift.commands.<area> module adds its commands via register(app)."""
    app = typer.Typer(
        name="srift",
        cls=SriftGroup,
        help=(
            "Srift: which cloud VMs to rent for data-parallel training, and how to split the global "
            "batch.\n\n"
            "Typical flow: `srift profile` your model, `srift probe run` or `srift models train` for the "
            "network, then `srift plan request.yaml`. `srift serve` runs the API and dashboard."
        ),
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False,
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print Srift's version and exit.",
        ),
    ) -> None:
        """Srift's commands; `--version` prints the package version."""

    for name in COMMAND_MODULES:
        module = importlib.import_module(f"srift.commands.{name}")
        module.register(app)
    return app


def _print_version(value: bool) -> None:
    if value:
        from srift import __version__

        typer.echo(f"srift {__version__}")
        raise typer.Exit()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: SriftError prints as one line and exits with its own code; click's
    usage errors print the same way (SriftGroup) and exit 2."""
    install_log_redaction()
    app = build_app()
    try:
        app(args=argv, prog_name="srift")
    except SriftError as exc:
        report(exc)
