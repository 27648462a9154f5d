"""srift.documents: copy_fields (a dataclass read from the same-named attributes of a wider value) and
validated (a document into a pydantic model, its first problem as InvalidInput)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

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
    assert caught.value.hint == "give a number ≥ 1"
    with pytest.raises(InvalidInput) as hinted:
        validated(_Sizes, {"count": 0}, hints={"count": "count the hosts"})
    assert hinted.value.hint == "count the hosts"
    assert isinstance(hinted.value.__cause__, ValidationError)


class _Host(BaseModel):
    FIELD_HINTS: ClassVar[Mapping[str, str]] = {"cores": "count the host's cores", "": "give a host"}

    cores: int = Field(ge=1)
    name: str = Field(default="h", alias="host-name", min_length=1)
    disk_gib: int = Field(default=1, ge=1)


class _Pool(BaseModel):
    FIELD_HINTS: ClassVar[Mapping[str, str]] = {"hosts": "list the pool's hosts", "limits.hosts": "cap hosts"}

    hosts: list[_Host] = Field(default_factory=list)
    spare: _Host | None = None
    by_zone: dict[str, tuple[_Host, ...]] = Field(default_factory=dict)
    limits: dict[str, int] = Field(default_factory=dict)


@pytest.mark.parametrize(
    ("document", "field", "hint"),
    [
        # a list's item, an optional model, a mapping's tuple: the innermost model's own hint
        ({"hosts": [{"cores": 2}, {"cores": 0}]}, "hosts[1].cores", "count the host's cores"),
        ({"spare": {"cores": 0}}, "spare.cores", "count the host's cores"),
        ({"by_zone": {"a": [{"cores": 0}]}}, "by_zone.a[0].cores", "count the host's cores"),
        # a field (by its alias) the inner model has no hint for: the outer model's, by its path's prefix
        ({"hosts": [{"cores": 1, "host-name": ""}]}, "hosts[0].host-name", "list the pool's hosts"),
        ({"limits": {"hosts": "x"}}, "limits.hosts", "cap hosts"),
        # an inner object that is not an object: the inner model's hint for itself ("")
        ({"spare": 3}, "spare", "give a host"),
        # no table on the way names it: the worded default
        ({"by_zone": {"a": [{"cores": 1, "disk_gib": 0}]}}, "by_zone.a[0].disk_gib", "give a number ≥ 1"),
    ],
)
def test_a_nested_field_gets_the_hint_of_the_innermost_model_that_states_one(
    document: dict[str, Any], field: str, hint: str
) -> None:
    """Hints were looked up in the document model's FIELD_HINTS by the top-level field only, so a field
    inside a list or an inner model got the outer field's hint or none; the error's location is now walked
    through the models, and the innermost one that has a hint for it answers."""
    with pytest.raises(InvalidInput) as caught:
        validated(_Pool, document)
    assert (caught.value.field, caught.value.hint) == (field, hint)
