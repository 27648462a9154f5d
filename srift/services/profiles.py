"""Compute profiles as an application service: store and read them, and resolve the profiles a request names.

`resolve_profiles` is the one place plans and predictions turn a ProfileSelection into profiles, with one
source label each: `profile:<id> <model>@<accelerator>` for stored ones, `profile:inline
<model>@<accelerator>` for documents given in the request, followed by `(estimate:<method> ±N %)` for
estimated ones. Profiles are kept in one precision (the selection's, else their own).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from srift.domain import InstanceType, ModelProfile
from srift.domain.profile_document import read_profile
from srift.domain.requests import ProfileSelection
from srift.domain.structure import Precision
from srift.errors import Conflict, InvalidInput, NotFound
from srift.profiling import store
from srift.profiling.store import EVERYONE as EVERYONE
from srift.profiling.store import Viewer


def resolve_profiles(*, session: Session, selection: ProfileSelection) -> list[tuple[ModelProfile, str]]:
    """The selected profiles in preference order (as given; newest stored first for a model), each with its
    source label. The error names the field at fault: NotFound for an unknown id or a model with no stored
    profiles (in the asked precision; the data, not the request, is missing), InvalidInput for a bad inline
    document, inline profiles of different models or precisions (or not the asked one), Conflict for stored
    profiles named by id that are so."""
    selection.check()
    out: list[tuple[ModelProfile, str]] = []
    if selection.profile_ids is not None:
        for k, pid in enumerate(selection.profile_ids):
            try:
                prof = store.get_profile(session=session, profile_id=pid, viewer=selection.owner)
            except NotFound as exc:
                raise NotFound(exc.detail, hint=exc.hint, field=f"profile_ids[{k}]") from exc
            out.append((prof, source_label(f"profile:{pid}", prof)))
    elif selection.profiles is not None:
        for k, doc in enumerate(selection.profiles):
            try:
                prof = read_profile(dict(doc))
            except InvalidInput as exc:
                where = f"profiles[{k}].{exc.field}" if exc.field else f"profiles[{k}]"
                raise InvalidInput(exc.detail, hint=exc.hint, field=where) from exc
            out.append((prof, source_label("profile:inline", prof)))
    else:
        assert selection.model is not None
        found = store.find_profiles_for(session=session, model=selection.model, viewer=selection.owner)
        if not found:
            raise NotFound(
                f"no stored profiles of model {selection.model!r}"
                + (
                    f" that {selection.owner!r} or everyone owns"
                    if selection.owner
                    else " that everyone owns"
                ),
                hint=_unknown_model_hint(session=session, selection=selection),
                field="model",
            )
        newest_first = [(p, source_label(f"profile:{pid}", p), own) for pid, p, own in reversed(found)]
        # Measured profiles come before estimated ones (a measured profile always wins), the asker's own
        # before everyone's.
        ranked = sorted(newest_first, key=lambda item: (item[0].is_estimate, not item[2]))
        out = [(p, label) for p, label, _ in ranked]
    models = sorted({p.model for p, _ in out})
    if len(models) > 1:
        inline = selection.profiles is not None
        raise (InvalidInput if inline else Conflict)(
            f"the profiles are of different models ({', '.join(models)})",
            hint="give the profiles of one model (one per accelerator)",
            field="profiles" if inline else "profile_ids",
        )
    return _in_precision(out, selection)


def _unknown_model_hint(*, session: Session, selection: ProfileSelection) -> str:
    """How to fix a model name with no profiles: the stored names it begins or may be a typo of ("bert" for
    "bert-base", "resnet5" for "resnet50"; case and "-"/"_" aside), then how to add the model."""
    assert selection.model is not None
    names = store.model_names_for(session=session, viewer=selection.owner)
    folded = {name.lower().replace("_", "-"): name for name in names}
    typed = selection.model.lower().replace("_", "-")
    starting = [name for name in folded if name.startswith(typed)]
    close = list(dict.fromkeys([*starting, *difflib.get_close_matches(typed, list(folded), n=3)]))[:3]
    add = "profile the model and upload it (`srift profile upload FILE --token ...`), or give profile_ids or "
    add += "inline profiles"
    if not close:
        return add
    return f"did you mean {' or '.join(folded[name] for name in close)}? Else {add}"


def with_estimates(
    profiles: list[ModelProfile], instances: Sequence[InstanceType]
) -> tuple[list[ModelProfile], list[ModelProfile]]:
    """`profiles` followed by estimates for the GPU types among `instances` that none of them covers
    (`srift.estimate.estimator.complete_profiles`), and the estimates alone."""
    from srift.estimate.estimator import complete_profiles

    if not profiles:
        return profiles, []
    completed, _ = complete_profiles(profiles, instances, precision=profiles[0].precision)
    return completed, completed[len(profiles) :]


def source_label(prefix: str, profile: ModelProfile) -> str:
    """`<prefix> <model>@<accelerator>`, with `(estimate:<method> ±N %)` for an estimated profile."""
    label = f"{prefix} {profile.model}@{profile.accelerator}"
    if profile.estimate is not None:
        label += f" ({profile.estimate.source} ±{100 * profile.estimate.spread:.0f} %)"
    return label


_ORDER = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16)


def _in_precision(
    found: list[tuple[ModelProfile, str]], selection: ProfileSelection
) -> list[tuple[ModelProfile, str]]:
    """The profiles in the selection's precision; a model's stored profiles default to fp32, else to their
    only precision. Profiles named by id or given inline must all be in one (the asked) precision."""
    wanted = selection.precision
    have = [p for p in _ORDER if any(prof.precision is p for prof, _ in found)]
    if selection.model is not None:
        if wanted is None:
            if Precision.FP32 in have or len(have) == 1:
                wanted = Precision.FP32 if Precision.FP32 in have else have[0]
            else:
                raise InvalidInput(
                    f"model {selection.model!r} is stored in several precisions ({', '.join(have)})",
                    hint=f"add precision: one of {', '.join(have)}",
                    field="precision",
                )
        kept = [item for item in found if item[0].precision is wanted]
        if not kept:
            raise NotFound(
                f"no stored profiles of model {selection.model!r} in {wanted.value} "
                f"(stored in {', '.join(have)})",
                hint=f"ask for one of {', '.join(have)}, or profile the model with --amp fp16|bf16 or --tf32",
                field="precision",
            )
        return kept
    field = "profiles" if selection.profiles is not None else "profile_ids"
    # Inline documents break a rule of the request (422); stored profiles named by id make a valid request
    # that the stored data cannot answer (409), as for profiles of different models.
    refuse = InvalidInput if selection.profiles is not None else Conflict
    for k, (prof, _) in enumerate(found):
        if wanted is not None and prof.precision is not wanted:
            raise refuse(
                f"this profile is {prof.precision.value}, the request asks for {wanted.value}",
                hint=f"give profiles measured in {wanted.value}, or ask for precision {prof.precision.value}",
                field=f"{field}[{k}].precision",
            )
    if len(have) > 1:
        raise refuse(
            f"the profiles are in several precisions ({', '.join(have)})",
            hint="give profiles of one precision, or name it with `precision` to be told which differ",
            field=field,
        )
    return found


def store_profile(
    *, session: Session, profile: ModelProfile, owner: str | None = None, shared: bool = False
) -> tuple[int, bool]:
    """Store a profile as `owner`'s (None: everyone's); again: a no-op (or sharing it). Its id and whether
    it was new."""
    return store.save_profile_checked(session=session, profile=profile, owner=owner, shared=shared)


def get_profile(*, session: Session, profile_id: int, viewer: str | None = None) -> ModelProfile:
    """One stored profile `viewer` may read; NotFound when there is none."""
    return store.get_profile(session=session, profile_id=profile_id, viewer=viewer)


def delete_profile(*, session: Session, profile_id: int, viewer: Viewer) -> None:
    """Delete a profile `viewer` owns (with authentication off, anonymous callers own everyone's)."""
    store.delete_profile(session=session, profile_id=profile_id, viewer=viewer)


def list_profiles_by_model(
    *,
    session: Session,
    model: str | None,
    accelerator: str | None,
    limit: int,
    offset: int,
    viewer: str | None = None,
) -> tuple[list[tuple[str, list[str], list[dict[str, Any]]]], int, int]:
    """A page of stored profiles `viewer` may read, grouped by model: (model, its accelerators, summaries);
    the page size; and how many the listing holds over all pages."""
    items = store.list_profiles(
        session=session, model=model, accelerator=accelerator, limit=limit, offset=offset, viewer=viewer
    )
    total = store.count_listed(session=session, model=model, accelerator=accelerator, viewer=viewer)
    groups = []
    for name, members in store.group_by_model(items).items():
        accelerators = sorted({p.accelerator for _, p in members})
        groups.append((name, accelerators, [store.profile_summary(i, p) for i, p in members]))
    return groups, len(items), total
