"""Field types shared by response schemas (timestamps that are valid RFC 3339 date-times)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator


def _with_offset(value: datetime) -> datetime:
    """Stored times are naive local time (srift.db.tables.utcnow); answer them with their UTC offset."""
    return value if value.tzinfo is not None else value.astimezone()


Timestamp = Annotated[datetime, AfterValidator(_with_offset)]
"""A datetime that always serializes with an offset, as OpenAPI's `date-time` (RFC 3339) requires."""
