"""`srift validate` end to end: testbed, profiles, probes and bandwidth model, predictions, real DDP runs.

Steps, in order (each timed in the report):

1. **testbed** — bring up the spec (the shipped srift/validation/testbed.yaml by default; reused when it is
   already up), register its types in a validation database of its own (SQLite in the work folder), and
   set the measurement conditions of `srift.validation.conditions` (10 ms CPU period, raised CPU weight).
   Every process in the hosts runs with glibc malloc keeping freed memory (MALLOC_ENV), as PyTorch's CUDA
   caching allocator does on a GPU: otherwise whether the 34 MB of wide_mlp's gradients are page-faulted
   afresh each iteration depends on the allocator's history, and one step's time varies by half between
   a profile and a training run of the same model on the same host.
2. **profiles** — `srift profile` of every model inside one host of each type (`--accelerator TYPE
   --threads 1`), through the testbed profile-job runner; the types of one model are profiled at once.
   This machine's speed drifts by tens of percent over tens of seconds (other tenants of its host), and
   one profile takes seconds: alone, its curves carry the speed of that moment, and every case of the
   model inherits that bias (seen as −20 % for all cnn cases and +12 % for all transformer cases of one
   run). So `timing_passes` further passes over each profile's breakpoints, timed exactly as the profiler
   times them (srift.validation.timing, in the same hosts), are spread evenly over the DDP runs of step 4,
   and the stored profiles' curves are refit to the median of all their samples
   (`srift.profiling.curves.pool_curve_samples`) before the cases are predicted. The report keeps the
   single-pass predictions and their errors too.
3. **bandwidth** — allreduce probe jobs (probes/allreduce.py) on 2..4 hosts of each type, stored as probe
   samples and trained into a bandwidth model version that is activated (or: the shipped models, or the
   α-β prior; the report says which).
4. **matrix** — for every case, the simulator's prediction from the stored (pooled) profiles, the catalog's
   instance types and the active bandwidth model, reducing in PyTorch DDP's gradient buckets as the runs
   do (and, for comparison, layer by layer), then `repeats` real DDP runs (probes/ddp_train.py through
   `srift.validation.ddp`). Repeats run in rounds over all cases, so slow spells of the machine spread
   over cases instead of hitting one.
5. **plan quality** — see `srift.validation.plan_quality`.

The driver itself only waits while DDP runs are timed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import random
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from srift.domain.profile import ModelProfile
from srift.errors import EnvironmentProblem, InvalidInput, SriftError
from srift.profiling.curves import CurveSamples, pool_curve_samples
from srift.settings import Settings, get_settings
from srift.testbed import Testbed, TestbedSpec, load_spec
from srift.validation import conditions, stats
from srift.validation.ddp import AgentPool, DdpResult, TimingJob
from srift.validation.matrix import MODELS, Case, Fleet, build_matrix, check_spec, types_by_cpu

REPORT_FORMAT = "srift-validation/1"
DDP_BUCKET_CAP_MB = 25.0
"""probes/ddp_train.py's (and torch DDP's) default bucket_cap_mb: the buckets the runs reduce."""
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(16 << 30)}
"""glibc malloc keeps freed blocks below 32 MiB in the heap and never trims it (see step 1 above)."""
DEFAULT_SPEC = Path(__file__).resolve().parent / "testbed.yaml"
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
    """How much each step measures; `quick()` and `full()` are the two presets."""

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
    plan_batch_policy: str
    timing_passes: int = 0
    """Further timing passes over every profile's breakpoints, spread over the DDP runs (see step 2)."""
    timing_repeats: int = 3
    """Timed rounds over the breakpoints in each further pass (after one untimed round)."""

    @classmethod
    def quick(cls) -> Effort:
        return cls(
            repeats=2,
            target_run_s=2.0,
            min_iters=5,
            max_iters=30,
            warmup=2,
            profile_repeats=5,
            profile_iterations=10,
            profile_max_batch=64,
            probe_sizes=tuple(1 << k for k in range(2, 25)),
            probe_repeats=3,
            plan_batch_policy="pow2",
            timing_passes=4,
            timing_repeats=2,
        )

    @classmethod
    def full(cls) -> Effort:
        return cls(
            repeats=2,
            target_run_s=4.0,
            min_iters=6,
            max_iters=60,
            warmup=3,
            profile_repeats=9,
            profile_iterations=30,
            profile_max_batch=64,
            probe_sizes=tuple(1 << k for k in range(2, 26)),
            probe_repeats=5,
            plan_batch_policy="pow2_split",
            timing_passes=8,
            timing_repeats=3,
        )


