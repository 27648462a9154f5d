"""CLI commands `srift traces import|list|fit`: spot interruption traces and the model fitted to them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.options import JsonFlag, add_group
from srift.spot.model import Half
from srift.spot.traces import DEFAULT_TICK_S, TraceKind, TraceMeta

console = Console()

TRACES_HELP = (
    "Spot interruption traces: the public ones of Can't Be Late (skypilot-org/spot-traces) or your own "
    "interruption log (CSV). Imported traces are kept as one versioned set (<data dir>/spot-traces.json); "
    "`srift traces fit` fits the interruption model to traces, and `srift plan FILE --replay-traces PATH` "
    "replays a plan through them."
)

PATH_HELP = "a trace file (.json public format, .csv log), a folder of them, or a git repository"


def _meta(
    *,
    provider: str | None,
    zone: str | None,
    instance_type: str | None,
    node_count: int | None,
    kind: TraceKind,
) -> TraceMeta | None:
    given = [provider, zone, instance_type, node_count]
    if not any(v is not None for v in given):
        return None
    if not all(v is not None for v in given):
        from srift.errors import InvalidInput

        raise InvalidInput(
            "--provider, --zone, --instance-type and --node-count go together",
            hint="give all four for a file whose path does not name them, or none",
            field="zone",
        )
    assert provider is not None and zone is not None and instance_type is not None and node_count is not None
    return TraceMeta(
        provider=provider, zone=zone, instance_type=instance_type, kind=kind, node_count=node_count
    )


def _table(rows: list[dict[str, Any]], *, title: str) -> Table:
    table = Table(title=title)
    for col in ("name", "kind", "zone", "type", "VMs", "tick s", "days", "start"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"],
            r["kind"],
            f"{r['provider']}/{r['zone']}",
            r["instance_type"],
            str(r["node_count"]),
            f"{r['gap_s']:.0f}",
            f"{r['days']:.1f}",
            str(r["start"] or "-"),
        )
    return table


def import_traces(
    path: Path = typer.Argument(..., help=PATH_HELP),
    commit: str = typer.Option("HEAD", help="the commit to read when PATH is a git repository"),
    provider: str | None = typer.Option(None, help="for a .json whose path does not say it (e.g. aws)"),
    zone: str | None = typer.Option(None, help="for a .json whose path does not say it (e.g. us-east-1a)"),
    instance_type: str | None = typer.Option(None, help="for a .json whose path does not say it"),
    node_count: int | None = typer.Option(None, min=1, help="for a .json: VMs the trace held or asked for"),
    kind: TraceKind = typer.Option(TraceKind.PREEMPTION, help="for a .json: preemption or availability"),
    log_provider: str = typer.Option("aws", help="provider of a CSV log without a provider column"),
    tick_s: float = typer.Option(DEFAULT_TICK_S, help="seconds between the ticks a CSV log is sampled at"),
    as_json: JsonFlag = False,
) -> None:
    """Read traces and store them; a malformed file is refused naming its row, and nothing is stored.

    A CSV log: the header time,zone,instance_type,event,count (provider optional), one event a row.
    time: ISO 8601, e.g. 2024-05-01T10:00:00Z (no offset: UTC); epoch seconds are not read.
    event: launched or interrupted; count: the VMs that came up or were taken back (docs/spot.md).
    """
    from srift.services.traces import import_traces as store
    from srift.settings import get_settings
    from srift.spot.sources import read_traces

    meta = _meta(provider=provider, zone=zone, instance_type=instance_type, node_count=node_count, kind=kind)
    traces = read_traces(path, commit=commit, meta=meta, provider=log_provider, tick_s=tick_s)
    result = store(settings=get_settings(), traces=traces)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    console.print(
        _table(
            result["traces"],
            title=f"{result['stored']} stored, {result['unchanged']} unchanged, in {result['path']}",
        )
    )


def list_traces(as_json: JsonFlag = False) -> None:
    """The stored traces."""
    from srift.services.traces import list_traces as listed
    from srift.settings import get_settings

    rows = listed(settings=get_settings())
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    console.print(_table(rows, title=f"{len(rows)} stored trace(s)"))


def fit(
    path: Path = typer.Argument(..., help=PATH_HELP),
    out: Path = typer.Option(..., "--out", help="where to write the model (srift-spot-model/1 JSON)"),
    half: Half = typer.Option(Half.FIT, help="fit: even 2-day blocks (the shipped model); all: every tick"),
    commit: str = typer.Option("HEAD", help="the commit to read when PATH is a git repository"),
    registered: bool = typer.Option(
        False,
        "--registered",
        help="refuse traces other than the measurement registry's public set (the shipped model's refit)",
    ),
) -> None:
    """Fit the interruption model to traces and write it with its provenance (no raw data in the file)."""
    from srift.spot.shipped import dumps, fit_document, registered_traces
    from srift.spot.sources import commit_date, is_git_repository, read_traces

    traces = read_traces(path, commit=commit)
    if registered:
        traces = list(registered_traces(traces))
    commits = {t.source.commit for t in traces if t.source.commit}
    dated = {c: commit_date(path, c) for c in commits} if is_git_repository(path) else {}
    doc = fit_document(
        traces,
        half=half,
        committed=dated,
        command=f"srift traces fit <{', '.join(sorted({t.source.repository for t in traces}))}> "
        f"--half {half.value}",
    )
    out.write_text(dumps(doc), encoding="utf-8")
    laws = sum(len(r["fleets"]) for r in doc["laws"])
    console.print(f"{laws} laws from {len(traces)} traces ({half.value} half) written to {out}")


def register(app: typer.Typer) -> None:
    """Add the `traces` group."""
    add_group(
        app, "traces", help=TRACES_HELP, commands={"import": import_traces, "list": list_traces, "fit": fit}
    )
