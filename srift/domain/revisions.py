"""Data revisions as values: which area of stored data a cache depends on, and the areas' current tokens."""

from __future__ import annotations

from collections.abc import Mapping
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
    """The current token of every area; equal tokens mean no write to that area in between.

    One token per `DataArea`, keyed by it, so a new area is one enum member and nothing else here.
    """

    tokens: Mapping[DataArea, str]

    @classmethod
    def from_names(cls, tokens: Mapping[str, str]) -> Revisions:
        """The tokens stored under each area's name; an area with none reads as ""."""
        return cls({area: tokens.get(area.value, "") for area in DataArea})

    def token(self, area: DataArea) -> str:
        """The token of `area` ("" where none is stored)."""
        return self.tokens.get(area, "")

    def of(self, areas: tuple[DataArea, ...]) -> tuple[str, ...]:
        """The tokens of `areas`, in order (part of a cache key)."""
        return tuple(self.token(area) for area in areas)
