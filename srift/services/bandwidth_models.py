"""Bus-bandwidth model versions as an application service: list, train on stored samples, activate."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from srift.bandwidth import registry
from srift.bandwidth.prior import SOURCE as PRIOR_SOURCE
from srift.bandwidth.records import BACKENDS, SampleQuery
from srift.bandwidth.registry import ModelVersion
from srift.domain.rings import canonical_instance_type, ring_members
from srift.errors import InvalidInput, NotFound
from srift.settings import Settings

__all__ = ["PRIOR_SOURCE", "ModelVersion", "activate", "list_versions", "train"]


def list_versions(*, session: Session) -> list[ModelVersion]:
    """Every model version, newest first."""
    return registry.list_versions(session=session)


def train(
    *,
    session: Session,
    settings: Settings,
    providers: Sequence[str],
    instance_types: Sequence[str],
    backends: Sequence[str],
    activate_it: bool,
    seed: int,
    tune: bool,
) -> ModelVersion:
    """Train a new version on the stored probe samples matching the filters (empty: all).

    A provider (instance type) that neither the catalog nor any stored sample names is NotFound on
    `providers[i]` (`instance_types[i]`): a typo, or a cloud or type Srift has no data of, not the Conflict
    of a known one that has no samples yet. A mixed ring's name ("a+b", in any order) selects that ring's
    samples and its types' own (what the ring is measured against, `srift.bandwidth.samples.load_samples`);
    it is recorded in its one spelling, and is NotFound when no stored sample names it (a ring is in no
    catalog). A backend outside BACKENDS is InvalidInput on `backends[i]` (the API's schema refuses it
    first; `srift models train` calls this directly).
    """
    wanted = tuple(p.lower() for p in providers)
    _check_providers(session, wanted)
    names = _checked_instance_types(session, instance_types)
    query = SampleQuery(providers=wanted, instance_types=names, backends=_checked_backends(backends))
    return registry.train_version(
        session=session, settings=settings, query=query, activate_it=activate_it, seed=seed, tune=tune
    )


def activate(*, session: Session, version: str) -> ModelVersion:
    """Make `version` the model predictions use (activating an older one rolls back)."""
    return registry.activate(session=session, version=version)


def _check_providers(session: Session, providers: Sequence[str]) -> None:
    """Refuse the first provider unknown to both the catalog and the stored samples, listing the known."""
    if not providers:
        return
    from srift.bandwidth.samples import sample_providers
    from srift.catalog.store import known_providers

    known = sorted(set(known_providers(session)) | set(sample_providers(session=session)))
    listed = ", ".join(known) or "none yet (load the catalog or store samples)"
    _refuse_unknown(
        providers, known, what="provider", field="providers", hint=lambda _: f"use one of: {listed}"
    )


def _checked_instance_types(session: Session, instance_types: Sequence[str]) -> tuple[str, ...]:
    """The names as the samples store them (a mixed ring's types sorted; InvalidInput on `instance_types[i]`
    for a ring naming a type twice). Refuses the first type unknown to both the catalog and the stored
    samples, with the closest known names (a mixed ring's samples name each of its types), and a ring no
    stored sample names: NotFound on `instance_types[i]` naming the unknown member, or the unprobed ring."""
    names = tuple(
        canonical_instance_type(name, field=f"instance_types[{i}]") for i, name in enumerate(instance_types)
    )
    if not names:
        return names
    import difflib

    from srift.bandwidth.samples import sample_instance_types, sample_ring_names
    from srift.catalog.store import known_instance_types

    known = sorted(set(known_instance_types(session)) | set(sample_instance_types(session=session)))
    rings = set(sample_ring_names(session=session))

    def hint(name: str) -> str:
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
        where = f"did you mean {', '.join(close)}? " if close else ""
        return f"{where}list the catalog's with `srift catalog list` (GET /v1/instance-types)"

    for i, name in enumerate(names):
        members = ring_members(name)
        for member in members:
            if member not in known:
                raise _unknown(member, what="instance type", field="instance_types", at=i, hint=hint(member))
        if len(members) > 1 and name not in rings:
            raise NotFound(
                f"no stored probe sample is of the mixed ring {name!r}",
                hint=f"store the ring's samples first (`srift probe import FILE --instance-type {name}`, or "
                f"a probe job of the ring), or list its types alone ({', '.join(members)}); or leave "
                "`instance_types` out to train on every stored sample",
                field=f"instance_types[{i}]",
            )
    return names


def _refuse_unknown(
    names: Sequence[str], known: Sequence[str], *, what: str, field: str, hint: Callable[[str], str]
) -> None:
    """NotFound on `field[i]` for the first of `names` not in `known` (the catalog's and the stored samples'
    names), with `hint(name)` and the way out: leave the filter out."""
    for i, name in enumerate(names):
        if name not in known:
            raise _unknown(name, what=what, field=field, at=i, hint=hint(name))


def _unknown(name: str, *, what: str, field: str, at: int, hint: str) -> NotFound:
    """The NotFound on `field[at]` for `name`, which neither the catalog nor the stored samples name."""
    return NotFound(
        f"unknown {what} {name!r}: neither the catalog nor the stored probe samples name it",
        hint=f"{hint}; or leave `{field}` out to train on every stored sample",
        field=f"{field}[{at}]",
    )


def _checked_backends(backends: Sequence[str]) -> tuple[str, ...]:
    """The backends lowercased; InvalidInput on `backends[i]` for the first that is not one of BACKENDS."""
    wanted = tuple(b.lower() for b in backends)
    for i, backend in enumerate(wanted):
        if backend not in BACKENDS:
            raise InvalidInput(
                f"unknown backend {backends[i]!r}",
                hint=f"use one of {', '.join(BACKENDS)}; or leave `backends` out to train on every stored "
                "sample",
                field=f"backends[{i}]",
            )
    return wanted
