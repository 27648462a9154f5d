"""CLI commands to run the service: `serve` and `db upgrade|downgrade|current`."""

from __future__ import annotations

from typing import Annotated

import typer

from srift.commands.options import add_group
from srift.settings import get_settings


def _at_revision(revision: str | None) -> str:
    """What `srift db upgrade|downgrade` printed as `database at revision None` for an empty database."""
    if revision is None:
        return "database at no revision (empty; `srift db upgrade` creates the tables)"
    return f"database at revision {revision}"


def db_upgrade(revision: Annotated[str, typer.Argument(help="target revision")] = "head") -> None:
    """Apply migrations up to REVISION (default: the latest)."""
    from srift.db import migrate

    url = get_settings().resolved_database_url
    migrate.upgrade(url, revision)
    typer.echo(_at_revision(migrate.current_revision(url)))


def db_downgrade(
    revision: Annotated[str, typer.Argument(help="target revision, or 'base' for empty")],
) -> None:
    """Roll migrations back to REVISION."""
    from srift.db import migrate

    url = get_settings().resolved_database_url
    migrate.downgrade(url, revision)
    typer.echo(_at_revision(migrate.current_revision(url)))


def db_current() -> None:
    """Print the database's current and the latest revision, and `srift db upgrade` when they differ (an
    empty database has no revision)."""
    from srift.db import migrate

    url = get_settings().resolved_database_url
    current, head = migrate.current_revision(url), migrate.head_revision(url)
    if current is None:
        typer.echo(
            f"current: none (empty database)  head: {head}; run `srift db upgrade` to create the tables"
        )
    elif current != head:
        typer.echo(f"current: {current}  head: {head}; run `srift db upgrade` to apply the rest")
    else:
        typer.echo(f"current: {current}  head: {head}")


def serve(
    host: Annotated[str | None, typer.Option(help="bind address (default SRIFT_HOST, 127.0.0.1)")] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="TCP port, 1 to 65535 (default SRIFT_PORT, 8000)")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=256,
            help="worker processes (default SRIFT_WORKERS; 0, its default: one per CPU this process may "
            "use, counting a container's CPU quota); 1 serves in this process",
        ),
    ] = None,
    no_bootstrap: Annotated[
        bool, typer.Option("--no-bootstrap", help="skip migrations and loading the shipped data")
    ] = False,
) -> None:
    """Migrate the database, load shipped catalog and models if missing, serve the API and dashboard.

    Plans are CPU-bound Python, so each CPU gets its own worker process (uvicorn's supervisor restarts
    one that dies). Examples: `srift serve` (all CPUs, 127.0.0.1:8000), `srift serve --host 0.0.0.0
    --port 9000 --workers 4`, `SRIFT_WORKERS=1 srift serve` (one process, e.g. to attach a profiler).
    """
    from srift.api.server import available_cpus, configure_logging
    from srift.api.server import serve as run_server
    from srift.bootstrap import bootstrap

    settings = get_settings()
    configure_logging(settings.log_level)
    if not no_bootstrap:
        bootstrap(settings, progress=lambda line: typer.echo(line, err=True))
    run_server(
        settings=settings,
        host=host or settings.host,
        port=port if port is not None else settings.port,
        workers=(workers if workers is not None else settings.workers) or available_cpus(),
    )


def register(app: typer.Typer) -> None:
    """Add `serve` and the `db` group."""
    add_group(
        app,
        "db",
        help="Database schema: apply or roll back Alembic migrations.",
        commands={"upgrade": db_upgrade, "downgrade": db_downgrade, "current": db_current},
    )
    app.command()(serve)
