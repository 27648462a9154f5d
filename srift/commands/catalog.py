"""CLI commands `srift catalog list|refresh|import`: browse, refresh from AWS, and extend the catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.local import catalog_database
from srift.commands.options import Region, add_group
from srift.settings import get_settings

if TYPE_CHECKING:
    from srift.catalog.store import CatalogEntry

console = Console()


def _price(entry: CatalogEntry, market: str) -> str:
    offer = entry.on_demand if market == "on_demand" else entry.spot
    return f"{offer.price_usd_per_hr:.4g}" if offer is not None else "-"


WIDE_ONLY = ("vCPU", "mem GiB", "GPU link Gbps", "EFA")
"""Columns `catalog list` shows only with --wide: what a plan does not depend on most (the GPUs, the
network and the prices decide a fleet), so the default table fits 80 columns."""


def _tables(entries: list[CatalogEntry], *, wide: bool = False) -> list[Table]:
    """The catalog as one table per location (provider/region, in the listing's order), each titled with it:
    provider and region columns beside the type's would squeeze the rest of an 80-column table to "…"."""
    locations: dict[tuple[str, str], list[CatalogEntry]] = {}
    for e in entries:
        locations.setdefault((e.instance.provider, e.region), []).append(e)
    return [_table(group, where=f"{p}/{r}", wide=wide) for (p, r), group in locations.items()] or [
        _table([], where="the catalog", wide=wide)
    ]


def _table(entries: list[CatalogEntry], *, where: str, wide: bool = False) -> Table:
    """One location's instance types as a table titled with the location."""
    noun = "instance type" if len(entries) == 1 else "instance types"
    table = Table(title=f"{len(entries)} {noun} in {where}", show_lines=False)
    columns = [
        ("type", "left"),
        ("GPUs", "left"),
        ("CC", "right"),
        ("status", "left"),
        ("vCPU", "right"),
        ("mem GiB", "right"),
        ("network Gbps", "right"),
        ("GPU link Gbps", "left"),
        ("EFA", "center"),
        ("on-demand $/h", "right"),
        ("spot $/h", "right"),
    ]
    from srift.domain.catalog import Lifecycle

    lifecycle = wide or any(e.status is not Lifecycle.CURRENT for e in entries)
    shown = [(h, j) for h, j in columns if (wide or h not in WIDE_ONLY) and (lifecycle or h != "status")]
    for header, justify in shown:
        table.add_column(header, justify=justify, no_wrap=header == "type")  # type: ignore[arg-type]
    for e in entries:
        i = e.instance
        gpus = f"{i.gpu_count}x {i.gpu_model} {i.gpu_memory_gib:g} GiB" if i.gpu_count else "-"
        link = (
            f"{i.interconnect.value} {i.interconnect_gbps:g}" if i.interconnect_gbps else i.interconnect.value
        )
        network = f"{'up to ' if i.network_burst else ''}{i.network_gbps:g}"
        cells = {
            "type": i.name,
            "GPUs": gpus,
            "CC": e.compute_capability or "-",
            "status": e.status.value,
            "vCPU": str(i.vcpus),
            "mem GiB": f"{i.memory_gib:g}",
            "network Gbps": network,
            "GPU link Gbps": link,
            "EFA": "yes" if i.efa else "",
            "on-demand $/h": _price(e, "on_demand"),
            "spot $/h": _price(e, "spot"),
        }
        table.add_row(*(cells[h] for h, _ in shown))
    return table


def _sources_footer(entries: list[CatalogEntry]) -> list[str]:
    seen: dict[tuple[str, str], None] = {}
    for e in entries:
        for o in e.offers():
            seen[(o.source, o.as_of.isoformat())] = None
    return [f"[{as_of}] {source}" for source, as_of in seen]


def list_(
    provider: Annotated[str | None, typer.Option("--provider", help="e.g. aws, or a custom provider")] = None,
    region: Region = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU model, e.g. T4, A100, H100")] = None,
    min_gpus: Annotated[int | None, typer.Option("--min-gpus", min=0, help="at least this many GPUs")] = None,
    market: Annotated[
        str, typer.Option("--market", help="any | spot | on_demand: keep types priced there")
    ] = "any",
    snapshot: Annotated[
        str | None, typer.Option("--snapshot", help="read one snapshot, e.g. srift-paper-2020")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="print a JSON list with every field and price")
    ] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="every column (vCPU, memory, GPU link, EFA too), however wide")
    ] = False,
) -> None:
    """List instance types with their on-demand and spot prices (USD/hour).

    The table fits 80 columns: CC is the GPUs' compute capability; a status column (current, previous
    generation, retired; see srift/catalog/specs/support.yaml) appears when a listed family is not
    current; --wide adds vCPU, memory, the GPU link, EFA and status (or use --json).

    Examples:
      srift catalog list --provider aws --region us-east-1 --gpu V100
      srift catalog list --provider aws --region us-east-1 --min-gpus 8 \\
          --market spot
      srift catalog list --snapshot srift-paper-2020 --json

    Unknown providers or regions exit with code 2 and list the valid values.
    """
    from srift.catalog import store
    from srift.db.session import session_factory
    from srift.domain.catalog import MarketChoice
    from srift.errors import parse_choice

    choice = parse_choice(MarketChoice, market, what="market", field="market")
    url = catalog_database(get_settings())
    with session_factory(url)() as session:
        entries = store.list_instance_types(
            session=session,
            provider=provider,
            region=region,
            gpu=gpu,
            min_gpus=min_gpus,
            market=choice,
            snapshot=snapshot,
        )
    if as_json:
        typer.echo(json.dumps([e.to_dict() for e in entries], indent=2))
        return
    for table in _tables(entries, wide=wide):
        console.print(table)
    for line in _sources_footer(entries):
        console.print(f"source {line}", style="dim", highlight=False)


