"""Mixed-ring names: one spelling for a ring of several instance types, whatever order they are given in.

A probe across hosts of several types (a mixed ring) stores its samples under one instance-type name: the
member types joined by "+". The ring is the set of its types, so the name is canonical only in one order:
each type once, sorted (`tb.large+tb.small`, never `tb.small+tb.large`). Every place a ring's name enters
(REST bodies, `srift probe import --instance-type`, the curves query, the samples store) passes it through
`canonical_instance_type`, so both orders store into, and look up, the same ring.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

from srift.documents import BLANKS
from srift.errors import InvalidInput, NotFound

SEPARATOR = "+"
_MEMBER = rf"[^\x00+]*[^\x00+{BLANKS}][^\x00+]*"
TYPE_OR_RING_TEXT = rf"^{_MEMBER}(\+{_MEMBER})*$"
"""A schema pattern for text `canonical_instance_type` reads (a type, or a ring's types joined by '+'): no
NUL, and no blank or empty type between, before or after the '+' signs; blanks around a type are allowed (it
strips them). Each type once is a rule across the members, which a regex cannot state: schemas publish it as
RING_TYPES_ONCE."""
RING_TYPES_ONCE = (
    "ring-types-once",
    "a mixed ring's name (its instance types joined by '+': a probe sample's instance_type, an entry of a "
    "training request's instance_types, the curves query's instance_type) names each type once, blanks "
    "around a type ignored (tb.large+tb.large and 'tb.large + tb.large' are refused)",
)
"""The published rule (srift.documents.publish_rules) of a ring's name, one id wherever a schema takes one:
`canonical_instance_type` enforces it for every place a ring's name enters."""
RING_RULE = (
    "a mixed ring's types, each once, joined by '+' (stored sorted: tb.small+tb.large is tb.large+tb.small)"
)
"""The rule as the API schema's field descriptions and the CLI help state it."""
QUERY_RULE = (
    "in a URL's query string write the ring's '+' as %2B (instance_type=tb.large%2Btb.small): a bare '+' "
    "there means a space, and no instance type's name has one"
)
"""How a ring's name is written as a query parameter, as the API schema's parameter descriptions state it."""


def ring_members(instance_type: str) -> tuple[str, ...]:
    """The types of a mixed-ring name as written (one element for a plain type)."""
    return tuple(instance_type.split(SEPARATOR))


def ring_name(type_names: Iterable[str]) -> str:
    """The name of the ring of a fleet's types (repeats allowed: a fleet has several hosts of a type): the
    distinct types, sorted, joined by "+". InvalidInput when fewer than two distinct types are left."""
    names = sorted(set(type_names))
    if len(names) < 2:
        raise InvalidInput(
            f"a mixed ring needs two or more instance types, got {names}",
            hint="probe a ring of one type as that type",
            field="instance_type",
        )
    return SEPARATOR.join(names)


def canonical_instance_type(name: str, *, field: str = "instance_type") -> str:
    """`name` as stored: a plain type unchanged; a mixed ring's types (blanks around each dropped) sorted
    and joined by "+". A ring naming a type twice, or with an empty member ("a+", "a++b"), is refused with
    an InvalidInput naming `field`: a ring lists each of its types once, and guessing which was meant would
    store samples under a ring nobody probed. A blank name (only blanks: a query parameter's schema refuses
    it, as a body's does) is refused the same way."""
    if not name.strip():
        raise InvalidInput(
            f"the instance type name {name!r} is blank",
            hint="name an instance type (e.g. g4dn.xlarge), or a mixed ring by its types joined by '+'",
            field=field,
        )
    if SEPARATOR not in name:
        return name
    members = [member.strip() for member in ring_members(name)]
    if any(not member for member in members):
        raise InvalidInput(
            f"the mixed ring {name!r} has an empty type between its '+' signs",
            hint="name a mixed ring by its types joined by '+', e.g. tb.large+tb.small",
            field=field,
        )
    twice = sorted({member for member in members if members.count(member) > 1})
    if twice:
        raise InvalidInput(
            f"the mixed ring {name!r} names {', '.join(repr(t) for t in twice)} more than once; a mixed ring "
            "lists each of its types once",
            hint=f"give each type once ({SEPARATOR.join(sorted(set(members)))}); a ring of one type is that "
            "type",
            field=field,
        )
    return SEPARATOR.join(sorted(members))


def spaced_name_not_found(name: str, *, provider: str, field: str = "instance_type") -> NotFound | None:
    """The NotFound for a query parameter's type name `name` that was found nowhere and has a blank in it,
    else None. No instance type's name has a blank, but a '+' written bare in a URL's query string arrives
    as one (`?instance_type=a+b` reads `a b`), so such a name is most likely a mixed ring whose '+' was not
    written %2B. It is refused, saying so, rather than read as that ring: the blank may be meant."""
    if not any(ch.isspace() for ch in name):
        return None
    ring = SEPARATOR.join(name.split())
    return NotFound(
        f"{provider} has no instance type {name!r}: no instance type's name has a space, and in a URL's "
        "query string a '+' written as it is means a space",
        hint=f"write a mixed ring's '+' as %2B in the query string ({field}={quote(ring, safe='')} for the "
        f"ring {ring})",
        field=field,
    )
