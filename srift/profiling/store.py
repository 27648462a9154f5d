"""Stored compute profiles: save (idempotent by document fingerprint), get, find by model, list."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from srift.db.tables import ModelProfileRow
from srift.domain.profile import ModelProfile
from srift.errors import NotFound


def fingerprint(profile: ModelProfile) -> str:
    """SHA-256 of the profile's canonical JSON document (sorted keys, no whitespace)."""
    text = json.dumps(profile.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def save_profile(*, session: Session, profile: ModelProfile) -> int:
    """Store `profile` and return its id; saving the same document again returns the existing id."""
    return save_profile_checked(session=session, profile=profile)[0]


def save_profile_checked(*, session: Session, profile: ModelProfile) -> tuple[int, bool]:
    """Like save_profile, and also say whether a new row was created."""
    digest = fingerprint(profile)
    existing = session.scalar(select(ModelProfileRow.id).where(ModelProfileRow.fingerprint == digest))
    if existing is not None:
        return existing, False
    row = ModelProfileRow(
        model=profile.model, accelerator=profile.accelerator, fingerprint=digest, document=profile.to_dict()
    )
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:
        existing = session.scalar(select(ModelProfileRow.id).where(ModelProfileRow.fingerprint == digest))
        if existing is None:
            raise
        return existing, False
    return row.id, True


def get_profile(*, session: Session, profile_id: int) -> ModelProfile:
    """The stored profile `profile_id`; NotFound when there is none."""
    row = session.get(ModelProfileRow, profile_id)
    if row is None:
        raise NotFound(
            f"no profile with id {profile_id}",
            hint="list stored profiles with GET /v1/profiles, or upload one with `srift profile --upload`",
            field="profile_id",
        )
    return ModelProfile.from_dict(row.document)


def find_profiles(*, session: Session, model: str) -> list[tuple[int, ModelProfile]]:
    """Every stored profile of `model` (one per accelerator and run), oldest first."""
    rows = session.scalars(
        select(ModelProfileRow).where(ModelProfileRow.model == model).order_by(ModelProfileRow.id)
    ).all()
    return [(row.id, ModelProfile.from_dict(row.document)) for row in rows]


def list_profiles(
    *,
    session: Session,
    model: str | None = None,
    accelerator: str | None = None,
    limit: int = 200,
    offset: int = 0,
) -> list[tuple[int, ModelProfile]]:
    """Stored profiles ordered by model name then id, optionally only one model or accelerator."""
    query = select(ModelProfileRow)
    if model is not None:
        query = query.where(ModelProfileRow.model == model)
    if accelerator is not None:
        query = query.where(ModelProfileRow.accelerator == accelerator)
    rows = session.scalars(
        query.order_by(ModelProfileRow.model, ModelProfileRow.id).limit(limit).offset(offset)
    ).all()
    return [(row.id, ModelProfile.from_dict(row.document)) for row in rows]


def count_profiles(*, session: Session, model: str | None = None) -> int:
    query = select(func.count(ModelProfileRow.id))
    if model is not None:
        query = query.where(ModelProfileRow.model == model)
    return int(session.scalar(query) or 0)


def group_by_model(items: list[tuple[int, ModelProfile]]) -> dict[str, list[tuple[int, ModelProfile]]]:
    """Profiles grouped under their model name, groups in the order first seen."""
    groups: dict[str, list[tuple[int, ModelProfile]]] = {}
    for profile_id, profile in items:
        groups.setdefault(profile.model, []).append((profile_id, profile))
    return groups


def profile_summary(profile_id: int, profile: ModelProfile) -> dict[str, Any]:
    """The fields a listing shows for one profile."""
    return {
        "id": profile_id,
        "model": profile.model,
        "accelerator": profile.accelerator,
        "device": profile.device,
        "threads": profile.threads,
        "max_batch": profile.max_batch,
        "ms_per_sample_at_max_batch": 1000.0 * profile.compute_s(profile.max_batch) / profile.max_batch,
        "layers": len(profile.layers),
        "total_grad_bytes": profile.total_grad_bytes,
        "straggler_cv": profile.straggler_cv,
        "torch_version": profile.torch_version,
        "created_at": profile.created_at,
        "precision": profile.precision.value,
        "source": profile.source,
        "reference": bool((profile.extra or {}).get("reference")),
    }
