"""API tokens: creation (stored hashed), scope checks, and the FastAPI dependencies that enforce them."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.api.deps import SessionDep
from srift.db.tables import ApiToken, utcnow
from srift.errors import Forbidden, NotFound, Unauthorized

TOKEN_PREFIX = "srift_"


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(*, session: Session, name: str, scope: Scope) -> tuple[ApiToken, str]:
    """Store a new token's hash and return the row and the plain token (shown once)."""
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, scope=scope.value, token_hash=hash_token(plain), prefix=plain[:10])
    session.add(row)
    session.flush()
    return row, plain


def revoke_token(*, session: Session, token_id: int) -> ApiToken:
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(
            f"no token with id {token_id}", hint="list tokens with `srift tokens list`", field="id"
        )
    row.revoked_at = row.revoked_at or utcnow()
    return row


def list_tokens(*, session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


def find_token(*, session: Session, plain: str) -> ApiToken | None:
    digest = hash_token(plain)
    row = session.scalars(select(ApiToken).where(ApiToken.token_hash == digest)).first()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return row


def _require(scope: Scope):  # type: ignore[no-untyped-def]
    def check(request: Request, session: SessionDep) -> ApiToken | None:
        settings = request.app.state.settings
        if not settings.auth_enabled or (scope is Scope.READ and not settings.read_requires_token):
            return None
        plain = bearer_token(request)
        if plain is None:
            raise Unauthorized(
                "this endpoint needs an API token",
                hint=(
                    "send `Authorization: Bearer <token>`; "
                    f"create one with `srift tokens create --scope {scope}`"
                ),
            )
        row = find_token(session=session, plain=plain)
        if row is None:
            raise Unauthorized(
                "the token is unknown or revoked", hint="create a new one with `srift tokens create`"
            )
        if _RANK[Scope(row.scope)] < _RANK[scope]:
            raise Forbidden(
                f"a {row.scope} token cannot do this (needs {scope})",
                hint=f"use a token created with `--scope {scope}`",
            )
        return row

    return check


RequireRead = Annotated[ApiToken | None, Depends(_require(Scope.READ))]
RequireWrite = Annotated[ApiToken | None, Depends(_require(Scope.WRITE))]
RequireAdmin = Annotated[ApiToken | None, Depends(_require(Scope.ADMIN))]
