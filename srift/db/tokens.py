"""API and job tokens as stored: creation (hashed), lookup, revocation, and a job's own token.

Tokens are 256-bit random strings (`srift_...` for API tokens, `srift_job_...` for a job's own token); only
their SHA-256 is stored, so a leaked database does not leak usable tokens. A plain token is shown once,
when created. API tokens carry a scope (read < write < admin). A job token lets a worker post results for
its own job and nothing else, and only while that job is queued or running. The HTTP checks that use these
are in `srift.api.auth`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.db.tables import ApiToken, Job, utcnow
from srift.domain.states import JobState
from srift.errors import Forbidden, InvalidInput, NotFound
from srift.limits import NAME_CHARS

TOKEN_PREFIX = "srift_"
JOB_TOKEN_PREFIX = "srift_job_"


class Scope(StrEnum):
    """What an API token may do; each scope includes the ones below it."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}


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
    """Every token, oldest first (without the revoked ones when asked)."""
    query = select(ApiToken).order_by(ApiToken.id)
    if not include_revoked:
        query = query.where(ApiToken.revoked_at.is_(None))
    return list(session.scalars(query))


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
    """The job whose own token is `plain`, or None."""
    if not plain.startswith(JOB_TOKEN_PREFIX):
        return None
    digest = hash_token(plain)
    job = session.scalars(select(Job).where(Job.token_hash == digest)).first()
    if job is None or job.token_hash is None or not hmac.compare_digest(job.token_hash, digest):
        return None
    return job


def check_token_holder(holder_id: int, job_id: int, *, noun: str, action: str) -> None:
    """Forbidden (field job_id) unless the token's holder, `noun` `holder_id`, is `job_id`: a job's or a
    training run's own token acts for that job or run only (`action` says what it may do)."""
    if holder_id != job_id:
        raise Forbidden(
            f"this token belongs to {noun} {holder_id}, not {noun} {job_id}",
            hint=f"{action} only for the {noun} the token was issued to",
            field="job_id",
        )


def check_job_open(job: Job) -> None:
    """Forbidden unless `job` is still queued or running (its token accepts results only then)."""
    if not JobState(job.state).is_open:
        raise Forbidden(
            f"job {job.id} is {job.state}; its token no longer accepts results",
            hint="results are accepted only while the job is queued or running; start a new job",
        )
