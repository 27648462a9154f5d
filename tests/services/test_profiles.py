"""Resolving a request's profiles: a model name with no stored profiles is answered with the stored names it
may be a typo of, among those the asker may plan with only."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy.orm import Session

from srift.domain.requests import ProfileSelection
from srift.errors import NotFound
from srift.optimize.synthetic import synthetic_profile
from srift.profiling.store import save_profile
from srift.services.profiles import resolve_profiles


def _hint(session: Session, model: str, *, owner: str | None) -> str:
    with pytest.raises(NotFound) as refused:
        resolve_profiles(session=session, selection=ProfileSelection(model=model, owner=owner))
    assert refused.value.field == "model"
    return refused.value.hint


def test_an_unknown_model_is_told_the_names_it_may_mean(session: Session) -> None:
    base = synthetic_profile("resnet50", "T4")
    owners = {"bert-base": None, "gpt2-small": None, "gpt2-xl": None, "bert-secret": "alice"}
    for name, owner in owners.items():
        save_profile(session=session, profile=dataclasses.replace(base, model=name), owner=owner)
    session.flush()
    assert _hint(session, "bert", owner="bob").startswith("did you mean bert-base? Else profile the model")
    assert _hint(session, "GPT2", owner=None).startswith("did you mean gpt2-small or gpt2-xl?")
    assert _hint(session, "bert_bse", owner=None).startswith("did you mean bert-base?")
    assert "bert-secret" in _hint(session, "bert-secrt", owner="alice")
    # Another owner's model names stay private.
    assert "bert-secret" not in _hint(session, "bert-secrt", owner="bob")
    assert _hint(session, "zzz", owner=None).startswith("profile the model and upload it")
