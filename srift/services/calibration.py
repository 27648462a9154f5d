"""Predictions that learn from runs: measured iteration times stored against the plan that predicted them,
corrections per model, instance type and network setting, and the hooks that apply them.

A training run's helper reports each step's iteration time (`record_iterations`, idempotent per step). When
the run completes, reports its last step, or is interrupted, its steps become one observation of the
prediction that planned it (`observe_run`, srift.domain.correction for the maths), and the corrections of
every instance type in its fleet are refitted from all their observations since their last reset. Later
predictions and plans for the same model and network setting go through `CorrectionTable.apply`, which
scales the compute and communication terms, says "calibrated on N runs" in the prediction's sources, and
narrows the band only as far as the evidence allows. Nothing here is fitted to validation outcomes: the
observations are the user's own runs (and `srift validate` cases recorded through `record_observation`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from srift.db.tables import (
    CalibrationObservation,
    CorrectionRow,
    ModelProfileRow,
    PlanRow,
    RunIteration,
    TrainingJob,
    utcnow,
)
from srift.domain import Band, FleetMember, Prediction
from srift.domain.correction import (
    Correction,
    Observation,
    for_fleet,
    network_key,
    summarize_steps,
    term_shares,
)
from srift.domain.correction import corrected as corrected_prediction
from srift.domain.correction import fit as fit_correction
from srift.domain.network import NetworkSpec
from srift.errors import Conflict, InvalidInput, NotFound

DEFAULT_PRIOR_SIGMA = 0.21
"""The prior's spread when a plan recorded no band: the bandwidth prior's measured residual for large
buffers over TCP (srift.bandwidth.prior.TCP_RESIDUAL_CV["large"], Srift Table 2)."""

MAX_STEPS_PER_REPORT = 10_000


@dataclass(frozen=True, slots=True)
class CorrectionEntry:
    """One stored correction: its key, the posterior, and the observations it rests on."""

    model: str
    instance_type: str
    network_key: str
    correction: Correction
    observation_ids: tuple[int, ...]
    updated_at: Any

    def document(self) -> dict[str, Any]:
        c = self.correction
        return {
            "model": self.model,
            "instance_type": self.instance_type,
            "network_key": self.network_key,
            "runs": len(self.observation_ids),
            "weight": c.runs,
            "compute_factor": c.factors[0],
            "comm_factor": c.factors[1],
            "log_mean": list(c.mean),
            "log_cov": [list(r) for r in c.cov],
            "prior_sigma": c.prior_sigma,
            "between_sigma": math.sqrt(c.between_variance),
            "observation_ids": list(self.observation_ids),
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class CorrectionTable:
    """Every type's correction for one model and network setting, ready to apply to predictions."""

    model: str
    network_key: str
    entries: Mapping[str, CorrectionEntry] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.entries

    def min_factor(self) -> float:
        """The smallest factor any correction applies (≤ 1): how far below the uncorrected compute floor
        and bounds a corrected prediction may go."""
        low = [min(e.correction.factors) for e in self.entries.values()]
        return min([1.0, *low])

    def apply(self, prediction: Prediction, shares: Mapping[str, float]) -> Prediction:
        """`prediction` for a fleet whose ranks are `shares` (type → share), corrected (unchanged when no
        type of the fleet has a correction)."""
        if self.empty:
            return prediction
        compute, comm = term_shares(prediction.breakdown)
        total = compute + comm
        if total <= 0:
            return prediction
        ids = {i for t in shares if t in self.entries for i in self.entries[t].observation_ids}
        fleet = for_fleet(
            {t: e.correction for t, e in self.entries.items()},
            shares,
            x=(compute / total, comm / total),
            runs=len(ids),
        )
        return prediction if fleet is None else corrected_prediction(prediction, fleet)

    def band(self, band: Band, prediction: Prediction, shares: Mapping[str, float]) -> Band:
        """The calibrated band of a fleet (for evaluators that compute bands apart from predictions)."""
        return self.apply(Prediction(**{**_fields(prediction), "band": band}), shares).band or band


def _fields(prediction: Prediction) -> dict[str, Any]:
    return {name: getattr(prediction, name) for name in prediction.__dataclass_fields__}


