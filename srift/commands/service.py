"""CLI commands to run the service: `serve` and `db upgrade|downgrade|current`."""

from __future__ import annotations

import logging

import typer

from srift.settings import get_settings


def register(app: typer.Typer) -> None:
    """Add `serve` and the `db` group."""
    db = typer.Typer(help="Database schema: apply or roll back Alembic migrations.", no_args_is_help=True)
    app.add_typer(db, name="db")

    @db.command("upgrade")
    def db_upgrade(revision: str = typer.Argument("head", help="target revision")) -> None:
        """Apply migrations up to REVISION (default: the latest)."""
        from srift.db import migrate

        url = get_settings().resolved_database_url
        migrate.upgrade(url, revision)
        typer.echo(f"database at revision {migrate.current_revision(url)}")

    @db.command("downgrade")
    def db_downgrade(
        revision: str = typer.Argument(..., help="target revision, or 'base' for empty"),
    ) -> None:
        """Roll migrations back to REVISION."""
        from srift.db import migrate

        url = get_settings().resolved_database_url
        migrate.downgrade(url, revision)
        typer.echo(f"database at revision {migrate.current_revision(url)}")

    @db.command("current")
    def db_current() -> None:
        """Print the database's current and the latest revision."""
        from srift.db import migrate

        url = get_settings().resolved_database_url
        typer.echo(f"current: {migrate.current_revision(url)}  head: {migrate.head_revision(url)}")

    @app.command()
    def serve(
        host: str | None = typer.Option(None, help="bind address (default SRIFT_HOST, 127.0.0.1)"),
        port: int | None = typer.Option(None, help="port (default SRIFT_PORT, 8000)"),
        no_bootstrap: bool = typer.Option(False, help="skip migrations and loading the shipped data"),
    ) -> None:
        """Migrate the database, load shipped catalog and models if missing, serve the API and dashboard."""
        import uvicorn

        from srift.api.app import create_app
        from srift.bootstrap import bootstrap

        settings = get_settings()
        logging.basicConfig(
            level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        if not no_bootstrap:
            bootstrap(settings)
        uvicorn.run(
            create_app(settings),
            host=host or settings.host,
            port=port or settings.port,
            log_level=settings.log_level,
        )
