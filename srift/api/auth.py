"""API and job tokens: creation (stored hashed), scope checks, and the FastAPI dependencies that enforce them.

Tokens are 256-bit random strings (`srift_...` for API tokens, `srift_job_...` for a job's own token); only
their SHA-256 is stored, so a leaked database does not leak usable tokens. A plain token is shown once,
when created. API tokens carry a scope (read < write < admin). A job token lets a worker post results for
its own job and nothing else, and only while that job is queued or running.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.api.deps import SessionDep
from srift.db.tables import ApiToken, Job, utcnow
from srift.domain.states import JobState
from srift.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from srift.limits import NAME_CHARS
from srift.settings import Settings

TOKEN_PREFIX = "srift_"
JOB_TOKEN_PREFIX = "srift_job_"


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}


def hash_token(token: str) -> str:
    """SHA-256 hex digest; enough for 256-bit random tokens (no dictionary to attack)."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(*, session: Session, name: str, scope: Scope) -> tuple[ApiToken, str]:
    """Store a new token's hash and return the row and the plain token (shown once, never stored)."""
    name = name.strip()
    if not name:
        raise InvalidInput(
            "the token name is empty", hint="name the token after its user, e.g. `ci`", field="name"
        )
    NAME_CHARS.check(len(name), field="name")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, scope=Scope(scope).value, token_hash=hash_token(plain), prefix=plain[:10])
    session.add(row)
    session.flush()
    return row, plain


def revoke_token(*, session: Session, token_id: int) -> ApiToken:
    """Mark a token revoked (idempotent); it stops working at once."""
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(
            f"no token with id {token_id}", hint="list tokens with `srift tokens list`", field="id"
        )
    row.revoked_at = row.revoked_at or utcnow()
    session.flush()
    return row


def list_tokens(*, session: Session, include_revoked: bool = True) -> list[ApiToken]:
    query = select(ApiToken).order_by(ApiToken.id)
    if not include_revoked:
        query = query.where(ApiToken.revoked_at.is_(None))
    return list(session.scalars(query))


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def find_token(*, session: Session, plain: str) -> ApiToken | None:
    """The live (not revoked) API token whose hash matches `plain`, or None."""
    digest = hash_token(plain)
    row = session.scalars(select(ApiToken).where(ApiToken.token_hash == digest)).first()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return row


def issue_job_token(job: Job) -> str:
    """Give `job` a fresh token (stored hashed on the row) and return the plain token for its worker."""
    plain = JOB_TOKEN_PREFIX + secrets.token_urlsafe(32)
    job.token_hash = hash_token(plain)
    return plain


def find_job_by_token(*, session: Session, plain: str) -> Job | None:
    if not plain.startswith(JOB_TOKEN_PREFIX):
        return None
    digest = hash_token(plain)
    job = session.scalars(select(Job).where(Job.token_hash == digest)).first()
    if job is None or job.token_hash is None or not hmac.compare_digest(job.token_hash, digest):
        return None
    return job


def _check_job_open(job: Job) -> None:
    if not JobState(job.state).is_open:
        raise Forbidden(
            f"job {job.id} is {job.state}; its token no longer accepts results",
            hint="results are accepted only while the job is queued or running; start a new job",
        )


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
    if job.id != job_id:
        raise Forbidden(
            f"this token belongs to job {job.id}, not job {job_id}",
            hint="post results only for the job the token was issued to",
            field="job_id",
        )
    _check_job_open(job)
    return job


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


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
    if _RANK[Scope(row.scope)] < _RANK[scope]:
        raise Forbidden(
            f"a {row.scope} token cannot do this (needs {scope})",
            hint=f"use a token created with `--scope {scope}`",
        )
    return row


def _require(scope: Scope) -> Callable[[Request, Session], ApiToken | None]:
    def check(request: Request, session: SessionDep) -> ApiToken | None:
        settings = _settings(request)
        if not settings.auth_enabled or (scope is Scope.READ and not settings.read_requires_token):
            return None
        return _check_api_token(session, bearer_token(request), scope)

    return check


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
        _check_job_open(self.job)


def _require_job_or_write(request: Request, session: SessionDep) -> Caller:
    settings = _settings(request)
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


RequireRead = Annotated[ApiToken | None, Depends(_require(Scope.READ))]
RequireWrite = Annotated[ApiToken | None, Depends(_require(Scope.WRITE))]
RequireAdmin = Annotated[ApiToken | None, Depends(_require(Scope.ADMIN))]
RequireJobOrWrite = Annotated[Caller, Depends(_require_job_or_write)]
"""A write token, or a job token; the route must then call `caller.authorize_job(job_id)` (403 otherwise)."""
