"""Bandwidth model registry: versions (DB rows + artifact folders), training, activation, the active model.

A version is a row in `bandwidth_models` (training-data query, hyperparameters, metrics) plus a folder
`<models_dir>/<version>/` holding `small.json` and `large.json` (XGBoost boosters) and `metadata.json`
(format, source, date, metrics, encoder). Activating a version deactivates the others; rolling back is
activating an older one. `active_model` answers with the active learned model for instance types it was
trained on and with the α-β prior for the rest; each BandwidthEstimate.source says which
("xgb:<version>" or "prior:alpha-beta"). Shipped versions live in the repository's `models/` folder and are
registered (with their raw samples) by `load_shipped_models` when the service starts.
"""

from __future__ import annotations

import datetime as dt
import functools
import gzip
import json
import logging
import secrets
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from srift.bandwidth.features import size_class
from srift.bandwidth.mixed import (
    MixedRingTable,
    is_mixed,
    measure_mixed_rings,
    rings_from_metrics,
    rings_to_metrics,
)
from srift.bandwidth.prior import AlphaBetaPrior, check_request
from srift.bandwidth.records import ProbeRecord, SampleQuery, parse_jsonl
from srift.bandwidth.samples import load_samples, store_samples
from srift.db.session import transaction
from srift.db.tables import BandwidthModelRow
from srift.domain import BandwidthEstimate, BusBandwidthModel, InstanceType
from srift.domain.bandwidth import AnswersBusbw, BusbwQuery, Collective
from srift.domain.host import HostFacts
from srift.domain.network import DEFAULT_NETWORK, NetworkSpec
from srift.errors import Conflict, EnvironmentProblem, NotFound
from srift.settings import REPO_ROOT, Settings

if TYPE_CHECKING:
    from srift.bandwidth.learner import BusBandwidthRegressor

log = logging.getLogger("srift.bandwidth")

FORMAT = "srift-bandwidth-model/1"
SOURCE_PREFIX = "xgb:"
METADATA = "metadata.json"
SHIPPED_SAMPLES = "samples.jsonl.gz"


@dataclass(frozen=True, slots=True)
class ModelVersion:
    """One registered model version as stored."""

    version: str
    source: str
    created_at: dt.datetime
    is_active: bool
    training_query: dict[str, Any]
    hyperparams: dict[str, Any]
    metrics: dict[str, Any]
    artifact_dir: str

    @property
    def covers(self) -> list[str]:
        """ "provider/instance_type" keys the model was trained on (others get the prior)."""
        return [str(c) for c in self.training_query.get("covers", [])]


def _version_of(row: BandwidthModelRow) -> ModelVersion:
    return ModelVersion(
        version=row.version,
        source=SOURCE_PREFIX + row.version,
        created_at=row.created_at,
        is_active=row.is_active,
        training_query=dict(row.training_query or {}),
        hyperparams=dict(row.hyperparams or {}),
        metrics=dict(row.metrics or {}),
        artifact_dir=row.artifact_dir,
    )


def _new_version(now: dt.datetime) -> str:
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def list_versions(*, session: Session) -> list[ModelVersion]:
    """Every version, newest first."""
    rows = session.scalars(
        select(BandwidthModelRow).order_by(BandwidthModelRow.created_at.desc(), BandwidthModelRow.id.desc())
    )
    return [_version_of(r) for r in rows]


def _row(session: Session, version: str) -> BandwidthModelRow:
    row = session.scalars(select(BandwidthModelRow).where(BandwidthModelRow.version == version)).first()
    if row is None:
        known = [v.version for v in list_versions(session=session)][:5]
        raise NotFound(
            f"no bandwidth model version {version!r}",
            hint=f"pick one of {known} (`srift models list`)"
            if known
            else "train one with `srift models train`",
            field="version",
        )
    return row


def get_version(*, session: Session, version: str) -> ModelVersion:
    return _version_of(_row(session, version))


def activate(*, session: Session, version: str) -> ModelVersion:
    """Make `version` the one predictions use (and every other inactive); rollback = activate an older one."""
    row = _row(session, version)
    session.execute(update(BandwidthModelRow).where(BandwidthModelRow.id != row.id).values(is_active=False))
    row.is_active = True
    session.flush()
    return _version_of(row)


