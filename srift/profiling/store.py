"""Stored compute profiles: save (idempotent by document fingerprint), get, find by model, list.

Profiles have owners (the name of the API token that stored them; None: everyone's, as reference profiles
are). A `viewer` sees its own profiles, everyone's, and (named by id, or listed) those shared with it; a
`model` lookup sees only its own and everyone's, so nobody's upload changes another user's plans. Internal
callers that must see everything (validation, jobs) pass `viewer=EVERYONE`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Text, cast, func, insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from srift.db.lookups import stored_among
from srift.db.tables import ModelProfileRow
from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.errors import InvalidInput, NotFound

log = logging.getLogger("srift.profiles")
_R = TypeVar("_R")


class _Everyone:
    """The viewer that sees every stored profile (internal callers, never a request)."""

    def __repr__(self) -> str:
        return "EVERYONE"


EVERYONE = _Everyone()
Viewer = str | None | _Everyone
"""Who asks: an owner's name, None (anonymous: everyone's profiles only), or EVERYONE."""


STORED_COLUMNS = (
    ModelProfileRow.id,
    ModelProfileRow.model,
    ModelProfileRow.accelerator,
    ModelProfileRow.owner,
    ModelProfileRow.shared,
    cast(ModelProfileRow.document, Text).label("document_text"),
)
"""What reading a stored profile selects: the row's columns but the document, and the document's stored
text (JSON as the database keeps it), which keys PARSED; read as the ORM column, it would be decoded first."""


class StoredRow(Protocol):
    """A row selected with STORED_COLUMNS."""

    id: int
    model: str
    accelerator: str
    owner: str | None
    shared: bool
    document_text: str


def _visible(viewer: Viewer, *, shared: bool) -> ColumnElement[bool] | None:
    """The rows `viewer` may see (None: no filter); `shared` adds other owners' shared profiles."""
    if isinstance(viewer, _Everyone):
        return None
    mine = (
        ModelProfileRow.owner.is_(None)
        if viewer is None
        else or_(ModelProfileRow.owner.is_(None), ModelProfileRow.owner == viewer)
    )
    return or_(mine, ModelProfileRow.shared.is_(True)) if shared else mine


def _read(row: StoredRow) -> ModelProfile:
    """The stored document read with today's rules; a row stored before a rule existed is a 4xx naming it.

    One exception: a `created_at` stored before it had to be an ISO 8601 date-time, which says nothing
    about the model's speed, is read as not recorded (empty) rather than making the profile unusable.
    Each document text is read once per process (PARSED); every caller gets its own `extra`."""
    key = hashlib.blake2b(row.document_text.encode(), digest_size=16).digest()
    parsed = PARSED.get(key)
    if parsed is None:
        parsed = _parse(row)
        PARSED.put(key, parsed, text_chars=len(row.document_text))
        return replace(parsed, extra=copy.deepcopy(parsed.extra))
    return parsed


def _parse(row: StoredRow) -> ModelProfile:
    """`_read` without the cache: validate the row's document and build the profile."""
    document = json.loads(row.document_text)
    try:
        try:
            return read_profile(document)
        except InvalidInput as exc:
            if exc.field != "created_at":
                raise
            return read_profile({**document, "created_at": ""})
    except InvalidInput as exc:
        where = f"stored profile {row.id} ({row.model}@{row.accelerator})"
        raise InvalidInput(
            f"{where} is not plausible: {exc.detail}",
            hint=f"upload a corrected profile of {row.model} on {row.accelerator} (`srift profile upload "
            f"FILE`), then delete this one (DELETE /v1/profiles/{row.id}) or name profiles by id",
            field=f"profile:{row.id}.{exc.field}" if exc.field else f"profile:{row.id}",
        ) from exc


