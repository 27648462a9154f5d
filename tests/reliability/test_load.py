"""Short, bounded form of benchmarks/load.py: a few clients against a real server on loopback for a few
seconds; every request must succeed. The full form (longer, more clients) writes docs/BENCHMARKS.md."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.load import measure, render

CLIENTS = 4
DURATION_S = 4.0
MAX_REQUESTS = 2000


@pytest.mark.slow
def test_short_load_has_zero_errors(tmp_path: Path) -> None:
    result, peak_rss_bytes = measure(
        scenario="auto", clients=CLIENTS, duration_s=DURATION_S, max_requests=MAX_REQUESTS, work_dir=tmp_path
    )
    assert result.requests >= CLIENTS, render(result, peak_rss_bytes)
    assert result.error_count == 0, result.errors[:5]
    assert sum(result.statuses.values()) == result.requests
    p99 = result.percentile_s(99)
    assert math.isfinite(p99) and p99 < 10.0, render(result, peak_rss_bytes)
    assert 0 < peak_rss_bytes < 2 * 2**30
    assert result.duration_s < DURATION_S + 60


@pytest.mark.slow
def test_short_wrk_load_on_two_workers_has_zero_errors(tmp_path: Path) -> None:
    """The compiled load generator (benchmarks/load_wrk.py) against `srift serve --workers 2`, briefly."""
    from benchmarks.load_wrk import acceptance
    from benchmarks.load_wrk import measure as measure_wrk

    run = measure_wrk(
        scenario="plans",
        database="sqlite",
        workers=2,
        connections=4,
        threads=1,
        duration_s=3,
        rate=0.0,
        work_dir=tmp_path,
    )
    assert run.requests > 0 and run.errors == 0, run.report
    assert run.workers == 2 and run.server_cpu_s > 0 and run.client_cpu_s >= 0
    assert 0 <= run.client_share < 1 and run.latency_ms("p99") > 0
    assert acceptance(run).startswith("≥ 100/s")


@pytest.mark.slow
def test_paced_wrk_load_keeps_to_the_rate(tmp_path: Path) -> None:
    """--rate paces wrk (the soak mode): 40 req/s for 3 s sends about 120 requests, not all it can."""
    from benchmarks.load_wrk import measure as measure_wrk

    run = measure_wrk(
        scenario="health",
        database="sqlite",
        workers=1,
        connections=2,
        threads=1,
        duration_s=3,
        rate=40.0,
        work_dir=tmp_path,
    )
    assert run.errors == 0
    assert 50 <= run.requests <= 200, run.report
