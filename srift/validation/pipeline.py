"""`srift validate` end to end: testbed, profiles, probes and bandwidth model, predictions, real DDP runs.

Steps, in order (each timed in the report):

1. **testbed** — bring up the spec (the shipped srift/validation/testbed.yaml by default; reused when it is
   already up), register its types in a validation database of its own (SQLite in the work folder), and
   set the measurement conditions of `srift.validation.conditions` (10 ms CPU period, raised CPU weight).
   Every process in the hosts runs with glibc malloc serving every block from its heap and keeping freed
   memory (MALLOC_ENV), as PyTorch's CUDA caching allocator does on a GPU: otherwise whether a large
   block (wide_mlp's 34 MB of gradients; `nn.Bilinear`'s backward temporaries, 32 MiB each and 1.3 GB a
   step at batch 32) is page-faulted afresh each iteration depends on the allocator's history, and one
   step's time varies by half (3–4× for those temporaries) between a profile and a training run of the
   same model on the same host.
2. **profiles** — `srift profile` of every model inside one host of each type (`--accelerator TYPE
   --threads 1`), through the testbed profile-job runner, one host at a time: hosts share this machine's
   memory bandwidth, and a profile is what one host computes alone (`profiles.profile_models`).
   This machine's speed drifts by tens of percent over tens of seconds (other tenants of its host), and
   one profile takes seconds: alone, its curves carry the speed of that moment, and every case of the
   model inherits that bias (seen as −20 % for all cnn cases and +12 % for all transformer cases of one
   run). So `timing_passes` further passes over each profile's breakpoints, timed exactly as the profiler
   times them (srift.validation.timing, in the same hosts), are spread evenly over the DDP runs of step 4
   (a model whose first pass shows that they would not fit `Effort.timing_budget_s` keeps fewer, at least
   the first and the last, spread evenly), and the stored profiles' curves are refit to the mean, over
   passes, of each pass's mean (each pass one moment of the machine, the profile's own included;
   `srift.profiling.curves.pool_curve_samples`) before the cases are predicted. The report keeps the
   single-pass predictions and their errors too.
3. **bandwidth** — allreduce probe jobs (probes/allreduce.py) on 2..4 hosts of each type, and on mixed
   rings of each pair of types (1+1 and 2+2 hosts, `srift.bandwidth.mixed`), stored as probe samples and
   trained into a bandwidth model version that is activated (or: the shipped models, or the α-β prior; the
   report says which).
3b. **overlap** — probes/overlap.py on two hosts of each type at once (its built-in MLP's forward+backward
   alone and while 1 MiB allreduces run, `Effort.overlap_rounds` rounds, a few seconds per type): the
   compute slowdown and its spread go into every profile of the type (`extra.overlap_slowdown`), so the
   predictions stretch backward while the exchange overlaps it and the band carries its spread; the
   report's `overlap` has what each type measured.
4. **matrix** — for every case, the simulator's prediction from the stored (pooled) profiles, the catalog's
   instance types and the active bandwidth model, reducing in PyTorch DDP's gradient buckets as the runs
   do (and, for comparison, layer by layer), then `repeats` real DDP runs (probes/ddp_train.py through
   `srift.validation.ddp`). Repeats run in rounds over all cases, so slow spells of the machine spread
   over cases instead of hitting one.
5. **plan quality** — see `srift.validation.plan_quality`.

The driver itself only waits while DDP runs are timed.

The shared options and context are in `srift.validation.context`, the steps in `srift.validation.steps`,
the report in `srift.validation.report`; this module runs them in order.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

from srift.errors import InvalidInput
from srift.settings import get_settings
from srift.testbed import load_spec
from srift.validation import conditions
from srift.validation.context import (
    DEFAULT_SPEC,
    MALLOC_ENV,
    BandwidthSource,
    Context,
    Effort,
    Log,
    Progress,
    ValidationOptions,
    no_progress,
    quiet,
)
from srift.validation.ddp import AgentPool
from srift.validation.matrix import check_model_names, check_spec
from srift.validation.plan_quality import run_plan_quality
from srift.validation.profiles import pass_positions, probe_overlap, profile_models
from srift.validation.report import REPORT_FORMAT, build_report
from srift.validation.steps import (
    bring_up,
    build_bandwidth,
    iterations_for,
    measure,
    plan_models,
    prepare_database,
    run_matrix,
    select_cases,
)

__all__ = [
    "DEFAULT_SPEC",
    "MALLOC_ENV",
    "REPORT_FORMAT",
    "BandwidthSource",
    "Effort",
    "ValidationOptions",
    "iterations_for",
    "pass_positions",
    "run_validation",
]


def run_validation(
    options: ValidationOptions, *, log: Log = quiet, progress: Progress = no_progress
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
    check_model_names(options.models)  # else model_specs() drops a typo and the run goes on without it
    check_user_models(options)
    workdir = workdir_for(options)
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
    testbed, brought_up = bring_up(spec, settings.data_dir / "testbed", log)
    ctx = Context(options, effort, spec, testbed, settings, url, workdir, log, progress)
    saved: list[conditions.CgroupSettings] = []
    host_env = {**MALLOC_ENV, "PYTHONPATH": _python_path()}
    previous_env = {k: os.environ.get(k) for k in host_env}
    os.environ.update(host_env)  # inherited by every process started in the hosts
    try:
        prepare_database(ctx)
        for host in testbed.hosts:
            for directory in host.cgroups:
                got = conditions.tune_cgroup(directory, cpu_cores=host.cpu_cores, period_us=options.period_us)
                if got is not None:
                    saved.append(got)
        ctx.timings["testbed_s"] = time.perf_counter() - tick
        cases = select_cases(ctx)
        tick = time.perf_counter()
        profile_models(ctx, sorted({c.model for c in cases} | plan_models(ctx)))
        ctx.timings["profiles_s"] = time.perf_counter() - tick
        tick = time.perf_counter()
        build_bandwidth(ctx)
        ctx.timings["bandwidth_s"] = time.perf_counter() - tick
        preload = sorted({m.module for m in options.case_specs().values() if m.module})
        with AgentPool(testbed, workdir=workdir, preload=preload) as pool:
            tick = time.perf_counter()
            probe_overlap(ctx, pool)
            ctx.timings["overlap_s"] = time.perf_counter() - tick
            tick = time.perf_counter()
            results = run_matrix(ctx, pool, cases)
            ctx.timings["matrix_s"] = time.perf_counter() - tick
            plan: dict[str, Any] | None = None
            if options.plan_quality and spec.locations:
                log("plan quality: skipped (it plans inside one location; this spec has several)")
            elif options.plan_quality:
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
    report = build_report(ctx, results, plan, started_at=started_at, load_before=load_before)
    report["duration_s"] = time.perf_counter() - started
    report["testbed"]["brought_up"] = brought_up
    (workdir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


USED_PARAMETERS_HINT = (
    "use every parameter in the loss, delete the ones the forward pass skips, or freeze them "
    "(requires_grad=False)"
)


def check_user_models(options: ValidationOptions) -> None:
    """Import every user model's factory, input factory and loss, and take one training step with it here,
    before the testbed comes up, so that a typo, a model that cannot train, or one whose parameters do not
    all get a gradient (DDP refuses it on several hosts: every multi-host case would fail after its
    profile) is an InvalidInput naming the option (`model[0]`, ...) in seconds, not a failed run later."""
    from srift.profiling.loading import resolve_callable
    from srift.profiling.profiler import parameters_without_grad

    for i, m in enumerate(options.user_models):
        model_fn = resolve_callable(m.factory, what="model factory", field=f"model[{i}]")
        input_fn = resolve_callable(m.input_factory, what="input factory", field=f"input[{i}]")
        loss_fn = resolve_callable(m.loss, what="loss", field=f"loss[{i}]") if m.loss is not None else None
        fields = {"model_factory": f"model[{i}]", "input_factory": f"input[{i}]", "loss_fn": f"loss[{i}]"}
        try:
            missing = parameters_without_grad(model_fn, input_fn, loss_fn)
        except InvalidInput as exc:
            field = fields.get(exc.field or "", f"model[{i}]")
            raise InvalidInput(exc.detail, hint=exc.hint, field=field) from exc
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise InvalidInput(
                f"model `{m.factory}`: {len(missing)} trainable parameter(s) get no gradient in a training "
                f'step ({shown}); DDP refuses such a model on more than one host ("Expected to have '
                'finished reduction in the prior iteration"), so every multi-host case would fail',
                hint=USED_PARAMETERS_HINT,
                field=f"model[{i}]",
            )


def _python_path() -> str:
    """PYTHONPATH for the hosts: the current one plus the working directory, where `srift validate` was
    started, so that the user's MODULE:FACTORY imports inside the hosts as it does here."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys([os.getcwd(), *parts]))


def workdir_for(options: ValidationOptions) -> Path:
    """The run's work folder (created): `options.workdir`, or a time-stamped one under the data dir."""
    if options.workdir is not None:
        path = options.workdir
    else:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = get_settings().data_dir / "validation" / stamp
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()
