"""MALLOC_ENV: the hosts' allocator reuses freed large blocks instead of mapping and faulting them again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from srift.validation.context import MALLOC_ENV

BLOCK_BYTES = 34 << 20
"""Just over glibc's largest mmap threshold (32 MiB), as `nn.Bilinear`'s temporaries at batch 32."""
BLOCKS_PER_ITERATION = 8
ITERATIONS = 8

_LOOP = f"""
import json, resource, torch
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
counts = []
for _ in range({ITERATIONS}):
    before = faults()
    for _ in range({BLOCKS_PER_ITERATION}):
        t = torch.ones({BLOCK_BYTES} // 4)
        del t
    counts.append(faults() - before)
print(json.dumps(counts))
"""


def _page_faults_per_iteration(env: dict[str, str]) -> list[int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _LOOP], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    counts: list[int] = json.loads(out.stdout)
    return counts


def _pages_per_iteration() -> int:
    return BLOCK_BYTES * BLOCKS_PER_ITERATION // os.sysconf("SC_PAGE_SIZE")


def test_the_hosts_allocator_reuses_large_blocks_once_warm() -> None:
    counts = _page_faults_per_iteration(MALLOC_ENV)
    assert counts[0] >= _pages_per_iteration() // 8
    assert all(n < _pages_per_iteration() // 100 for n in counts[-4:]), counts


def test_a_32_mib_mmap_threshold_faults_such_blocks_every_iteration() -> None:
    threshold_only = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(16 << 30)}
    counts = _page_faults_per_iteration(threshold_only)
    assert all(n >= _pages_per_iteration() // 2 for n in counts), counts
