"""One way to read documents into frozen domain values, and to write them back (pydantic does the typing).

`read_document(cls, doc)` builds the dataclass `cls` from a document whose keys are its field names
(enums from their values, tuples from lists, nested dataclasses from nested documents; unknown keys are
ignored); `to_document(value)` is the inverse, JSON-ready. The edges validate user input (bounds, "To fix:"
hints) with their pydantic models first; this is the conversion they and the services share.
"""

from __future__ import annotations

import codecs
import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError
from pydantic_core import core_schema as cs
from typing_extensions import TypeAliasType

from srift.errors import InvalidInput

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


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


def field_defaults(cls: type[Any]) -> dict[str, Any]:
    """The defaults of a dataclass's fields (those that have one), so an edge schema states the defaults the
    domain value owns instead of writing them again."""
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def copy_fields(cls: type[T], source: object, **given: Any) -> T:
    """The dataclass `cls` with each field read from `source`'s attribute of the same name, except those in
    `given`: a value that is a view of a wider one (a plan query's constraints, a run's inputs)."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    taken = {name: getattr(source, name) for name in names if name not in given}
    return cls(**taken, **given)


def to_document(value: Any) -> dict[str, Any]:
    """A dataclass value as JSON-ready data (enums as their values, tuples as lists)."""
    out: dict[str, Any] = _adapter(type(value)).dump_python(value, mode="json")
    return out


WHOLE_NUMBER = "give a whole number, without quotes (e.g. 3)"
A_NUMBER = "give a number, without quotes (e.g. 2.5)"


class FixableValueError(ValueError):
    """A validator's ValueError that knows its fix: pydantic keeps the exception in the error's context
    (`ctx["error"]`), where schema_hint reads `hint`, so the "To fix:" hint says it; the message is
    pydantic's as for any ValueError."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _whole(value: Any) -> Any:
    if isinstance(value, bool | str) or (isinstance(value, float) and not value.is_integer()):
        raise FixableValueError(f"{value!r} is not a whole number (an integer)", hint=WHOLE_NUMBER)
    return int(value) if isinstance(value, float) else value


def _number(value: Any) -> Any:
    if isinstance(value, bool | str) or not isinstance(value, int | float):
        raise FixableValueError(f"{value!r} is not a number", hint=A_NUMBER)
    if not math.isfinite(float(value)):
        raise FixableValueError(f"{value!r} is not a finite number", hint="give a finite number")
    return float(value)


