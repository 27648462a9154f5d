"""`srift validate`'s profiling steps: `srift profile` in each type's host, further timing passes spread
over the matrix (the testbed adapter's measure of its hosts' drift), and the overlap probe."""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from srift.errors import EnvironmentProblem
from srift.profiling.curves import pool_curve_samples
from srift.validation.context import Context, types_in_scope
from srift.validation.ddp import AgentPool, TimingJob

if TYPE_CHECKING:
    from srift.jobs.run import JobRun
    from srift.jobs.spec import ProbeJobSpec, ProfileJobSpec


def _profile_one(ctx: Context, model: str, type_name: str) -> tuple[Any, float]:
    """`srift profile` of `model` inside one host of `type_name` (the testbed profile-job runner)."""
    from srift.jobs.runners import run_testbed_profiles
    from srift.jobs.service import TypeFacts
    from srift.jobs.spec import JobProvider, ProfileJobSpec

    effort = ctx.effort
    spec = ProfileJobSpec(
        provider=JobProvider.TESTBED,
        instance_types=(type_name,),
        model=ctx.model(model).factory,
        input=ctx.model(model).input_factory,
        loss=ctx.model(model).loss,
        model_name=model,
        max_batch=effort.profile_max_batch,
        repeats=effort.profile_repeats,
        iterations=effort.profile_iterations,
        time_budget_s=900.0,
        testbed_prefix=ctx.spec.prefix,
    )
    run = job_run(ctx, "profile", spec)
    tick = time.perf_counter()
    try:
        (profile,) = run_testbed_profiles(
            run, spec, [TypeFacts(instance_type=type_name, provider="testbed", region="local")]
        )
    finally:
        drop_job_folder(ctx, run.job_id)
    return profile, time.perf_counter() - tick


def job_run(ctx: Context, kind: str, spec: ProbeJobSpec | ProfileJobSpec) -> JobRun:
    """A job runner's attempt for one of validation's own jobs (never stored as a job)."""
    from srift.jobs.run import JobRun

    return JobRun(
        job_id=ctx.next_job_id(), attempt=1, worker_id="validate", kind=kind, spec=spec, settings=ctx.settings
    )


def drop_job_folder(ctx: Context, job_id: int) -> None:
    """The job runners work in <data dir>/jobs/<id>; validation's ids are never stored jobs, so drop it."""
    shutil.rmtree(ctx.settings.data_dir / "jobs" / str(job_id), ignore_errors=True)


def profile_models(ctx: Context, models: Sequence[str]) -> None:
    """Profile each model in one host of each type, one host at a time.

    The testbed's hosts share this machine's memory bandwidth, so a host computes slower while another
    one does (wideconv at batch 32 on tbv.large, forward+backward as the profiler times it: 765 and 627 ms
    with a tbv.small host profiling beside it, 513 and 539 ms alone; benchmarks/causes.py at 0856b84). A
    profile must be what one host computes alone, as a cloud VM does: the one-host
    cases run alone, and the co-location factor measures, in each multi-host run, how much slower its
    hosts compute together than alone (srift.validation.colocation); a profile taken beside another host
    counts that slowdown twice (unseen17's wideconv: 41 % MAPE profiled beside, 14 % alone; round 14 of
    docs/validation.md at 0856b84)."""
    from srift.db.session import transaction
    from srift.profiling.store import save_profile

    types = types_in_scope(ctx)
    for k, name in enumerate(models):
        ctx.progress("profiles", k, len(models))
        ctx.log(f"profile: {name} on {', '.join(types)}")
        found = {t: _profile_one(ctx, name, t) for t in types}
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


