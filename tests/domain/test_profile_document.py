"""srift.domain.profile_document: `created_at` is an ISO 8601 date-time (or empty), kept as written, and
every profile document Srift ships still reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from srift.domain.profile_document import read_profile
from srift.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "srift" / "testing" / "data" / "cnn_t4_profile.json"


def _shipped_profile_documents() -> list[Path]:
    """Every JSON file under srift/ that is a profile document (a mapping with curves and layers)."""
    found = []
    for path in sorted((ROOT / "srift").rglob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(document, dict) and {"forward", "backward", "layers"} <= set(document):
            found.append(path)
    return found


def test_every_shipped_profile_document_still_reads() -> None:
    paths = _shipped_profile_documents()
    assert len(paths) >= 6, paths  # the measured H200 profiles and the testing CNN profiles
    for path in paths:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        profile = read_profile(document)
        assert profile.created_at == document.get("created_at", ""), path
        assert read_profile(profile.to_dict()) == profile, path


@pytest.mark.parametrize(
    "value", ["2026-12-06T14:08:45+00:00", "2026-12-06T14:08:45Z", "2026-12-06T14:08:45.5", "2026-12-06", ""]
)
def test_an_iso_date_time_is_kept_as_written(value: str) -> None:
    document = {**json.loads(SHIPPED.read_text(encoding="utf-8")), "created_at": value}
    assert read_profile(document).to_dict()["created_at"] == value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("yesterday", "it does not start with a date, YYYY-MM-DD"),
        ("1700000000", "it does not start with a date, YYYY-MM-DD"),  # pydantic would read seconds
        ("2026-12-06T14:61:00Z", "minute value is outside expected range of 0-59"),
        ("2026-12-06T14:08:45 and then", "invalid timezone sign"),
    ],
)
def test_anything_else_is_refused_naming_created_at_and_why(value: str, reason: str) -> None:
    document = {**json.loads(SHIPPED.read_text(encoding="utf-8")), "created_at": value}
    with pytest.raises(InvalidInput) as refused:
        read_profile(document)
    assert refused.value.field == "created_at"
    assert refused.value.detail == f"created_at {value!r} is not an ISO 8601 date-time ({reason})"
    assert "2026-12-06T14:08:45+00:00" in refused.value.hint
