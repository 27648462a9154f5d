"""Compute profiles as an application service: store and read them, and resolve the profiles a request names.

`resolve_profiles` is the one place plans and predictions turn a ProfileSelection into profiles, with one
source label each: `profile:<id> <model>@<accelerator>` for stored ones, `profile:inline
<model>@<accelerator>` for documents given in the request.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from srift.domain import ModelProfile
from srift.domain.requests import ProfileSelection
from srift.errors import InvalidInput, NotFound
from srift.profiling import store


def resolve_profiles(*, session: Session, selection: ProfileSelection) -> list[tuple[ModelProfile, str]]:
    """The selected profiles in preference order (as given; newest stored first for a model), each with its
    source label. InvalidInput names the field at fault: an unknown id, a bad inline document, a model with
    no stored profiles, or profiles of different models."""
    selection.check()
    out: list[tuple[ModelProfile, str]] = []
    if selection.profile_ids is not None:
        for k, pid in enumerate(selection.profile_ids):
            try:
                prof = store.get_profile(session=session, profile_id=pid)
            except NotFound as exc:
                raise InvalidInput(exc.detail, hint=exc.hint, field=f"profile_ids[{k}]") from exc
            out.append((prof, f"profile:{pid} {prof.model}@{prof.accelerator}"))
    elif selection.profiles is not None:
        for k, doc in enumerate(selection.profiles):
            try:
                prof = ModelProfile.from_dict(dict(doc))
            except InvalidInput as exc:
                where = f"profiles[{k}].{exc.field}" if exc.field else f"profiles[{k}]"
                raise InvalidInput(exc.detail, hint=exc.hint, field=where) from exc
            out.append((prof, f"profile:inline {prof.model}@{prof.accelerator}"))
    else:
        assert selection.model is not None
        found = store.find_profiles(session=session, model=selection.model)
        if not found:
            raise InvalidInput(
                f"no stored profiles of model {selection.model!r}",
                hint="profile the model (`srift profile --upload`), or give profile_ids or inline profiles",
                field="model",
            )
        out = [(p, f"profile:{pid} {p.model}@{p.accelerator}") for pid, p in reversed(found)]
    models = sorted({p.model for p, _ in out})
    if len(models) > 1:
        raise InvalidInput(
            f"the profiles are of different models ({', '.join(models)})",
            hint="give the profiles of one model (one per accelerator)",
            field="profiles" if selection.profiles is not None else "profile_ids",
        )
    return out


def store_profile(*, session: Session, profile: ModelProfile) -> tuple[int, bool]:
    """Store a profile (again: a no-op); its id and whether it was new."""
    return store.save_profile_checked(session=session, profile=profile)


def get_profile(*, session: Session, profile_id: int) -> ModelProfile:
    """One stored profile; NotFound when there is none."""
    return store.get_profile(session=session, profile_id=profile_id)


def list_profiles_by_model(
    *, session: Session, model: str | None, accelerator: str | None, limit: int, offset: int
) -> tuple[list[tuple[str, list[str], list[dict[str, Any]]]], int]:
    """A page of stored profiles grouped by model: (model, its accelerators, summaries); and the page size."""
    items = store.list_profiles(
        session=session, model=model, accelerator=accelerator, limit=limit, offset=offset
    )
    groups = []
    for name, members in store.group_by_model(items).items():
        accelerators = sorted({p.accelerator for _, p in members})
        groups.append((name, accelerators, [store.profile_summary(i, p) for i, p in members]))
    return groups, len(items)
