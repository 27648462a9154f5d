"""Types and helpers shared by the schemas: RFC 3339 timestamps, one-of rules, reading request documents."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic_core import PydanticCustomError

from srift.documents import NO_NUL as NO_NUL
from srift.documents import NOT_BLANK as NOT_BLANK
from srift.documents import SOME_TEXT as SOME_TEXT
from srift.documents import FreeJson as FreeJson
from srift.documents import FreeObject as FreeObject
from srift.documents import KeysStated as KeysStated
from srift.documents import NoNulText as NoNulText
from srift.documents import error_hint, error_location
from srift.domain.simulation import MAX_BUCKET_CAP_MB, Exchange
from srift.errors import InvalidInput


def _with_offset(value: datetime) -> datetime:
    """Stored times are naive local time (srift.db.tables.utcnow); answer them with their UTC offset."""
    return value if value.tzinfo is not None else value.astimezone()


Timestamp = Annotated[datetime, AfterValidator(_with_offset)]
"""A datetime that always serializes with an offset, as OpenAPI's `date-time` (RFC 3339) requires."""

ExchangeField = Annotated[
    Exchange,
    Field(
        description="how gradients are exchanged: ddp_buckets (PyTorch DDP's buckets, what every answer uses "
        "by default) or per_layer (the Srift paper's one allreduce per layer)"
    ),
]
BucketCapMb = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_BUCKET_CAP_MB,
        description="DistributedDataParallel's bucket_cap_mb (MiB); its first bucket holds about 1 MiB",
    ),
]

ProviderField = Annotated[str, Field(min_length=1, max_length=64)]
"""The cloud provider a request prices with (its default is the request's domain value's)."""
RegionField = Annotated[str | None, Field(max_length=64, description="default: the service's default_region")]
SnapshotField = Annotated[
    str | None,
    Field(max_length=200, description="catalog snapshot to price with (e.g. srift-paper-2020)"),
]

TypeName = Annotated[str, Field(min_length=1, max_length=128, pattern=SOME_TEXT)]
"""An instance type name as requests give it (looked up in the catalog as written); also a dict key, so
its pattern alone says it is not empty."""


def one_of(*names: str, types: dict[str, str]) -> dict[str, Any]:
    """A JSON Schema rule: exactly one of `names` is given and not null (each name's JSON type in `types`)."""
    return {"oneOf": [{"required": [n], "properties": {n: {"type": types[n]}}} for n in names]}


def check_one_of(model: BaseModel, *names: str) -> None:
    """Raise (as a validation error) unless exactly one of `names` is set on `model`; the error's context
    names the first of them as its field (see `error_field`) and the fix (the "To fix:" hint)."""
    given = [n for n in names if getattr(model, n) is not None]
    if len(given) != 1:
        got = f" (got {', '.join(given)})" if given else ""
        raise PydanticCustomError(
            "one_of",
            "give exactly one of {names}{got}",
            {"names": ", ".join(names), "got": got, "field": names[0], "hint": _one_of_fix(names, given)},
        )


def _one_of_fix(names: tuple[str, ...], given: list[str]) -> str:
    """The fix of a one-of rule broken by giving `given` of `names`: keep one, or give one."""
    if given:
        return f"keep only one of {', '.join(given)} and drop the rest"
    return f"give one of {', '.join(names)}"


def error_field(error: Mapping[str, Any]) -> str | None:
    """The field a pydantic error is about, written as Srift writes field paths everywhere
    (`config.choices[0].count`, srift.documents); a rule across fields names the field its context gives;
    a body that is not JSON at all has no field (pydantic's location is a character offset there)."""
    if error.get("type") == "json_invalid":
        return None
    return error_location(error, skip=("body", "query", "path")) or None


M = TypeVar("M", bound=BaseModel)


def parse_request(model: type[M], data: Any) -> M:
    """Validate a request document (a CLI file, a stored body) with `model`, raising InvalidInput that
    names the field, with the hint the REST API gives (srift.documents.error_hint: a rule's own, else the
    field's, else the fix the error's type says, else a generic one)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        hint = error_hint(first, default="correct the named field", model=model)
        raise InvalidInput(str(first.get("msg", "invalid")), hint=hint, field=error_field(first)) from exc