class ParsedProfiles:
    """A thread-safe LRU of profiles as read from stored documents, keyed by a digest of the document's
    stored text, bounded by the length of the texts it holds (`max_text_chars`; a parsed profile takes 3 to 4
    bytes of memory per character of its document).

    A plan or prediction by model reads every stored profile of the model; validating a document and
    building its profile costs milliseconds (more with a recorded structure), reading its text from the
    database and hashing it microseconds. The key is the text itself, so an entry can never be stale: a
    replaced or edited document (by any process, or plain SQL) has another text, a deleted row is no longer
    selected, and an entry nobody reads any more falls off the end. Documents that fail today's rules are
    never kept (each read raises again), nor is one longer than the whole bound.

    Profiles are frozen dataclasses but for `extra`, a dict: every `get` hands out a profile with an `extra`
    of its own, unpickled from bytes pickled once by `put` (a profiler's `extra`, lists of floats mostly,
    unpickles about 7 times faster than copy.deepcopy copies it; a plan by model reads every stored profile
    of the model, twice when it also searches on-demand offers alone)."""

    def __init__(self, *, max_text_chars: int) -> None:
        self.max_text_chars = max_text_chars
        self._items: OrderedDict[bytes, tuple[ModelProfile, bytes | None, int]] = OrderedDict()
        self._text_chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes) -> ModelProfile | None:
        """The profile kept for `key` with an `extra` of its own (made the most recent, counted as a hit),
        or None (a miss)."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
        profile, extra, _ = found
        copied = copy.deepcopy(profile.extra) if extra is None else pickle.loads(extra)
        return replace(profile, extra=copied)

    def put(self, key: bytes, profile: ModelProfile, *, text_chars: int) -> None:
        """Keep `profile`, read from a document text `text_chars` long, under `key`, dropping the least
        recently used entries while the texts held are longer than `max_text_chars`. Its `extra` is kept
        pickled (None: it does not pickle, and each `get` deep-copies it)."""
        if text_chars > self.max_text_chars:
            return
        try:
            extra: bytes | None = pickle.dumps(profile.extra, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            extra = None
        with self._lock:
            old = self._items.pop(key, None)
            self._text_chars += text_chars - (old[2] if old is not None else 0)
            self._items[key] = (profile, extra, text_chars)
            while self._text_chars > self.max_text_chars:
                self._text_chars -= self._items.popitem(last=False)[1][2]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._text_chars = 0

    def __len__(self) -> int:
        return len(self._items)


PARSED = ParsedProfiles(max_text_chars=16 * 2**20)
"""Profiles read from stored documents, per process (see ParsedProfiles): 16 Mi characters of documents,
at most about 60 MiB of profiles; every shipped reference profile (7 models x 48, 5.7 Mi characters) fits with
room for users' own."""


def fingerprint(profile: ModelProfile, *, owner: str | None = None) -> str:
    """SHA-256 of the profile's canonical JSON document (sorted keys, no whitespace), preceded by its owner's
    name when it has one: two owners storing one document get a row each."""
    return _document_fingerprint(profile.to_dict(), owner=owner)


