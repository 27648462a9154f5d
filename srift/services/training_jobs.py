"""Tracked training runs (Srift §4.5): progress reports, and re-planning when spot VMs are interrupted.

On an interruption the job is re-planned for what is left: the remaining iterations, the time left before the
original deadline minus the launch overhead of new VMs (default 150 s, Srift §5.4), and the budget left. The
interrupted type is never launched again; VMs of it that survived may stay in the new plan (as in §5.4, where
the surviving p3.8xlarge keeps its batch and g3.8xlarge VMs are added). Every report, interruption and plan is
kept in the job's history. When no plan fits, the job moves to `needs_input`, the event is kept, and the
PlanInfeasible error says by how much the limits are missed. An amendment (new time limit, budget or
objective, kept as an `amended` event that later re-plans and the run's view apply over the original request)
re-plans the rest of the run under the new limits: that is how a run in `needs_input` resumes. An amendment
that no plan fits is refused and changes nothing (no event; state, limits and current plan as they were):
the user was told it was refused, so the run's request must not carry it.

A run gets its own token when it starts (`srift_run_...`, shown once): with it the training-script helper
(srift.launch.helper) posts measured iteration times (`report_iterations`), which move the run's progress
forward and, when it completes or is interrupted, teach the corrections of srift.services.calibration;
an interruption's re-plan then already predicts with the run's measured throughput.
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.db.tables import PlanRow, TrainingJob, TrainingJobEvent
from srift.db.tokens import check_token_holder, hash_token
from srift.documents import read_document, to_document
from srift.domain.planning import Objective
from srift.domain.records import PlanRecord, TrainingRun, TrainingRunEvent, TrainingRunPlan
from srift.domain.requests import Amendment, InterruptionReport, IterationReport, PlanQuery, ProgressReport
from srift.domain.states import TrainingState
from srift.errors import Conflict, InvalidInput, NotFound, Unauthorized
from srift.optimize.solver import PlanInfeasible, seconds_up, usd_up
from srift.services import calibration
from srift.services.plans import create_plan, get_plan_for, get_plan_row
from srift.settings import Settings


def start_job(*, session: Session, plan_id: int) -> TrainingRun:
    """Start tracking a run of stored plan `plan_id`."""
    try:
        get_plan_row(session=session, plan_id=plan_id)
    except NotFound as exc:
        raise NotFound(exc.detail, hint="start a job from an existing plan id", field="plan_id") from exc
    token = RUN_TOKEN_PREFIX + secrets.token_urlsafe(32)
    job = TrainingJob(
        plan_id=plan_id,
        current_plan_id=plan_id,
        state=TrainingState.RUNNING,
        excluded_types=[],
        token_hash=hash_token(token),
    )
    session.add(job)
    session.flush()
    _event(session, job, "started", {"plan_id": plan_id})
    return replace(training_run(session=session, job=job), token=token)


RUN_TOKEN_PREFIX = "srift_run_"


def is_run_token(plain: str | None) -> bool:
    """Whether `plain` has the form of a run's own token (checked against a run by `check_run_token`)."""
    return bool(plain) and str(plain).startswith(RUN_TOKEN_PREFIX)


def check_run_token(*, session: Session, job_id: int, plain: str) -> None:
    """401 unless `plain` is some run's token, 403 unless it is run `job_id`'s."""
    job = session.scalars(select(TrainingJob).where(TrainingJob.token_hash == hash_token(plain))).first()
    if job is None or job.token_hash is None or not hmac.compare_digest(job.token_hash, hash_token(plain)):
        raise Unauthorized("the run token is unknown", hint="use the token `srift run start` printed")
    check_token_holder(job.id, job_id, noun="run", action="report iterations")


