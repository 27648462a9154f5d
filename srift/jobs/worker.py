"""`srift worker`: claim queued jobs, run them, heartbeat, store their outputs in one transaction.

A job's outputs (probe samples, profiles) are stored in the same transaction that marks it succeeded, so
a worker killed mid-job leaves nothing half-ingested: the job stays `running` until its heartbeat goes
stale, and the next worker (at start and between jobs) cleans up what it left (processes, testbed,
EC2 instances) and requeues it while attempts remain, else fails it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from srift.db.session import transaction
from srift.db.tables import Job, utcnow
from srift.domain.states import JobKind, JobState
from srift.errors import SriftError
from srift.jobs import store
from srift.jobs.backends import (
    Ec2Backend,
    Ec2ClientFactory,
    HostsFailed,
    JobBackend,
    JobOutput,
    LocalBackend,
    TestbedBackend,
)
from srift.jobs.run import JobLost, JobRun, job_marker, kill_marked
from srift.jobs.spec import (
    JobProvider,
    ProbeJobSpec,
    ProfileJobSpec,
    spec_from_row,
)
from srift.settings import Settings

log = logging.getLogger("srift.worker")


def default_ec2_client(region: str) -> Any:
    import boto3

    return boto3.client("ec2", region_name=region)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a worker polls and when it declares another worker dead."""

    poll_s: float = 2.0
    heartbeat_s: float = 5.0
    stale_after_s: float = 60.0
    max_attempts: int = 2
    kinds: tuple[JobKind, ...] = tuple(JobKind)
    providers: tuple[JobProvider, ...] = tuple(JobProvider)
    ec2_poll_s: float = 5.0
    ec2_retry_delay_s: float = 2.0


@dataclass
class Outcome:
    """What a finished job leaves: its state, error, result summary."""

    job_id: int
    state: JobState
    error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)