def passes_within(budget_s: float | None, took_s: float, passes: int) -> int:
    """How many of `passes` further timing passes a model keeps when one took `took_s`: as many as fit
    `budget_s`, at least two (before the first run and after the last) and at most all; all without a
    budget. A model whose pass takes long (grulm, 8–10 s a pass against the shipped models' 2–4 s) would
    otherwise push the quick matrix past its 15 minutes (protocol run 13)."""
    if budget_s is None or took_s <= 0:
        return passes
    return min(passes, max(2, int(budget_s // took_s)))


def spread_slots(slots: int, count: int) -> set[int]:
    """`count` of the pass slots 0 … `slots` − 1, evenly spread from the first to the last."""
    if count >= slots:
        return set(range(slots))
    if count <= 1:
        return {0}
    return {round(k * (slots - 1) / (count - 1)) for k in range(count)}


def timing_models(ctx: Context) -> list[str]:
    """The models with profiles to time, in a stable order."""
    return sorted({m for m, _ in ctx.profiles})


def timing_pass(ctx: Context, pool: AgentPool, models: Sequence[str] | None = None) -> dict[str, float]:
    """One further timing pass over the breakpoints of every profile of `models` (default: all), each
    model on the first host of each type, one host at a time as when profiling (see `profile_models`);
    a failed pass is logged and left out, not raised. Returns the seconds each model's pass took."""
    took: dict[str, float] = {}
    for model in timing_models(ctx) if models is None else models:
        keys = [(model, t) for t in types_in_scope(ctx) if (model, t) in ctx.profiles]
        jobs = [
            TimingJob(
                host=ctx.testbed.hosts_of_type(key[1])[0].name,
                model=ctx.model(model).factory,
                input_factory=ctx.model(model).input_factory,
                loss=ctx.model(model).loss,
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
            found = [pool.time_points([job], timeout_s=120.0 + 10.0 * expected_s)[0] for job in jobs]
        except EnvironmentProblem as exc:
            ctx.log(f"timing pass failed: {model}: {exc.detail}")
            ctx.timing_log.append({"model": model, "ok": False, "error": exc.detail})
            continue
        for key, samples in zip(keys, found, strict=True):
            ctx.timing_samples.setdefault(key, []).append(samples)
        took[model] = time.perf_counter() - tick
        ctx.timing_log.append({"model": model, "ok": True, "took_s": took[model]})
    return took


OVERLAP_BYTES = "1M"
"""The overlap probe's allreduce: DDP's first bucket (1 MiB), the one most often reduced during backward."""
OVERLAP_STEPS = 4
OVERLAP_TIMEOUT_S = 120.0


def probe_overlap(ctx: Context, pool: AgentPool) -> None:
    """Step 3b: probes/overlap.py (its built-in MLP at batch 32 against 1 MiB allreduces, gloo) on two
    hosts of every type in scope, all types at once, and the measured compute slowdown and its spread put
    into every profile of that type (`extra.overlap_slowdown`, `extra.overlap_slowdown_spread`), so the
    predictions stretch backward while the exchange overlaps it, and the allreduce's slowdown
    (`extra.comm_overlap_slowdown`), so they slow the exchange while the members compute. A type with
    fewer than two hosts, or a failed probe, keeps its profiles as they are; the report's `overlap` says
    which."""
    from srift.db.session import transaction
    from srift.domain.profile import MAX_OVERLAP_SLOWDOWN
    from srift.profiling.store import save_profile

    if ctx.effort.overlap_rounds < 1:
        return
    groups = {}
    for type_name in types_in_scope(ctx):
        hosts = [h.name for h in ctx.testbed.hosts_of_type(type_name)][:2]
        if len(hosts) == 2:
            groups[type_name] = hosts
        else:
            ctx.overlap[type_name] = {"ok": False, "why": "fewer than two hosts of the type"}
    if not groups:
        return
    argv = ["--bytes", OVERLAP_BYTES, "--batch", "32", "--steps", str(OVERLAP_STEPS)]
    argv += ["--rounds", str(ctx.effort.overlap_rounds)]
    started = time.perf_counter()
    try:
        found = pool.overlap(list(groups.values()), argv=argv, timeout_s=OVERLAP_TIMEOUT_S)
    except EnvironmentProblem as exc:
        ctx.log(f"overlap probe failed ({exc}); predictions go without the overlap slowdown")
        for type_name in groups:
            ctx.overlap[type_name] = {"ok": False, "why": str(exc)}
        return
    took_s = time.perf_counter() - started
    for type_name, data in zip(groups, found, strict=True):
        slowdown = min(MAX_OVERLAP_SLOWDOWN, max(1.0, float(data["compute_slowdown"])))
        spread = min(1.0, max(0.0, float(data["compute_slowdown_spread"])))
        ctx.overlap[type_name] = {
            "ok": True,
            "hosts": groups[type_name],
            "took_s": took_s,
            "overlap_slowdown": slowdown,
            "overlap_slowdown_spread": spread,
            "comm_overlap_slowdown": min(MAX_OVERLAP_SLOWDOWN, max(1.0, float(data["comm_slowdown"]))),
            "probe": {k: data[k] for k in ("compute_slowdown", "comm_slowdown", "buffer_bytes", "model")},
        }
        ctx.log(
            f"overlap {type_name}: compute ×{data['compute_slowdown']:.3f} (spread {spread:.3f}) while "
            f"allreducing {OVERLAP_BYTES}; allreduce ×{data['comm_slowdown']:.2f} ({took_s:.0f} s)"
        )
    info = {(p["model"], p["instance_type"]): p for p in ctx.profile_info}
    with transaction(ctx.url) as session:
        for key, profile in sorted(ctx.profiles.items()):
            got = ctx.overlap.get(key[1])
            if not got or not got["ok"]:
                continue
            measured = dataclasses.replace(
                profile,
                extra={
                    **profile.extra,
                    "overlap_slowdown": got["overlap_slowdown"],
                    "overlap_slowdown_spread": got["overlap_slowdown_spread"],
                    "comm_overlap_slowdown": got["comm_overlap_slowdown"],
                },
            )
            ctx.profiles[key] = measured
            ctx.profile_ids[key] = save_profile(session=session, profile=measured)
            if key in info:
                info[key]["profile_id"] = ctx.profile_ids[key]


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


def pass_positions(total_runs: int, passes: int) -> list[int]:
    """Indices of the runs before which a timing pass goes (`total_runs`: after the last), evenly spread
    from before the first run to after the last."""
    if passes <= 0:
        return []
    if passes == 1:
        return [total_runs // 2]
    return [round(k * total_runs / (passes - 1)) for k in range(passes)]