def report_iterations(*, session: Session, job_id: int, report: IterationReport) -> dict[str, Any]:
    """Store measured iteration times (a step counts once), move the run's progress forward to the last
    step reported, and when the run completes or the report is final, file its steps as an observation of
    the plan's prediction (refitting the corrections). Returns what was stored and the observation."""
    job = _get_job(session, job_id)
    plan_ids = [p.id for p in training_run(session=session, job=job).plans]
    stored = calibration.store_iterations(
        session=session, job=job, plan_id=report.plan_id, steps=report.steps, plan_ids=plan_ids
    )
    if job.state != TrainingState.COMPLETED and report.steps:
        total = _total_iterations(session, job)
        done = min(total, max(job.iterations_done, max(s for s, _ in report.steps) + 1))
        elapsed = max(job.elapsed_s, report.elapsed_s or 0.0)
        plan = get_plan_row(session=session, plan_id=stored.plan_id).result["predicted"]
        usd_per_s = plan["cost_usd"] / plan["total_time_s"] if plan.get("total_time_s") else 0.0
        spent = max(job.spent_usd, elapsed * usd_per_s)
        if (done, elapsed, spent) != (job.iterations_done, job.elapsed_s, job.spent_usd):
            _update_progress(session, job, iterations_done=done, elapsed_s=elapsed, spent_usd=spent)
    observation = None
    if report.final or job.state == TrainingState.COMPLETED:
        observation = calibration.observe_run(session=session, job=job, plan_id=stored.plan_id)
    return {
        "job_id": job.id,
        "plan_id": stored.plan_id,
        "accepted": stored.accepted,
        "duplicates": stored.duplicates,
        "steps_stored": stored.steps_stored,
        "iterations_done": job.iterations_done,
        "state": str(job.state),
        "observation": observation,
    }


def get_run(*, session: Session, job_id: int) -> TrainingRun:
    """A tracked run with its plans and every event; NotFound when there is none."""
    return training_run(session=session, job=_get_job(session, job_id))


def check_run_reader(*, session: Session, job_id: int, viewer: str | None) -> None:
    """NotFound unless `viewer` may read run `job_id`: the run's plan is the viewer's or everyone's. Another
    owner's run answers as a missing one, so its id tells nothing (ownership, issue 48)."""
    job = _get_job(session, job_id)
    try:
        get_plan_for(session=session, plan_id=job.plan_id, viewer=viewer)
    except NotFound:
        raise NotFound(
            f"no job with id {job_id} that this token may read",
            hint="use the token that started the run",
            field="job_id",
        ) from None


def _get_job(session: Session, job_id: int) -> TrainingJob:
    job = session.get(TrainingJob, job_id)
    if job is None:
        raise NotFound(
            f"no training job with id {job_id}", hint="start one with POST /v1/jobs", field="job_id"
        )
    return job


def _open_job(session: Session, job_id: int) -> TrainingJob:
    """A run that may still change; Conflict once it has completed."""
    job = _get_job(session, job_id)
    if job.state == TrainingState.COMPLETED:
        raise Conflict(f"job {job_id} has completed", hint="start a new job for a new run")
    return job


def _open_run(session: Session, job_id: int) -> tuple[TrainingJob, PlanRow, dict[str, int]]:
    """A run that may still change (`_open_job`), its current plan, and how many VMs of each type that plan
    runs."""
    job = _open_job(session, job_id)
    current = get_plan_row(session=session, plan_id=job.current_plan_id)
    held = {ch["instance_type"]: int(ch["count"]) for ch in current.result.get("choices", [])}
    return job, current, held


def _original(session: Session, job: TrainingJob) -> dict[str, Any]:
    """The run's request: the first plan's, with every amendment's limits and objective applied in order."""
    request = dict(get_plan_row(session=session, plan_id=job.plan_id).request)
    for e in _events(session, job):
        if e.kind == "amended":
            request.update(e.payload.get("set", {}))
    return request


def _events(session: Session, job: TrainingJob) -> list[TrainingJobEvent]:
    return list(
        session.scalars(
            select(TrainingJobEvent).where(TrainingJobEvent.job_id == job.id).order_by(TrainingJobEvent.id)
        ).all()
    )


def _total_iterations(session: Session, job: TrainingJob) -> int:
    return int(_original(session, job)["iterations"])


def _event(session: Session, job: TrainingJob, kind: str, payload: dict[str, Any]) -> None:
    session.add(TrainingJobEvent(job_id=job.id, kind=kind, payload=payload))
    session.flush()


