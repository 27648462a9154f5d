"""CLI commands for probe/profile jobs and the worker (filled in by the probe-jobs issue)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
