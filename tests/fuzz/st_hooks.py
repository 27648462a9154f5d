"""Schemathesis hooks for `st run` against a live server (scripts/fuzz_live.sh sets SCHEMATHESIS_HOOKS to this
module): positive cases keep to the rules across fields the schema publishes under x-srift-rules (in bodies
and query parameters)."""

from __future__ import annotations

from typing import Any

import schemathesis

from tests.fuzz.contract import broken_rule, published_rules

_PUBLISHED: dict[int, set[str]] = {}


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    """Drop a positive case whose body or query breaks a published rule (negative cases stay: they must be
    refused)."""
    meta = case.meta
    if meta is not None and not meta.generation.mode.is_positive:
        return True
    raw = case.operation.schema.raw_schema
    rules = _PUBLISHED.setdefault(id(raw), published_rules(raw))
    return broken_rule([case.body, case.query], rules) is None
