"""Types and helpers shared by the schemas: RFC 3339 timestamps, one-of rules, reading request documents."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, TypeVar, Union

from pydantic import AfterValidator, BaseModel, Field, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError
from typing_extensions import TypeAliasType

from srift.documents import field_path
from srift.errors import InvalidInput


def _with_offset(value: datetime) -> datetime:
    """Stored times are naive local time (srift.db.tables.utcnow); answer them with their UTC offset."""
    return value if value.tzinfo is not None else value.astimezone()


Timestamp = Annotated[datetime, AfterValidator(_with_offset)]
"""A datetime that always serializes with an offset, as OpenAPI's `date-time` (RFC 3339) requires."""

NO_NUL = r"^[^\x00]*$"
"""Text without NUL characters (PostgreSQL text and JSON columns cannot hold them), stated in the schema."""
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


def one_of(*names: str, types: dict[str, str]) -> dict[str, Any]:
    """A JSON Schema rule: exactly one of `names` is given and not null (each name's JSON type in `types`)."""
    return {"oneOf": [{"required": [n], "properties": {n: {"type": types[n]}}} for n in names]}


def check_one_of(model: BaseModel, *names: str) -> None:
    """Raise (as a validation error) unless exactly one of `names` is set on `model`; the error's context
    names the first of them as its field (see `error_field`)."""
    given = [n for n in names if getattr(model, n) is not None]
    if len(given) != 1:
        got = f" (got {', '.join(given)})" if given else ""
        raise PydanticCustomError(
            "one_of",
            "give exactly one of {names}{got}",
            {"names": ", ".join(names), "got": got, "field": names[0]},
        )


def error_field(error: Mapping[str, Any]) -> str | None:
    """The field a pydantic error is about, written as Srift writes field paths everywhere
    (`config.choices[0].count`, srift.documents); a rule across fields names the field its context gives;
    a body that is not JSON at all has no field (pydantic's location is a character offset there)."""
    if error.get("type") == "json_invalid":
        return None
    loc = [p for p in error.get("loc", ()) if p not in ("body", "query", "path")]
    if loc:
        return field_path(loc)
    field = (error.get("ctx") or {}).get("field")
    return str(field) if field else None


M = TypeVar("M", bound=BaseModel)


def parse_request(model: type[M], data: Any) -> M:
    """Validate a request document (a CLI file, a stored body) with `model`, raising InvalidInput that
    names the field, as the REST API does."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidInput(
            str(first.get("msg", "invalid")), hint="correct the named field", field=error_field(first)
        ) from exc
