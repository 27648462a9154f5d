"""The probe sample document (srift.bandwidth.records): its schema states what reading it refuses."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from srift.bandwidth.records import ProbeSampleDocument
from srift.documents import RULES_KEY
from srift.domain.rings import RING_TYPES_ONCE

_SAMPLE = {"provider": "testbed", "backend": "nccl", "buffer_bytes": 1 << 20, "world_size": 2, "time_s": 2e-3}
NAMES = [
    "tb.large",
    " tb.large\t",
    "tb.large+tb.small",
    " tb.small + tb.large ",
    "a+b+c",
    "a+",
    "+a",
    "a++b",
    "a+ +b",
    "a+\u3000",
    "a+b+",
    "  ",
    "a\x00b",
    "a+\x00",
    "a+a",
    "a + b+ a",
]


def _accepted(name: str) -> bool:
    try:
        ProbeSampleDocument.model_validate({**_SAMPLE, "instance_type": name})
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_a_samples_instance_type_is_read_when_its_schema_and_published_rule_allow_it(name: str) -> None:
    """A schema-valid sample is never refused for its ring's name, nor a schema-invalid one read: the
    schema's pattern refuses an empty or blank type between '+' signs, the published rule a type named
    twice (blanks around a type ignored), as canonical_instance_type does."""
    schema = ProbeSampleDocument.model_json_schema()
    assert RING_TYPES_ONCE[0] in {rule["id"] for rule in schema[RULES_KEY]}
    matches = re.fullmatch(schema["properties"]["instance_type"]["pattern"], name) is not None
    members = [member.strip() for member in name.split("+")]
    assert (matches and len(set(members)) == len(members)) == _accepted(name)


def test_blanks_around_a_rings_types_are_still_read_and_dropped() -> None:
    doc = ProbeSampleDocument.model_validate({**_SAMPLE, "instance_type": " tb.small + tb.large "})
    assert doc.instance_type == "tb.large+tb.small"
