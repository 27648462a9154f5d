"""One way to read documents into frozen domain values, and to write them back (pydantic does the typing).

`read_document(cls, doc)` builds the dataclass `cls` from a document whose keys are its field names
(enums from their values, tuples from lists, nested dataclasses from nested documents; unknown keys are
ignored); `to_document(value)` is the inverse, JSON-ready. The edges validate user input (bounds, "To fix:"
hints) with their pydantic models first; this is the conversion they and the services share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import TypeAdapter

T = TypeVar("T")


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    """One TypeAdapter per dataclass, built on first use (building one takes milliseconds)."""
    found = _ADAPTERS.get(cls)
    if found is None:
        found = _ADAPTERS.setdefault(cls, TypeAdapter(cls))
    return found


def read_document(cls: type[T], document: Mapping[str, Any]) -> T:
    """The frozen value of type `cls` (a dataclass whose fields are the document's keys)."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    value: T = _adapter(cls).validate_python({k: v for k, v in document.items() if k in known})
    return value


def to_document(value: Any) -> dict[str, Any]:
    """A dataclass value as JSON-ready data (enums as their values, tuples as lists)."""
    out: dict[str, Any] = _adapter(type(value)).dump_python(value, mode="json")
    return out
