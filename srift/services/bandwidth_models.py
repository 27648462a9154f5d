"""Bus-bandwidth model versions as an application service: list, train on stored samples, activate."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from srift.bandwidth import registry
from srift.bandwidth.prior import SOURCE as PRIOR_SOURCE
from srift.bandwidth.records import SampleQuery
from srift.bandwidth.registry import ModelVersion
from srift.errors import NotFound
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

    A provider that neither the catalog nor any stored sample names is NotFound on `providers[i]` (a typo,
    or a cloud Srift has no data of), not the Conflict of a known provider that has no samples yet.
    """
    wanted = tuple(p.lower() for p in providers)
    _check_providers(session, wanted)
    query = SampleQuery(
        providers=wanted,
        instance_types=tuple(instance_types),
        backends=tuple(b.lower() for b in backends),
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
    for i, provider in enumerate(providers):
        if provider not in known:
            raise NotFound(
                f"unknown provider {provider!r}: neither the catalog nor the stored probe samples name it",
                hint=f"use one of: {', '.join(known) or 'none yet (load the catalog or store samples)'}; "
                "or leave `providers` out to train on every stored sample",
                field=f"providers[{i}]",
            )
