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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from srift.db.session import transaction
from srift.db.tables import Job, utcnow
from srift.domain.states import JobState
from srift.errors import SriftError
from srift.jobs import store
from srift.jobs.run import JobLost, JobRun, job_marker, kill_marked
from srift.jobs.spec import (
    JobKind,
    JobProvider,
    ProbeJobSpec,
    ProfileJobSpec,
    spec_from_row,
)
from srift.settings import Settings

log = logging.getLogger("srift.worker")

Ec2ClientFactory = Callable[[str], Any]


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
    ) -> None:
        self.settings = settings
        self.config = config or WorkerConfig()
        self.ec2_client = ec2_client
        self.sleep = sleep
        self.now = now
        self.url = settings.resolved_database_url
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

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
        """Stop what a dead attempt left behind: its processes, its testbed, its EC2 instances."""
        killed = kill_marked(job_marker(job_id, attempts))
        if killed:
            log.warning("job %s: killed %d leftover processes", job_id, killed)
        if provider == JobProvider.TESTBED.value:
            root = self.settings.data_dir / "testbed"
            own = f"j{job_id % 10**9}"
            if (root / f"{own}.json").exists():
                from srift.testbed import down

                try:
                    down(own, root=root)
                except SriftError as exc:
                    log.error("job %s: could not remove testbed %s: %s", job_id, own, exc)
        if provider == JobProvider.EC2.value:
            try:
                spec = spec_from_row(kind, request)
                self._fleet(job_id=job_id, attempt=attempts, spec=spec, run=None).terminate()
            except Exception as exc:  # a dead worker's instances also shut themselves down
                log.error("job %s: could not terminate its EC2 instances: %s", job_id, exc)

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
        with transaction(self.url) as session:
            store.finish(
                session=session,
                job_id=run.job_id,
                worker_id=self.worker_id,
                state=JobState.FAILED,
                log=run.log_text(old_log),
                error=error,
            )
        log.error("job %s failed: %s", run.job_id, error)
        return Outcome(job_id=run.job_id, state=JobState.FAILED, error=error)

    # ----- dispatch ---------------------------------------------------------------------------------

    def _execute(self, run: JobRun, spec: ProbeJobSpec | ProfileJobSpec, old_log: str) -> Outcome:
        from srift.jobs import runners
        from srift.jobs.service import type_facts

        if isinstance(spec, ProbeJobSpec):
            with transaction(self.url) as session:
                facts = type_facts(
                    session=session, provider=spec.provider, instance_type=spec.instance_type, ec2=spec.ec2
                )
            if spec.provider is JobProvider.EC2:
                return self._ec2_probe(run, spec, old_log)
            if spec.provider is JobProvider.TESTBED:
                records = runners.run_testbed_probe(run, spec, facts)
            else:
                records = runners.run_local_probe(run, spec, facts)
            run.check()
            return self._store_samples(run, records, old_log)
        with transaction(self.url) as session:
            all_facts = [
                type_facts(session=session, provider=spec.provider, instance_type=t, ec2=spec.ec2)
                for t in spec.instance_types
            ]
        if spec.provider is JobProvider.EC2:
            return self._ec2_profiles(run, spec, old_log)
        if spec.provider is JobProvider.TESTBED:
            profiles = runners.run_testbed_profiles(run, spec, all_facts)
        else:
            profiles = runners.run_local_profiles(run, spec)
        run.check()
        return self._store_profiles(run, profiles, old_log)

    def _store_samples(self, run: JobRun, records: list[Any], old_log: str) -> Outcome:
        """Samples and the success mark in one transaction: both or neither."""
        from srift.bandwidth.samples import store_samples

        run.log(f"storing {len(records)} samples")
        with transaction(self.url) as session:
            stored = store_samples(session=session, records=records, origin="job", job_id=run.job_id)
            result = {"samples_parsed": len(records), "samples_stored": stored}
            run.log(f"succeeded: {stored} new samples")
            if not store.finish(
                session=session,
                job_id=run.job_id,
                worker_id=self.worker_id,
                state=JobState.SUCCEEDED,
                log=run.log_text(old_log),
                result=result,
            ):
                raise JobLost(f"job {run.job_id} was taken from this worker", hint="nothing was stored")
        return Outcome(job_id=run.job_id, state=JobState.SUCCEEDED, result=result)

    def _store_profiles(self, run: JobRun, profiles: list[Any], old_log: str) -> Outcome:
        from srift.profiling.store import save_profile

        with transaction(self.url) as session:
            ids = [save_profile(session=session, profile=p) for p in profiles]
            result = {
                "profile_ids": ids,
                "profiles": [
                    {"id": i, "model": p.model, "accelerator": p.accelerator}
                    for i, p in zip(ids, profiles, strict=True)
                ],
            }
            run.log(f"succeeded: profiles {ids}")
            if not store.finish(
                session=session,
                job_id=run.job_id,
                worker_id=self.worker_id,
                state=JobState.SUCCEEDED,
                log=run.log_text(old_log),
                result=result,
            ):
                raise JobLost(f"job {run.job_id} was taken from this worker", hint="nothing was stored")
        return Outcome(job_id=run.job_id, state=JobState.SUCCEEDED, result=result)

    # ----- EC2 --------------------------------------------------------------------------------------

    def _fleet(
        self, *, job_id: int, attempt: int, spec: ProbeJobSpec | ProfileJobSpec, run: JobRun | None
    ) -> Any:
        from srift.jobs.ec2 import Ec2Fleet

        assert spec.ec2 is not None
        return Ec2Fleet(
            self.ec2_client(spec.ec2.region),
            job_id=job_id,
            attempt=attempt,
            options=spec.ec2,
            sleep=self.sleep,
            base_delay_s=self.config.ec2_retry_delay_s,
            log=run.log if run is not None else (lambda m: log.info("job %s: %s", job_id, m)),
        )

    def _rotate_token(self, run: JobRun) -> str:
        """A fresh job token for the instances (the submitter's token stops working)."""
        from srift.api.auth import issue_job_token

        with transaction(self.url) as session:
            job = session.get(Job, run.job_id, populate_existing=True)
            assert job is not None
            return issue_job_token(job)

    def _reserve_budget(
        self, run: JobRun, spec: ProbeJobSpec | ProfileJobSpec, counts: dict[str, int]
    ) -> None:
        """Charge this attempt's worst case (price × instances × ec2.timeout_s) to the job before launching.

        The charge is kept across attempts, a dead worker's included, so all attempts together stay within
        ec2.max_cost_usd: a requeued job whose next attempt would overrun the cap fails instead of launching.
        """
        from srift.errors import InvalidInput
        from srift.jobs.service import type_facts

        assert spec.ec2 is not None
        cap_usd = spec.ec2.max_cost_usd
        with transaction(self.url) as session:
            worst_usd = 0.0
            for name, count in counts.items():
                facts = type_facts(session=session, provider=spec.provider, instance_type=name, ec2=spec.ec2)
                if facts.price_usd_per_hr is None:
                    raise InvalidInput(
                        f"the catalog has no {spec.ec2.market} price for {name} in {spec.ec2.region}",
                        hint="pick a type and market the catalog prices, so the cost cap can be checked",
                        field="instance_type",
                    )
                worst_usd += facts.price_usd_per_hr * count * spec.ec2.timeout_s / 3600
            job = session.get(Job, run.job_id, populate_existing=True, with_for_update=True)
            assert job is not None
            reserved_usd = float((job.result or {}).get("ec2_reserved_usd", 0.0))
            if reserved_usd + worst_usd > cap_usd * (1 + 1e-9):
                raise InvalidInput(
                    f"attempt {run.attempt} may cost ${worst_usd:.2f} on top of ${reserved_usd:.2f} reserved "
                    f"by earlier attempts, above the cap ec2.max_cost_usd = ${cap_usd:g}; nothing launched",
                    hint="submit a new job, or raise ec2.max_cost_usd to cover retries",
                    field="ec2.max_cost_usd",
                )
            store.update_result(session=session, job_id=run.job_id, ec2_reserved_usd=reserved_usd + worst_usd)
        run.log(f"ec2: reserved ${worst_usd:.2f} of the ${cap_usd:g} cap (${reserved_usd:.2f} before)")

    def _journal_instances(self, run: JobRun, ids: list[str]) -> None:
        with transaction(self.url) as session:
            store.update_result(session=session, job_id=run.job_id, instances=ids)
        run.log(f"ec2: launched {', '.join(ids)}")

    def _wait_for_results(
        self, run: JobRun, *, timeout_s: float, ready: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            with transaction(self.url) as session:
                job = session.get(Job, run.job_id, populate_existing=True)
                result = dict(job.result or {}) if job is not None else {}
            if result.get("results_error"):
                raise ExternalResultError(str(result["results_error"]))
            if ready(result):
                return result
            if time.monotonic() > deadline:
                from srift.errors import ExternalServiceError

                raise ExternalServiceError(
                    f"no results from the instances within {timeout_s:g} s (ec2.timeout_s)",
                    hint="check /var/log/srift-job.log on an instance, the AMI (python3, pip), and that "
                    "ec2.results_url is reachable from the VPC",
                )
            run.check()
            self.sleep(self.config.ec2_poll_s)

    def _ec2_probe(self, run: JobRun, spec: ProbeJobSpec, old_log: str) -> Outcome:
        from srift.jobs.ec2 import probe_user_data
        from srift.jobs.runners import probe_script

        assert spec.ec2 is not None
        fleet = self._fleet(job_id=run.job_id, attempt=run.attempt, spec=spec, run=run)
        launched: list[str] = []
        reported = ""
        result: dict[str, Any] = {}
        self._reserve_budget(run, spec, {spec.instance_type: spec.max_nodes})
        try:
            token = self._rotate_token(run)
            source = probe_script().read_text()
            master = fleet.launch(
                instance_type=spec.instance_type,
                count=1,
                role="master",
                user_data=probe_user_data(
                    job_id=run.job_id,
                    attempt=run.attempt,
                    spec=spec,
                    token=token,
                    probe_source=source,
                    master_ip=None,
                ),
            )
            launched += master.instance_ids
            self._journal_instances(run, launched)
            if spec.max_nodes > 1:
                workers = fleet.launch(
                    instance_type=spec.instance_type,
                    count=spec.max_nodes - 1,
                    role="workers",
                    user_data=probe_user_data(
                        job_id=run.job_id,
                        attempt=run.attempt,
                        spec=spec,
                        token=token,
                        probe_source=source,
                        master_ip=master.private_ips[0],
                    ),
                )
                launched += workers.instance_ids
                self._journal_instances(run, launched)
            result = self._wait_for_results(
                run, timeout_s=spec.ec2.timeout_s, ready=lambda r: bool(r.get("results_received"))
            )
        except ExternalResultError as exc:
            reported = str(exc)
        finally:
            fleet.terminate(launched)
        if reported:
            return self._fail(run, old_log, f"the instances reported: {reported}")
        summary = {"samples_stored": result.get("samples_stored", 0), "instances": launched}
        with transaction(self.url) as session:
            store.finish(
                session=session,
                job_id=run.job_id,
                worker_id=self.worker_id,
                state=JobState.SUCCEEDED,
                log=run.log_text(old_log) + "succeeded: results received and instances terminated\n",
                result=summary,
            )
        return Outcome(job_id=run.job_id, state=JobState.SUCCEEDED, result=summary)

    def _ec2_profiles(self, run: JobRun, spec: ProfileJobSpec, old_log: str) -> Outcome:
        from srift.jobs.ec2 import profile_user_data

        assert spec.ec2 is not None
        fleet = self._fleet(job_id=run.job_id, attempt=run.attempt, spec=spec, run=run)
        launched: list[str] = []
        wanted = set(spec.instance_types)
        reported = ""
        result: dict[str, Any] = {}
        self._reserve_budget(run, spec, dict.fromkeys(spec.instance_types, 1))
        try:
            token = self._rotate_token(run)
            for i, name in enumerate(spec.instance_types):
                got = fleet.launch(
                    instance_type=name,
                    count=1,
                    role=f"profile{i}",
                    user_data=profile_user_data(
                        job_id=run.job_id, spec=spec, token=token, instance_type=name
                    ),
                )
                launched += got.instance_ids
                self._journal_instances(run, launched)
            result = self._wait_for_results(
                run,
                timeout_s=spec.ec2.timeout_s,
                ready=lambda r: wanted <= set(r.get("profiles_received", {})),
            )
        except ExternalResultError as exc:
            reported = str(exc)
        finally:
            fleet.terminate(launched)
        if reported:
            return self._fail(run, old_log, f"an instance reported: {reported}")
        summary = {"profile_ids": sorted(result.get("profiles_received", {}).values()), "instances": launched}
        with transaction(self.url) as session:
            store.finish(
                session=session,
                job_id=run.job_id,
                worker_id=self.worker_id,
                state=JobState.SUCCEEDED,
                log=run.log_text(old_log) + "succeeded: profiles received and instances terminated\n",
                result=summary,
            )
        return Outcome(job_id=run.job_id, state=JobState.SUCCEEDED, result=summary)


class ExternalResultError(Exception):
    """The instances posted an error instead of results."""
