"""One way to read documents into frozen domain values, and to write them back (pydantic does the typing).

`read_document(cls, doc)` builds the dataclass `cls` from a document whose keys are its field names
(enums from their values, tuples from lists, nested dataclasses from nested documents; unknown keys are
ignored); `to_document(value)` is the inverse, JSON-ready. The edges validate user input (bounds, "To fix:"
hints) with their pydantic models first; this is the conversion they and the services share.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, TypeAdapter, ValidationError

from srift.errors import InvalidInput

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


def _whole(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise ValueError(f"must be an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"must be an integer, got {value!r}")
        return int(value)
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool | str) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"must be finite, got {value!r}")
    return float(value)


WholeNumber = Annotated[int, BeforeValidator(_whole)]
"""An integer in a document: 3 or 3.0, never 3.5, "3" or true (one rule for every document)."""
Number = Annotated[float, BeforeValidator(_number)]
"""A finite number in a document: never a string, a boolean, NaN or infinity."""


def _path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _bound(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def invalid_input(
    exc: ValidationError, *, where: str = "", hints: Mapping[str, str] | None = None
) -> InvalidInput:
    """The first problem pydantic found, as Srift's InvalidInput: the field's path (`sizes[2]`, `ec2.region`),
    a message in the project's words, prefixed by `where` when given, and a "To fix:" hint (`hints` maps a
    top-level field name to its own hint)."""
    errors = exc.errors()
    extra = sorted(str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden")
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    field = _path(first["loc"])
    name = str(first["loc"][-1]) if first["loc"] else "value"
    kind, ctx, given = first["type"], first.get("ctx") or {}, first.get("input")
    if kind == "extra_forbidden":
        message, hint = f"unknown fields {extra}", "use only the fields the format documents"
    elif kind == "missing":
        message, hint = f"{name} is missing", f"give {name}"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}[
            kind
        ]
        bound = ctx.get(
            {"greater_than_equal": "ge", "greater_than": "gt"}.get(kind, "le" if "equal" in kind else "lt")
        )
        message, hint = (
            f"{name} must be {sign} {_bound(bound)}, got {given!r}",
            f"use {name} {sign} {_bound(bound)}",
        )
    elif kind in ("string_too_long", "too_long"):
        message, hint = f"{name} is too long (at most {ctx.get('max_length')})", f"shorten {name}"
    elif kind in ("literal_error", "enum"):
        message = f"unknown {name} {given!r}"
        hint = f"use one of {ctx.get('expected', '')}".replace("'", "")
    elif kind == "value_error":
        message, hint = f"{name} {ctx.get('error', first['msg'])!s}", f"correct {name}"
    else:
        message, hint = f"{name}: {first['msg'].lower()}, got {given!r}", f"correct {name}"
    top = str(first["loc"][0]) if first["loc"] else ""
    hint = (hints or {}).get(top, hint)
    return InvalidInput(f"{where}: {message}" if where else message, hint=hint, field=field or None)
