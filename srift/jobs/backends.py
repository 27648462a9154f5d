"""Where a job's processes run: one JobBackend per provider (this machine, testbed hosts, EC2 instances).

A backend runs one attempt and returns a JobOutput: the probe records or profiles it collected, or (EC2)
a summary of what its instances already posted through the API. The worker stores the output and marks the
job succeeded in one transaction, and only if it still holds the job (`store.finish`); a backend never
touches the job's state. After a worker dies, `cleanup` stops what its attempt left behind.

A new cloud is one catalog module, one backend here and data files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from srift.bandwidth.records import ProbeRecord
from srift.db.session import transaction
from srift.db.tables import Job
from srift.domain.profile import ModelProfile
from srift.jobs import store
from srift.jobs.run import JobRun
from srift.jobs.service import TypeFacts
from srift.jobs.spec import JobProvider, ProbeJobSpec, ProfileJobSpec, spec_from_row
from srift.settings import Settings

log = logging.getLogger("srift.worker")

Ec2ClientFactory = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class JobOutput:
    """What one attempt produced: probe records or profiles to store (None: nothing to store here, the
    hosts posted it already), result fields to merge into the job's result, and the log's closing line."""

    records: tuple[ProbeRecord, ...] | None = None
    profiles: tuple[ModelProfile, ...] | None = None
    result: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""


class HostsFailed(Exception):
    """The job's hosts reported an error instead of results; the job fails with this message."""