def calibration_sources(prediction: Prediction) -> list[str]:
    """The "calibration: calibrated on N runs ..." lines of a prediction's sources."""
    return [s for s in prediction.sources if s.startswith("calibration: ")]


def network_key_of(network: NetworkSpec | Mapping[str, Any] | None) -> str:
    """The correction key of a network setting (a NetworkSpec or a request's `network` document)."""
    if isinstance(network, NetworkSpec):
        return network_key(
            transport=network.transport.value,
            library=network.library.value,
            placement_group=network.placement_group,
            flows_per_peer=network.flows_per_peer,
            ena_visible=network.ena_visible,
        )
    doc = network or {}
    flows = doc.get("flows_per_peer")
    return network_key(
        transport=str(doc.get("transport") or "tcp"),
        library=str(doc.get("library") or "nccl"),
        placement_group=bool(doc.get("placement_group")),
        flows_per_peer=flows if isinstance(flows, int) else None,
        ena_visible=doc.get("ena_visible"),
    )


def fleet_shares(fleet: Sequence[FleetMember]) -> dict[str, float]:
    """Each instance type's share of a fleet's ranks."""
    ranks: dict[str, float] = {}
    for m in fleet:
        ranks[m.instance.name] = ranks.get(m.instance.name, 0.0) + m.count * max(1, m.instance.devices)
    total = sum(ranks.values())
    return {t: r / total for t, r in ranks.items()}


def load_table(
    *, session: Session, model: str, network: NetworkSpec | Mapping[str, Any] | None
) -> CorrectionTable:
    """The corrections stored for `model` under `network`."""
    key = network_key_of(network)
    rows = session.scalars(
        select(CorrectionRow).where(CorrectionRow.model == model, CorrectionRow.network_key == key)
    ).all()
    entries = {row.instance_type: _entry(row) for row in rows if row.state.get("observation_ids")}
    return CorrectionTable(model, key, entries)


def _entry(row: CorrectionRow) -> CorrectionEntry:
    s = row.state
    cov = s.get("cov") or [[0.0, 0.0], [0.0, 0.0]]
    correction = Correction(
        mean=(float(s.get("mean", [0, 0])[0]), float(s.get("mean", [0, 0])[1])),
        cov=((float(cov[0][0]), float(cov[0][1])), (float(cov[1][0]), float(cov[1][1]))),
        runs=float(row.runs),
        prior_sigma=float(s.get("prior_sigma", 0.0)),
        between_variance=float(s.get("between_variance", 0.0)),
    )
    return CorrectionEntry(
        row.model,
        row.instance_type,
        row.network_key,
        correction,
        tuple(int(i) for i in s.get("observation_ids", [])),
        row.updated_at,
    )


# Recording measurements ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredSteps:
    """What storing a report did: new steps stored, repeats ignored, and the steps now stored."""

    plan_id: int
    accepted: int
    duplicates: int
    steps_stored: int


def store_iterations(
    *,
    session: Session,
    job: TrainingJob,
    plan_id: int | None,
    steps: Sequence[tuple[int, float]],
    plan_ids: Sequence[int],
) -> StoredSteps:
    """Store a run's measured iteration times against `plan_id` (default: its current plan); a step
    already stored for the run and plan is ignored, so a report sent twice counts once."""
    pid = job.current_plan_id if plan_id is None else plan_id
    if pid not in plan_ids:
        raise Conflict(
            f"plan {pid} is not a plan of run {job.id}",
            hint=f"report against one of plans {', '.join(map(str, plan_ids))}",
            field="plan_id",
        )
    if len(steps) > MAX_STEPS_PER_REPORT:
        raise InvalidInput(
            f"{len(steps)} steps in one report", hint=f"send at most {MAX_STEPS_PER_REPORT}", field="steps"
        )
    wanted: dict[int, float] = {}
    for k, (step, seconds) in enumerate(steps):
        if step < 0 or not (seconds > 0 and math.isfinite(seconds)):
            raise InvalidInput(
                f"step {step} took {seconds} s",
                hint="steps are ≥ 0 and times finite and > 0",
                field=f"steps[{k}]",
            )
        wanted.setdefault(step, seconds)
    for attempt in range(2):
        have = set(
            session.scalars(
                select(RunIteration.step).where(
                    RunIteration.job_id == job.id,
                    RunIteration.plan_id == pid,
                    RunIteration.step.in_(list(wanted)),
                )
            ).all()
        )
        new = {s: t for s, t in wanted.items() if s not in have}
        try:
            with session.begin_nested():
                session.add_all(
                    RunIteration(job_id=job.id, plan_id=pid, step=s, iteration_s=t) for s, t in new.items()
                )
            break
        except IntegrityError:  # the same steps reported at once by two requests: keep the first
            if attempt:
                raise
    return StoredSteps(pid, len(new), len(steps) - len(new), len(_steps(session, job.id, pid)))


