"""The query and path parameters of the OpenAPI document and the answers each value of them may get, for the
parameter fuzz (tests/fuzz/test_fuzz_api.py): a value the parameter's schema accepts is served (2xx, or
404/409 where the data it names is missing or cannot answer), or refused naming the parameter and a rule the
schema publishes for it under x-srift-rules, with a predicate here; a value the schema refuses is answered
422 naming the parameter. A rule the server enforces on a parameter without publishing it fails the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from srift.documents import RULES_KEY

LOCATIONS = ("query", "path")
"""Where the parameters this module judges lie (headers are the auth tests' business)."""
SERVED = frozenset({404, 409})
"""Answers, besides 2xx, that serve a valid value: the resource it names is missing, or the stored data
cannot answer it (as the body fuzz's positive_data_acceptance counts them)."""

ParameterPredicate = Callable[[str, Any], bool | None]
"""A published parameter rule over (parameter name, value): True kept, False broken, None not about it."""


def _ring_types_once(name: str, value: Any) -> bool | None:
    """An instance_type that is a mixed ring (types joined by '+') names each type once, blanks around a
    type ignored (the sentence of the ring rule, srift.domain.rings)."""
    if name != "instance_type" or not isinstance(value, str) or "+" not in value:
        return None
    members = [member.strip() for member in value.split("+")]
    return len(set(members)) == len(members)


PARAMETER_RULES: dict[str, ParameterPredicate] = {"ring-types-once": _ring_types_once}
"""A predicate for each rule id a query or path parameter may publish (ring-types-once: the curves query's
instance_type publishes it, one id for every ring name)."""


@dataclass(frozen=True)
class Parameter:
    """One query or path parameter of an operation: where it lies and the rule ids it publishes."""

    name: str
    location: str
    schema: dict[str, Any] = field(compare=False)
    rules: frozenset[str] = frozenset()


def _rule_ids(value: Any) -> set[str]:
    """The ids of the rules listed under x-srift-rules anywhere in `value` (a parameter or its schema)."""
    if isinstance(value, dict):
        found = {rule["id"] for rule in value.get(RULES_KEY, ())}
        for inner in value.values():
            found |= _rule_ids(inner)
        return found
    if isinstance(value, list):
        return set().union(*(_rule_ids(inner) for inner in value))
    return set()


def operation_parameters(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Parameter]]:
    """The query and path parameters of every operation of the OpenAPI document `spec` that has any, by
    (METHOD, path) and then by name."""
    found: dict[tuple[str, str], dict[str, Parameter]] = {}
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            params = {
                p["name"]: Parameter(
                    p["name"],
                    p["in"],
                    p["schema"],
                    frozenset(_rule_ids(p)),
                )
                for p in operation.get("parameters", ())
                if p["in"] in LOCATIONS
            }
            if params:
                found[(method.upper(), path)] = params
    return found


TRICKY_TEXTS = ("a\x00b", " ", "a+a", " a + b ", "..", "%41", "é\u2028", "-1")
"""Texts a parameter taking text may be given: NUL (which PostgreSQL cannot store), blanks, a ring naming a
type twice, a dot segment, an escape, a Unicode line separator, a number's sign."""


def schema_accepts(spec: dict[str, Any], parameter: Parameter, value: Any) -> bool:
    """Whether the schema `parameter` has in the OpenAPI document `spec` accepts `value`."""
    schema = {**parameter.schema, "components": spec.get("components", {})}
    return bool(Draft202012Validator(schema).is_valid(value))


def names_parameter(field: Any, name: str) -> bool:
    """Whether an error answer's `field` is the parameter `name` (or an item of it: world_size[0])."""
    return isinstance(field, str) and (field == name or field.startswith((f"{name}[", f"{name}.")))


def broken_parameter_rule(parameter: Parameter, value: Any) -> str | None:
    """The first rule `parameter` publishes that `value` breaks, or None."""
    for rule in sorted(parameter.rules):
        if PARAMETER_RULES[rule](parameter.name, value) is False:
            return rule
    return None


def routable(value: Any) -> bool:
    """Whether a path parameter's value reaches its operation as one path segment: an empty one, one with a
    '/' or a dot segment makes another path (404 or 405 there, for the router, not the operation)."""
    text = str(value)
    return text not in ("", ".", "..") and "/" not in text


def refusal_error(
    parameters: dict[str, Parameter],
    values: dict[str, Any],
    *,
    invalid: str | None,
    status: int,
    field: Any,
    with_body: bool,
) -> str | None:
    """What is wrong with the answer (`status`, the `field` it names) to a request whose query and path
    parameters took `values`, all valid by their schemas except the one named `invalid` (and a valid body
    `with_body`); None if nothing."""
    if status >= 500:
        return f"server error {status}"
    if invalid is not None:
        if parameters[invalid].location == "path" and not routable(values.get(invalid)):
            return None if status in (404, 405) else f"unroutable path value answered {status}"
        if status == 422 and names_parameter(field, invalid):
            return None
        return f"{invalid} is invalid by its schema, answered {status} naming {field!r}, not 422 naming it"
    if status < 400 or status in SERVED:
        return None
    named = [p for p in parameters.values() if p.name in values and names_parameter(field, p.name)]
    if not named:
        if with_body and isinstance(field, str) and field:
            return None  # about a field of the body: the body fuzz judges that
        return f"refused {status} naming {field!r}, not a parameter"
    if broken_parameter_rule(named[0], values[named[0].name]) is not None:
        return None
    value = values[named[0].name]
    return f"{named[0].name}={value!r} is valid by its schema and published rules, refused {status}"