def active_version(*, session: Session) -> ModelVersion | None:
    row = session.scalars(
        select(BandwidthModelRow).where(BandwidthModelRow.is_active).order_by(BandwidthModelRow.id.desc())
    ).first()
    return None if row is None else _version_of(row)


def train_version(
    *,
    session: Session,
    settings: Settings,
    query: SampleQuery = SampleQuery(),
    activate_it: bool = False,
    seed: int = 0,
    grid: Sequence[dict[str, Any]] | None = None,
    tune: bool = True,
    origin: str = "trained",
) -> ModelVersion:
    """Train a new version on the stored samples matching `query`, write its artifacts, register it.

    `tune=False` skips the hyperparameter search (the learner's defaults; a quick retrain).
    """
    from srift.bandwidth.learner import DEFAULT_XGB_PARAMS
    from srift.bandwidth.tuning import DEFAULT_GRID, tune_and_fit

    found = load_samples(session=session, query=query)
    records = [r for r in found if not is_mixed(r)]
    rings = measure_mixed_rings(found)
    if not records:
        raise Conflict(
            f"no stored probe samples match {query.to_dict()}",
            hint="store samples first (`srift probe run --store`, `srift probe import`, or a probe job), "
            "or loosen the filters",
        )
    if not tune:
        grid = [dict(DEFAULT_XGB_PARAMS)]
    model, report = tune_and_fit(records, seed=seed, grid=grid or DEFAULT_GRID)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    version = _new_version(now)
    covers = sorted(f"{p}/{t}" for p, t in model.hosts_)
    training_query = {**query.to_dict(), "n_samples": len(records), "covers": covers}
    metrics = report.metrics()
    if rings:
        metrics["mixed_rings"] = rings_to_metrics(rings)
        training_query["n_mixed_samples"] = len(found) - len(records)
    directory = Path(settings.models_dir) / version
    try:
        write_artifacts(
            directory,
            model=model,
            version=version,
            created_at=now,
            training_query=training_query,
            hyperparams=report.hyperparams(),
            metrics=metrics,
            origin=origin,
        )
        row = BandwidthModelRow(
            version=version,
            created_at=now.replace(tzinfo=None),
            is_active=False,
            training_query=training_query,
            hyperparams=report.hyperparams(),
            metrics=metrics,
            artifact_dir=str(directory.resolve()),
        )
        session.add(row)
        session.flush()
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    if activate_it:
        return activate(session=session, version=version)
    return _version_of(row)


