"""Bus-bandwidth model versions as an application service: list, train on stored samples, activate."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from srift.bandwidth import registry
from srift.bandwidth.prior import SOURCE as PRIOR_SOURCE
from srift.bandwidth.records import BACKENDS, SampleQuery
from srift.bandwidth.registry import ModelVersion
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
    of a known one that has no samples yet. A backend outside BACKENDS is InvalidInput on `backends[i]`
    (the API's schema refuses it first; `srift models train` calls this directly).
    """
    wanted = tuple(p.lower() for p in providers)
    _check_providers(session, wanted)
    _check_instance_types(session, instance_types)
    query = SampleQuery(
        providers=wanted,
        instance_types=tuple(instance_types),
        backends=_checked_backends(backends),
    )
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


def _check_instance_types(session: Session, instance_types: Sequence[str]) -> None:
    """Refuse the first instance type unknown to both the catalog and the stored samples, with the closest
    known names (a mixed ring's samples name each of its types)."""
    if not instance_types:
        return
    import difflib

    from srift.bandwidth.samples import sample_instance_types
    from srift.catalog.store import known_instance_types

    known = sorted(set(known_instance_types(session)) | set(sample_instance_types(session=session)))

    def hint(name: str) -> str:
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
        where = f"did you mean {', '.join(close)}? " if close else ""
        return f"{where}list the catalog's with `srift catalog list` (GET /v1/instance-types)"

    _refuse_unknown(instance_types, known, what="instance type", field="instance_types", hint=hint)


def _refuse_unknown(
    names: Sequence[str], known: Sequence[str], *, what: str, field: str, hint: Callable[[str], str]
) -> None:
    """NotFound on `field[i]` for the first of `names` not in `known` (the catalog's and the stored samples'
    names), with `hint(name)` and the way out: leave the filter out."""
    for i, name in enumerate(names):
        if name not in known:
            raise NotFound(
                f"unknown {what} {name!r}: neither the catalog nor the stored probe samples name it",
                hint=f"{hint(name)}; or leave `{field}` out to train on every stored sample",
                field=f"{field}[{i}]",
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