def _update_progress(
    session: Session, job: TrainingJob, *, iterations_done: int, elapsed_s: float, spent_usd: float
) -> None:
    total = _total_iterations(session, job)
    if iterations_done > total:
        raise Conflict(
            f"{iterations_done} is more than the job's {total} iterations",
            hint=f"report at most {total}",
            field="iterations_done",
        )
    for name, new, old in (
        ("iterations_done", float(iterations_done), float(job.iterations_done)),
        ("elapsed_s", elapsed_s, job.elapsed_s),
        ("spent_usd", spent_usd, job.spent_usd),
    ):
        if new < old:
            raise Conflict(
                f"{new:g} is below the last report ({old:g})", hint="progress only moves forward", field=name
            )
    job.iterations_done = iterations_done
    job.elapsed_s = elapsed_s
    job.spent_usd = spent_usd
    if iterations_done == total:
        job.state = TrainingState.COMPLETED


def record_progress(*, session: Session, job_id: int, progress: ProgressReport) -> TrainingRun:
    """Record iterations done, elapsed time and money spent so far."""
    job = _open_job(session, job_id)
    _update_progress(
        session,
        job,
        iterations_done=progress.iterations_done,
        elapsed_s=progress.elapsed_s,
        spent_usd=progress.spent_usd,
    )
    _event(session, job, "progress", to_document(progress))
    if job.state == TrainingState.COMPLETED:
        calibration.observe_run(session=session, job=job, plan_id=job.current_plan_id)
    return training_run(session=session, job=job)


def record_interruption(
    *, session: Session, settings: Settings, job_id: int, interruption: InterruptionReport
) -> tuple[TrainingRun, PlanRecord]:
    """Record lost VMs and re-plan the rest of the run; returns the run and its new plan."""
    job, current, held = _open_run(session, job_id)
    lost_type = interruption.instance_type
    if lost_type not in held:
        raise Conflict(
            f"the current plan (id {current.id}) runs no {lost_type}",
            hint=f"name one of {', '.join(sorted(held))}",
            field="instance_type",
        )
    if interruption.count > held[lost_type]:
        raise Conflict(
            f"{interruption.count} is more than the {held[lost_type]} {lost_type} VMs of the current plan",
            hint=f"report at most {held[lost_type]}",
            field="count",
        )
    _update_progress(
        session,
        job,
        iterations_done=job.iterations_done
        if interruption.iterations_done is None
        else interruption.iterations_done,
        elapsed_s=job.elapsed_s if interruption.elapsed_s is None else interruption.elapsed_s,
        spent_usd=job.spent_usd if interruption.spent_usd is None else interruption.spent_usd,
    )
    held[lost_type] -= interruption.count
    measured = calibration.observe_run(session=session, job=job, plan_id=current.id)
    excluded = tuple(dict.fromkeys([*job.excluded_types, lost_type]))
    job.excluded_types = list(excluded)
    original = _original(session, job)
    remaining = _remaining(original, job, interruption.launch_overhead_s)
    payload: dict[str, Any] = {
        **to_document(interruption),
        "iterations_done": job.iterations_done,
        "elapsed_s": job.elapsed_s,
        "spent_usd": job.spent_usd,
        "remaining": remaining,
        "previous_plan_id": current.id,
        "measured_iteration_s": None if measured is None else measured["measured_s"],
    }
    return _replan_and_record(
        session, settings, job, original, remaining, held=held, kind="interruption", payload=payload
    )