def write_artifacts(
    directory: Path,
    *,
    model: BusBandwidthRegressor,
    version: str,
    created_at: dt.datetime,
    training_query: dict[str, Any],
    hyperparams: dict[str, Any],
    metrics: dict[str, Any],
    origin: str,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write boosters and metadata.json into `directory` (created; must not exist yet)."""
    import xgboost

    try:
        directory.mkdir(parents=True, exist_ok=False)
    except FileExistsError as exc:
        raise EnvironmentProblem(f"{directory} already exists", hint="remove it or train again") from exc
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot create {directory} ({exc.strerror})", hint="set SRIFT_MODELS_DIR to a writable folder"
        ) from exc
    learner = model.save(directory)
    metadata = {
        "format": FORMAT,
        "version": version,
        "source": SOURCE_PREFIX + version,
        "created_at": created_at.isoformat(),
        "origin": origin,
        "training_query": training_query,
        "hyperparams": hyperparams,
        "metrics": metrics,
        "learner": learner,
        "xgboost_version": xgboost.__version__,
        "units": "busbw_gbps: allreduce bus bandwidth 2s(n-1)/(n t) in gigabits/s",
        **(extra or {}),
    }
    (directory / METADATA).write_text(json.dumps(metadata, indent=1, sort_keys=True) + "\n")


# -- loading and predicting --------------------------------------------------------------------------------

_cache: dict[tuple[str, str, str], BusBandwidthRegressor] = {}
_cache_lock = threading.Lock()
# Predictions are pure functions of (version, request): the simulator asks the same questions many times.
_predictions: dict[tuple[Any, ...], BandwidthEstimate] = {}
_MAX_CACHED_PREDICTIONS = 50_000


def _artifact_candidates(artifact_dir: str, version: str, models_dir: Path) -> list[Path]:
    """Where a version's artifacts may be, in order: the folder it was trained into, the settings' models
    folder (a data folder moved or restored elsewhere, e.g. a validation run's work folder unpacked from an
    archive, keeps its versions there while its database still names the old path), then the shipped
    models/ folders (a moved checkout or container)."""
    return [
        Path(artifact_dir),
        Path(models_dir) / version,
        *(base / version for base in shipped_models_dirs()),
    ]


def _load_regressor(artifact_dir: str, version: str, models_dir: Path) -> BusBandwidthRegressor:
    key = (artifact_dir, version, str(models_dir))
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    from srift.bandwidth.learner import BusBandwidthRegressor

    candidates = _artifact_candidates(artifact_dir, version, models_dir)
    directory = next((c for c in candidates if (c / METADATA).is_file()), Path(artifact_dir))
    try:
        metadata = json.loads((directory / METADATA).read_text())
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem(
            f"the artifacts of bandwidth model {version} are missing or unreadable in {directory}",
            hint="activate another version (`srift models list`) or retrain with `srift models train`",
        ) from exc
    if metadata.get("format") != FORMAT:
        raise EnvironmentProblem(
            f"{directory / METADATA} has format {metadata.get('format')!r}, expected {FORMAT!r}",
            hint="retrain the model with this version of srift",
        )
    regressor = BusBandwidthRegressor.load(directory, metadata["learner"])
    with _cache_lock:
        _cache[key] = regressor
    return regressor


class LearnedBandwidthModel(AnswersBusbw):
    """A trained version answering for the instance types it covers; the prior answers for the rest.

    `regressor` may be a loader (a callable): the boosters (and scikit-learn/XGBoost, seconds to import)
    are then loaded only when a covered type is asked for; which types are covered comes from the
    version's record (`training_query.covers`) until then.
    """

    def __init__(
        self,
        regressor: BusBandwidthRegressor | Callable[[], BusBandwidthRegressor],
        *,
        version: ModelVersion,
        prior: AlphaBetaPrior | None = None,
    ) -> None:
        self._regressor = None if callable(regressor) else regressor
        self._loader = regressor if callable(regressor) else None
        self._covered = {tuple(c.split("/", 1)) for c in version.covers if "/" in c}
        self.version = version
        self.source = version.source
        self.prior = prior or AlphaBetaPrior()
        metrics = version.metrics
        self._cv_small = float(metrics.get("residual_cv_small") or 0.0)
        self._cv_large = float(metrics.get("residual_cv_large") or 0.0)
        self._cv_by_size = {int(k): float(v) for k, v in (metrics.get("residual_cv_by_size") or {}).items()}
        self.mixed_rings = MixedRingTable(rings_from_metrics(metrics.get("mixed_rings")))

    def _residual_at(self, buffer_bytes: int, *, mtu: int) -> float:
        """The out-of-fold error spread of the size's class, else its half's (below / at or above the MTU);
        sizes beyond the probed classes take the nearest class's."""
        if self._cv_by_size:
            klass = size_class(buffer_bytes)
            nearest = min(self._cv_by_size, key=lambda k: (abs(k - klass), k))
            return self._cv_by_size[nearest]
        return self._cv_large if buffer_bytes >= mtu else self._cv_small

    @property
    def regressor(self) -> BusBandwidthRegressor:
        if self._regressor is None:
            assert self._loader is not None
            self._regressor = self._loader()
        return self._regressor

    def _trained_on(self, instance: InstanceType) -> bool:
        key = (instance.provider, instance.name)
        if self._regressor is None and self._covered:
            return key in self._covered
        return key in self.regressor.hosts_

    def covers(self, instance: InstanceType) -> bool:
        """True when this version answers for `instance`: trained on it, no measured rate overriding."""
        return self._trained_on(instance) and instance.name not in self.prior.network.measured_gbps

    def shares_host_pcie(self, instance: InstanceType) -> bool:
        return not self.covers(instance) and self.prior.shares_host_pcie(instance)

    def mixed_ring_factors(
        self, *, instances: Sequence[InstanceType], nodes: int, buffer_bytes: Sequence[int]
    ) -> list[float] | None:
        """Per size, what a ring of these types on `nodes` VMs measured against its slowest type alone (at
        most 1; `srift.bandwidth.mixed`); None for one type, types of several providers, or a ring this
        version has no probe of."""
        providers = {i.provider for i in instances}
        if len(providers) != 1 or not self.mixed_rings:
            return None
        return self.mixed_rings.factors(providers.pop(), [i.name for i in instances], nodes, buffer_bytes)

    def predict_rings(
        self, *, instance: InstanceType, nodes: Sequence[int], buffer_bytes: Sequence[int]
    ) -> np.ndarray | None:
        """The prior's batched ring answers (AlphaBetaPrior.predict_rings) for a type this version does not
        cover, as `predict` gives them; None for a covered type (ask `predict` n by n)."""
        if self.covers(instance):
            return None
        return self.prior.predict_rings(instance=instance, nodes=nodes, buffer_bytes=buffer_bytes)

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        """`collective`'s bus bandwidth: the prior's for types this version does not cover; for covered
        ones this version's allreduce answer stands in (it was trained on allreduce probes only;
        srift.bandwidth.collectives says why the bus bandwidths agree)."""
        if query.world_size < 2 or not self.covers(query.instance):
            return query.ask_collective(self.prior, collective)
        return super().answer_collective(collective, query)

    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        instance, world_size, nodes = query.instance, query.world_size, query.nodes
        async_count = query.async_count
        buffer_bytes = query.buffer_bytes
        profile: HostFacts | None = None
        if world_size >= 2 and self.covers(instance):
            profile = self.regressor.hosts_.get((instance.provider, instance.name))
        if profile is None:
            return query.ask(self.prior)
        key: tuple[Any, ...] = (self.version.version, instance.provider, instance.name, world_size, nodes)
        key += (async_count, *buffer_bytes)
        with _cache_lock:
            cached = _predictions.get(key)
        if cached is not None:
            return cached
        sizes = check_request(
            world_size=world_size, nodes=nodes, buffer_bytes=buffer_bytes, async_count=async_count
        )
        if not sizes.size:
            return BandwidthEstimate(busbw_gbps=(), source=self.source, residual_cv=self._cv_large)
        unique, inverse = np.unique(sizes, return_inverse=True)
        busbw = self.regressor.predict_host(
            profile, sizes=unique, world_size=world_size, nodes=nodes, async_count=async_count
        )[inverse]
        mtu = self.regressor.mtu_bytes_.get(instance.provider, self.regressor.default_mtu_bytes_)
        cv = self._cv_large if np.any(sizes >= mtu) else self._cv_small
        estimate = BandwidthEstimate(
            busbw_gbps=tuple(float(b) for b in busbw),
            source=self.source,
            residual_cv=cv,
            residual_cvs=tuple(self._residual_at(int(b), mtu=mtu) for b in sizes),
        )
        with _cache_lock:
            if len(_predictions) >= _MAX_CACHED_PREDICTIONS:
                _predictions.clear()
            _predictions[key] = estimate
        return estimate


def model_version(
    *, session: Session, settings: Settings, version: str, network: NetworkSpec = DEFAULT_NETWORK
) -> BusBandwidthModel:
    """The model of one version (prior fallback for types it does not cover); NotFound if unknown."""
    found = get_version(session=session, version=version)
    return LearnedBandwidthModel(
        _load_regressor(found.artifact_dir, found.version, settings.models_dir),
        version=found,
        prior=AlphaBetaPrior(network=network),
    )


def _artifacts_present(found: ModelVersion, models_dir: Path) -> bool:
    candidates = _artifact_candidates(found.artifact_dir, found.version, models_dir)
    return any((c / METADATA).is_file() for c in candidates)


def active_model(
    *, session: Session, settings: Settings, network: NetworkSpec = DEFAULT_NETWORK
) -> BusBandwidthModel:
    """The active learned model (prior fallback per instance type), or the prior when none is active.

    `network` holds the request's transport assumptions and measured rates; the prior follows them, and a
    measured rate for a type overrides the learned model for that type too.
    """
    prior = AlphaBetaPrior(network=network)
    found = active_version(session=session)
    if found is None:
        return prior
    if found.covers and _artifacts_present(found, settings.models_dir):
        # loaded on first use: a request about types the version does not cover never imports XGBoost
        return LearnedBandwidthModel(
            lambda: _load_regressor(found.artifact_dir, found.version, settings.models_dir),
            version=found,
            prior=prior,
        )
    try:
        return LearnedBandwidthModel(
            _load_regressor(found.artifact_dir, found.version, settings.models_dir),
            version=found,
            prior=prior,
        )
    except EnvironmentProblem as exc:
        log.warning("using the α-β prior: %s", exc)
        return prior


# -- shipped models ----------------------------------------------------------------------------------------


def shipped_models_dirs() -> list[Path]:
    """Where shipped models may be: the repository's models/ (source checkout) or ./models (container)."""
    seen: list[Path] = []
    for candidate in (REPO_ROOT / "models", Path.cwd() / "models"):
        resolved = candidate.resolve()
        if resolved.is_dir() and resolved not in seen:
            seen.append(resolved)
    return seen


def _shipped(directories: Sequence[Path]) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for base in directories:
        for meta_path in sorted(base.glob(f"*/{METADATA}")):
            try:
                metadata = json.loads(meta_path.read_text())
            except (OSError, ValueError):
                log.warning("skipping unreadable %s", meta_path)
                continue
            if metadata.get("format") == FORMAT and metadata.get("origin") == "shipped":
                found.append((meta_path.parent, metadata))
    return found


def _shipped_samples(path: Path) -> tuple[ProbeRecord, ...]:
    """The probe samples of a shipped model's gzipped JSON-lines file, parsed once per process for as long
    as the file is unchanged (each new database a process prepares stores them again: tests, `srift plan`
    on a fresh data folder after another)."""
    stat = path.stat()
    return _parsed_samples(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _parsed_samples(path: str, _mtime_ns: int, _size: int) -> tuple[ProbeRecord, ...]:
    text = gzip.decompress(Path(path).read_bytes()).decode()
    return tuple(parse_jsonl(text, source=path))


def register_shipped(*, session: Session, directories: Sequence[Path] | None = None) -> list[str]:
    """Register shipped versions not yet in the database, with their raw samples; activate the newest when
    none is active. Idempotent. Returns the versions registered now.

    A version already registered is skipped whole: its samples were stored in the transaction that added
    its row, so every start-up (each local `srift plan` runs one) does not parse them again."""
    shipped = _shipped(shipped_models_dirs() if directories is None else directories)
    added: list[str] = []
    for directory, metadata in shipped:
        version = str(metadata["version"])
        exists = session.scalars(
            select(BandwidthModelRow.id).where(BandwidthModelRow.version == version)
        ).first()
        if exists is not None:
            continue
        samples = directory / SHIPPED_SAMPLES
        if samples.exists():
            store_samples(session=session, records=_shipped_samples(samples), origin="shipped")
        session.add(
            BandwidthModelRow(
                version=version,
                created_at=dt.datetime.fromisoformat(metadata["created_at"]).replace(tzinfo=None),
                is_active=False,
                training_query=metadata.get("training_query", {}),
                hyperparams=metadata.get("hyperparams", {}),
                metrics=metadata.get("metrics", {}),
                artifact_dir=str(directory),
            )
        )
        session.flush()
        added.append(version)
    if shipped and active_version(session=session) is None:
        newest = max(shipped, key=lambda item: str(item[1]["created_at"]))
        activate(session=session, version=str(newest[1]["version"]))
    return added


def load_shipped_models(settings: Settings) -> None:
    """Start-up hook (srift.bootstrap): register the shipped models in the service's database."""
    with transaction(settings.resolved_database_url) as session:
        added = register_shipped(session=session)
    if added:
        log.info("registered shipped bandwidth models: %s", ", ".join(added))
