"""/v1/bandwidth-models: list, train (from stored probe samples) and activate bus-bandwidth model versions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from srift.api.auth import RequireRead, RequireWrite
from srift.api.deps import SessionDep, SettingsDep
from srift.api.schemas.bandwidth import BandwidthModelList, BandwidthModelOut, TrainRequest
from srift.api.schemas.types import NO_NUL
from srift.services import bandwidth_models as service
from srift.services.bandwidth_models import PRIOR_SOURCE, ModelVersion

router = APIRouter(tags=["bandwidth-models"])

ERRORS: dict[int | str, dict[str, str]] = {
    401: {"description": "a token is required"},
    403: {"description": "the token's scope is too low"},
    404: {
        "description": "unknown model version, or a training filter's provider or instance type that "
        "neither the catalog nor any stored probe sample names"
    },
    409: {"description": "no stored probe samples match the filters (nothing to train on yet)"},
    422: {"description": "invalid request"},
}

Version = Annotated[
    str,
    Path(min_length=1, max_length=64, pattern=NO_NUL, description="a version from GET /v1/bandwidth-models"),
]


def _out(v: ModelVersion) -> BandwidthModelOut:
    """The API's view of a model version: its fields of the same names (metrics as ModelMetrics)."""
    return BandwidthModelOut.model_validate(v, from_attributes=True)


@router.get("/bandwidth-models", response_model=BandwidthModelList, responses=ERRORS)
def list_models(session: SessionDep, _: RequireRead) -> BandwidthModelList:
    """Every model version, newest first, and which one serves predictions."""
    versions = service.list_versions(session=session)
    active = next((v.version for v in versions if v.is_active), None)
    return BandwidthModelList(active=active, prior=PRIOR_SOURCE, models=[_out(v) for v in versions])


@router.post(
    "/bandwidth-models",
    response_model=BandwidthModelOut,
    status_code=status.HTTP_201_CREATED,
    responses=ERRORS,
)
def train_model(
    body: TrainRequest, session: SessionDep, settings: SettingsDep, _: RequireWrite
) -> BandwidthModelOut:
    """Train a new version on the stored probe samples matching the filters (takes seconds)."""
    version = service.train(
        session=session,
        settings=settings,
        providers=body.providers,
        instance_types=body.instance_types,
        backends=body.backends,
        activate_it=body.activate,
        seed=body.seed,
        tune=body.tune,
    )
    return _out(version)


@router.post("/bandwidth-models/{version}/activate", response_model=BandwidthModelOut, responses=ERRORS)
def activate_model(version: Version, session: SessionDep, _: RequireWrite) -> BandwidthModelOut:
    """Make VERSION the model predictions use; activating an older version rolls back."""
    return _out(service.activate(session=session, version=version))