def amend(
    *, session: Session, settings: Settings, job_id: int, amendment: Amendment
) -> tuple[TrainingRun, PlanRecord]:
    """Change the run's time limit, budget or objective and re-plan the rest of it under them.

    The types lost so far stay excluded and the VMs still held may stay. A run in `needs_input` resumes
    (`running`) when the new plan fits. When no plan fits, PlanInfeasible says by how much and nothing is
    written: no event, and the run keeps its state, limits and current plan (a refused amendment must not
    become part of the run's request).
    """
    job, current, held = _open_run(session, job_id)
    changes: dict[str, Any] = {
        k: v
        for k, v in (
            ("time_limit_s", amendment.time_limit_s),
            ("budget_usd", amendment.budget_usd),
            ("objective", None if amendment.objective is None else amendment.objective.value),
        )
        if v is not None
    }
    if not changes:
        raise InvalidInput(
            "nothing to amend", hint="give time_limit_s, budget_usd or objective", field="time_limit_s"
        )
    original = {**_original(session, job), **changes}
    for e in _events(session, job):
        if e.kind == "interruption" and e.payload.get("previous_plan_id") == current.id:
            lost = str(e.payload.get("instance_type"))
            held[lost] = max(0, held.get(lost, 0) - int(e.payload.get("count", 0)))
    remaining = _remaining(original, job, amendment.launch_overhead_s)
    payload: dict[str, Any] = {
        "set": changes,
        "launch_overhead_s": amendment.launch_overhead_s,
        "remaining": remaining,
        "previous_plan_id": current.id,
    }
    return _replan_and_record(
        session, settings, job, original, remaining, held=held, kind="amended", payload=payload
    )


KEPT_WHEN_INFEASIBLE = frozenset({"interruption"})
"""Events recorded even when no plan fits the rest of the run: an interruption happened whatever the plan.
An amendment is not among them: the 409 refuses it, so it must leave nothing behind."""


def _replan_and_record(
    session: Session,
    settings: Settings,
    job: TrainingJob,
    original: dict[str, Any],
    remaining: dict[str, Any],
    *,
    held: dict[str, int],
    kind: str,
    payload: dict[str, Any],
) -> tuple[TrainingRun, PlanRecord]:
    """Re-plan the rest of the run, without the types it has lost (`job.excluded_types`) but for the VMs
    still `held`, and record the event `kind`: on success the run is `running` on the new plan (the run
    and the plan are returned). When no plan fits the error propagates; an event of KEPT_WHEN_INFEASIBLE
    is first recorded with the error and committed, the run put in `needs_input`; any other (an
    amendment, which the error refuses) writes nothing."""
    excluded = tuple(job.excluded_types)
    try:
        plan = _replan(session, settings, original, remaining, job, excluded=excluded, held=held)
    except PlanInfeasible as exc:
        if kind in KEPT_WHEN_INFEASIBLE:
            job.state = TrainingState.NEEDS_INPUT
            _event(session, job, kind, {**payload, "error": exc.to_dict()})
            session.commit()
        raise
    job.current_plan_id = plan.id
    job.state = TrainingState.RUNNING
    _event(session, job, kind, {**payload, "plan_id": plan.id})
    return training_run(session=session, job=job), plan


def _remaining(original: dict[str, Any], job: TrainingJob, overhead_s: float) -> dict[str, Any]:
    limit = original.get("time_limit_s")
    budget = original.get("budget_usd")
    return {
        "iterations": int(original["iterations"]) - job.iterations_done,
        "time_limit_s": None if limit is None else float(limit) - job.elapsed_s - overhead_s,
        "budget_usd": None if budget is None else float(budget) - job.spent_usd,
        "launch_overhead_s": overhead_s,
    }


