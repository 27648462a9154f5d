"""srift.documents: copy_fields (a dataclass read from the same-named attributes of a wider value) and
validated (a document into a pydantic model, its first problem as InvalidInput)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from srift.documents import copy_fields, validated
from srift.errors import InvalidInput


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


class _Sizes(BaseModel):
    count: int = Field(ge=1)
    scale: float = 1.0

    @field_validator("scale")
    @classmethod
    def _within_cap(cls, value: float, info: ValidationInfo) -> float:
        cap = (info.context or {}).get("cap")
        if cap is not None and value > cap:
            raise ValueError(f"above the cap {cap}")
        return value


def test_validated_returns_the_model_and_passes_the_context_on() -> None:
    assert validated(_Sizes, {"count": 2}) == _Sizes(count=2)
    assert validated(_Sizes, {"count": 2, "scale": 3.0}, context={"cap": 4.0}).scale == 3.0
    with pytest.raises(InvalidInput) as caught:
        validated(_Sizes, {"count": 2, "scale": 5.0}, context={"cap": 4.0})
    assert caught.value.field == "scale"


def test_validated_names_the_field_prefixes_where_and_takes_a_hint() -> None:
    with pytest.raises(InvalidInput) as caught:
        validated(_Sizes, {"count": 0}, where="sizes.yaml")
    assert caught.value.field == "count"
    assert caught.value.detail == "sizes.yaml: count must be ≥ 1, got 0"
    assert caught.value.hint == "use count ≥ 1"
    with pytest.raises(InvalidInput) as hinted:
        validated(_Sizes, {"count": 0}, hints={"count": "count the hosts"})
    assert hinted.value.hint == "count the hosts"
    assert isinstance(hinted.value.__cause__, ValidationError)
