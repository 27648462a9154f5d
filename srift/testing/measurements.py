"""Edited copies of the shipped measurement registry, for tests that show a fit reads exactly its entries."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

import yaml

from srift.measurements import REGISTRY, Registry, parse_registry


def shipped_document() -> dict[str, Any]:
    """The shipped registry as a plain document (a fresh copy each call)."""
    text = resources.files("srift").joinpath(REGISTRY).read_text(encoding="utf-8")
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def registry_with(edit: Callable[[dict[str, Any]], None]) -> Registry:
    """The shipped registry after `edit` changed its document in place (parsed as the loader parses it)."""
    document = shipped_document()
    edit(document)
    return parse_registry(yaml.safe_dump(document, allow_unicode=True), where="edited registry")


def move_row(document: dict[str, Any], row: str, *, source: str, target: str) -> None:
    """Move `row` from set `source` to set `target` (for instance from a fit set to its check set)."""
    sets = document["sets"]
    sets[source]["rows"] = [r for r in sets[source]["rows"] if r != row]
    sets[target]["rows"] = [*sets[target].get("rows", []), row]