def _replan(
    session: Session,
    settings: Settings,
    original: dict[str, Any],
    remaining: dict[str, Any],
    job: TrainingJob,
    *,
    excluded: tuple[str, ...],
    held: dict[str, int],
) -> PlanRecord:
    iters = remaining["iterations"]
    if iters <= 0:
        raise InvalidInput(
            "the job has no iterations left", hint="report progress instead", field="iterations_done"
        )
    limit, budget = remaining["time_limit_s"], remaining["budget_usd"]
    if limit is not None and limit <= 0:
        raise PlanInfeasible(
            f"the deadline cannot be met: {job.elapsed_s:.0f} s elapsed + "
            f"{remaining['launch_overhead_s']:.0f} s to launch VMs is already {-limit:.0f} s past "
            f"time_limit_s={original['time_limit_s']:g} s",
            hint="relax the deadline or accept finishing late",
            field="time_limit_s",
            relaxations={"time_short_s": -limit},
            proven=True,  # the time already spent exceeds the limit: no plan can meet it
        )
    if budget is not None and budget <= 0:
        raise PlanInfeasible(
            f"the budget is spent: ${job.spent_usd:.2f} of budget_usd=${original['budget_usd']:g}",
            hint="raise the budget",
            field="budget_usd",
            relaxations={"budget_short_usd": -budget},
            proven=True,  # the money already spent exceeds the budget
        )
    # A re-plan prices spot with the fitted law: the original request's recent market (its log up to the
    # run's start) is not the market the run is in now, and may not cover the re-planned fleet.
    base = {k: v for k, v in original.items() if k not in ("replan_of", "recent_market")}
    doc = {**base, "iterations": iters, "time_limit_s": limit, "budget_usd": budget}
    try:
        return create_plan(
            session=session,
            settings=settings,
            query=read_document(PlanQuery, doc),
            excluded=excluded,
            held=held,
            request_doc={**doc, "replan_of": {"job_id": job.id, "plan_id": job.current_plan_id}},
        )
    except PlanInfeasible as exc:
        left = f"{limit:.0f} s left before the original deadline" if limit is not None else "no deadline"
        money = f", ${budget:.2f} of budget left" if budget is not None else ""
        out = f", {', '.join(excluded)} excluded" if excluded else ""
        raise PlanInfeasible(
            f"re-planning {iters} remaining iterations ({left}{money}{out}): {exc.detail}",
            hint=_whole_run_hint(
                exc.hint, before_s=job.elapsed_s + remaining["launch_overhead_s"], spent_usd=job.spent_usd
            ),
            field=exc.field,
            relaxations=exc.relaxations,
            proven=exc.proven,
        ) from exc


_HINT_TIME = re.compile(r"(time_limit_s to (?:at least )?)(\d+) s")
_HINT_BUDGET = re.compile(r"(budget_usd to (?:at least )?)\$(\d+\.\d\d)")


def _whole_run_hint(hint: str, *, before_s: float, spent_usd: float) -> str:
    """The planner's hint for the rest of a run restated in the run's own limits. The re-plan searches the
    time and money left, so its hint names figures for the rest ("raise time_limit_s to at least 900 s");
    a run's time_limit_s and budget_usd (the amendment's fields, the Jobs page's form) are the whole run's,
    counted from its start, so followed as written that figure fails again. Each figure gets what the run
    has used (`before_s`: elapsed plus the launch to come; `spent_usd`), rounded up as the planner rounds."""
    hint = _HINT_TIME.sub(lambda m: f"{m[1]}{seconds_up(float(m[2]) + before_s)}", hint)
    hint = _HINT_BUDGET.sub(lambda m: f"{m[1]}{usd_up(float(m[2]) + spent_usd)}", hint)
    return hint


def training_run(*, session: Session, job: TrainingJob) -> TrainingRun:
    """The run with its history of plans and events."""
    events = _events(session, job)
    plan_ids = [job.plan_id] + [
        int(e.payload["plan_id"])
        for e in events
        if e.kind in ("interruption", "amended") and "plan_id" in e.payload
    ]
    plans = []
    for pid in dict.fromkeys(plan_ids):
        row = session.get(PlanRow, pid)
        if row is None:
            continue
        plans.append(
            TrainingRunPlan(
                id=row.id,
                label=row.result["label"],
                iterations=row.result["iterations"],
                total_time_s=row.result["predicted"]["total_time_s"],
                cost_usd=row.result["predicted"]["cost_usd"],
            )
        )
    original = _original(session, job)
    return TrainingRun(
        id=job.id,
        plan_id=job.plan_id,
        current_plan_id=job.current_plan_id,
        state=TrainingState(job.state),
        created_at=job.created_at,
        iterations_total=int(original["iterations"]),
        iterations_done=job.iterations_done,
        elapsed_s=job.elapsed_s,
        spent_usd=job.spent_usd,
        time_limit_s=original.get("time_limit_s"),
        budget_usd=original.get("budget_usd"),
        objective=Objective(original.get("objective") or Objective.MIN_COST),
        excluded_types=tuple(job.excluded_types),
        plans=tuple(plans),
        events=tuple(
            TrainingRunEvent(id=e.id, kind=e.kind, created_at=e.created_at, payload=e.payload) for e in events
        ),
    )
