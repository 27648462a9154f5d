"""Stored profiles: idempotent save, get, find by model (grouping across accelerators), listing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event, func, insert, select
from sqlalchemy.orm import ORMExecuteState, Session

from srift.db.session import get_engine
from srift.db.tables import ModelProfileRow
from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.errors import NotFound
from srift.profiling import store


def _profile(doc: dict[str, Any], **changes: Any) -> ModelProfile:
    return read_profile({**doc, **changes})


def test_save_is_idempotent_by_document(session: Session, profile_doc: dict[str, Any]) -> None:
    profile = _profile(profile_doc)
    first = store.save_profile(session=session, profile=profile)
    again, created = store.save_profile_checked(session=session, profile=_profile(profile_doc))
    assert again == first and created is False
    other = store.save_profile(session=session, profile=_profile(profile_doc, straggler_cv=0.05))
    assert other != first
    assert store.get_profile(session=session, profile_id=first) == profile


def test_profiles_stored_in_one_insert_are_the_rows_one_by_one_gives(
    session: Session, profile_doc: dict[str, Any]
) -> None:
    a, b, c = (_profile(profile_doc, straggler_cv=cv) for cv in (0.01, 0.02, 0.03))
    first = store.save_profile(session=session, profile=a)
    assert store.save_profiles_new(session=session, profiles=[a, b, b, c]) == 2  # a stored, b once
    rows = session.execute(select(ModelProfileRow.id, ModelProfileRow.fingerprint)).all()
    assert len(rows) == 3 and dict(rows)[first] == store.fingerprint(a)
    for profile in (a, b, c):
        pid, created = store.save_profile_checked(session=session, profile=profile)
        assert not created and store.get_profile(session=session, profile_id=pid) == profile
    assert store.save_profiles_new(session=session, profiles=[a, b, c]) == 0


def test_a_profile_stored_by_another_process_meanwhile_refuses_the_insert_whole(
    session: Session, db_url: str, profile_doc: dict[str, Any]
) -> None:
    """Another loader stores one of the profiles between the lookup and the INSERT: the INSERT is refused
    whole, and the profiles are stored one by one, each once."""
    d, e = (_profile(profile_doc, straggler_cv=cv) for cv in (0.04, 0.05))
    row = {"model": d.model, "accelerator": d.accelerator, "fingerprint": store.fingerprint(d)}

    inserts: list[ORMExecuteState] = []

    def other_loader_first(state: ORMExecuteState) -> None:
        inserts.extend([state] if state.is_insert else [])
        if len(inserts) == 1 and state.is_insert:
            with get_engine(db_url).begin() as other:
                other.execute(insert(ModelProfileRow).values(**row, document=d.to_dict()))

    event.listen(session, "do_orm_execute", other_loader_first)
    assert store.save_profiles_new(session=session, profiles=[d, e]) == 1
    event.remove(session, "do_orm_execute", other_loader_first)
    assert inserts and inserts[0].is_insert  # the multi-row INSERT ran, and was refused
    session.commit()
    assert session.scalar(select(func.count()).select_from(ModelProfileRow)) == 2
    assert all(not store.save_profile_checked(session=session, profile=p)[1] for p in (d, e))


def test_get_unknown_profile_is_not_found(session: Session) -> None:
    with pytest.raises(NotFound) as caught:
        store.get_profile(session=session, profile_id=12345)
    assert caught.value.field == "profile_id"


def test_find_profiles_groups_accelerators_under_the_model(
    session: Session, profile_doc: dict[str, Any]
) -> None:
    ids = [
        store.save_profile(session=session, profile=_profile(profile_doc, accelerator=acc))
        for acc in ("Tesla V100-SXM2-16GB", "Tesla T4", "cpu:Xeon:4t")
    ]
    store.save_profile(session=session, profile=_profile(profile_doc, model="other"))
    found = store.find_profiles(session=session, model="resnet-ish")
    assert [i for i, _ in found] == ids
    assert {p.accelerator for _, p in found} == {"Tesla V100-SXM2-16GB", "Tesla T4", "cpu:Xeon:4t"}
    assert store.find_profiles(session=session, model="missing") == []
    listed = store.list_profiles(session=session)
    groups = store.group_by_model(listed)
    assert list(groups) == ["other", "resnet-ish"] and len(groups["resnet-ish"]) == 3
    assert len(store.list_profiles(session=session, accelerator="Tesla T4")) == 1
    assert store.count_profiles(session=session, model="resnet-ish") == 3
    assert len(store.list_profiles(session=session, limit=2, offset=3)) == 1


def test_summary_reports_time_per_sample(profile_doc: dict[str, Any]) -> None:
    summary = store.profile_summary(7, _profile(profile_doc))
    assert summary["id"] == 7 and summary["layers"] == 3
    assert summary["ms_per_sample_at_max_batch"] == pytest.approx(1000 * (0.087 + 0.175) / 96)
    assert summary["total_grad_bytes"] == 2052 + 73856 + 1792


def test_a_row_stored_with_a_free_text_created_at_still_reads(
    session: Session, profile_doc: dict[str, Any]
) -> None:
    """Before created_at had to be an ISO 8601 date-time any text was stored; such a row reads with
    created_at empty (not recorded) instead of making the profile unusable."""
    profile = _profile(profile_doc)
    pid = store.save_profile(session=session, profile=replace(profile, created_at="last Tuesday"))
    row = session.get(ModelProfileRow, pid)
    assert row is not None and row.document["created_at"] == "last Tuesday"
    assert store.get_profile(session=session, profile_id=pid) == replace(profile, created_at="")


def test_a_stored_document_is_read_once_per_process(session: Session, profile_doc: dict[str, Any]) -> None:
    """A plan by model reads every stored profile of the model: each document is validated once, later
    lookups (by model, by id, listings) answer from store.PARSED with equal profiles."""
    profiles = [_profile(profile_doc, straggler_cv=cv) for cv in (0.01, 0.02, 0.03)]
    ids = [store.save_profile(session=session, profile=p) for p in profiles]
    store.PARSED.clear()
    misses, hits = store.PARSED.misses, store.PARSED.hits
    first = store.find_profiles(session=session, model="resnet-ish")
    assert (store.PARSED.misses - misses, store.PARSED.hits - hits) == (3, 0)
    assert first == list(zip(ids, profiles, strict=True))
    assert store.find_profiles(session=session, model="resnet-ish") == first
    assert store.get_profile(session=session, profile_id=ids[1]) == profiles[1]
    assert store.list_profiles(session=session) == first
    assert (store.PARSED.misses - misses, store.PARSED.hits - hits) == (3, 7)


def test_a_replaced_edited_or_deleted_profile_is_never_read_from_memory(
    session: Session, profile_doc: dict[str, Any]
) -> None:
    """Entries are keyed by the stored text itself: a document edited in place (plain SQL, keeping its
    fingerprint), replaced (deleted, another stored) or deleted reads as the database now holds it."""
    slow = _profile(profile_doc)
    pid = store.save_profile(session=session, profile=slow)
    assert store.find_profiles(session=session, model="resnet-ish") == [(pid, slow)]
    fast = _profile(profile_doc, straggler_cv=0.01, update_s=0.001)
    row = session.get(ModelProfileRow, pid)
    assert row is not None
    row.document = fast.to_dict()  # as an UPDATE from plain SQL would: the fingerprint stays the old one
    session.flush()
    session.expire_all()
    assert store.find_profiles(session=session, model="resnet-ish") == [(pid, fast)]
    assert store.get_profile(session=session, profile_id=pid) == fast
    store.delete_profile(session=session, profile_id=pid, viewer=store.EVERYONE)
    assert store.find_profiles(session=session, model="resnet-ish") == []
    with pytest.raises(NotFound):
        store.get_profile(session=session, profile_id=pid)
    again = store.save_profile(session=session, profile=slow)
    assert store.find_profiles(session=session, model="resnet-ish") == [(again, slow)]


def test_readers_of_one_stored_profile_share_no_mutable_value(
    session: Session, profile_doc: dict[str, Any]
) -> None:
    """Profiles are frozen but for `extra` (a dict): every reader gets its own, so one request changing it
    cannot change what the next request reads."""
    pid = store.save_profile(session=session, profile=_profile(profile_doc, extra={"note": {"run": 1}}))
    mine = store.get_profile(session=session, profile_id=pid)
    mine.extra["note"]["run"] = 2
    mine.extra["added"] = True
    theirs = store.get_profile(session=session, profile_id=pid)
    assert theirs.extra == {"note": {"run": 1}}
    assert store.find_profiles(session=session, model="resnet-ish")[0][1].extra == {"note": {"run": 1}}


def test_every_read_of_a_kept_profile_gets_an_extra_of_its_own(profile_doc: dict[str, Any]) -> None:
    """store.PARSED hands out a profile per read, equal to the kept one with an `extra` of its own (made
    from bytes pickled when it was kept, not by copying the kept dict per read); an `extra` that does not
    pickle is deep-copied instead."""
    parsed = store.ParsedProfiles(max_text_chars=100)
    kept = _profile(profile_doc, extra={"note": {"run": 1}, "times": [0.1, -0.0, 1e-300]})
    parsed.put(b"k", kept, text_chars=10)
    kept.extra["note"]["run"] = 2  # what was kept is what `put` saw
    first, second = parsed.get(b"k"), parsed.get(b"k")
    assert first is not None and second is not None
    assert first == kept and second == kept
    assert first.extra == second.extra == {"note": {"run": 1}, "times": [0.1, -0.0, 1e-300]}
    assert first.extra is not second.extra and first.extra["note"] is not second.extra["note"]
    first.extra["note"]["run"] = 3
    assert second.extra["note"]["run"] == 1

    def unpicklable() -> int:
        return 1

    odd = replace(_profile(profile_doc), extra={"call": unpicklable, "runs": [1]})
    parsed.put(b"odd", odd, text_chars=10)
    one, two = parsed.get(b"odd"), parsed.get(b"odd")
    assert one is not None and two is not None
    assert one.extra["call"] is unpicklable and one.extra["runs"] is not two.extra["runs"]


def test_the_parsed_profiles_are_bounded_least_recently_used_first(profile_doc: dict[str, Any]) -> None:
    """The bound is the length of the documents held: the least recently read go first, and a document
    longer than the whole bound is not kept."""
    parsed = store.ParsedProfiles(max_text_chars=20)
    a, b, c = (_profile(profile_doc, straggler_cv=cv) for cv in (0.01, 0.02, 0.03))
    parsed.put(b"a", a, text_chars=8)
    parsed.put(b"b", b, text_chars=8)
    assert parsed.get(b"a") == a  # now the most recent
    parsed.put(b"c", c, text_chars=8)
    assert len(parsed) == 2
    assert parsed.get(b"b") is None and parsed.get(b"a") == a and parsed.get(b"c") == c
    parsed.put(b"b", b, text_chars=21)
    assert parsed.get(b"b") is None and len(parsed) == 2
    parsed.put(b"b", b, text_chars=20)
    assert len(parsed) == 1 and parsed.get(b"b") == b
