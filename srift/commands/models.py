"""CLI commands `srift models train|list|activate`: bus-bandwidth model versions, locally or via --url."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.local import models_database
from srift.commands.options import ReadToken, ServerUrl, WriteToken, add_group
from srift.commands.remote import call_api, env_token
from srift.settings import get_settings

console = Console()


def _pct(value: Any) -> str:
    return f"{100 * float(value):.1f} %" if isinstance(value, int | float) else "-"


def _table(models: list[dict[str, Any]], *, title: str) -> Table:
    table = Table(title=title)
    table.add_column("version", no_wrap=True)
    table.add_column("samples", justify="right")
    names = [m.get("covers", []) for m in models]
    providers = {name.split("/", 1)[0] if "/" in name else "" for cover in names for name in cover}
    shared = next(iter(providers)) if len(providers) == 1 else ""  # every name is "<provider>/<type>"
    shown = [_covers([n.split("/", 1)[1] if shared else n for n in cover]) for cover in names]
    table.add_column(
        f"covers ({shared})" if shared else "covers",
        no_wrap=_whole(shown, versions=[m["version"] for m in models]),
        overflow="fold",
    )
    table.add_column("MAPE<MTU (floor)", justify="right")
    table.add_column("MAPE≥MTU (floor)", justify="right")
    for m, covers in zip(models, shown, strict=True):
        metrics = m.get("metrics", {})
        table.add_row(
            m["version"] + ("\n(active)" if m.get("is_active") else ""),
            str(metrics.get("n_samples", "-")),
            covers,
            f"{_pct(metrics.get('test_mape_small'))}\n({_pct(metrics.get('noise_floor_small'))})",
            f"{_pct(metrics.get('test_mape_large'))}\n({_pct(metrics.get('noise_floor_large'))})",
        )
    return table


COVERS_SHOWN = 2
"""The instance types (or rings) a model covers that its row names; the rest are counted."""
OTHER_COLUMNS_WIDTH = 16 + len("samples") + 2 * len("MAPE<MTU")
"""The models table's width besides its version and covers columns: borders and padding, the sample
count, and each MAPE column at its narrowest (its header's longest word)."""


def _covers(covers: list[str]) -> str:
    """A model's covered types, one a line (a name never breaks at a ", " the console would strand on a line
    of its own), the first COVERS_SHOWN of them and "+N more" for the rest."""
    lines = covers[:COVERS_SHOWN]
    if len(covers) > COVERS_SHOWN:
        lines.append(f"+{len(covers) - COVERS_SHOWN} more")
    return "\n".join(lines) or "-"


def _whole(shown: list[str], *, versions: list[str]) -> bool:
    """Whether every covered name fits the console unbroken beside the other columns at their narrowest;
    else (a long mixed ring on a narrow console) the covers column folds rather than cut the MAPE off."""
    widest = max((len(name) for cell in shown for name in cell.splitlines()), default=0)
    room = console.width - OTHER_COLUMNS_WIDTH - max((len(v) for v in versions), default=0)
    return widest <= room


def _as_dict(version: Any) -> dict[str, Any]:
    return {
        "version": version.version,
        "source": version.source,
        "created_at": version.created_at.isoformat(),
        "is_active": version.is_active,
        "covers": version.covers,
        "training_query": version.training_query,
        "hyperparams": version.hyperparams,
        "metrics": version.metrics,
    }


VersionJson = Annotated[bool, typer.Option("--json", help="print the version as JSON")]
PROVIDER_OPTION = typer.Option([], "--provider", help="only samples of this provider (repeatable)")
TYPE_OPTION = typer.Option(
    [],
    "--instance-type",
    help="only this type (repeatable); a mixed ring's name (a+b): that ring's samples and its types' own",
)
BACKEND_OPTION = typer.Option([], "--backend", help="only this backend: gloo, nccl, mpi, nccl-tests")
"""`srift models train`'s repeatable filters (an empty list: every sample)."""


def train(
    provider: list[str] = PROVIDER_OPTION,
    instance_type: list[str] = TYPE_OPTION,
    backend: list[str] = BACKEND_OPTION,
    activate: Annotated[bool, typer.Option("--activate", help="make the new version the active one")] = False,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="seed of the 9/1 split and the k-fold search")
    ] = 0,
    tune: Annotated[
        bool, typer.Option("--tune/--no-tune", help="search hyperparameters (--no-tune: faster)")
    ] = True,
    as_json: VersionJson = False,
    url: ServerUrl = None,
    token: WriteToken = None,
) -> None:
    """Train a new version on the stored samples (all of them, or those matching the filters).

    Reports held-out MAPE below and above the MTU next to the noise floor.

    Examples:

      srift models train --activate

      srift models train --provider testbed --instance-type tb-100m --json
    """
    body = {
        "providers": provider,
        "instance_types": instance_type,
        "backends": backend,
        "activate": activate,
        "seed": seed,
        "tune": tune,
    }
    if url:
        result = call_api("POST", url, "/v1/bandwidth-models", token=env_token(token), body=body)
    else:
        result = _train_here(provider, instance_type, backend, activate=activate, seed=seed, tune=tune)
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    console.print(_table([result], title="new bandwidth model version"))
    for warning in result.get("metrics", {}).get("warnings", []):
        console.print(f"warning: {warning}", style="yellow", highlight=False, soft_wrap=True)


