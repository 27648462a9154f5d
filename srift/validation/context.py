"""What the steps of `srift validate` share: options, effort presets, measurement constants, context."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from srift.domain.planning import BatchPolicy
from srift.domain.profile import ModelProfile
from srift.profiling.curves import CurveSamples
from srift.settings import Settings
from srift.testbed import Testbed, TestbedSpec
from srift.validation import conditions
from srift.validation.matrix import MODELS, SHARDED_MODEL, ModelSpec, types_by_cpu

MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(16 << 30)}
"""glibc malloc serves every block from its heap (no mmap) and never trims it, so freed memory is reused as
a GPU's caching allocator reuses it (see `srift.validation.pipeline`, step 1)."""
DEFAULT_SPEC = Path(__file__).resolve().parent / "testbed.yaml"
GEO_SPEC = Path(__file__).resolve().parent / "testbed-geo.yaml"
"""Two locations joined by a slow link: `srift validate --spec` it for the cases across locations."""
PROBE_NODE_COUNTS = (2, 3, 4)

Log = Callable[[str], None]
Progress = Callable[[str, int, int], None]


class BandwidthSource(StrEnum):
    """Where the bandwidth model comes from: fresh probes on the testbed, the shipped models, or the prior."""

    PROBE = "probe"
    SHIPPED = "shipped"
    PRIOR = "prior"


@dataclass(frozen=True, slots=True)
class Effort:
    """How much each step measures; `quick()` and `full()` are the two presets.

    A DDP run is bounded by time: after its warm-up, rank 0 times the last warm-up iteration and the run
    takes about `target_run_s` of timed iterations, at least `min_iters` and at most `max_iters`, so a
    communication-heavy model (seconds per iteration) costs a few iterations, not a fixed count, and a
    short step is timed over the whole target too (`max_iters` only bounds a run whose warm-up was
    unusually fast: 500 fill 2 s at 4 ms a step).
    """

    repeats: int
    target_run_s: float
    min_iters: int
    max_iters: int
    warmup: int
    profile_repeats: int
    profile_iterations: int
    profile_max_batch: int
    probe_sizes: tuple[int, ...]
    probe_repeats: int
    plan_batch_policy: BatchPolicy
    timing_passes: int = 0
    """Further timing passes over every profile's breakpoints, spread over the DDP runs (see step 2)."""
    timing_repeats: int = 3
    """Timed rounds over the breakpoints in each further pass (after one untimed round)."""
    timing_budget_s: float | None = None
    """At most about this many seconds of further passes per model (None: every pass): after its first
    pass, a model whose pass took t seconds keeps max(2, budget // t) of the passes, spread evenly
    (profiles.passes_within)."""
    long_iteration_s: float = 1.0
    """Runs whose iteration is predicted to take longer warm up less: one iteration on one host, two with
    DDP (through its bucket rebuild), not `warmup` (steps.long_run_warmup)."""
    overlap_rounds: int = 4
    """Rounds of probes/overlap.py on two hosts of each type (0: no overlap probe; see step 3b)."""
    colocation_rounds: int = 0
    """At most this many compute-only rounds at the end of each multi-host DDP run of the matrix
    (srift.validation.colocation; 0: predictions without the co-location factor)."""
    colocation_budget_s: float = 0.5
    """As many of those rounds as fit this many seconds of together-steps (at least one): a 1 s step
    gets one round, a 50 ms step ten (single steps under a 10 ms quota period are quantised)."""

    @classmethod
    def quick(cls) -> Effort:
        return cls(
            repeats=2,
            target_run_s=2.0,
            min_iters=2,
            max_iters=500,
            warmup=2,
            profile_repeats=5,
            profile_iterations=10,
            profile_max_batch=64,
            probe_sizes=tuple(1 << k for k in range(2, 25)),
            probe_repeats=3,
            plan_batch_policy=BatchPolicy.POW2,
            timing_passes=8,
            timing_repeats=2,
            timing_budget_s=30.0,
            colocation_rounds=8,
        )

    @classmethod
    def full(cls) -> Effort:
        return cls(
            repeats=2,
            target_run_s=4.0,
            min_iters=3,
            max_iters=1000,
            warmup=3,
            profile_repeats=9,
            profile_iterations=30,
            profile_max_batch=64,
            probe_sizes=tuple(1 << k for k in range(2, 26)),
            probe_repeats=5,
            plan_batch_policy=BatchPolicy.POW2_SPLIT,
            timing_passes=12,
            timing_repeats=3,
            colocation_rounds=12,
            colocation_budget_s=1.0,
        )


