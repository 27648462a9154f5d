"""One way to read documents into frozen domain values, and to write them back (pydantic does the typing).

`read_document(cls, doc)` builds the dataclass `cls` from a document whose keys are its field names
(enums from their values, tuples from lists, nested dataclasses from nested documents; unknown keys are
ignored); `to_document(value)` is the inverse, JSON-ready. The edges validate user input (bounds, "To fix:"
hints) with their pydantic models first; this is the conversion they and the services share.
"""

from __future__ import annotations

import codecs
import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union

from pydantic import BeforeValidator, Field, GetJsonSchemaHandler, TypeAdapter, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError
from typing_extensions import TypeAliasType

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


NO_NUL = r"^[^\x00]*$"
"""Text without NUL characters (PostgreSQL text and JSON columns cannot hold them), stated in the schema;
with `min_length=1` it is the rule for non-empty text."""
NOT_BLANK = r"^[^\x00]*[^\x00\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00]*$"
"""Text with a character that is not whitespace (`str.isspace`, which readers strip), and no NUL."""
SOME_TEXT = r"^[^\x00]+$"
"""Non-empty text without NUL, in the pattern alone: for dict keys, whose schema (`propertyNames`) keeps
only the pattern of the key type."""
NoNulText = Annotated[str, Field(pattern=NO_NUL)]


class KeysStated:
    """States a dict's key rule as `propertyNames` (pydantic writes `patternProperties`, which lets keys that
    miss the pattern through unchecked) and its values as `additionalProperties`."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = dict(handler(core_schema))
        ((pattern, values),) = schema.pop("patternProperties").items()
        return {**schema, "propertyNames": {"pattern": pattern}, "additionalProperties": values}


FreeJson = TypeAliasType(  # type: ignore[misc]
    "FreeJson",
    Union[  # noqa: UP007 (a recursive alias needs the forward references of Union)
        NoNulText,
        int,
        float,
        bool,
        list["FreeJson"],  # type: ignore[misc]
        Annotated[dict[NoNulText, "FreeJson"], KeysStated],  # type: ignore[misc]
        None,
    ],
)
"""Any JSON value without NUL characters in its strings and keys (free-form facts such as a profile's
`extra`), with the rule in its schema."""
FreeObject = Annotated[dict[NoNulText, FreeJson], KeysStated]  # type: ignore[misc]


def rule_error(message: str, *, field: str, hint: str) -> PydanticCustomError:
    """A rule across fields, raised from a model validator: `field` (relative to the model) and the "To fix:"
    hint travel in the error's context, so REST answers and document readers name the same field."""
    return PydanticCustomError("rule", "{message}", {"message": message, "field": field, "hint": hint})


def error_location(error: Mapping[str, Any], *, skip: tuple[str, ...] = ()) -> str:
    """The field path of one pydantic error: its location, then the field a rule across fields names."""
    path = field_path([p for p in error.get("loc", ()) if p not in skip])
    inner = (error.get("ctx") or {}).get("field")
    if inner:
        return f"{path}.{inner}" if path and not str(inner).startswith("[") else f"{path}{inner}"
    return path


WHOLE = BeforeValidator(_whole)
"""The one integer rule of documents: 3 or 3.0, never 3.5, "3" or true (JSON Schema's `integer`). Put bounds
before it, `Annotated[int, Field(ge=1), WHOLE]`, so the schema states them as `minimum`/`maximum`."""
NUMBER = BeforeValidator(_number)
"""The one number rule of documents: finite, never a string or a boolean; bounds go before it (as WHOLE)."""
WholeNumber = Annotated[int, WHOLE]
Number = Annotated[float, NUMBER]


def field_path(loc: Sequence[Any]) -> str:
    """The one style of field paths in errors (documents, REST bodies, CLI files): `samples[1].world_size`,
    `config.choices[0].batch`, `availability.p3.2xlarge`."""
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
    field = error_location(first)
    name = str(first["loc"][-1]) if first["loc"] else "value"
    kind, ctx, given = first["type"], first.get("ctx") or {}, first.get("input")
    if kind == "rule":
        message, hint = str(ctx["message"]), str(ctx["hint"])
    elif kind == "extra_forbidden":
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
    elif kind == "string_pattern_mismatch":
        choices = str(ctx.get("pattern", "")).startswith("^(")
        message = f"unknown {name} {given!r}" if choices else f"{name} {given!r} is not in the expected form"
        hint = f"correct {name}"
    elif kind == "multiple_of":
        message = f"{name} must be a multiple of {ctx.get('multiple_of')}, got {given!r}"
        hint = f"use a multiple of {ctx.get('multiple_of')}"
    elif kind == "value_error":
        message, hint = f"{name} {ctx.get('error', first['msg'])!s}", f"correct {name}"
    else:
        message, hint = f"{name}: {first['msg'].lower()}, got {given!r}", f"correct {name}"
    top = str(first["loc"][0]) if first["loc"] else ""
    if kind != "rule":
        hint = (hints or {}).get(field, (hints or {}).get(top, hint))
    return InvalidInput(f"{where}: {message}" if where else message, hint=hint, field=field or None)


BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
"""Byte-order marks and their codecs (UTF-32 first: its little-endian mark begins with UTF-16's)."""


def read_text_file(path: Path, *, field: str | None = "FILE") -> str:
    """The text of a request or data file: UTF-8, UTF-8 with a BOM, or UTF-16/UTF-32 with a BOM (Windows
    PowerShell's `>` writes UTF-16 LE with a BOM). Any other encoding is InvalidInput on `field` with the
    offending byte; OSError (a missing or unreadable file) is left to the caller, which knows the hint."""
    data = path.read_bytes()
    codec = next((name for bom, name in BOMS if data.startswith(bom)), "utf-8")
    hint = "save it as UTF-8 (PowerShell: `Out-File -Encoding utf8`), UTF-8 with a BOM, or UTF-16 with a BOM"
    nul = data.find(b"\x00")
    if codec == "utf-8" and nul >= 0:
        raise InvalidInput(
            f"{path} is not UTF-8 text: a NUL byte at offset {nul} (UTF-16 without a byte-order mark?)",
            hint=hint,
            field=field,
        )
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        label = "UTF-8" if codec == "utf-8" else f"{codec.upper()} (as its byte-order mark says)"
        raise InvalidInput(
            f"{path} is not {label} text: byte 0x{data[exc.start]:02x} at offset {exc.start}",
            hint=hint,
            field=field,
        ) from None
