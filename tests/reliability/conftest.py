"""Reliability tests drive real `srift serve` processes through benchmarks/load.py's server harness."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `benchmarks` is a top-level package of the checkout, not installed
    sys.path.insert(0, str(REPO_ROOT))
