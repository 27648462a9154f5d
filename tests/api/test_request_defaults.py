"""Request defaults are written once: the domain values (PlanQuery, PredictionQuery, FleetChoice) own them,
and the REST schemas state the same ones for every field the two share."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from srift.api.schemas.plans import PlanRequest
from srift.api.schemas.predictions import FleetChoiceIn, PredictionRequest
from srift.domain.requests import FleetChoice, PlanQuery, PredictionQuery


@pytest.mark.parametrize(
    ("schema", "value"),
    [(PlanRequest, PlanQuery), (PredictionRequest, PredictionQuery), (FleetChoiceIn, FleetChoice)],
)
def test_the_schema_states_the_domain_defaults(schema: type[BaseModel], value: type) -> None:
    domain = {f.name: f for f in dataclasses.fields(value)}
    shared = set(schema.model_fields) & set(domain)
    assert len(shared) >= 3
    for name in sorted(shared):
        field = schema.model_fields[name]
        if field.default_factory is not None or domain[name].default_factory is not dataclasses.MISSING:
            continue
        mine = None if field.default is PydanticUndefined else field.default
        theirs = None if domain[name].default is dataclasses.MISSING else domain[name].default
        assert mine == theirs, name


def test_the_defaults_come_from_the_domain() -> None:
    """One place: the schema's default is the domain's object, not a copy typed twice."""
    assert (
        PlanRequest.model_fields["spot_samples"].default
        is PlanQuery.__dataclass_fields__["spot_samples"].default
    )
    assert (
        PlanRequest.model_fields["confidence"].default is PlanQuery.__dataclass_fields__["confidence"].default
    )
