"""Data revisions as values: which area of stored data a cache depends on, and the areas' current tokens."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DataArea(StrEnum):
    """An area of stored data whose revision token changes on every write to it (see srift.db.revisions)."""

    CATALOG = "catalog"
    PROFILES = "profiles"
    BANDWIDTH_MODELS = "bandwidth_models"
    CORRECTIONS = "corrections"


@dataclass(frozen=True, slots=True)
class Revisions:
    """The current token of every area; equal tokens mean no write to that area in between."""

    catalog: str
    profiles: str
    bandwidth_models: str
    corrections: str = ""

    def of(self, areas: tuple[DataArea, ...]) -> tuple[str, ...]:
        """The tokens of `areas`, in order (part of a cache key)."""
        return tuple(getattr(self, area.value) for area in areas)