def _steps(session: Session, job_id: int, plan_id: int) -> list[float]:
    rows = session.execute(
        select(RunIteration.step, RunIteration.iteration_s)
        .where(RunIteration.job_id == job_id, RunIteration.plan_id == plan_id)
        .order_by(RunIteration.step)
    ).all()
    return [float(t) for _, t in rows]


def run_series(*, session: Session, job_id: int) -> list[dict[str, Any]]:
    """Per plan a run followed: its measured steps and the plan's predicted iteration (mean, p10, p90)."""
    rows = session.execute(
        select(RunIteration.plan_id, RunIteration.step, RunIteration.iteration_s)
        .where(RunIteration.job_id == job_id)
        .order_by(RunIteration.plan_id, RunIteration.step)
    ).all()
    out: dict[int, dict[str, Any]] = {}
    for pid, step, seconds in rows:
        if pid not in out:
            plan = session.get(PlanRow, pid)
            predicted = (plan.result.get("predicted") if plan is not None else None) or {}
            out[pid] = {
                "plan_id": pid,
                "predicted_s": predicted.get("iteration_s"),
                "predicted_p10_s": predicted.get("iteration_p10_s"),
                "predicted_p90_s": predicted.get("iteration_p90_s"),
                "steps": [],
            }
        out[pid]["steps"].append({"step": step, "iteration_s": seconds})
    return list(out.values())


# Observations and corrections ---------------------------------------------------------------------------


def plan_model(*, session: Session, plan: PlanRow) -> str | None:
    """The model a stored plan was made for."""
    block = plan.result.get("calibration") or {}
    if block.get("model"):
        return str(block["model"])
    request = plan.request
    if request.get("model"):
        return str(request["model"])
    if request.get("profile_ids"):
        row = session.get(ModelProfileRow, int(request["profile_ids"][0]))
        return row.model if row is not None else None
    profiles = request.get("profiles") or []
    return str(profiles[0].get("model")) if profiles and profiles[0].get("model") else None


def _raw_prediction(plan: PlanRow) -> tuple[float, float, float, float]:
    """(iteration_s, compute_s, comm_s, band sigma) of the plan's prediction before any correction."""
    raw = (plan.result.get("calibration") or {}).get("raw")
    if raw:
        return (
            float(raw["iteration_s"]),
            float(raw["compute_s"]),
            float(raw["comm_s"]),
            float(raw.get("sigma", 0.0)),
        )
    return _uncorrected_terms(plan.result["predicted"], plan.result.get("breakdown"))


def _uncorrected_terms(
    predicted: Mapping[str, Any], breakdown: Mapping[str, Any] | None
) -> tuple[float, float, float, float]:
    """(iteration_s, compute_s, comm_s, band sigma) of an uncorrected prediction and its breakdown: the
    compute term counts straggler waits and data stalls, the communication term what the network leaves
    exposed (the two terms a correction scales)."""
    bd = breakdown or {}
    compute = sum(float(bd.get(k) or 0.0) for k in ("compute_s", "straggler_wait_s", "data_stall_s"))
    comm = sum(float(bd.get(k) or 0.0) for k in ("exposed_intra_s", "exposed_network_s"))
    sigma = float((predicted.get("band") or {}).get("sigma") or 0.0)
    return float(predicted["iteration_s"]), compute, comm, sigma


def _plan_types(plan: PlanRow) -> dict[str, float]:
    from srift.launch.layout import layout_of

    layout = layout_of({**plan.result, "request": plan.request})
    ranks: dict[str, float] = {}
    for part in layout.parts:
        ranks[part.instance_type] = ranks.get(part.instance_type, 0.0) + part.count * part.procs_per_node
    total = sum(ranks.values())
    return {t: r / total for t, r in ranks.items()}


