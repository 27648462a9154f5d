"""Mixed-ring names: one spelling for a ring of several instance types, whatever order they are given in.

A probe across hosts of several types (a mixed ring) stores its samples under one instance-type name: the
member types joined by "+". The ring is the set of its types, so the name is canonical only in one order:
each type once, sorted (`tb.large+tb.small`, never `tb.small+tb.large`). Every place a ring's name enters
(REST bodies, `srift probe import --instance-type`, the curves query, the samples store) passes it through
`canonical_instance_type`, so both orders store into, and look up, the same ring.
"""

from __future__ import annotations

from collections.abc import Iterable

from srift.errors import InvalidInput

SEPARATOR = "+"
RING_RULE = (
    "a mixed ring's types, each once, joined by '+' (stored sorted: tb.small+tb.large is tb.large+tb.small)"
)
"""The rule as the API schema's field descriptions and the CLI help state it."""


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
    store samples under a ring nobody probed."""
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
