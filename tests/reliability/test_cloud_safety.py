"""Cloud safety against a moto EC2 server shared by real processes: a `srift worker` SIGKILLed while its
instances run leaves them running only until the next worker recovers the job, which terminates every one;
and a job's cost cap bounds what all of its attempts together may launch.

(tests/jobs/test_jobs_ec2.py covers the live worker's own paths: success, failure, timeout, capacity and
throttling. These cover the worker that dies without running any of its cleanup.)
"""

from __future__ import annotations

import threading
import time

import ec2kit as kit
import pytest

from srift.db.session import transaction
from srift.jobs.results import post_probe_results
from srift.jobs.worker import Outcome
from srift.settings import Settings

# Runs or recovers job processes: one worker, with the root tests (tests/conftest.py, GROUP_OF_MARKER).
pytestmark = pytest.mark.xdist_group("serial")


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_sigkilled_worker_leaves_no_instance_running_after_recovery(cloud_settings: Settings) -> None:
    job_id = kit.submit(cloud_settings, max_cost_usd=20.0)
    kit.kill_once_launched(cloud_settings, job_id, count=2)

    # the dead worker ran no cleanup: its instances are still up, the job still says running
    assert len(kit.live(job_id)) == 2
    assert kit.job(cloud_settings, job_id).state == "running"

    recovered = kit.recovering_worker(cloud_settings, max_attempts=1).recover()
    assert [(r.job_id, r.state.value) for r in recovered] == [(job_id, "failed")]
    assert kit.live(job_id) == []
    assert set(kit.instances(job_id).values()) == {"terminated"}
    assert kit.samples(cloud_settings) == 0


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_cost_cap_bounds_the_launches_of_all_attempts(cloud_settings: Settings) -> None:
    """Cap room for one attempt's worst case but not two: after the first attempt dies, no relaunch."""
    worst = kit.worst_case_usd(cloud_settings)
    job_id = kit.submit(cloud_settings, max_cost_usd=worst * 1.05)
    kit.kill_once_launched(cloud_settings, job_id, count=2)
    first = set(kit.instances(job_id))

    worker = kit.recovering_worker(cloud_settings, max_attempts=3)
    worker.recover()
    assert kit.live(job_id) == [] and kit.job(cloud_settings, job_id).state == "queued"

    outcomes: list[Outcome | None] = []
    attempt = threading.Thread(target=lambda: outcomes.append(worker.run_once()), daemon=True)
    attempt.start()
    attempt.join(timeout=30)
    relaunched = set(kit.instances(job_id)) - first
    if attempt.is_alive():  # it launched and now waits for results: make the instances report failure
        with transaction(cloud_settings.resolved_database_url) as session:
            post_probe_results(session=session, job_id=job_id, records=[], final=True, error="stop")
        attempt.join(timeout=60)
    assert not relaunched, "a second attempt launched beyond the job's cost cap"
    assert outcomes and outcomes[0] is not None and outcomes[0].state.value == "failed"
    assert "max_cost_usd" in (outcomes[0].error or "")
    assert kit.live(job_id) == []


@pytest.mark.slow
@pytest.mark.usefixtures("moto_server")
def test_cost_cap_with_room_for_retries_allows_the_next_attempt(cloud_settings: Settings) -> None:
    worst = kit.worst_case_usd(cloud_settings)
    job_id = kit.submit(cloud_settings, max_cost_usd=worst * 2.5)
    kit.kill_once_launched(cloud_settings, job_id, count=2)
    first = set(kit.instances(job_id))
    worker = kit.recovering_worker(cloud_settings, max_attempts=3)
    worker.recover()

    outcomes: list[Outcome | None] = []
    attempt = threading.Thread(target=lambda: outcomes.append(worker.run_once()), daemon=True)
    attempt.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(set(kit.live(job_id)) - first) < 2:
        time.sleep(0.1)
    assert len(set(kit.live(job_id)) - first) == 2, "the retry within the cap did not launch"
    with transaction(cloud_settings.resolved_database_url) as session:
        post_probe_results(session=session, job_id=job_id, records=[], final=True, error="stop")
    attempt.join(timeout=60)
    assert outcomes and outcomes[0] is not None and outcomes[0].state.value == "failed"
    assert kit.live(job_id) == []
    assert kit.job(cloud_settings, job_id).result["ec2_reserved_usd"] == pytest.approx(2 * worst)
