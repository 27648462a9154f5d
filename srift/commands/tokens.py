"""CLI commands for API tokens: `srift tokens create|list|revoke` against the configured database."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.local import migrated_url
from srift.commands.options import add_group

console = Console()


def _when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def create(
    name: Annotated[str, typer.Option("--name", help="who or what uses the token, e.g. `ci` or `alice`")],
    scope: Annotated[str, typer.Option("--scope", help="read | write | admin")] = "write",
    as_json: Annotated[bool, typer.Option("--json", help="print {id, name, scope, token} as JSON")] = False,
) -> None:
    """Create a token and print it once; store it in a secret manager, it cannot be shown again.

    Example: `srift tokens create --name ci --scope write`, then
    `curl -H "Authorization: Bearer $TOKEN" -X POST .../v1/profiles -d @profile.json`.
    """
    from srift.db.session import transaction
    from srift.db.tokens import Scope, create_token
    from srift.errors import parse_choice

    parsed = parse_choice(Scope, scope.lower(), what="scope", field="scope")
    with transaction(migrated_url()) as session:
        row, plain = create_token(session=session, name=name, scope=parsed)
        token_id = row.id
    if as_json:
        typer.echo(json.dumps({"id": token_id, "name": name.strip(), "scope": parsed.value, "token": plain}))
        return
    console.print(f"created {parsed.value} token {token_id} ({name.strip()}); it is shown only now:")
    typer.echo(plain)


def list_(
    revoked: Annotated[bool, typer.Option("--revoked", help="include revoked tokens")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list")] = False,
) -> None:
    """List tokens: id, name, scope, dates. Never prints a token or its hash.

    Example: `srift tokens list --revoked`.
    """
    from srift.db.session import transaction
    from srift.db.tokens import list_tokens

    with transaction(migrated_url()) as session:
        rows: list[dict[str, object]] = [
            {
                "id": r.id,
                "name": r.name,
                "scope": r.scope,
                "created_at": _when(r.created_at),
                "revoked_at": _when(r.revoked_at),
            }
            for r in list_tokens(session=session, include_revoked=revoked)
        ]
    if as_json:
        typer.echo(json.dumps(rows))
        return
    table = Table("id", "name", "scope", "created", "revoked", title="API tokens")
    for r in rows:
        table.add_row(*(str(r[k] or "") for k in ("id", "name", "scope", "created_at", "revoked_at")))
    console.print(table)


def revoke(
    token_id: Annotated[int, typer.Argument(metavar="ID", help="the id shown by `srift tokens list`")],
) -> None:
    """Revoke token ID; requests using it get 401 from now on.

    Example: `srift tokens revoke 3`.
    """
    from srift.db.session import transaction
    from srift.db.tokens import revoke_token

    with transaction(migrated_url()) as session:
        row = revoke_token(session=session, token_id=token_id)
        name = row.name
    console.print(f"revoked token {token_id} ({name})")


def register(app: typer.Typer) -> None:
    """Add the `tokens` group."""
    add_group(
        app,
        "tokens",
        help=(
            "API tokens: writes need a write (or admin) token; reads need a read token when "
            "SRIFT_READ_REQUIRES_TOKEN=true. Tokens are stored hashed and shown once, at creation. "
            "These commands act on the database in SRIFT_DATABASE_URL (run them where the server runs)."
        ),
        commands={"create": create, "list": list_, "revoke": revoke},
    )