@dataclass(frozen=True, slots=True)
class ValidationOptions:
    """What `srift validate` runs. `types` and `max_hosts` narrow the matrix (tests, quick checks)."""

    full: bool = False
    spec_path: Path | None = None
    models: tuple[str, ...] = tuple(MODELS)
    """Shipped models (srift.profiling.testmodels) in the matrix."""
    user_models: tuple[ModelSpec, ...] = ()
    """The user's own models (`--model/--input/--loss`), alongside the shipped ones."""
    effort: Effort | None = None
    max_cores: float | None = None
    max_hosts: int = 4
    types: tuple[str, ...] | None = None
    workdir: Path | None = None
    data_dir: Path | None = None
    bandwidth: BandwidthSource = BandwidthSource.PROBE
    plan_quality: bool = True
    plan_model: str | None = None
    """The plan-quality problem's model: transformer when it is in the matrix, else the first model."""
    keep_testbed: bool = False
    across_only: bool = False
    """Only the cases whose fleet spans locations (a spec with locations, e.g. testbed-geo.yaml)."""
    period_us: int = conditions.DEFAULT_PERIOD_US
    seed: int = 0
    command: str = ""
    sharded: bool = False
    """The sharded cases too (srift.validation.sharded: FSDP2 zero2 and full_shard of the blocks model);
    `srift validate` turns them on unless --no-sharded."""
    sharded_only: bool = False
    """Only the sharded cases."""

    def model_specs(self) -> dict[str, ModelSpec]:
        """Every model of the matrix by name: the shipped ones asked for, then the user's."""
        return {name: MODELS[name] for name in self.models if name in MODELS} | {
            m.name: m for m in self.user_models
        }

    def case_specs(self) -> dict[str, ModelSpec]:
        """`model_specs` and, when the sharded cases run, their model (srift.validation.sharded)."""
        found = self.model_specs()
        if self.sharded or self.sharded_only:
            found[SHARDED_MODEL.name] = SHARDED_MODEL
        return found

    def matrix_models(self) -> tuple[str, ...]:
        """The models of the DDP matrix (none with `sharded_only`)."""
        return () if self.sharded_only else tuple(self.model_specs())

    def resolved_plan_model(self) -> str:
        specs = self.model_specs()
        if self.plan_model is not None:
            return self.plan_model
        return "transformer" if "transformer" in specs or not specs else next(iter(specs))

    def resolved_effort(self) -> Effort:
        return self.effort or (Effort.full() if self.full else Effort.quick())

    def resolved_max_cores(self) -> float:
        return self.max_cores if self.max_cores is not None else 0.75 * (os.cpu_count() or 1)


@dataclass
class Context:
    """What the steps share."""

    options: ValidationOptions
    effort: Effort
    spec: TestbedSpec
    testbed: Testbed
    settings: Settings
    url: str
    workdir: Path
    log: Log
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    profile_ids: dict[tuple[str, str], int] = field(default_factory=dict)
    profiles: dict[tuple[str, str], ModelProfile] = field(default_factory=dict)
    timing_samples: dict[tuple[str, str], list[CurveSamples]] = field(default_factory=dict)
    timing_log: list[dict[str, Any]] = field(default_factory=list)
    profile_info: list[dict[str, Any]] = field(default_factory=list)
    bandwidth: dict[str, Any] = field(default_factory=dict)
    overlap: dict[str, dict[str, Any]] = field(default_factory=dict)
    job_counter: int = 0

    def model(self, name: str) -> ModelSpec:
        """The spec of a model of this run (shipped or the user's)."""
        return self.options.case_specs().get(name) or MODELS[name]

    def next_job_id(self) -> int:
        """Identifiers for the job runners' work folders and ports (never stored as jobs)."""
        self.job_counter += 1
        return 900_000_000 + (os.getpid() % 10_000) * 100 + self.job_counter


def types_in_scope(ctx: Context) -> list[str]:
    """The spec's types by CPU, narrowed to `options.types` when given."""
    names = types_by_cpu(ctx.spec)
    return [t for t in names if not ctx.options.types or t in ctx.options.types]


def quiet(_message: str) -> None:
    """A Log that says nothing."""
    return None


def no_progress(_stage: str, _done: int, _total: int) -> None:
    """A Progress that shows nothing."""
    return None


def leading_hosts(ctx: Context, type_name: str) -> list[str]:
    """The hosts of a type that a probe job takes (the first ones) while they stay in the first one's
    location: probes measure the network inside one location, never across a link."""
    hosts = ctx.testbed.hosts_of_type(type_name)
    out: list[str] = []
    for h in hosts:
        if h.location != hosts[0].location:
            break
        out.append(h.name)
    return out