NO_NUL = r"^[^\x00]*$"
"""Text without NUL characters (PostgreSQL text and JSON columns cannot hold them), stated in the schema;
with `min_length=1` it is the rule for non-empty text."""
BLANKS = r"\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""The whitespace characters (`str.isspace`, what `str.strip` drops) as the body of a regex character class,
written so that Python's `re` and JSON Schema's ECMA-262 dialect read it alike."""
NOT_BLANK = rf"^[^\x00]*[^\x00{BLANKS}][^\x00]*$"
"""Text with a character that is not whitespace (`str.isspace`, which readers strip), and no NUL."""
HTTP_URL = r"^https?://[^\x00\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+$"
"""An http(s) URL without NUL or whitespace, the whitespace listed so that Python's `re` and JSON Schema's
ECMA-262 dialect read the pattern alike (`\\s` differs between them: U+0085 and U+001C..U+001F are space to
Python only, U+FEFF to ECMA only)."""
SOME_TEXT = r"^[^\x00]+$"
"""Non-empty text without NUL, in the pattern alone: for dict keys, whose schema (`propertyNames`) keeps
only the pattern of the key type."""
ONE_LINE = r"^[^\x00-\x1f\x7f]*$"
"""Text on one line: no NUL, line break, tab or other control character (a script name or host written
into one line of a launch file, where a line break would split the command)."""
NoNulText = Annotated[str, Field(pattern=NO_NUL)]


_PATTERN_WORDS = {
    NOT_BLANK: (
        "{name} is blank (only whitespace)",
        "give {name} a value with a character other than spaces",
    ),
    SOME_TEXT: ("{name} is empty", "give {name} a value"),
    ONE_LINE: (
        "{name} holds a line break or another control character",
        "give {name} on one line, without control characters (a trailing newline from a paste?)",
    ),
    HTTP_URL: (
        "{name} {given!r} is not an http(s) URL without spaces",
        "give {name} as http://HOST[:PORT] or https://HOST[:PORT]",
    ),
}
"""What a mismatch of each text pattern above means, and its fix (NUL characters aside)."""


def pattern_words(pattern: str, given: Any, name: str) -> tuple[str, str] | None:
    """A mismatch of one of the text patterns above in words (message, hint), or None for another pattern.
    Their regexes are for the schema; read back to a person they say nothing."""
    if pattern in (NO_NUL, NOT_BLANK, SOME_TEXT) and isinstance(given, str) and "\x00" in given:
        return f"{name} holds a NUL character (\\u0000)", f"remove the NUL character from {name}"
    if pattern not in _PATTERN_WORDS:
        return None
    message, hint = _PATTERN_WORDS[pattern]
    return message.format(name=name, given=given), hint.format(name=name)


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


RULES_KEY = "x-srift-rules"
"""Where a schema object lists its rules across fields: JSON Schema cannot relate two values, so each rule is
published as {"id", "rule"} (a sentence over the object's own fields) beside the keywords that state the rest;
a request that breaks one is answered 422 naming the field, as for any other rule."""


def publish_rules(
    *rules: tuple[str, str], then: Callable[[dict[str, Any]], None] | dict[str, Any] | None = None
) -> Callable[[dict[str, Any]], None]:
    """A `json_schema_extra` that adds `rules` ((id, sentence) pairs) under RULES_KEY, after `then` (another
    `json_schema_extra`, a function or keywords) has applied."""

    def extra(schema: dict[str, Any]) -> None:
        if callable(then):
            then(schema)
        elif then is not None:
            schema.update(then)
        schema[RULES_KEY] = [{"id": rule_id, "rule": sentence} for rule_id, sentence in rules]

    return extra


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


def _strict(schema: Any) -> Any:
    """`schema` (a pydantic core schema) with every boolean and number strict and every integer WHOLE."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("bool", "float"):
        return {**schema, "strict": True}
    if kind == "int":
        return cs.no_info_before_validator_function(_whole, {**schema, "strict": True})
    return {key: _strict(value) for key, value in schema.items()}


class StrictModel(BaseModel):
    """A request or stored document read as JSON Schema reads it: an `integer` is 3 or 3.0 (never 3.5, "3" or
    true), a `number` is never a string or a boolean, a `boolean` is true or false (never 0 or "yes").

    Pydantic's lax mode would coerce all of those, so a request the schema refuses would be accepted; the
    subclasses' fields keep their plain types (`int`, `float`, `bool`), and this class makes every one of
    them, nested containers included, strict. Nested models must subclass it too."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        strict: CoreSchema = _strict(handler(source))
        return strict


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
    exc: ValidationError,
    *,
    where: str = "",
    hints: Mapping[str, str] | None = None,
    model: type[BaseModel] | None = None,
) -> InvalidInput:
    """The first problem pydantic found, as Srift's InvalidInput: the field's path (`sizes[2]`, `ec2.region`),
    a message in the project's words, prefixed by `where` when given, and a "To fix:" hint (error_hint: the
    hints of the innermost `model` the field lies in, then `hints` for the document's own fields, then the
    fix the error's type says)."""
    errors = exc.errors()
    extra = sorted(str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden")
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    field = error_location(first)
    message, hint = describe(first)
    if first["type"] == "extra_forbidden":
        message = f"unknown fields {extra}"
    hint = error_hint(first, hints=hints, default=hint, model=model)
    return InvalidInput(f"{where}: {message}" if where else message, hint=hint, field=field or None)


def field_hint(
    error: Mapping[str, Any],
    hints: Mapping[str, str] | None,
    *,
    default: str,
    skip: tuple[str, ...] = (),
    model: Any = None,
) -> str:
    """A document's own hint for one pydantic error, else `default`; a rule across fields keeps the hint it
    brings. The error's location is walked through `model` (hint_tables): the innermost model on the way
    that states FIELD_HINTS answers first, by the field's path relative to it with list indices left out,
    then by each shorter prefix of that path (`ec2.security_group_ids[1]`: `ec2.security_group_ids`, then
    `ec2`; `""` for the document as a whole); then each model further out. `hints` stand for the outermost
    table (a reader's own hints for the document's fields; default: `model`'s FIELD_HINTS). So
    `samples[3].backend` of a probe-results body gets the sample's hint for `backend`, and a CLI file and
    a REST body of one model get the same. `skip` drops location parts that are not fields (the REST API's
    `body`), as in error_location."""
    if error.get("type") == "rule":
        return default
    loc = tuple(p for p in error.get("loc", ()) if p not in skip)
    tables = hint_tables(model, loc) if model is not None else []
    if hints is not None:
        tables = [*(t for t in tables if len(t[1]) < len(loc)), (hints, loc)]
    for table, rest in tables:
        names = [str(p) for p in rest if not isinstance(p, int)]
        for key in [".".join(names[:end]) for end in range(len(names), 0, -1)] or [""]:
            if key in table:
                return table[key]
    return default


def model_hints(model: Any) -> Mapping[str, str] | None:
    """The per-field hints a document model states (its FIELD_HINTS class attribute), if any."""
    hints = getattr(model, "FIELD_HINTS", None)
    return hints if isinstance(hints, Mapping) else None


def hint_tables(model: Any, loc: Sequence[Any]) -> list[tuple[Mapping[str, str], tuple[Any, ...]]]:
    """The FIELD_HINTS tables of the models an error location passes through, innermost first, each with
    the part of `loc` below its model: `samples[3].backend` in a probe-results body passes through the
    body model (no table) and the sample's model (its table, with `("backend",)`). The location is followed
    through fields (by name or alias), list and tuple items, mapping values and unions; a part that leads
    nowhere (a union member's tag, `[key]`, an unknown field) is passed over."""
    found: list[tuple[Mapping[str, str], tuple[Any, ...]]] = []
    here = _alternatives(model)
    for depth in range(len(loc) + 1):
        for kind in here:
            table = model_hints(kind) if isinstance(kind, type) else None
            if table is not None and all(table is not seen for seen, _ in found):
                found.append((table, tuple(loc[depth:])))
        if depth < len(loc):
            inner = [alt for kind in here for t in _inner_types(kind, loc[depth]) for alt in _alternatives(t)]
            here = inner or here
    return found[::-1]


def _alternatives(kind: Any) -> list[Any]:
    """`kind` without its wrappers: a type alias's value, Annotated's type, each member of a union."""
    if isinstance(kind, TypeAliasType):
        return _alternatives(kind.__value__)
    origin = get_origin(kind)
    if origin is Annotated:
        return _alternatives(get_args(kind)[0])
    if origin is Union or origin is UnionType:
        return [alt for arg in get_args(kind) for alt in _alternatives(arg)]
    return [kind]


def _inner_types(kind: Any, part: Any) -> list[Any]:
    """The types one location part leads to from `kind`: a model's field (by name or alias, or the model
    itself where `part` is its name, as pydantic tags a union member), a list's or tuple's item, a mapping's
    value; none where it leads nowhere."""
    out: list[Any] = []
    for alt in _alternatives(kind):
        origin, args = get_origin(alt), get_args(alt)
        if isinstance(alt, type) and issubclass(alt, BaseModel):
            if part == alt.__name__:
                out.append(alt)
            out += [f.annotation for name, f in alt.model_fields.items() if part in (name, f.alias)]
        elif isinstance(part, int) and origin in (list, tuple, set, frozenset, Sequence) and args:
            out.append(
                args[part] if origin is tuple and args[-1] is not Ellipsis and part < len(args) else args[0]
            )
        elif origin in (dict, Mapping) and len(args) == 2:
            out.append(args[1])
    return out


def validated(
    model: type[M],
    data: Any,
    *,
    where: str = "",
    hints: Mapping[str, str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> M:
    """`data` validated into `model` (pydantic `context` passed on); the first problem raised as
    `invalid_input` words it: InvalidInput naming the field, prefixed by `where`, with a "To fix:" hint
    (`hints` as there; default: the model's FIELD_HINTS). The one way a document reader turns pydantic's
    ValidationError into Srift's error."""
    try:
        return model.model_validate(data, context=None if context is None else dict(context))
    except ValidationError as exc:
        raise invalid_input(exc, where=where, hints=hints, model=model) from exc


def error_hint(
    error: Mapping[str, Any],
    *,
    default: str,
    model: Any = None,
    hints: Mapping[str, str] | None = None,
) -> str:
    """The "To fix:" hint of one pydantic error, as the REST API and every request reader give it: the
    hint a rule brings in its context (`rule_error`), else the field's own (field_hint: FIELD_HINTS of
    the models the field lies in, `hints`), else the fix the error's type and context say (schema_hint:
    "use one of: tcp, efa"), else `default`."""
    ctx = error.get("ctx")
    brought = ctx.get("hint") if isinstance(ctx, dict) else None
    if brought:
        return str(brought)
    fix = schema_hint(error, model=model) or default
    return field_hint(error, hints, default=fix, model=model)


_NUMBER_FIXES = {
    "int_parsing": WHOLE_NUMBER,
    "int_type": WHOLE_NUMBER,
    "int_from_float": WHOLE_NUMBER,
    "float_parsing": A_NUMBER,
    "float_type": A_NUMBER,
    "finite_number": "give a finite number",
    "bool_parsing": "give true or false, without quotes",
    "bool_type": "give true or false, without quotes",
    "string_type": "give text, in quotes",
    "list_type": "give a list ([...])",
    "tuple_type": "give a list ([...])",
    "dict_type": "give an object ({...})",
    "model_type": "give an object ({...})",
    "model_attributes_type": "give an object ({...})",
}
"""The fix of each error about a value's JSON type, which the error itself says."""


def schema_hint(error: Mapping[str, Any], *, model: Any = None, skip: tuple[str, ...] = ()) -> str | None:
    """The concrete fix of one pydantic error, said from its type and context (the bound it broke, the
    values it takes, the field it misses), or None for a type without one. `model` (the document's model)
    lets an unknown field be matched against the fields it has (difflib) and a pattern be said by the
    field's description; `skip` drops location parts that are not fields, as in error_location."""
    kind, ctx, given = error.get("type"), error.get("ctx") or {}, error.get("input")
    loc = [p for p in error.get("loc", ()) if p not in skip]
    path = field_path(loc) or "the value"
    if kind in _NUMBER_FIXES:
        return _NUMBER_FIXES[str(kind)]
    if kind in ("literal_error", "enum"):
        values = [v.strip().strip("'\"") for v in re.split(r", | or ", str(ctx.get("expected", "")))]
        return f"use one of: {', '.join(v for v in values if v)}"
    if kind in _SIGNS:
        return f"give a number {_SIGNS[str(kind)]} {_bound(ctx.get(_BOUNDS[str(kind)]))}"
    if kind == "multiple_of":
        return f"give a multiple of {_bound(ctx.get('multiple_of'))}"
    if kind == "missing":
        return f"add {path}"
    if kind in _LENGTHS:
        least = kind.endswith("too_short")
        bound = ctx.get("min_length" if least else "max_length")
        unit = "character" if kind.startswith("string") else "entry"
        units = unit if bound == 1 else ("characters" if unit == "character" else "entries")
        return f"{'give at least' if least else 'shorten it to at most'} {bound} {units}"
    if kind == "string_pattern_mismatch":
        return _pattern_fix(str(ctx.get("pattern", "")), given, path, _field_description(model, loc))
    if kind == "extra_forbidden" and loc:
        return _extra_fix(loc, _models_at(model, loc[:-1]))
    if kind == "value_error":
        hint = getattr(ctx.get("error"), "hint", None)
        return str(hint) if hint else None
    return None


_LENGTHS = ("string_too_short", "string_too_long", "too_short", "too_long")


def _pattern_fix(pattern: str, given: Any, path: str, description: str | None) -> str:
    """The fix of a value that misses `pattern`: said in words for the project's text patterns
    (pattern_words), else by the field's description, else by showing the pattern."""
    words = pattern_words(pattern, given, path)
    if words is not None:
        return words[1]
    if description:
        return f"give {path} as described: {description.rstrip('.')}"
    return f"give {path} matching the pattern {pattern}"


def _extra_fix(loc: Sequence[Any], models: Sequence[type[BaseModel]]) -> str:
    """The fix of an unknown field: remove it, and the known field its name is closest to, if any."""
    name, parent = str(loc[-1]), field_path(loc[:-1])
    known = sorted({f.alias or n for m in models for n, f in m.model_fields.items()})
    close = difflib.get_close_matches(name, known, n=1)
    guess = f"; did you mean {close[0]}?" if close else ""
    return f"remove {field_path(loc)} (it is not a field of {parent or 'the request'}{guess})"


def _models_at(model: Any, loc: Sequence[Any]) -> list[type[BaseModel]]:
    """The models that `loc` (a field path from `model`) leads to, followed as hint_tables follows it."""
    if model is None:
        return []
    here = _alternatives(model)
    for part in loc:
        here = [alt for kind in here for t in _inner_types(kind, part) for alt in _alternatives(t)] or here
    return [kind for kind in here if isinstance(kind, type) and issubclass(kind, BaseModel)]


def _field_description(model: Any, loc: Sequence[Any]) -> str | None:
    """The description `model` states for the field at `loc`; None for a list item (its list's
    description speaks of the list, not of one item's form)."""
    if not loc or isinstance(loc[-1], int):
        return None
    for found in _models_at(model, loc[:-1]):
        for name, info in found.model_fields.items():
            if loc[-1] in (name, info.alias) and info.description:
                return info.description
    return None


_SIGNS = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤", "less_than": "<"}
_BOUNDS = {"greater_than_equal": "ge", "greater_than": "gt", "less_than_equal": "le", "less_than": "lt"}


def describe(error: Mapping[str, Any], *, skip: tuple[str, ...] = ()) -> tuple[str, str]:
    """One pydantic error in the project's words: its message (naming the field) and "To fix:" hint (a
    rule across fields, `rule_error`, brings its own; else schema_hint's, as the REST API gives it, else
    "correct FIELD"). Every document reader words its errors with this; `skip` drops location parts that
    are not fields (union tags), as in error_location."""
    loc = [p for p in error.get("loc", ()) if p != "[key]" and p not in skip]
    name = field_path(loc[-2:]) if loc and isinstance(loc[-1], int) else str(loc[-1]) if loc else "value"
    kind, ctx, given = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "rule":
        return str(ctx["message"]), str(ctx["hint"])
    hint = schema_hint(error, skip=(*skip, "[key]")) or f"correct {name}"
    return _message(kind, ctx, given, name, str(error["msg"])), hint


_MESSAGES = {
    "extra_forbidden": "{name!r} is not a known field",
    "missing": "{name} is missing",
    "string_too_long": "{name} is too long (at most {max_length})",
    "too_long": "{name} is too long (at most {max_length})",
    "string_too_short": "{name} is too short (at least {min_length})",
    "literal_error": "unknown {name} {given!r}",
    "enum": "unknown {name} {given!r}",
    "multiple_of": "{name} must be a multiple of {multiple_of}, got {given!r}",
    "bool_type": "{name} {given!r} is not true or false",
    "bool_parsing": "{name} {given!r} is not true or false",
    "string_type": "{name} {given!r} is not text",
    "list_type": "{name} is not a list, got {given!r}",
    "dict_type": "{name} is not a mapping, got {given!r}",
    "model_type": "{name} is not a mapping, got {given!r}",
}
"""describe's message for each pydantic error type that needs only the field, the value given and one bound
of the error's context."""


def _message(kind: str, ctx: Mapping[str, Any], given: Any, name: str, msg: str) -> str:
    """describe's message for one pydantic error of type `kind` about the field `name`."""
    if kind in _MESSAGES:
        bounds = {key: ctx.get(key) for key in ("max_length", "min_length", "multiple_of")}
        return _MESSAGES[kind].format(name=name, given=given, **bounds)
    if kind in _SIGNS:
        return f"{name} must be {_SIGNS[kind]} {_bound(ctx.get(_BOUNDS[kind]))}, got {given!r}"
    if kind == "too_short":
        least = ctx.get("min_length")
        return f"{name} has fewer than {least} entries" if least != 1 else f"{name} is empty"
    if kind == "string_pattern_mismatch":
        words = pattern_words(str(ctx.get("pattern", "")), given, name)
        if words is not None:
            return words[0]
        if str(ctx.get("pattern", "")).startswith("^("):
            return f"unknown {name} {given!r}"
        return f"{name} {given!r} is not in the expected form"
    if kind == "value_error":
        return f"{name} {ctx.get('error', msg)!s}"
    return f"{name}: {msg.lower()}, got {given!r}"


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
