"""CLI commands for catalog (filled in by its issue)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