class JobBackend(Protocol):
    """Runs a job's attempt on one provider's machines, and cleans up after a dead worker's attempt."""

    provider: JobProvider

    def run_probe(self, run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> JobOutput: ...

    def run_profiles(self, run: JobRun, spec: ProfileJobSpec, facts: Sequence[TypeFacts]) -> JobOutput: ...

    def cleanup(self, *, job_id: int, kind: str, attempt: int, request: Mapping[str, Any]) -> None: ...


class LocalBackend:
    """Every rank a process on this machine (loopback); profiles with `srift profile` here."""

    provider = JobProvider.LOCAL

    def run_probe(self, run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> JobOutput:
        from srift.jobs.runners import run_local_probe

        return JobOutput(records=tuple(run_local_probe(run, spec, facts)))

    def run_profiles(self, run: JobRun, spec: ProfileJobSpec, facts: Sequence[TypeFacts]) -> JobOutput:
        from srift.jobs.runners import run_local_profiles

        return JobOutput(profiles=tuple(run_local_profiles(run, spec)))

    def cleanup(self, *, job_id: int, kind: str, attempt: int, request: Mapping[str, Any]) -> None:
        return None


class TestbedBackend:
    """Ranks and profiles inside testbed hosts: a running testbed, or one of the job's own."""

    provider = JobProvider.TESTBED

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run_probe(self, run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> JobOutput:
        from srift.jobs.runners import run_testbed_probe

        return JobOutput(records=tuple(run_testbed_probe(run, spec, facts)))

    def run_profiles(self, run: JobRun, spec: ProfileJobSpec, facts: Sequence[TypeFacts]) -> JobOutput:
        from srift.jobs.runners import run_testbed_profiles

        return JobOutput(profiles=tuple(run_testbed_profiles(run, spec, facts)))

    def cleanup(self, *, job_id: int, kind: str, attempt: int, request: Mapping[str, Any]) -> None:
        """Remove the testbed the attempt brought up for itself (prefix j<job id>), if any."""
        from srift.errors import SriftError

        root = self.settings.data_dir / "testbed"
        own = f"j{job_id % 10**9}"
        if (root / f"{own}.json").exists():
            from srift.testbed import down

            try:
                down(own, root=root)
            except SriftError as exc:
                log.error("job %s: could not remove testbed %s: %s", job_id, own, exc)


class Ec2Backend:
    """Instances launched for the attempt post their results to this server; they are always terminated."""

    provider = JobProvider.EC2

    def __init__(
        self,
        *,
        url: str,
        ec2_client: Ec2ClientFactory,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 5.0,
        retry_delay_s: float = 2.0,
    ) -> None:
        self.url = url
        self.ec2_client = ec2_client
        self.sleep = sleep
        self.poll_s = poll_s
        self.retry_delay_s = retry_delay_s

    def cleanup(self, *, job_id: int, kind: str, attempt: int, request: Mapping[str, Any]) -> None:
        """Terminate the attempt's instances (they also shut themselves down after ec2.timeout_s)."""
        try:
            spec = spec_from_row(kind, request)
            self._fleet(job_id=job_id, attempt=attempt, spec=spec, run=None).terminate()
        except Exception as exc:
            log.error("job %s: could not terminate its EC2 instances: %s", job_id, exc)

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
            base_delay_s=self.retry_delay_s,
            log=run.log if run is not None else (lambda m: log.info("job %s: %s", job_id, m)),
        )

    def _rotate_token(self, run: JobRun) -> str:
        """A fresh job token for the instances (the submitter's token stops working)."""
        from srift.db.tokens import issue_job_token

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
                raise HostsFailed(str(result["results_error"]))
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
            self.sleep(self.poll_s)

    def _collect(
        self,
        run: JobRun,
        spec: ProbeJobSpec | ProfileJobSpec,
        *,
        counts: dict[str, int],
        launch: Callable[[Callable[..., Any], str], None],
        ready: Callable[[dict[str, Any]], bool],
        who: str,
    ) -> tuple[dict[str, Any], list[str]]:
        """Reserve the attempt's worst-case cost (`counts` instances per type), launch its instances, wait for
        their results, terminate every instance launched.

        `launch(start, token)` launches the groups: `start(**launch_args)` launches one group on the fleet,
        journals every instance id so far (so a dead worker's instances can be terminated) and returns it;
        `token` is a fresh job token for the instances. The results are the job's once `ready` says so;
        what the instances report as an error is raised as HostsFailed ("`who` reported: ..."), after the
        instances are terminated. Returns the results and the ids launched."""
        assert spec.ec2 is not None
        fleet = self._fleet(job_id=run.job_id, attempt=run.attempt, spec=spec, run=run)
        self._reserve_budget(run, spec, counts)
        launched: list[str] = []

        def start(**launch_args: Any) -> Any:
            group = fleet.launch(**launch_args)
            launched.extend(group.instance_ids)
            self._journal_instances(run, launched)
            return group

        reported = ""
        result: dict[str, Any] = {}
        try:
            launch(start, self._rotate_token(run))
            result = self._wait_for_results(run, timeout_s=spec.ec2.timeout_s, ready=ready)
        except HostsFailed as exc:
            reported = str(exc)
        finally:
            fleet.terminate(launched)
        if reported:
            raise HostsFailed(f"{who} reported: {reported}")
        return result, launched

    def run_probe(self, run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> JobOutput:
        """Launch the fleet (a master, then the workers that join it), wait for the instances to post their
        samples, terminate it."""
        from srift.jobs.ec2 import probe_user_data
        from srift.jobs.runners import probe_script

        def launch(start: Callable[..., Any], token: str) -> None:
            source = probe_script().read_text()

            def group(count: int, role: str, master_ip: str | None) -> Any:
                user_data = probe_user_data(
                    job_id=run.job_id,
                    attempt=run.attempt,
                    spec=spec,
                    token=token,
                    probe_source=source,
                    master_ip=master_ip,
                )
                return start(instance_type=spec.instance_type, count=count, role=role, user_data=user_data)

            master = group(1, "master", None)
            if spec.max_nodes > 1:
                group(spec.max_nodes - 1, "workers", master.private_ips[0])

        result, launched = self._collect(
            run,
            spec,
            counts={spec.instance_type: spec.max_nodes},
            launch=launch,
            ready=lambda r: bool(r.get("results_received")),
            who="the instances",
        )
        return JobOutput(
            result={"samples_stored": result.get("samples_stored", 0), "instances": launched},
            note="succeeded: results received and instances terminated",
        )

    def run_profiles(self, run: JobRun, spec: ProfileJobSpec, facts: Sequence[TypeFacts]) -> JobOutput:
        """Launch one instance per type, wait for each to post its profile, terminate them."""
        from srift.jobs.ec2 import profile_user_data
        from srift.jobs.runners import profile_device

        by_type = {f.instance_type: f for f in facts}
        wanted = set(spec.instance_types)

        def launch(start: Callable[..., Any], token: str) -> None:
            for i, name in enumerate(spec.instance_types):
                device = profile_device(by_type.get(name))
                user_data = profile_user_data(
                    job_id=run.job_id, spec=spec, token=token, instance_type=name, device=device
                )
                start(instance_type=name, count=1, role=f"profile{i}", user_data=user_data)

        result, launched = self._collect(
            run,
            spec,
            counts=dict.fromkeys(spec.instance_types, 1),
            launch=launch,
            ready=lambda r: wanted <= set(r.get("profiles_received", {})),
            who="an instance",
        )
        return JobOutput(
            result={
                "profile_ids": sorted(result.get("profiles_received", {}).values()),
                "instances": launched,
            },
            note="succeeded: profiles received and instances terminated",
        )
