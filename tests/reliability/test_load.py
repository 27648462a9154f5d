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
