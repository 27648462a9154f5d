"""HTTP side of API and job tokens: the FastAPI dependencies that read a bearer token and check its scope.

Storing, finding and revoking tokens is `srift.db.tokens` (the CLI and the worker use it without FastAPI).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from srift.api.deps import SessionDep, get_app_settings
from srift.db.session import read_session_factory
from srift.db.tables import ApiToken, Job
from srift.db.tokens import (
    JOB_TOKEN_PREFIX,
    RANK,
    Scope,
    check_job_open,
    check_token_holder,
    find_job_by_token,
    find_token,
)
from srift.db.tokens import create_token as create_token
from srift.db.tokens import list_tokens as list_tokens
from srift.db.tokens import revoke_token as revoke_token
from srift.errors import Forbidden, Unauthorized
from srift.settings import Settings

__all__ = [
    "Caller",
    "CallerIdentity",
    "Identity",
    "RequireAdmin",
    "RequireJobOrWrite",
    "RequireRead",
    "RequireReadAsync",
    "RequireWrite",
    "Scope",
    "bearer_token",
    "create_token",
    "find_token",
    "list_tokens",
    "require_job_token",
    "revoke_token",
]


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def require_job_token(*, session: Session, job_id: int, plain: str | None) -> Job:
    """Check that `plain` is job `job_id`'s own token: 401 when missing or unknown, 403 for another job's
    token or a finished job. Returns the job."""
    if not plain:
        raise Unauthorized(
            "this endpoint needs the job's token", hint="send `Authorization: Bearer <job token>`"
        )
    job = find_job_by_token(session=session, plain=plain)
    if job is None:
        raise Unauthorized("the job token is unknown", hint="use the token the worker was given for this job")
    check_token_holder(job.id, job_id, noun="job", action="post results")
    check_job_open(job)
    return job


def _check_api_token(session: Session, plain: str | None, scope: Scope) -> ApiToken:
    if plain is None:
        raise Unauthorized(
            "this endpoint needs an API token",
            hint=(
                "send `Authorization: Bearer <token>`; "
                f"create one with `srift tokens create --name NAME --scope {scope}`"
            ),
        )
    row = find_token(session=session, plain=plain)
    if row is None:
        raise Unauthorized(
            "the token is unknown or revoked", hint="create a new one with `srift tokens create`"
        )
    if RANK[Scope(row.scope)] < RANK[scope]:
        raise Forbidden(
            f"a {row.scope} token cannot do this (needs {scope})",
            hint=f"use a token created with `--scope {scope}`",
        )
    return row


def _token_needed(settings: Settings, scope: Scope) -> bool:
    return settings.auth_enabled and (scope is not Scope.READ or settings.read_requires_token)


def _require(scope: Scope) -> Callable[[Request, Session], ApiToken | None]:
    def check(request: Request, session: SessionDep) -> ApiToken | None:
        if not _token_needed(get_app_settings(request), scope):
            return None
        return _check_api_token(session, bearer_token(request), scope)

    return check


async def _require_read_async(request: Request) -> ApiToken | None:
    """RequireRead for `async def` routes: no thread when reads are open; else the token is checked in the
    thread pool, with a read session of its own."""
    settings = get_app_settings(request)
    if not _token_needed(settings, Scope.READ):
        return None
    plain = bearer_token(request)

    def check() -> ApiToken:
        session = read_session_factory(settings.resolved_database_url)()
        try:
            return _check_api_token(session, plain, Scope.READ)
        finally:
            session.close()

    return await run_in_threadpool(check)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is posting results: a write-scoped API token, a job's own token, or anyone (auth disabled)."""

    api_token: ApiToken | None = None
    job: Job | None = None

    def authorize_job(self, job_id: int | None) -> None:
        """403 unless this caller may write results for `job_id` (None: results not tied to a job)."""
        if self.job is None:
            return
        if job_id != self.job.id:
            raise Forbidden(
                f"this token belongs to job {self.job.id}, not "
                + ("a batch without a job" if job_id is None else f"job {job_id}"),
                hint="post results only for the job the token was issued to",
                field="job_id",
            )
        check_job_open(self.job)


def _require_job_or_write(request: Request, session: SessionDep) -> Caller:
    settings = get_app_settings(request)
    if not settings.auth_enabled:
        return Caller()
    plain = bearer_token(request)
    if plain is not None and plain.startswith(JOB_TOKEN_PREFIX):
        job = find_job_by_token(session=session, plain=plain)
        if job is None:
            raise Unauthorized(
                "the job token is unknown", hint="use the token the worker was given for this job"
            )
        return Caller(job=job)
    return Caller(api_token=_check_api_token(session, plain, Scope.WRITE))


@dataclass(frozen=True, slots=True)
class Identity:
    """Whose data a request reads and writes: the API token's name (None: anonymous, or authentication off,
    where every row is everyone's), and whether the token is an admin's (which may delete any profile)."""

    owner: str | None = None
    admin: bool = False


def _identity(request: Request, session: SessionDep) -> Identity:
    """The caller's identity from its bearer token; a token that is given but unknown is a 401 even where
    reads are open (an anonymous answer would silently leave out the caller's own profiles and plans)."""
    if not get_app_settings(request).auth_enabled:
        return Identity()
    plain = bearer_token(request)
    if plain is None or plain.startswith(JOB_TOKEN_PREFIX):
        return Identity()
    row = find_token(session=session, plain=plain)
    if row is None:
        raise Unauthorized(
            "the token is unknown or revoked",
            hint="create a new one with `srift tokens create`, or send no token to read what everyone shares",
        )
    return Identity(owner=row.name, admin=Scope(row.scope) is Scope.ADMIN)


CallerIdentity = Annotated[Identity, Depends(_identity)]
"""Who asks: profiles, plans and runs are the token owner's (see srift.profiling.store)."""
RequireRead = Annotated[ApiToken | None, Depends(_require(Scope.READ))]
RequireReadAsync = Annotated[ApiToken | None, Depends(_require_read_async)]
"""RequireRead for `async def` routes that take no session (cached reads)."""
RequireWrite = Annotated[ApiToken | None, Depends(_require(Scope.WRITE))]
RequireAdmin = Annotated[ApiToken | None, Depends(_require(Scope.ADMIN))]
RequireJobOrWrite = Annotated[Caller, Depends(_require_job_or_write)]
"""A write token, or a job token; the route must then call `caller.authorize_job(job_id)` (403 otherwise)."""
