"""srift.documents.copy_fields: a dataclass read from the same-named attributes of a wider value."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from srift.documents import copy_fields


@dataclass(frozen=True, slots=True)
class _Narrow:
    a: int
    b: str


@dataclass(frozen=True, slots=True)
class _Wide:
    a: int
    b: str
    c: float


def test_copy_fields_reads_each_field_by_name_and_given_values_win() -> None:
    wide = _Wide(a=1, b="x", c=2.5)
    assert copy_fields(_Narrow, wide) == _Narrow(a=1, b="x")
    assert copy_fields(_Narrow, wide, b="y") == _Narrow(a=1, b="y")


def test_copy_fields_fails_on_a_field_the_source_lacks_or_an_unknown_given() -> None:
    with pytest.raises(AttributeError):
        copy_fields(_Wide, _Narrow(a=1, b="x"))
    with pytest.raises(TypeError):
        copy_fields(_Narrow, _Wide(a=1, b="x", c=0.0), d=3)