def _train_here(
    providers: list[str],
    instance_types: list[str],
    backends: list[str],
    *,
    activate: bool,
    seed: int,
    tune: bool,
) -> dict[str, Any]:
    """Train (and maybe activate) a version on the local database's samples matching the filters, through
    the service the API uses (so an unknown provider is refused the same way)."""
    from srift.db.session import transaction
    from srift.services.bandwidth_models import train as train_service

    settings = get_settings()
    with (
        console.status("training (9/1 split, k-fold search)...", spinner="dots"),
        transaction(models_database(settings)) as session,
    ):
        return _as_dict(
            train_service(
                session=session,
                settings=settings,
                providers=providers,
                instance_types=instance_types,
                backends=backends,
                activate_it=activate,
                seed=seed,
                tune=tune,
            )
        )


def list_(
    as_json: Annotated[bool, typer.Option("--json", help="print the versions as JSON")] = False,
    url: ServerUrl = None,
    token: ReadToken = None,
) -> None:
    """List model versions, newest first, with their test MAPE and noise floor.

    Example: `srift models list --json`.
    """
    if url:
        payload = call_api("GET", url, "/v1/bandwidth-models", token=env_token(token))
        rows = list(payload["models"])
    else:
        from srift.bandwidth.registry import list_versions
        from srift.db.session import session_factory

        with session_factory(models_database(get_settings()))() as session:
            rows = [_as_dict(v) for v in list_versions(session=session)]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    active = next((r["version"] for r in rows if r.get("is_active")), None)
    console.print(
        _table(rows, title=f"bandwidth models (active: {active or 'none — the α-β prior answers'})")
    )


def activate_(
    version: Annotated[str, typer.Argument(help="a version from `srift models list`")],
    as_json: VersionJson = False,
    url: ServerUrl = None,
    token: WriteToken = None,
) -> None:
    """Make VERSION the model predictions use. Activating an older version is a rollback.

    Example: `srift models activate 20261122-101500-a1b2c3`.
    """
    if url:
        result = call_api("POST", url, f"/v1/bandwidth-models/{version}/activate", token=env_token(token))
    else:
        from srift.bandwidth.registry import activate
        from srift.db.session import transaction

        with transaction(models_database(get_settings())) as session:
            result = _as_dict(activate(session=session, version=version))
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    console.print(f"active bandwidth model: {result['version']} (source {result['source']})")


def register(app: typer.Typer) -> None:
    """Add the `models` group."""
    add_group(
        app,
        "models",
        help=(
            "Bus-bandwidth models (XGBoost, below and above the MTU) trained on stored probe samples. "
            "Each training run is a version; predictions use the active one, and the α-β prior for instance "
            "types it was not trained on."
        ),
        commands={"train": train, "list": list_, "activate": activate_},
    )