class Worker:
    """Runs jobs from the database in `settings`; `run_once` for one job, `run_forever` for the loop.

    `sleep` and `now` (the clock that judges heartbeats stale) are injectable, for tests.
    """

    def __init__(
        self,
        settings: Settings,
        config: WorkerConfig | None = None,
        *,
        ec2_client: Ec2ClientFactory = default_ec2_client,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = utcnow,
        backends: Mapping[JobProvider, JobBackend] | None = None,
    ) -> None:
        self.settings = settings
        self.config = config or WorkerConfig()
        self.ec2_client = ec2_client
        self.sleep = sleep
        self.now = now
        self.url = settings.resolved_database_url
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.backends: Mapping[JobProvider, JobBackend] = backends or {
            JobProvider.LOCAL: LocalBackend(),
            JobProvider.TESTBED: TestbedBackend(settings),
            JobProvider.EC2: Ec2Backend(
                url=self.url,
                ec2_client=ec2_client,
                sleep=sleep,
                poll_s=self.config.ec2_poll_s,
                retry_delay_s=self.config.ec2_retry_delay_s,
            ),
        }

    # ----- recovery -------------------------------------------------------------------------------

    def recover(self) -> list[store.Recovered]:
        """Clean up and requeue (or fail) jobs whose worker stopped heartbeating."""
        with transaction(self.url) as session:
            stale = store.stale_jobs(session=session, stale_after_s=self.config.stale_after_s, now=self.now())
            snapshots = [
                (j.id, j.kind, j.provider, j.attempts, dict(j.request), dict(j.result or {})) for j in stale
            ]
        recovered = []
        for job_id, kind, provider, attempts, request, result in snapshots:
            self._cleanup(job_id=job_id, kind=kind, provider=provider, attempts=attempts, request=request)
            with transaction(self.url) as session:
                job = session.get(Job, job_id, populate_existing=True)
                if job is None or job.state != JobState.RUNNING.value:
                    continue
                ready = bool(result.get("results_received")) and kind == JobKind.PROBE.value
                done = store.release_stale(
                    session=session,
                    job=job,
                    max_attempts=self.config.max_attempts,
                    reason=f"worker {job.worker_id} stopped heartbeating (recovered by {self.worker_id})",
                    results_ready=ready,
                )
            if done is not None:
                log.warning("job %s from a dead worker: %s", job_id, done.state.value)
                recovered.append(done)
        return recovered

    def _cleanup(
        self, *, job_id: int, kind: str, provider: str, attempts: int, request: dict[str, Any]
    ) -> None:
        """Stop what a dead attempt left behind: its processes, then whatever its backend holds."""
        killed = kill_marked(job_marker(job_id, attempts))
        if killed:
            log.warning("job %s: killed %d leftover processes", job_id, killed)
        backend = self.backends.get(JobProvider(provider))
        if backend is not None:
            backend.cleanup(job_id=job_id, kind=kind, attempt=attempts, request=request)

    # ----- the loop ---------------------------------------------------------------------------------

    def run_forever(self, *, stop: threading.Event | None = None, max_jobs: int | None = None) -> int:
        """Poll, recover, run; returns the number of jobs run when `stop` is set or `max_jobs` reached."""
        stop = stop or threading.Event()
        ran = 0
        while not stop.is_set() and (max_jobs is None or ran < max_jobs):
            outcome = self.run_once()
            if outcome is None:
                stop.wait(self.config.poll_s)
            else:
                ran += 1
        return ran

    def run_once(self) -> Outcome | None:
        """Recover stale jobs, then claim and run one job; None when the queue is empty."""
        self.recover()
        with transaction(self.url) as session:
            job = store.claim_next(
                session=session,
                worker_id=self.worker_id,
                kinds=self.config.kinds,
                providers=self.config.providers,
            )
            if job is None:
                return None
            job_id, kind, attempts, request, old_log = (
                job.id,
                job.kind,
                job.attempts,
                dict(job.request),
                job.log,
            )
        log.info("job %s (%s) claimed by %s, attempt %d", job_id, kind, self.worker_id, attempts)
        return self._run(job_id=job_id, kind=kind, attempt=attempts, request=request, old_log=old_log or "")

    def _run(self, *, job_id: int, kind: str, attempt: int, request: dict[str, Any], old_log: str) -> Outcome:
        spec = spec_from_row(kind, request)
        run = JobRun(
            job_id=job_id,
            attempt=attempt,
            worker_id=self.worker_id,
            kind=kind,
            spec=spec,
            settings=self.settings,
        )
        run.log(f"attempt {attempt} on worker {self.worker_id}")
        stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(run, stop, old_log), daemon=True)
        beat.start()
        try:
            try:
                outcome = self._execute(run, spec, old_log)
            except HostsFailed as exc:
                outcome = self._fail(run, old_log, str(exc))
            except JobLost as exc:
                log.warning("job %s: %s", job_id, exc)
                return Outcome(job_id=job_id, state=JobState.FAILED, error=str(exc))
            except SriftError as exc:
                outcome = self._fail(run, old_log, str(exc))
            except Exception as exc:
                log.exception("job %s failed unexpectedly", job_id)
                outcome = self._fail(run, old_log, f"{type(exc).__name__}: {exc}")
            except (KeyboardInterrupt, SystemExit):
                run.log("worker stopped; job given back to the queue")
                with transaction(self.url) as session:
                    store.requeue(
                        session=session, job_id=job_id, worker_id=self.worker_id, log=run.log_text(old_log)
                    )
                raise
        finally:
            stop.set()
            beat.join(timeout=10)
        return outcome

    def _heartbeat(self, run: JobRun, stop: threading.Event, old_log: str) -> None:
        while not stop.wait(self.config.heartbeat_s):
            try:
                with transaction(self.url) as session:
                    alive = store.heartbeat(
                        session=session,
                        job_id=run.job_id,
                        worker_id=self.worker_id,
                        log=run.log_text(old_log),
                    )
            except Exception:
                log.exception("job %s: heartbeat failed", run.job_id)
                continue
            if not alive:
                run.lost.set()
                return

    def _fail(self, run: JobRun, old_log: str, error: str) -> Outcome:
        run.log(f"failed: {error}")
        outcome = Outcome(job_id=run.job_id, state=JobState.FAILED, error=error)
        with transaction(self.url) as session:
            self._finish(session, run, old_log, outcome)
        log.error("job %s failed: %s", run.job_id, error)
        return outcome

    def _finish(self, session: Session, run: JobRun, old_log: str, outcome: Outcome) -> bool:
        """Store `outcome` (its state, error or result) with the job's log so far, in the caller's
        transaction; False when this worker no longer holds the job (srift.jobs.store.finish)."""
        return store.finish(
            session=session,
            job_id=run.job_id,
            worker_id=self.worker_id,
            state=outcome.state,
            log=run.log_text(old_log),
            error=outcome.error,
            result=outcome.result,
        )

    # ----- dispatch ---------------------------------------------------------------------------------

    def _execute(self, run: JobRun, spec: ProbeJobSpec | ProfileJobSpec, old_log: str) -> Outcome:
        from srift.jobs.service import type_facts

        backend = self.backends[spec.provider]
        with transaction(self.url) as session:
            if isinstance(spec, ProbeJobSpec):
                facts = type_facts(
                    session=session, provider=spec.provider, instance_type=spec.instance_type, ec2=spec.ec2
                )
            else:
                all_facts = [
                    type_facts(session=session, provider=spec.provider, instance_type=t, ec2=spec.ec2)
                    for t in spec.instance_types
                ]
        if isinstance(spec, ProbeJobSpec):
            output = backend.run_probe(run, spec, facts)
        else:
            output = backend.run_profiles(run, spec, all_facts)
        run.check()
        return self._succeed(run, output, old_log)

    def _succeed(self, run: JobRun, output: JobOutput, old_log: str) -> Outcome:
        """Store the attempt's output and mark the job succeeded in one transaction, only if this worker
        still holds the job; otherwise JobLost and nothing is stored (the only success path)."""
        from srift.bandwidth.samples import store_samples
        from srift.profiling.store import save_profile

        result: dict[str, Any] = {}
        with transaction(self.url) as session:
            if output.records is not None:
                run.log(f"storing {len(output.records)} samples")
                stored = store_samples(
                    session=session, records=output.records, origin="job", job_id=run.job_id
                )
                result.update(samples_parsed=len(output.records), samples_stored=stored)
                run.log(f"succeeded: {stored} new samples")
            if output.profiles is not None:
                ids = [save_profile(session=session, profile=p) for p in output.profiles]
                result.update(
                    profile_ids=ids,
                    profiles=[
                        {"id": i, "model": p.model, "accelerator": p.accelerator}
                        for i, p in zip(ids, output.profiles, strict=True)
                    ],
                )
                run.log(f"succeeded: profiles {ids}")
            result.update(output.result)
            if output.note:
                run.log(output.note)
            outcome = Outcome(job_id=run.job_id, state=JobState.SUCCEEDED, result=result)
            if not self._finish(session, run, old_log, outcome):
                raise JobLost(f"job {run.job_id} was taken from this worker", hint="nothing was stored")
        return outcome
