"""The error hierarchy's helpers: a choice that is not one of an enum's values names the field and every
choice."""

from __future__ import annotations

import pytest

from srift.domain.catalog import MarketChoice
from srift.errors import InvalidInput, parse_choice


def test_a_known_choice_is_its_member() -> None:
    assert parse_choice(MarketChoice, "spot", what="market", field="market") is MarketChoice.SPOT


def test_an_unknown_choice_names_the_field_and_lists_the_choices() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_choice(MarketChoice, "reserved", what="market", field="market")
    err = caught.value
    assert err.field == "market" and err.detail == "unknown market 'reserved'"
    assert err.hint == "use spot, on_demand or any"
    assert str(err).endswith("To fix: use spot, on_demand or any.")


def test_a_hint_that_asks_a_question_ends_with_it() -> None:
    err = InvalidInput("no such type 'p5e.48xlarge'", hint="did you mean p5en.48xlarge?", field="type")
    assert str(err) == "type: no such type 'p5e.48xlarge'. To fix: did you mean p5en.48xlarge?"