def _document_fingerprint(document: dict[str, Any], *, owner: str | None = None) -> str:
    """`fingerprint` of the profile whose document (ModelProfile.to_dict) this is."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if owner is not None:
        text = json.dumps(owner) + "\n" + text
    return hashlib.sha256(text.encode()).hexdigest()


def save_profile(*, session: Session, profile: ModelProfile, owner: str | None = None) -> int:
    """Store `profile` and return its id; saving the same document again returns the existing id."""
    return save_profile_checked(session=session, profile=profile, owner=owner)[0]


def save_profile_checked(
    *, session: Session, profile: ModelProfile, owner: str | None = None, shared: bool = False
) -> tuple[int, bool]:
    """Like save_profile, and also say whether a new row was created (storing it again may share it)."""
    digest = fingerprint(profile, owner=owner)
    existing = session.scalars(select(ModelProfileRow).where(ModelProfileRow.fingerprint == digest)).first()
    if existing is not None:
        if shared and not existing.shared:
            existing.shared = True
            session.flush()
        return existing.id, False
    row = ModelProfileRow(
        model=profile.model,
        accelerator=profile.accelerator,
        fingerprint=digest,
        document=profile.to_dict(),
        owner=owner,
        shared=shared,
    )
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:
        stored = session.scalar(select(ModelProfileRow.id).where(ModelProfileRow.fingerprint == digest))
        if stored is None:
            raise
        return stored, False
    return row.id, True


def save_profiles_new(*, session: Session, profiles: Sequence[ModelProfile]) -> int:
    """Store unowned `profiles` whose documents are not stored yet, in one multi-row INSERT; return how many
    rows were written. Same rows as `save_profile_checked` one by one (one per fingerprint), without a query
    and a savepoint per profile: the reference loader stores hundreds at every new data folder. The INSERT
    is all or nothing: when the database refuses it (another process stored one of them since the lookup),
    none of it stays and the profiles are stored one by one, each already stored one returning its row."""
    return save_documents_new(session=session, documents=unowned_documents(profiles))


@dataclass(frozen=True)
class StoredForm:
    """An unowned profile as `save_documents_new` stores it: its document and that document's fingerprint
    (computed once; a caller that stores the same profiles into many databases can keep these)."""

    profile: ModelProfile
    document: dict[str, Any]
    fingerprint: str


def unowned_documents(profiles: Sequence[ModelProfile]) -> tuple[StoredForm, ...]:
    """The stored forms of `profiles` as unowned rows, one per fingerprint (the first profile of each)."""
    forms: dict[str, StoredForm] = {}
    for profile in profiles:
        document = profile.to_dict()
        digest = _document_fingerprint(document)
        forms.setdefault(digest, StoredForm(profile, document, digest))
    return tuple(forms.values())


def save_documents_new(*, session: Session, documents: Sequence[StoredForm]) -> int:
    """`save_profiles_new` of profiles already in their stored form (`unowned_documents`)."""
    by_print = {form.fingerprint: form for form in documents}
    stored = stored_among(session, ModelProfileRow.fingerprint, by_print)
    rows = [
        {
            "model": f.profile.model,
            "accelerator": f.profile.accelerator,
            "fingerprint": d,
            "document": f.document,
        }
        for d, f in by_print.items()
        if d not in stored
    ]
    if not rows:
        return 0
    try:
        with session.begin_nested():
            session.execute(insert(ModelProfileRow), rows)
    except IntegrityError:
        return sum(save_profile_checked(session=session, profile=f.profile)[1] for f in by_print.values())
    return len(rows)


def _row(session: Session, profile_id: int, viewer: Viewer) -> ModelProfileRow:
    query = select(ModelProfileRow).where(*_by_id(profile_id, viewer))
    return _found(session.scalars(query).first(), profile_id, viewer)


def _stored(session: Session, profile_id: int, viewer: Viewer) -> StoredRow:
    """`_row` as the columns `_read` reads (STORED_COLUMNS), not the ORM row."""
    query = select(*STORED_COLUMNS).where(*_by_id(profile_id, viewer))
    return _found(session.execute(query).first(), profile_id, viewer)


def _by_id(profile_id: int, viewer: Viewer) -> list[ColumnElement[bool]]:
    """The conditions of a lookup by id: the row `profile_id`, if `viewer` may read it (shared included)."""
    visible = _visible(viewer, shared=True)
    return [ModelProfileRow.id == profile_id, *([] if visible is None else [visible])]


def _found(row: _R | None, profile_id: int, viewer: Viewer) -> _R:
    """`row`, or NotFound when the lookup of `profile_id` found none."""
    if row is None:
        raise NotFound(
            f"no profile with id {profile_id}" + ("" if viewer is EVERYONE else " that this token may read"),
            hint="list stored profiles with GET /v1/profiles, or upload one with `srift profile upload FILE`",
            field="profile_id",
        )
    return row


def get_profile(*, session: Session, profile_id: int, viewer: Viewer = EVERYONE) -> ModelProfile:
    """The stored profile `profile_id` if `viewer` may read it; NotFound when there is none."""
    return _read(_stored(session, profile_id, viewer))


def get_profile_owned(
    *, session: Session, profile_id: int, viewer: Viewer
) -> tuple[ModelProfile, str | None, bool]:
    """The profile with its owner and whether it is shared."""
    row = _stored(session, profile_id, viewer)
    return _read(row), row.owner, row.shared


def delete_profile(*, session: Session, profile_id: int, viewer: Viewer) -> None:
    """Delete a profile `viewer` owns (anyone's when unowned and the viewer is anonymous or EVERYONE)."""
    row = _row(session, profile_id, viewer)
    if not isinstance(viewer, _Everyone) and row.owner != viewer:
        raise NotFound(
            f"profile {profile_id} is not this token's to delete",
            hint="delete only profiles your token uploaded",
            field="profile_id",
        )
    session.delete(row)
    session.flush()


def find_profiles(*, session: Session, model: str) -> list[tuple[int, ModelProfile]]:
    """Every stored profile of `model`, whoever owns it (one per accelerator and run), oldest first."""
    return [(pid, prof) for pid, prof, _ in find_profiles_for(session=session, model=model, viewer=EVERYONE)]


def find_profiles_for(
    *, session: Session, model: str, viewer: Viewer
) -> list[tuple[int, ModelProfile, bool]]:
    """Every stored profile of `model` that `viewer` plans with (its own and everyone's; one per accelerator
    and run), oldest first, each with whether it is the viewer's own."""
    query = select(*STORED_COLUMNS).where(ModelProfileRow.model == model)
    visible = _visible(viewer, shared=False)
    if visible is not None:
        query = query.where(visible)
    rows = session.execute(query.order_by(ModelProfileRow.id)).all()
    return [(row.id, _read(row), row.owner is not None and row.owner == viewer) for row in rows]


def model_names_for(*, session: Session, viewer: Viewer) -> list[str]:
    """The names of the models `viewer` plans with (those find_profiles_for finds profiles of), sorted."""
    query = select(ModelProfileRow.model).distinct()
    visible = _visible(viewer, shared=False)
    if visible is not None:
        query = query.where(visible)
    return sorted(session.scalars(query))


def list_profiles(
    *,
    session: Session,
    model: str | None = None,
    accelerator: str | None = None,
    limit: int = 200,
    offset: int = 0,
    viewer: Viewer = EVERYONE,
) -> list[tuple[int, ModelProfile]]:
    """Stored profiles `viewer` may read, ordered by model name then id, optionally only one model or
    accelerator."""
    query = select(*STORED_COLUMNS).where(*_listed(viewer, model, accelerator))
    rows = session.execute(
        query.order_by(ModelProfileRow.model, ModelProfileRow.id).limit(limit).offset(offset)
    ).all()
    out = []
    for row in rows:
        try:
            out.append((row.id, _read(row)))
        except InvalidInput as exc:
            log.warning("left out of the listing: %s", exc)
    return out


def count_listed(
    *, session: Session, model: str | None = None, accelerator: str | None = None, viewer: Viewer = EVERYONE
) -> int:
    """How many profiles list_profiles lists over all pages (same filters), so a page can say it is one."""
    query = select(func.count(ModelProfileRow.id)).where(*_listed(viewer, model, accelerator))
    return int(session.scalar(query) or 0)


def _listed(viewer: Viewer, model: str | None, accelerator: str | None) -> list[ColumnElement[bool]]:
    """The conditions of a listing: what `viewer` may read, of one model and accelerator when given."""
    visible = _visible(viewer, shared=True)
    conditions = [] if visible is None else [visible]
    if model is not None:
        conditions.append(ModelProfileRow.model == model)
    if accelerator is not None:
        conditions.append(ModelProfileRow.accelerator == accelerator)
    return conditions


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
