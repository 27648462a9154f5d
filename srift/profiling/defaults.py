"""How much the profiler measures unless told otherwise: the defaults of `profile_model`, `profile_layers`
and `sample_curve_points`, which `srift profile` shows and passes on.

A leaf without torch, so the CLI can read them when it builds its options without loading the profiler.
"""

from __future__ import annotations

DEFAULT_REPEATS = 7
"""Timed runs per curve point (their median is kept)."""
DEFAULT_WARMUP = 2
"""Untimed warm-up rounds before a point is timed."""
DEFAULT_ITERATIONS = 30
"""Iterations behind readiness, `exec_prob` and `straggler_cv` (≥ 30 for the paper's spread measure)."""
DEFAULT_LAYERS_BATCH = 2
"""Per-device batch of a layers-only profile's readiness iterations."""
DEFAULT_LAYERS_ITERATIONS = 5
"""Readiness iterations of a layers-only profile."""