def observe_run(*, session: Session, job: TrainingJob, plan_id: int) -> dict[str, Any] | None:
    """Turn the run's measured steps under `plan_id` into an observation (replacing the one it already
    made, so a run counts once) and refit its types' corrections; None with too few steps."""
    summary = summarize_steps(_steps(session, job.id, plan_id))
    plan = session.get(PlanRow, plan_id)
    if summary is None or plan is None:
        return None
    model = plan_model(session=session, plan=plan)
    if model is None:
        return None
    predicted_s, compute_s, comm_s, sigma = _raw_prediction(plan)
    return record_observation(
        session=session,
        source=f"run {job.id}, plan {plan_id}",
        model=model,
        network=plan.request.get("network"),
        types=_plan_types(plan),
        predicted_s=predicted_s,
        compute_s=compute_s,
        comm_s=comm_s,
        measured_s=summary.mean_s,
        log_variance=summary.log_variance,
        prior_sigma=sigma,
        steps=summary.steps,
        job_id=job.id,
        plan_id=plan_id,
    )


def record_observation(
    *,
    session: Session,
    source: str,
    model: str,
    network: NetworkSpec | Mapping[str, Any] | None,
    types: Mapping[str, float],
    predicted_s: float,
    compute_s: float,
    comm_s: float,
    measured_s: float,
    log_variance: float,
    prior_sigma: float,
    steps: int,
    job_id: int | None = None,
    plan_id: int | None = None,
) -> dict[str, Any]:
    """Store one measured run against its prediction (by `source`, once: a second call replaces it) and
    refit the corrections of its types. `srift validate` records its cases through this as well."""
    if predicted_s <= 0 or measured_s <= 0:
        raise InvalidInput("predicted and measured times must be > 0", hint="report real timings")
    key = network_key_of(network)
    row = session.scalars(
        select(CalibrationObservation).where(CalibrationObservation.source == source)
    ).first()
    values = {
        "model": model,
        "network_key": key,
        "types": dict(types),
        "job_id": job_id,
        "plan_id": plan_id,
        "predicted_s": predicted_s,
        "compute_s": compute_s,
        "comm_s": comm_s,
        "measured_s": measured_s,
        "log_variance": log_variance,
        "prior_sigma": prior_sigma if prior_sigma > 0 else DEFAULT_PRIOR_SIGMA,
        "steps": steps,
    }
    if row is None:
        row = CalibrationObservation(source=source, **values)
        session.add(row)
    else:
        for name, value in values.items():
            setattr(row, name, value)
    session.flush()
    for instance_type in types:
        refit(session=session, model=model, instance_type=instance_type, network_key=key)
    return observation_document(row)


def record_validation_rows(
    *,
    session: Session,
    rows: Sequence[Mapping[str, Any]],
    network: NetworkSpec | Mapping[str, Any] | None,
    source: str,
) -> list[dict[str, Any]]:
    """`srift validate`'s scored cases (srift.validation.steps.run_matrix rows) as observations, one per
    case: the mean of its repeats' mean iterations against the case's prediction, with the repeats' own
    spread (the variance of their logs: what one more run may differ by) as its noise. Cases with fewer
    than two good repeats are skipped. `source` names the validation run (a case counts once)."""
    out = []
    for k, row in enumerate(rows):
        means = [float(r["mean_iter_s"]) for r in row.get("runs", []) if r.get("ok") and r.get("mean_iter_s")]
        predicted = row.get("predicted") or {}
        if len(means) < 2 or not predicted.get("iteration_s"):
            continue
        counts: dict[str, float] = {}
        for part in str(row["composition"]).split(" + "):
            n, _, name = part.partition("×")
            counts[name] = counts.get(name, 0.0) + float(n)
        total = sum(counts.values())
        predicted_s, compute_s, comm_s, sigma = _uncorrected_terms(predicted, predicted.get("breakdown"))
        out.append(
            record_observation(
                session=session,
                source=f"{source}: case {k} ({row['model']}, {row.get('fleet', row['composition'])})",
                model=str(row["model"]),
                network=network,
                types={t: n / total for t, n in counts.items()},
                predicted_s=predicted_s,
                compute_s=compute_s,
                comm_s=comm_s,
                measured_s=statistics.fmean(means),
                log_variance=statistics.variance([math.log(m) for m in means]),
                prior_sigma=sigma,
                steps=len(means),
            )
        )
    return out


