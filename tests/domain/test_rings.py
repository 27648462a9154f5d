"""Mixed-ring names: one stored spelling whatever order the types come in; a type named twice is refused."""

from __future__ import annotations

import pytest

from srift.domain.rings import canonical_instance_type, ring_name
from srift.errors import InvalidInput


def test_a_rings_types_in_any_order_are_one_name() -> None:
    assert canonical_instance_type("tb.small+tb.large") == "tb.large+tb.small"
    assert canonical_instance_type("tb.large+tb.small") == "tb.large+tb.small"
    assert canonical_instance_type("c+a+b") == canonical_instance_type("b+c+a") == "a+b+c"
    assert canonical_instance_type(" tb.small + tb.large ") == "tb.large+tb.small"
    assert canonical_instance_type("p5.48xlarge") == "p5.48xlarge", "a plain type is left as it is"
    assert ring_name(["tb.small", "tb.large", "tb.small"]) == canonical_instance_type("tb.small+tb.large")


REFUSED = {
    "tb.small+tb.small": "'tb.small' more than once",
    "tb.large+tb.small+tb.large": "'tb.large' more than once",
    "tb.small+": "an empty type",
    "tb.small++tb.large": "an empty type",
    " ": "is blank",
    "": "is blank",
}
"""Ring names that are refused, and words of the refusal."""


@pytest.mark.parametrize(("name", "words"), REFUSED.items())
def test_a_ring_naming_a_type_twice_or_none_is_refused_naming_the_field(name: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        canonical_instance_type(name, field="samples[0].instance_type")
    assert caught.value.field == "samples[0].instance_type"
    assert words in caught.value.detail and name in caught.value.detail
    assert caught.value.hint