def refresh(
    provider: Annotated[
        str, typer.Option("--provider", help="only aws can be refreshed from an API")
    ] = "aws",
    region: str = typer.Option(..., "--region", help="AWS region, e.g. us-east-1"),
    families: Annotated[
        str | None,
        typer.Option("--families", help="comma-separated instance families (default: the shipped ones)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Fetch current instance types, spot and on-demand prices from AWS into a new snapshot.

    Uses boto3's standard credentials (AWS_PROFILE, environment, ~/.aws, instance role) and needs
    ec2:DescribeInstanceTypes, ec2:DescribeSpotPriceHistory and pricing:GetProducts.

    Example: srift catalog refresh --provider aws --region us-west-2 --families p4d,p5
    """
    from srift.catalog import aws
    from srift.db.session import transaction
    from srift.errors import InvalidInput

    if provider != "aws":
        raise InvalidInput(
            f"provider {provider!r} cannot be refreshed from an API",
            hint="use `srift catalog import FILE.yaml` for custom providers; refresh supports: aws",
            field="provider",
        )
    chosen = tuple(f.strip() for f in families.split(",") if f.strip()) if families else aws.DEFAULT_FAMILIES
    url = catalog_database(get_settings())
    with console.status(f"querying AWS in {region}..."), transaction(url) as session:
        report = aws.refresh(session=session, region=region, families=chosen)
    payload: dict[str, Any] = {
        "snapshot": report.snapshot,
        "snapshot_id": report.snapshot_id,
        "region": report.region,
        "types": report.types,
        "spot_prices": report.spot_prices,
        "on_demand_prices": report.on_demand_prices,
        "notes": list(report.notes),
    }
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    console.print(
        f"snapshot [bold]{report.snapshot}[/]: {report.types} types, {report.spot_prices} spot and "
        f"{report.on_demand_prices} on-demand prices in {report.region}"
    )
    for note in report.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)


def import_(
    file: Annotated[Path, typer.Argument(help="a srift-catalog/1 YAML file (see docs/catalog.md)")],
    as_json: Annotated[
        bool, typer.Option("--json", help="print {snapshot, provider, types, prices} as JSON")
    ] = False,
) -> None:
    """Import a custom provider's instance types and prices (on-prem, other clouds, rate cards).

    The file is validated whole before anything is written; errors name the file, line and field.
    Importing the same snapshot name again replaces it.

    A minimal file:

      provider: onprem
      source: "Lab rate card v3"
      as_of: 2026-11-01
      instance_types:
        - {name: a100x8, gpu_model: A100, gpu_count: 8, gpu_memory_gib: 40,
           vcpus: 128, memory_gib: 1024, network_gbps: 200,
           interconnect: nvswitch, interconnect_gbps: 2400,
           prices: {lab-1: {on_demand: 12.5}}}
    """
    from srift.catalog.custom import import_file
    from srift.db.session import transaction

    url = catalog_database(get_settings())
    with transaction(url) as session:
        snapshot_id, data = import_file(session=session, path=file)
    regions = sorted({p.region for p in data.prices})
    payload: dict[str, Any] = {
        "snapshot": data.name,
        "snapshot_id": snapshot_id,
        "provider": data.provider,
        "types": len(data.types),
        "prices": len(data.prices),
        "regions": regions,
    }
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    console.print(
        f"imported snapshot [bold]{data.name}[/] for provider {data.provider}: {len(data.types)} types, "
        f"{len(data.prices)} prices in {', '.join(regions)}"
    )


def register(app: typer.Typer) -> None:
    """Add the `catalog` group."""
    add_group(
        app,
        "catalog",
        help=(
            "The catalog of instance types and prices. Srift ships AWS data (g4dn, g5, g6, g6e, p3, p3dn, "
            "p4d, p4de, p5, p5en, g3, p2, c5 in us-east-1 and us-west-2, plus the Srift paper's 2020 prices "
            "as snapshot srift-paper-2020); refresh it from AWS or import your own providers."
        ),
        commands={"list": list_, "refresh": refresh, "import": import_},
    )