def observation_document(row: CalibrationObservation) -> dict[str, Any]:
    return {
        "id": row.id,
        "source": row.source,
        "model": row.model,
        "network_key": row.network_key,
        "types": row.types,
        "predicted_s": row.predicted_s,
        "measured_s": row.measured_s,
        "error": row.predicted_s / row.measured_s - 1.0,
        "steps": row.steps,
    }


def _observation(row: CalibrationObservation, instance_type: str) -> Observation:
    total = row.compute_s + row.comm_s
    x = (row.compute_s / total, row.comm_s / total) if total > 0 else (1.0, 0.0)
    return Observation(
        compute_share=x[0],
        comm_share=x[1],
        log_ratio=math.log(row.measured_s / row.predicted_s),
        variance=row.log_variance,
        prior_sigma=row.prior_sigma,
        weight=float(row.types.get(instance_type, 0.0)),
    )


def refit(*, session: Session, model: str, instance_type: str, network_key: str) -> CorrectionEntry:
    """Recompute one correction from its observations since its last reset."""
    query = select(CorrectionRow).where(
        CorrectionRow.model == model,
        CorrectionRow.instance_type == instance_type,
        CorrectionRow.network_key == network_key,
    )
    row = session.scalars(query).first()
    if row is None:
        try:
            with session.begin_nested():
                row = CorrectionRow(
                    model=model, instance_type=instance_type, network_key=network_key, state={}
                )
                session.add(row)
        except IntegrityError:  # another run's report created it first (PostgreSQL, concurrent refits)
            row = session.scalars(query).one()
    observations = [
        o
        for o in session.scalars(
            select(CalibrationObservation)
            .where(
                CalibrationObservation.model == model,
                CalibrationObservation.network_key == network_key,
                CalibrationObservation.id > row.reset_after_id,
            )
            .order_by(CalibrationObservation.id)
        ).all()
        if instance_type in o.types
    ]
    correction = fit_correction([_observation(o, instance_type) for o in observations])
    row.runs = correction.runs
    row.state = {
        "mean": list(correction.mean),
        "cov": [list(r) for r in correction.cov],
        "prior_sigma": correction.prior_sigma,
        "between_variance": correction.between_variance,
        "observation_ids": [o.id for o in observations],
    }
    row.updated_at = utcnow()
    session.flush()
    return _entry(row)


def list_corrections(*, session: Session, model: str | None = None) -> list[CorrectionEntry]:
    query = select(CorrectionRow).order_by(CorrectionRow.model, CorrectionRow.instance_type)
    if model is not None:
        query = query.where(CorrectionRow.model == model)
    return [_entry(r) for r in session.scalars(query).all()]


def reset_correction(
    *, session: Session, model: str, instance_type: str, network_key: str | None = None
) -> list[CorrectionEntry]:
    """Forget what the runs so far taught the correction(s) of `model` on `instance_type` (every network
    setting unless `network_key` is given): later predictions start again from no correction. The
    observations stay stored; only runs after the reset count."""
    query = select(CorrectionRow).where(
        CorrectionRow.model == model, CorrectionRow.instance_type == instance_type
    )
    if network_key is not None:
        query = query.where(CorrectionRow.network_key == network_key)
    rows = session.scalars(query).all()
    if not rows:
        raise NotFound(
            f"no correction for {model} on {instance_type}"
            + (f" under {network_key}" if network_key else ""),
            hint="list them with `srift run corrections` or GET /v1/corrections",
            field="instance_type",
        )
    last = session.scalars(
        select(CalibrationObservation.id).order_by(CalibrationObservation.id.desc()).limit(1)
    ).first()
    out = []
    for row in rows:
        row.reset_after_id = int(last or 0)
        session.flush()
        out.append(
            refit(session=session, model=model, instance_type=instance_type, network_key=row.network_key)
        )
    return out


# Hooks into predictions and plans -----------------------------------------------------------------------