@dataclass(frozen=True, slots=True)
class ValidationOptions:
    """What `srift validate` runs. `types` and `max_hosts` narrow the matrix (tests, quick checks)."""

    full: bool = False
    spec_path: Path | None = None
    models: tuple[str, ...] = tuple(MODELS)
    effort: Effort | None = None
    max_cores: float | None = None
    max_hosts: int = 4
    types: tuple[str, ...] | None = None
    workdir: Path | None = None
    data_dir: Path | None = None
    bandwidth: BandwidthSource = BandwidthSource.PROBE
    plan_quality: bool = True
    plan_model: str = "transformer"
    keep_testbed: bool = False
    period_us: int = conditions.DEFAULT_PERIOD_US
    seed: int = 0
    command: str = ""

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
    job_counter: int = 0

    def next_job_id(self) -> int:
        """Identifiers for the job runners' work folders and ports (never stored as jobs)."""
        self.job_counter += 1
        return 900_000_000 + (os.getpid() % 10_000) * 100 + self.job_counter


def _quiet(_message: str) -> None:
    return None


def _no_progress(_stage: str, _done: int, _total: int) -> None:
    return None


def run_validation(
    options: ValidationOptions, *, log: Log = _quiet, progress: Progress = _no_progress
) -> dict[str, Any]:
    """Run every step and return the report (a JSON-ready dict); see the module docstring."""
    started = time.perf_counter()
    started_at = dt.datetime.now(dt.UTC)
    effort = options.resolved_effort()
    spec = load_spec(options.spec_path or DEFAULT_SPEC)
    check_spec(spec)
    if options.types:
        unknown = [t for t in options.types if t not in {x.name for x in spec.types}]
        if unknown:
            raise InvalidInput(
                f"unknown instance types {unknown} for this spec",
                hint=f"use some of: {', '.join(t.name for t in spec.types)}",
                field="types",
            )
    workdir = _workdir(options)
    url = f"sqlite:///{workdir / 'validate.db'}"
    base = get_settings()
    settings = base.model_copy(
        update={
            "database_url": url,
            "models_dir": workdir / "models",
            "data_dir": options.data_dir or base.data_dir,
        }
    )
    load_before = conditions.load_average()
    log(f"work folder {workdir}")
    tick = time.perf_counter()
    testbed, brought_up = _bring_up(spec, settings.data_dir / "testbed", log)
    ctx = Context(options, effort, spec, testbed, settings, url, workdir, log, progress)
    saved: list[conditions.CgroupSettings] = []
    previous_env = {k: os.environ.get(k) for k in MALLOC_ENV}
    os.environ.update(MALLOC_ENV)  # inherited by every process started in the hosts
    try:
        _prepare_database(ctx)
        for host in testbed.hosts:
            for directory in host.cgroups:
                got = conditions.tune_cgroup(directory, cpu_cores=host.cpu_cores, period_us=options.period_us)
                if got is not None:
                    saved.append(got)
        ctx.timings["testbed_s"] = time.perf_counter() - tick
        cases = _cases(ctx)
        tick = time.perf_counter()
        _profiles(ctx, sorted({c.model for c in cases} | _plan_models(ctx)))
        ctx.timings["profiles_s"] = time.perf_counter() - tick
        tick = time.perf_counter()
        _bandwidth(ctx)
        ctx.timings["bandwidth_s"] = time.perf_counter() - tick
        preload = sorted({MODELS[m].module for m in options.models})
        with AgentPool(testbed, workdir=workdir, preload=preload) as pool:
            tick = time.perf_counter()
            results = _matrix(ctx, pool, cases)
            ctx.timings["matrix_s"] = time.perf_counter() - tick
            plan: dict[str, Any] | None = None
            if options.plan_quality:
                from srift.validation.plan_quality import run_plan_quality

                tick = time.perf_counter()
                plan = run_plan_quality(ctx, pool, runner=measure)
                ctx.timings["plan_quality_s"] = time.perf_counter() - tick
    finally:
        for key, value in previous_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        conditions.restore(saved)
        if brought_up and not options.keep_testbed:
            log("testbed: down")
            testbed.down()
    report = _report(ctx, results, plan, started_at=started_at, load_before=load_before)
    report["duration_s"] = time.perf_counter() - started
    report["testbed"]["brought_up"] = brought_up
    (workdir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def _workdir(options: ValidationOptions) -> Path:
    if options.workdir is not None:
        path = options.workdir
    else:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = get_settings().data_dir / "validation" / stamp
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _bring_up(spec: TestbedSpec, root: Path, log: Log) -> tuple[Testbed, bool]:
    """Testbed.up (the job runners find it again under `root`); True when this call created it."""
    from srift.testbed import status

    try:
        was_up = status(spec.prefix, root=root).healthy
    except SriftError:
        was_up = False
    log(f"testbed {spec.prefix}: {'reusing the running one' if was_up else 'bringing it up'}")
    return Testbed.up(spec, root=root), not was_up


def _prepare_database(ctx: Context) -> None:
    from srift.db import migrate
    from srift.db.session import transaction
    from srift.testbed.catalog import register_types

    migrate.upgrade(ctx.url)
    with transaction(ctx.url) as session:
        register_types(session=session, spec=ctx.spec)


def _types(ctx: Context) -> list[str]:
    names = types_by_cpu(ctx.spec)
    return [t for t in names if not ctx.options.types or t in ctx.options.types]


def _cases(ctx: Context) -> list[Case]:
    spec = ctx.spec
    cases = build_matrix(
        spec,
        models=ctx.options.models,
        full=ctx.options.full,
        max_cores=ctx.options.resolved_max_cores(),
        max_hosts=ctx.options.max_hosts,
    )
    allowed = set(_types(ctx))
    cases = [c for c in cases if set(c.fleet.types) <= allowed]
    if not cases:
        raise InvalidInput(
            "the matrix is empty for this spec, types and max_cores",
            hint="allow more CPU (--max-cores) or more types",
            field="types",
        )
    return cases


def _plan_models(ctx: Context) -> set[str]:
    return {ctx.options.plan_model} if ctx.options.plan_quality else set()


# -- profiles ---------------------------------------------------------------------------------------------


def _profile_one(ctx: Context, model: str, type_name: str) -> tuple[Any, float]:
    """`srift profile` of `model` inside one host of `type_name` (the testbed profile-job runner)."""
    from srift.jobs.run import JobRun
    from srift.jobs.runners import run_testbed_profiles
    from srift.jobs.service import TypeFacts
    from srift.jobs.spec import JobProvider, ProfileJobSpec

    effort = ctx.effort
    spec = ProfileJobSpec(
        provider=JobProvider.TESTBED,
        instance_types=(type_name,),
        model=MODELS[model].factory,
        input=MODELS[model].input_factory,
        model_name=model,
        max_batch=effort.profile_max_batch,
        repeats=effort.profile_repeats,
        iterations=effort.profile_iterations,
        time_budget_s=900.0,
        testbed_prefix=ctx.spec.prefix,
    )
    run = JobRun(
        job_id=ctx.next_job_id(),
        attempt=1,
        worker_id="validate",
        kind="profile",
        spec=spec,
        settings=ctx.settings,
    )
    tick = time.perf_counter()
    try:
        (profile,) = run_testbed_profiles(
            run, spec, [TypeFacts(name=type_name, provider="testbed", region="local")]
        )
    finally:
        _drop_job_folder(ctx, run.job_id)
    return profile, time.perf_counter() - tick


def _drop_job_folder(ctx: Context, job_id: int) -> None:
    """The job runners work in <data dir>/jobs/<id>; validation's ids are never stored jobs, so drop it."""
    shutil.rmtree(ctx.settings.data_dir / "jobs" / str(job_id), ignore_errors=True)


def _profiles(ctx: Context, models: Sequence[str]) -> None:
    """Profile each model in one host of each type (types in parallel: their quotas fit the machine)."""
    from concurrent.futures import ThreadPoolExecutor

    from srift.db.session import transaction
    from srift.profiling.store import save_profile

    types = _types(ctx)
    for k, name in enumerate(models):
        ctx.progress("profiles", k, len(models))
        ctx.log(f"profile: {name} on {', '.join(types)}")
        with ThreadPoolExecutor(max_workers=len(types)) as workers:
            futures = {t: workers.submit(_profile_one, ctx, name, t) for t in types}
            found = {t: f.result() for t, f in futures.items()}
        with transaction(ctx.url) as session:
            for type_name in types:
                profile, took = found[type_name]
                ctx.profiles[(name, type_name)] = profile
                ctx.profile_ids[(name, type_name)] = save_profile(session=session, profile=profile)
                ctx.profile_info.append(
                    {
                        "model": name,
                        "instance_type": type_name,
                        "profile_id": ctx.profile_ids[(name, type_name)],
                        "max_batch": profile.max_batch,
                        "compute_s_at_32": profile.compute_s(32),
                        "update_s": profile.update_s,
                        "straggler_cv": profile.straggler_cv,
                        "grad_bytes": profile.total_grad_bytes,
                        "took_s": took,
                    }
                )
    ctx.progress("profiles", len(models), len(models))


# -- bandwidth --------------------------------------------------------------------------------------------


def _bandwidth(ctx: Context) -> None:
    from srift.bandwidth.registry import active_version, register_shipped, train_version
    from srift.bandwidth.samples import SampleQuery, store_samples
    from srift.db.session import transaction

    source = ctx.options.bandwidth
    if source is BandwidthSource.PRIOR:
        ctx.bandwidth = {"source": "prior:alpha-beta", "how": "the α-β prior (no probes, no learned model)"}
        return
    if source is BandwidthSource.SHIPPED:
        with transaction(ctx.url) as session:
            register_shipped(session=session)
            found = active_version(session=session)
        ctx.bandwidth = {
            "source": found.source if found else "prior:alpha-beta",
            "how": "the shipped bandwidth models (the prior answers for types they do not cover)",
            "version": found.version if found else None,
            "covers": found.covers if found else [],
        }
        return
    from srift.jobs.run import JobRun
    from srift.jobs.runners import run_testbed_probe
    from srift.jobs.service import TypeFacts
    from srift.jobs.spec import JobProvider, ProbeJobSpec

    effort = ctx.effort
    cap = ctx.options.resolved_max_cores()
    records = []
    plan = []
    for type_name in _types(ctx):
        t = ctx.spec.type_named(type_name)
        hosts = len(ctx.testbed.hosts_of_type(type_name))
        counts = tuple(
            n
            for n in PROBE_NODE_COUNTS
            if n <= min(hosts, ctx.options.max_hosts) and n * t.cpu_cores <= cap + 1e-9
        )
        if counts:
            plan.append((type_name, counts))
    for k, (type_name, counts) in enumerate(plan):
        ctx.progress("probes", k, len(plan))
        t = ctx.spec.type_named(type_name)
        ctx.log(f"probe: {type_name} on {', '.join(str(n) for n in counts)} hosts")
        spec = ProbeJobSpec(
            provider=JobProvider.TESTBED,
            instance_type=type_name,
            node_counts=counts,
            sizes=effort.probe_sizes,
            repeats=effort.probe_repeats,
            warmup=1,
            time_budget_s=600.0,
            testbed_prefix=ctx.spec.prefix,
        )
        run = JobRun(
            job_id=ctx.next_job_id(),
            attempt=1,
            worker_id="validate",
            kind="probe",
            spec=spec,
            settings=ctx.settings,
        )
        facts = TypeFacts(name=type_name, provider="testbed", region="local", rated_gbps=t.rate_mbit / 1000)
        try:
            records.extend(run_testbed_probe(run, spec, facts))
        finally:
            _drop_job_folder(ctx, run.job_id)
    ctx.progress("probes", len(plan), len(plan))
    if not records:
        raise EnvironmentProblem(
            "no type has two hosts to probe within max_cores",
            hint="give the spec two hosts of a type, or use --bandwidth prior",
        )
    ctx.log(f"bandwidth: training on {len(records)} probe samples")
    tick = time.perf_counter()
    with transaction(ctx.url) as session:
        store_samples(session=session, records=records, origin="validate")
    with transaction(ctx.url) as session:
        version = train_version(
            session=session,
            settings=ctx.settings,
            query=SampleQuery(providers=("testbed",), instance_types=tuple(t for t, _ in plan)),
            activate_it=True,
            seed=ctx.options.seed,
            origin="validate",
        )
    ctx.bandwidth = {
        "source": version.source,
        "how": "trained now on the testbed's own allreduce probes (probe jobs on 2..4 hosts per type)",
        "version": version.version,
        "covers": version.covers,
        "samples": len(records),
        "probe_plan": {t: list(c) for t, c in plan},
        "metrics": version.metrics,
        "train_s": time.perf_counter() - tick,
    }


# -- predictions and runs ---------------------------------------------------------------------------------


def predict_fleet(ctx: Context, model: str, fleet: Fleet) -> dict[str, Any]:
    """The simulator's prediction for one model on one fleet, from the stored profiles, the catalog's
    instance types and the active bandwidth model: with PyTorch DDP's gradient buckets (what the runs use,
    25 MiB) and, for comparison, layer by layer (Srift's original model)."""
    from srift.bandwidth.prior import AlphaBetaPrior
    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_instance_type
    from srift.db.session import transaction
    from srift.domain import FleetMember
    from srift.profiling.store import get_profile
    from srift.sim import simulate

    with transaction(ctx.url) as session:
        bandwidth = (
            AlphaBetaPrior()
            if ctx.options.bandwidth is BandwidthSource.PRIOR
            else active_model(session=session, settings=ctx.settings)
        )
        members = [
            FleetMember(
                instance=get_instance_type(session=session, provider="testbed", name=g.type_name),
                count=g.count,
                batch=g.batch,
                profile=get_profile(session=session, profile_id=ctx.profile_ids[(model, g.type_name)]),
            )
            for g in fleet.groups
        ]
    estimate = simulate(members, bandwidth=bandwidth, seed=ctx.options.seed, bucket_cap_mb=DDP_BUCKET_CAP_MB)
    per_layer = simulate(members, bandwidth=bandwidth, seed=ctx.options.seed)
    b = estimate.breakdown
    return {
        "iteration_s": estimate.iteration_s,
        "iteration_p90_s": estimate.iteration_p90_s,
        "per_layer_iteration_s": per_layer.iteration_s,
        "breakdown": {
            "forward_s": b.forward_s,
            "backward_s": b.backward_s,
            "update_s": b.update_s,
            "compute_s": b.compute_s,
            "straggler_wait_s": b.straggler_wait_s,
            "exposed_intra_s": b.exposed_intra_s,
            "exposed_network_s": b.exposed_network_s,
            "communication_s": b.communication_s,
            "granularity": b.granularity if math.isfinite(b.granularity) else None,
            "warnings": list(b.warnings),
        },
        "sources": list(estimate.sources),
    }


def hosts_for(ctx: Context, fleet: Fleet) -> list[str]:
    """Testbed hosts for the fleet's ranks: the first hosts of each type, in group order."""
    used: dict[str, int] = {}
    names = []
    for g in fleet.groups:
        pool = [h.name for h in ctx.testbed.hosts_of_type(g.type_name)]
        start = used.get(g.type_name, 0)
        if start + g.count > len(pool):
            raise InvalidInput(
                f"{fleet.label()} needs {start + g.count} hosts of {g.type_name}, the testbed has "
                f"{len(pool)}",
                hint="add hosts of that type to the spec",
                field="spec.hosts",
            )
        names += pool[start : start + g.count]
        used[g.type_name] = start + g.count
    return names


def iterations_for(effort: Effort, predicted_s: float) -> int:
    """Timed iterations of one run: about `target_run_s` of training, within min_iters..max_iters."""
    wanted = math.ceil(effort.target_run_s / max(predicted_s, 1e-3))
    return max(effort.min_iters, min(effort.max_iters, wanted))


def measure(ctx: Context, pool: AgentPool, model: str, fleet: Fleet, predicted_s: float) -> dict[str, Any]:
    """One real DDP run of `model` on `fleet`; a failure is recorded, not raised."""
    spec = MODELS[model]
    effort = ctx.effort
    iters = iterations_for(effort, predicted_s)
    hosts = hosts_for(ctx, fleet)
    timeout_s = 120.0 + 10.0 * (iters + effort.warmup) * max(predicted_s, 0.05)
    before = conditions.cpu_times()
    load = conditions.load_average()
    tick = time.perf_counter()
    try:
        result: DdpResult = pool.run_case(
            hosts,
            fleet.batches,
            model=spec.factory,
            input_factory=spec.input_factory,
            iters=iters,
            warmup=effort.warmup,
            timeout_s=timeout_s,
        )
    except EnvironmentProblem as exc:
        ctx.log(f"run failed: {model} on {fleet.label()}: {exc.detail}")
        return {"ok": False, "error": exc.detail, "hosts": hosts, "iters": iters}
    return {
        "ok": True,
        "hosts": hosts,
        "iters": iters,
        "warmup": effort.warmup,
        "mean_iter_s": result.mean_iter_s,
        "median_iter_s": result.median_iter_s,
        "stdev_iter_s": result.stdev_iter_s,
        "iter_times_s": list(result.iter_times_s),
        "wall_s": time.perf_counter() - tick,
        "load_avg": load,
        "machine_busy": conditions.busy_fraction(before, conditions.cpu_times()),
    }


def pass_positions(total_runs: int, passes: int) -> list[int]:
    """Indices of the runs before which a timing pass goes (`total_runs`: after the last), evenly spread
    from before the first run to after the last."""
    if passes <= 0:
        return []
    if passes == 1:
        return [total_runs // 2]
    return [round(k * total_runs / (passes - 1)) for k in range(passes)]


def _matrix(ctx: Context, pool: AgentPool, cases: Sequence[Case]) -> list[dict[str, Any]]:
    repeats = ctx.effort.repeats
    ctx.log(f"matrix: {len(cases)} cases × {repeats} repeats, {ctx.effort.timing_passes} timing passes")
    rows: list[dict[str, Any]] = []
    for case in cases:
        predicted = predict_fleet(ctx, case.model, case.fleet)
        rows.append(
            {
                "model": case.model,
                "fleet": case.fleet.label(),
                "composition": case.fleet.composition(),
                "hosts": case.fleet.hosts,
                "types": list(case.fleet.types),
                "type_group": case.fleet.types[0] if not case.fleet.mixed else "mixed",
                "batches": list(case.fleet.batches),
                "predicted": predicted,
                "runs": [],
            }
        )
    total = len(cases) * repeats
    order = []
    rng = random.Random(ctx.options.seed)
    for _ in range(repeats):
        this_round = list(range(len(cases)))
        rng.shuffle(this_round)
        order += this_round
    passes = pass_positions(total, ctx.effort.timing_passes)
    for done, i in enumerate(order):
        for _ in range(passes.count(done)):
            timing_pass(ctx, pool)
        ctx.progress("ddp runs", done, total)
        row = rows[i]
        row["runs"].append(
            measure(ctx, pool, cases[i].model, cases[i].fleet, row["predicted"]["iteration_s"])
        )
    for _ in range(passes.count(total)):
        timing_pass(ctx, pool)
    ctx.progress("ddp runs", total, total)
    if ctx.timing_samples:
        pool_profiles(ctx)
        for case, row in zip(cases, rows, strict=True):
            row["single_pass_predicted"] = row["predicted"]
            row["predicted"] = predict_fleet(ctx, case.model, case.fleet)
    for row in rows:
        finish_case(row)
    return rows


def timing_pass(ctx: Context, pool: AgentPool) -> None:
    """One further timing pass over every profile's breakpoints, each model on the first host of each
    type (the types at once, as when profiling); a failed pass is logged and left out, not raised."""
    for model in sorted({m for m, _ in ctx.profiles}):
        keys = [(model, t) for t in _types(ctx) if (model, t) in ctx.profiles]
        jobs = [
            TimingJob(
                host=ctx.testbed.hosts_of_type(key[1])[0].name,
                model=MODELS[model].factory,
                input_factory=MODELS[model].input_factory,
                batches=tuple(ctx.profiles[key].extra["measured"]["batches"]),
                repeats=ctx.effort.timing_repeats,
                warmup=1,
            )
            for key in keys
        ]
        one_round_s = [
            sum(map(ctx.profiles[key].compute_s, key_batches))
            for key, key_batches in zip(keys, (j.batches for j in jobs), strict=True)
        ]
        expected_s = (1 + ctx.effort.timing_repeats) * max(one_round_s)
        tick = time.perf_counter()
        try:
            found = pool.time_points(jobs, timeout_s=120.0 + 10.0 * expected_s)
        except EnvironmentProblem as exc:
            ctx.log(f"timing pass failed: {model}: {exc.detail}")
            ctx.timing_log.append({"model": model, "ok": False, "error": exc.detail})
            continue
        for key, samples in zip(keys, found, strict=True):
            ctx.timing_samples.setdefault(key, []).append(samples)
        ctx.timing_log.append({"model": model, "ok": True, "took_s": time.perf_counter() - tick})


def pool_profiles(ctx: Context) -> None:
    """Refit every profile that has further timing passes to all its samples, store it, and use it."""
    from srift.db.session import transaction
    from srift.profiling.store import save_profile

    info = {(p["model"], p["instance_type"]): p for p in ctx.profile_info}
    with transaction(ctx.url) as session:
        for key, passes in sorted(ctx.timing_samples.items()):
            first = ctx.profiles[key]
            pooled = pool_curve_samples(first, passes)
            ctx.profiles[key] = pooled
            ctx.profile_ids[key] = save_profile(session=session, profile=pooled)
            entry = info.get(key)
            if entry is not None:
                entry["single_pass_profile_id"] = entry["profile_id"]
                entry["single_pass_compute_s_at_32"] = entry["compute_s_at_32"]
                entry["profile_id"] = ctx.profile_ids[key]
                entry["compute_s_at_32"] = pooled.compute_s(32)
                entry["pass_compute_s_at_32"] = [p.compute_s(32) for p in passes]
                entry["timing_passes"] = 1 + len(passes)


def finish_case(row: dict[str, Any]) -> None:
    """Measured value (mean over successful repeats), its noise, and the prediction's error."""
    means = [r["mean_iter_s"] for r in row["runs"] if r.get("ok")]
    row["measured_iteration_s"] = statistics.fmean(means) if means else None
    row["repeat_noise"] = stats.repeat_noise(means)
    row["repeat_cv"] = stats.coefficient_of_variation(means)
    within = [
        r["stdev_iter_s"] / r["mean_iter_s"] for r in row["runs"] if r.get("ok") and r["mean_iter_s"] > 0
    ]
    row["iteration_cv"] = statistics.fmean(within) if within else None
    measured = row["measured_iteration_s"]
    row["error"] = stats.relative_error(row["predicted"]["iteration_s"], measured) if means else None
    row["per_layer_error"] = (
        stats.relative_error(row["predicted"]["per_layer_iteration_s"], measured) if means else None
    )
    single = row.get("single_pass_predicted")
    if single is not None:
        row["single_pass_error"] = stats.relative_error(single["iteration_s"], measured) if means else None


# -- report -----------------------------------------------------------------------------------------------


def summarize_cases(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """MAPE and underestimates overall and by model, host count, type group and batch mix; noise."""
    good = [r for r in rows if r.get("error") is not None]

    def block(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return stats.summarize([r["error"] for r in items]).to_dict()

    def by(key: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        return {k: block(v) for k, v in stats.group_by(good, key).items()}

    noises = [r["repeat_noise"] for r in good if len([x for x in r["runs"] if x.get("ok")]) >= 2]
    cvs = [r["iteration_cv"] for r in good if r.get("iteration_cv") is not None]
    return {
        "overall": block(good),
        "per_layer_overall": stats.summarize([r["per_layer_error"] for r in good]).to_dict(),
        "single_pass_overall": (
            stats.summarize([r["single_pass_error"] for r in good]).to_dict()
            if all(r.get("single_pass_error") is not None for r in good) and good
            else None
        ),
        "by_model": by(lambda r: str(r["model"])),
        "by_hosts": by(lambda r: str(r["hosts"])),
        "by_type": by(lambda r: str(r["type_group"])),
        "by_batches": by(lambda r: "uniform" if len(set(r["batches"])) == 1 else "mixed"),
        "noise": {
            "repeat_noise_mape": statistics.fmean(noises) if noises else None,
            "repeat_noise_p90": stats.percentile(noises, 90) if noises else None,
            "cases_with_repeats": len(noises),
            "iteration_cv_mean": statistics.fmean(cvs) if cvs else None,
            "explained": "repeat_noise_mape is the MAPE of each repeat against its case's mean: the error "
            "a perfect predictor would still show on these measurements",
        },
        "failed_cases": len(rows) - len(good),
        "failed_runs": sum(1 for r in rows for x in r["runs"] if not x.get("ok")),
    }


def acceptance(
    summary: dict[str, Any], plan: dict[str, Any] | None, *, duration_s: float, full: bool
) -> dict[str, Any]:
    """The issue's acceptance checks, each with the measured figure."""
    overall = summary["overall"]
    out: dict[str, Any] = {
        "mape_le_10pct": {
            "value": overall["mape"],
            "limit": 0.10,
            "ok": overall["mape"] is not None and overall["mape"] <= 0.10,
        },
        "mape_target_5pct": {
            "value": overall["mape"],
            "limit": 0.05,
            "ok": overall["mape"] is not None and overall["mape"] <= 0.05,
        },
        "underestimate_p90_le_13_5pct": {
            "value": overall["underestimate_p90"],
            "limit": 0.135,
            "ok": overall["underestimate_p90"] is not None and overall["underestimate_p90"] <= 0.135,
        },
    }
    if not full:
        out["quick_within_15_min"] = {"value": duration_s, "limit": 900.0, "ok": duration_s <= 900.0}
    if plan is not None:
        ratio = plan.get("primary", {}).get("srift", {}).get("ratio_to_best")
        out["plan_within_5pct_of_best"] = {
            "value": ratio,
            "limit": 1.05,
            "ok": ratio is not None and ratio <= 1.05,
        }
    return out


def _report(
    ctx: Context,
    rows: list[dict[str, Any]],
    plan: dict[str, Any] | None,
    *,
    started_at: dt.datetime,
    load_before: float,
) -> dict[str, Any]:
    from srift.profiling.accelerator import cpu_model

    summary = summarize_cases(rows)
    finished = dt.datetime.now(dt.UTC)
    duration = (finished - started_at).total_seconds()
    return {
        "format": REPORT_FORMAT,
        "level": "full" if ctx.options.full else "quick",
        "command": ctx.options.command,
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": cpu_model(),
            "python": platform.python_version(),
            "load_avg_before": load_before,
            "load_avg_after": conditions.load_average(),
        },
        "testbed": {
            "prefix": ctx.spec.prefix,
            "spec": ctx.spec.to_dict(),
            "max_cores": ctx.options.resolved_max_cores(),
            "cpu_period_us": ctx.options.period_us,
        },
        "effort": {k: getattr(ctx.effort, k) for k in ctx.effort.__slots__ if k != "probe_sizes"}
        | {"probe_sizes": [min(ctx.effort.probe_sizes), max(ctx.effort.probe_sizes)]},
        "profiles": ctx.profile_info,
        "timing_passes": ctx.timing_log,
        "bandwidth": ctx.bandwidth,
        "cases": rows,
        "summary": summary,
        "plan_quality": plan,
        "acceptance": acceptance(summary, plan, duration_s=duration, full=ctx.options.full),
        "timings": ctx.timings,
        "workdir": str(ctx.workdir),
    }
