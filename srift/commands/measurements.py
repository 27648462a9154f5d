"""CLI command `srift measurements list`: the measurement registry, what each set calibrates or checks."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.options import JsonFlag, add_group

console = Console()

MEASUREMENTS_HELP = (
    "The measurement registry (srift/data/measurements.yaml): every measurement a shipped constant was "
    "fitted, tuned or checked on, with its source; the fits read their data only through it."
)


def list_sets(as_json: JsonFlag = False) -> None:
    """Each measurement set: its use (fit, spread, direct, check), source, rows and the constants it sets."""
    from srift.measurements import shipped_registry

    registry = shipped_registry()
    if as_json:
        sets = [
            {
                "id": s.id,
                "use": s.use.value,
                "title": s.title,
                "repository": s.source.repository,
                "commit": s.source.commit,
                "citation": s.source.citation,
                "run": s.source.run,
                "date": s.source.date,
                "retrieved": s.source.retrieved,
                "copy": s.copy.path if s.copy else None,
                "copy_sha256": s.copy.sha256 if s.copy else None,
                "rows": len(s.rows),
                "reader": s.reader,
                "constants": [c.name for c in s.constants],
            }
            for s in registry.sets.values()
        ]
        typer.echo(json.dumps({"as_of": registry.as_of, "sets": sets}, indent=2))
        return
    table = Table(title=f"{len(registry.sets)} measurement sets (as of {registry.as_of})")
    table.add_column("set", no_wrap=True)
    for column in ("use", "source", "rows", "constants"):
        table.add_column(column, overflow="fold")
    for s in registry.sets.values():
        source = s.source.repository or s.source.citation or s.source.run or "-"
        table.add_row(s.id, s.use.value, source, str(len(s.rows) or "-"), str(len(s.constants) or "-"))
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add the `measurements` group."""
    add_group(app, "measurements", help=MEASUREMENTS_HELP, commands={"list": list_sets})