class CalibratedEvaluator:
    """An optimizer Evaluator (srift.optimize.evaluate) whose predictions go through a CorrectionTable.

    Its bounds are the inner evaluator's scaled by the table's smallest factor, so they stay bounds of the
    corrected predictions and the exhaustive search stays exact.
    """

    def __init__(self, inner: Any, table: CorrectionTable) -> None:
        self.inner = inner
        self.table = table
        self.scale = table.min_factor()

    @property
    def floor_factor(self) -> float:
        return float(self.inner.floor_factor) * self.scale

    def raw(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        prediction: Prediction = self.inner(fleet, iterations=iterations, usd_per_s=usd_per_s)
        return prediction

    def __call__(self, fleet: Sequence[FleetMember], *, iterations: int, usd_per_s: float) -> Prediction:
        return self.table.apply(
            self.raw(fleet, iterations=iterations, usd_per_s=usd_per_s), fleet_shares(fleet)
        )

    def band(self, fleet: Sequence[FleetMember], *, iterations: int) -> Band:
        band: Band = self.inner.band(fleet, iterations=iterations)
        prediction = self.raw(fleet, iterations=iterations, usd_per_s=0.0)
        return self.table.band(band, prediction, fleet_shares(fleet))

    def iteration_bound_s(self, fleet: Sequence[FleetMember], *, extension: Any = None) -> float:
        return float(self.inner.iteration_bound_s(fleet, extension=extension)) * self.scale

    def grow(self, partial: Any, member: FleetMember) -> Any:
        return self.inner.grow(partial, member)

    def partial_bound_s(self, partial: Any, *, extension: Any = None) -> float:
        return float(self.inner.partial_bound_s(partial, extension=extension)) * self.scale

    def type_partial(
        self, instance: Any, profile: Any, *, least_compute_s: float, forward_share: float
    ) -> Any:
        """The inner evaluator's state for any member of a type (its bounds scale in partial_bound_s), or
        None when it offers none."""
        make = getattr(self.inner, "type_partial", None)
        if make is None:
            return None
        return make(instance, profile, least_compute_s=least_compute_s, forward_share=forward_share)

    def use_locations(self, locations: Sequence[Any]) -> None:
        """The inner evaluator's bounds across locations (srift.optimize.evaluate.SimEvaluator)."""
        use = getattr(self.inner, "use_locations", None)
        if use is not None:
            use(locations)


def calibrated_evaluator(evaluator: Any, *, session: Session, model: str, network: NetworkSpec) -> Any:
    """The plan pipeline's hook: `evaluator` wrapped with the stored corrections of `model` under `network`,
    or `evaluator` itself when there are none."""
    table = load_table(session=session, model=model, network=network)
    return evaluator if table.empty else CalibratedEvaluator(evaluator, table)


def plan_block(
    evaluator: Any,
    *,
    fleet: Sequence[FleetMember],
    iterations: int,
    usd_per_s: float,
    model: str,
    network: NetworkSpec,
) -> dict[str, Any]:
    """The plan result's `calibration` block: the model and network key runs of it will be filed under,
    the uncorrected prediction they are compared with, and the correction applied (if any)."""
    raw = (
        evaluator.raw(fleet, iterations=iterations, usd_per_s=usd_per_s)
        if isinstance(evaluator, CalibratedEvaluator)
        else evaluator(fleet, iterations=iterations, usd_per_s=usd_per_s)
    )
    band_fn = getattr(
        evaluator.inner if isinstance(evaluator, CalibratedEvaluator) else evaluator, "band", None
    )
    sigma = band_fn(fleet, iterations=iterations).sigma if band_fn is not None else 0.0
    compute, comm = term_shares(raw.breakdown)
    block: dict[str, Any] = {
        "model": model,
        "network_key": network_key_of(network),
        "raw": {"iteration_s": raw.iteration_s, "compute_s": compute, "comm_s": comm, "sigma": sigma},
        "runs": 0,
        "text": None,
    }
    if isinstance(evaluator, CalibratedEvaluator):
        shares = fleet_shares(fleet)
        ids = {
            i
            for t in shares
            if t in evaluator.table.entries
            for i in evaluator.table.entries[t].observation_ids
        }
        after = evaluator.table.apply(raw, shares)
        block["runs"] = len(ids)
        block["text"] = next(
            (s[len("calibration: ") :] for s in after.sources if s.startswith("calibration: ")), None
        )
    return block
