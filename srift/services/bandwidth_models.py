"""Bus-bandwidth model versions as an application service: list, train on stored samples, activate."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from srift.bandwidth import registry
from srift.bandwidth.prior import SOURCE as PRIOR_SOURCE
from srift.bandwidth.records import SampleQuery
from srift.bandwidth.registry import ModelVersion
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
    """Train a new version on the stored probe samples matching the filters (empty: all)."""
    query = SampleQuery(
        providers=tuple(p.lower() for p in providers),
        instance_types=tuple(instance_types),
        backends=tuple(b.lower() for b in backends),
    )
    return registry.train_version(
        session=session, settings=settings, query=query, activate_it=activate_it, seed=seed, tune=tune
    )


def activate(*, session: Session, version: str) -> ModelVersion:
    """Make `version` the model predictions use (activating an older one rolls back)."""
    return registry.activate(session=session, version=version)
