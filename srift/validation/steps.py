"""The steps of `srift validate`: testbed, profiles, bandwidth, predictions and DDP runs (see pipeline)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srift.bandwidth.mixed import ring_name
from srift.errors import EnvironmentProblem, InvalidInput, SriftError
from srift.profiling.curves import pool_curve_samples
from srift.testbed import Testbed, TestbedSpec
from srift.validation import conditions, stats
from srift.validation.colocation import (
    ColocationFactors,
    colocation_factors,
    solo_ranks,
)
from srift.validation.context import (
    PROBE_NODE_COUNTS,
    BandwidthSource,
    Context,
    Effort,
    Log,
    types_in_scope,
)
from srift.validation.ddp import AgentPool, Colocation, DdpResult, TimingJob
from srift.validation.matrix import Case, Fleet, build_matrix

if TYPE_CHECKING:
    from srift.bandwidth.records import ProbeRecord
    from srift.domain import BusBandwidthModel, FleetMember
    from srift.jobs.run import JobRun
    from srift.jobs.spec import ProbeJobSpec, ProfileJobSpec
    from srift.sim.geo import GeoContext


def bring_up(spec: TestbedSpec, root: Path, log: Log) -> tuple[Testbed, bool]:
    """Testbed.up (the job runners find it again under `root`); True when this call created it.

    A build that this call started and that stops midway (a failed step, Ctrl-C, SIGTERM) is taken down
    before the error goes on, so no half-made namespaces or cgroups outlive the run.
    """
    from srift.testbed import down, status

    try:
        was_up = status(spec.prefix, root=root).healthy
    except SriftError:
        was_up = False
    log(f"testbed {spec.prefix}: {'reusing the running one' if was_up else 'bringing it up'}")
    try:
        return Testbed.up(spec, root=root), not was_up
    except BaseException:
        if not was_up:
            log(f"testbed {spec.prefix}: its build stopped; taking down what was made")
            down(spec.prefix, root=root)
        raise


def prepare_database(ctx: Context) -> None:
    """Migrate the run's own database and register the testbed's instance types in its catalog."""
    from srift.db import migrate
    from srift.db.session import transaction
    from srift.testbed.catalog import register_types

    migrate.upgrade(ctx.url)
    with transaction(ctx.url) as session:
        register_types(session=session, spec=ctx.spec)


def select_cases(ctx: Context) -> list[Case]:
    """The matrix's cases for this spec, narrowed to the types in scope; refused when none is left."""
    spec = ctx.spec
    cases = build_matrix(
        spec,
        models=tuple(ctx.options.model_specs()),
        known=tuple(ctx.options.model_specs()),
        full=ctx.options.full,
        max_cores=ctx.options.resolved_max_cores(),
        max_hosts=ctx.options.max_hosts,
    )
    allowed = set(types_in_scope(ctx))
    cases = [c for c in cases if set(c.fleet.types) <= allowed]
    if ctx.options.across_only:
        if not spec.links:
            raise InvalidInput(
                "--across-only needs a testbed spec with linked locations",
                hint="use --spec srift/validation/testbed-geo.yaml (or add `locations` and `links`)",
                field="across_only",
            )
        cases = [c for c in cases if c.fleet.across]
    if not cases:
        raise InvalidInput(
            "the matrix is empty for this spec, types and max_cores",
            hint="allow more CPU (--max-cores) or more types",
            field="types",
        )
    return cases


def plan_models(ctx: Context) -> set[str]:
    """Models the plan-quality step needs profiles of."""
    return {ctx.options.resolved_plan_model()} if ctx.options.plan_quality else set()


# -- profiles ---------------------------------------------------------------------------------------------


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
    run = _job_run(ctx, "profile", spec)
    tick = time.perf_counter()
    try:
        (profile,) = run_testbed_profiles(
            run, spec, [TypeFacts(instance_type=type_name, provider="testbed", region="local")]
        )
    finally:
        _drop_job_folder(ctx, run.job_id)
    return profile, time.perf_counter() - tick


def _job_run(ctx: Context, kind: str, spec: ProbeJobSpec | ProfileJobSpec) -> JobRun:
    """A job runner's attempt for one of validation's own jobs (never stored as a job)."""
    from srift.jobs.run import JobRun

    return JobRun(
        job_id=ctx.next_job_id(), attempt=1, worker_id="validate", kind=kind, spec=spec, settings=ctx.settings
    )


def _drop_job_folder(ctx: Context, job_id: int) -> None:
    """The job runners work in <data dir>/jobs/<id>; validation's ids are never stored jobs, so drop it."""
    shutil.rmtree(ctx.settings.data_dir / "jobs" / str(job_id), ignore_errors=True)


def profile_models(ctx: Context, models: Sequence[str]) -> None:
    """Profile each model in one host of each type, one host at a time.

    The testbed's hosts share this machine's memory bandwidth, so a host computes slower while another
    one does (wideconv at batch 32 on tbv.large, forward+backward as the profiler times it: 765 and 627 ms
    with a tbv.small host profiling beside it, 513 and 539 ms alone; `benchmarks.causes onehost
    [--one-at-a-time]`, see git history: benchmarks/causes.py at commit 0856b84). A profile must be
    what one host computes alone, as a cloud VM does: the one-host cases run alone, and the co-location
    factor measures, in each multi-host run, how much slower its hosts compute together than alone
    (srift.validation.colocation); a profile taken beside another host counts that slowdown twice
    (unseen17's wideconv: 41 % MAPE profiled beside, 14 % alone; round 14 of docs/validation.md)."""
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


# -- bandwidth --------------------------------------------------------------------------------------------


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


def build_bandwidth(ctx: Context) -> None:
    """Step 3: the bandwidth model the predictions use (fresh probes, the shipped models, or the prior)."""
    from srift.bandwidth.records import SampleQuery
    from srift.bandwidth.registry import active_version, register_shipped, train_version
    from srift.bandwidth.samples import store_samples
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
    cap = ctx.options.resolved_max_cores()
    records = []
    plan: list[tuple[str, tuple[int, ...]]] = []
    for type_name in types_in_scope(ctx):
        t = ctx.spec.type_named(type_name)
        hosts = len(leading_hosts(ctx, type_name))
        counts = tuple(
            n
            for n in PROBE_NODE_COUNTS
            if n <= min(hosts, ctx.options.max_hosts) and n * t.cpu_cores <= cap + 1e-9
        )
        if counts:
            plan.append((type_name, counts))
    rings = mixed_ring_plan(ctx, [t for t, _ in plan])
    total = len(plan) + len(rings)
    for k, (types, counts) in enumerate([((t,), c) for t, c in plan] + rings):
        ctx.progress("probes", k, total)
        records.extend(probe_ring(ctx, types, counts))
    ctx.progress("probes", total, total)
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
        "how": "trained now on the testbed's own allreduce probes (probe jobs on 2..4 hosts per type, and "
        "mixed rings of each pair of types on 1+1 and 2+2 hosts)",
        "version": version.version,
        "covers": version.covers,
        "samples": len(records),
        "probe_plan": {t: list(c) for t, c in plan} | {ring_name(ts): list(c) for ts, c in rings},
        "metrics": version.metrics,
        "train_s": time.perf_counter() - tick,
    }


def mixed_ring_plan(ctx: Context, probed: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    """The mixed rings to probe: each pair of probed types (weaker first, the order the matrix's mixed
    fleets run in) on 1+1 and 2+2 hosts, where the hosts and `max_cores` allow."""
    cap = ctx.options.resolved_max_cores()
    out: list[tuple[tuple[str, ...], tuple[int, ...]]] = []
    for a, b in itertools.combinations(probed, 2):
        cores = ctx.spec.type_named(a).cpu_cores + ctx.spec.type_named(b).cpu_cores
        hosts = min(len(leading_hosts(ctx, a)), len(leading_hosts(ctx, b)))
        counts = tuple(
            2 * k for k in (1, 2) if k <= hosts and 2 * k <= ctx.options.max_hosts and k * cores <= cap + 1e-9
        )
        if counts:
            out.append(((a, b), counts))
    return out


def probe_ring(ctx: Context, types: Sequence[str], counts: tuple[int, ...]) -> list[ProbeRecord]:
    """One probe job on each of `counts` hosts: of one type, or a mixed ring of `types` (equal hosts of
    each, in their order)."""
    from srift.jobs.runners import run_testbed_mixed_probe, run_testbed_probe
    from srift.jobs.service import TypeFacts
    from srift.jobs.spec import JobProvider, ProbeJobSpec

    name = ring_name(types) if len(types) > 1 else types[0]
    what = f"mixed ring {' + '.join(types)}" if len(types) > 1 else name
    ctx.log(f"probe: {what} on {', '.join(str(n) for n in counts)} hosts")
    spec = ProbeJobSpec(
        provider=JobProvider.TESTBED,
        instance_type=name,
        node_counts=counts,
        sizes=ctx.effort.probe_sizes,
        repeats=ctx.effort.probe_repeats,
        warmup=1,
        time_budget_s=600.0,
        testbed_prefix=ctx.spec.prefix,
    )
    run = _job_run(ctx, "probe", spec)
    rates_gbps = [ctx.spec.type_named(t).rate_mbit / 1000 for t in types]
    members = [
        TypeFacts(instance_type=t, provider="testbed", region="local", rated_gbps=r)
        for t, r in zip(types, rates_gbps, strict=True)
    ]
    try:
        if len(members) > 1:
            return run_testbed_mixed_probe(run, spec, members)
        return run_testbed_probe(run, spec, members[0])
    finally:
        _drop_job_folder(ctx, run.job_id)


# -- predictions and runs ---------------------------------------------------------------------------------


def predict_fleet(
    ctx: Context, model: str, fleet: Fleet, colocation: ColocationFactors | None = None
) -> dict[str, Any]:
    """The served simulator's prediction for one model on one fleet (`srift.sim.simulate` with the served
    configuration, as `POST /v1/predictions` runs it), from the stored profiles, the catalog's instance
    types and the active bandwidth model, with the testbed's own inputs from its adapter
    (srift.validation.adapter: fresh CPU quota after a wait, and `colocation`, what the fleet's runs
    measured of its hosts computing at once). For comparison the same inputs layer by layer (the Srift
    paper's exchange) and the served simulator on the profiles as `srift profile` wrote them."""
    from srift.bandwidth.prior import AlphaBetaPrior
    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_instance_type
    from srift.db.session import transaction
    from srift.domain import FleetMember
    from srift.domain.geo import Location
    from srift.domain.network import Library, NetworkSpec
    from srift.profiling.store import get_profile

    with transaction(ctx.url) as session:
        testbed = NetworkSpec(library=Library.GLOO)  # the DDP runs use gloo over the testbed's TCP links
        bandwidth = (
            AlphaBetaPrior(network=testbed)
            if ctx.options.bandwidth is BandwidthSource.PRIOR
            else active_model(session=session, settings=ctx.settings, network=testbed)
        )
        members = [
            FleetMember(
                instance=get_instance_type(session=session, provider="testbed", name=g.type_name),
                count=g.count,
                batch=g.batch,
                profile=get_profile(session=session, profile_id=ctx.profile_ids[(model, g.type_name)]),
                location=Location("testbed", g.location) if fleet.across and g.location else None,
            )
            for g in fleet.groups
        ]
    geo = testbed_geo(ctx.spec) if fleet.across else None
    return predict_members(
        members, bandwidth=bandwidth, seed=ctx.options.seed, effort=ctx.effort, geo=geo, colocation=colocation
    )


def predict_members(
    members: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int,
    effort: Effort,
    geo: GeoContext | None = None,
    colocation: ColocationFactors | None = None,
) -> dict[str, Any]:
    """A case's prediction document for a fleet of stored profiles (see `predict_fleet`): `iteration_s`
    is what `srift.sim.simulate` answers `POST /v1/predictions` for the adapter's inputs."""
    from srift.domain.simulation import PER_LAYER
    from srift.sim import simulate
    from srift.validation import adapter

    inputs = adapter.testbed_fleet(members, bandwidth=bandwidth, seed=seed, geo=geo, colocation=colocation)
    point = simulate(inputs, bandwidth=bandwidth, seed=seed, band=False, geo=geo)
    # The band describes what the case measures: the mean of its timed iterations over its repeats,
    # which run in shuffled rounds minutes apart (the host's drift meets each anew).
    measured_iterations = iterations_for(effort, point.iteration_s) * effort.repeats
    estimate = simulate(
        inputs, bandwidth=bandwidth, seed=seed, iterations=measured_iterations, runs=effort.repeats, geo=geo
    )
    per_layer = simulate(inputs, bandwidth=bandwidth, seed=seed, band=False, geo=geo, config=PER_LAYER)
    unadapted = simulate(members, bandwidth=bandwidth, seed=seed, band=False, geo=geo)
    b = estimate.breakdown
    band = estimate.band
    return {
        "iteration_s": estimate.iteration_s,
        "iteration_p10_s": estimate.iteration_p10_s,
        "iteration_p90_s": estimate.iteration_p90_s,
        "band": {
            "sigma": band.sigma if band else 0.0,
            "iterations": measured_iterations,
            "terms": [
                {"source": t.source, "spread": t.spread, "sigma": t.sigma, "measured_by": t.measured_by}
                for t in (band.terms if band else ())
            ],
        },
        "per_layer_iteration_s": per_layer.iteration_s,
        "unadapted_iteration_s": unadapted.iteration_s,
        "adapter": {
            "compute_scale": [m.profile.extra.get("compute_scale", 1.0) for m in inputs],
            "straggler_cv": [m.profile.straggler_cv for m in inputs],
        },
        "breakdown": {
            "forward_s": b.forward_s,
            "backward_s": b.backward_s,
            "update_s": b.update_s,
            "compute_s": b.compute_s,
            "straggler_wait_s": b.straggler_wait_s,
            "exposed_intra_s": b.exposed_intra_s,
            "exposed_network_s": b.exposed_network_s,
            "communication_s": b.communication_s,
            "exposed_location_s": b.exposed_location_s,
            "granularity": b.granularity if math.isfinite(b.granularity) else None,
            "warnings": list(b.warnings),
        },
        "sources": list(estimate.sources),
    }


def testbed_links(spec: TestbedSpec) -> list[dict[str, Any]]:
    """The spec's links as a plan request's `links` (`{from, to, bandwidth_gbps, rtt_ms}`): what a user
    would give for two regions. The round trip is the link's delay both ways plus the hosts' own (the mean
    of the two locations' slowest types, as the testbed adds it)."""

    def slowest_delay_ms(location: str) -> float:
        names = next(loc.hosts for loc in spec.locations if loc.name == location)
        return max(spec.type_of(h).delay_ms for h in names)

    out = []
    for link in spec.links:
        a, b = link.between
        own_ms = (slowest_delay_ms(a) + slowest_delay_ms(b)) / 2
        out.append(
            {
                "from": f"testbed/{a}",
                "to": f"testbed/{b}",
                "bandwidth_gbps": link.rate_mbit / 1000,
                "rtt_ms": 2 * (link.delay_ms + own_ms),
            }
        )
    return out


def testbed_geo(spec: TestbedSpec) -> Any:
    """The simulator's GeoContext for fleets across the spec's locations: the shipped network facts with
    the testbed's links as the request's measured links (srift.services.placement.geo_context), flat ring
    (what DDP's gloo allreduce runs)."""
    from srift.domain.geo import AllreducePattern
    from srift.services.placement import LinkSpec, geo_context

    links = [
        LinkSpec(
            source=k["from"], destination=k["to"], bandwidth_gbps=k["bandwidth_gbps"], rtt_ms=k["rtt_ms"]
        )
        for k in testbed_links(spec)
    ]
    return geo_context(pattern=AllreducePattern.RING, links=links)


def hosts_for(ctx: Context, fleet: Fleet) -> list[str]:
    """Testbed hosts for the fleet's ranks: the first hosts of each type (in the group's location, when it
    names one), in group order."""
    used: dict[tuple[str, str | None], int] = {}
    names = []
    for g in fleet.groups:
        pool = [
            h.name
            for h in ctx.testbed.hosts_of_type(g.type_name)
            if g.location is None or h.location == g.location
        ]
        key = (g.type_name, g.location)
        start = used.get(key, 0)
        if start + g.count > len(pool):
            where = f" in {g.location}" if g.location else ""
            raise InvalidInput(
                f"{fleet.label()} needs {start + g.count} hosts of {g.type_name}{where}, the testbed has "
                f"{len(pool)}",
                hint="add hosts of that type to the spec",
                field="spec.hosts",
            )
        names += pool[start : start + g.count]
        used[key] = start + g.count
    return names


def iterations_for(effort: Effort, predicted_s: float) -> int:
    """Timed iterations a run is expected to take: about `target_run_s` of training at the predicted
    iteration time, within min_iters..max_iters (the run itself counts from its own warm-up's time)."""
    wanted = math.ceil(effort.target_run_s / max(predicted_s, 1e-3))
    return max(effort.min_iters, min(effort.max_iters, wanted))


def run_timeout_s(effort: Effort, warmup: int, predicted_s: float) -> float:
    """Seconds after which a run is killed as hung: ten times its timed budget plus thirty times its
    warm-up and minimum iterations at the predicted time (a misprediction, DDP's bucket rebuild and the
    co-location rounds lengthen those). Not from `max_iters`, which only caps a short step's count: 500
    iterations of a 2 s prediction would allow hours."""
    return 120.0 + 10.0 * effort.target_run_s + 30.0 * (warmup + effort.min_iters) * max(predicted_s, 0.05)


DDP_REBUILD_ITERATION = 2
"""torch's DDP rebuilds its gradient buckets (in the order the first backward made them ready) in the
forward of its second iteration (torch/nn/parallel/distributed.py, `reducer._rebuild_buckets`)."""


def long_run_warmup(effort: Effort, fleet: Fleet) -> int:
    """Warm-up iterations of a run predicted above `effort.long_iteration_s`: one on one host (no DDP),
    else through DDP's bucket rebuild, so that no timed iteration pays it (densenet on four small hosts:
    the first timed iteration after one warm-up 1.96 … 2.20 s, after two 1.30 … 1.47 s, the rest 1.19 …
    1.66 s; see git history: docs/images/causes/warmup-densenet-s9.json at commit 0856b84)."""
    if fleet.hosts < 2:
        return 1
    return min(max(effort.warmup, 1), DDP_REBUILD_ITERATION)


def measure(
    ctx: Context, pool: AgentPool, model: str, fleet: Fleet, predicted_s: float, *, colocation: bool = False
) -> dict[str, Any]:
    """One real DDP run of `model` on `fleet`; a failure is recorded, not raised. With `colocation`, a
    multi-host run ends with the effort's compute-only rounds (srift.validation.colocation)."""
    spec = ctx.model(model)
    effort = ctx.effort
    iters = iterations_for(effort, predicted_s)
    warmup = long_run_warmup(effort, fleet) if predicted_s > effort.long_iteration_s else effort.warmup
    hosts = hosts_for(ctx, fleet)
    timeout_s = run_timeout_s(effort, warmup, predicted_s)
    before = conditions.cpu_times()
    load = conditions.load_average()
    tick = time.perf_counter()
    try:
        result: DdpResult = pool.run_case(
            hosts,
            fleet.batches,
            model=spec.factory,
            input_factory=spec.input_factory,
            loss=spec.run_loss,
            iters=effort.max_iters,
            warmup=warmup,
            timeout_s=timeout_s,
            time_budget_s=effort.target_run_s,
            min_iters=effort.min_iters,
            colocation_rounds=effort.colocation_rounds if colocation else 0,
            solo_ranks=solo_ranks(fleet),
            colocation_budget_s=effort.colocation_budget_s,
            colocation_idle_s=conditions.longest_period_s(
                (ctx.testbed.host(h).cpu_cores for h in hosts), ctx.options.period_us
            ),
        )
    except EnvironmentProblem as exc:
        ctx.log(f"run failed: {model} on {fleet.label()}: {exc.detail}")
        return {"ok": False, "error": exc.detail, "hosts": hosts, "iters": iters}
    return {
        "ok": True,
        "hosts": hosts,
        "iters": len(result.iter_times_s),
        "expected_iters": iters,
        "warmup": warmup,
        "mean_iter_s": result.mean_iter_s,
        "median_iter_s": result.median_iter_s,
        "stdev_iter_s": result.stdev_iter_s,
        "iter_times_s": list(result.iter_times_s),
        "wall_s": time.perf_counter() - tick,
        "load_avg": load,
        "machine_busy": conditions.busy_fraction(before, conditions.cpu_times()),
        **({"colocation": result.colocation.to_dict()} if result.colocation is not None else {}),
    }


def pass_positions(total_runs: int, passes: int) -> list[int]:
    """Indices of the runs before which a timing pass goes (`total_runs`: after the last), evenly spread
    from before the first run to after the last."""
    if passes <= 0:
        return []
    if passes == 1:
        return [total_runs // 2]
    return [round(k * total_runs / (passes - 1)) for k in range(passes)]


def run_matrix(ctx: Context, pool: AgentPool, cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Step 4: predict every case, run its repeats in shuffled rounds with the timing passes spread over
    them, then re-predict from the pooled profiles and score each case."""
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
                "locations": list(case.fleet.locations),
                "placement": "across locations" if case.fleet.across else "one location",
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
    slots = pass_positions(total, ctx.effort.timing_passes)
    kept: dict[str, set[int]] = {}
    slot = 0

    def pass_slot(j: int) -> None:
        """The j-th further pass, of the models that keep it; the first pass sets what each keeps."""
        models = [m for m in timing_models(ctx) if j == 0 or j in kept.get(m, {j})]
        took = timing_pass(ctx, pool, models)
        if j == 0:
            for model, took_s in took.items():
                count = passes_within(ctx.effort.timing_budget_s, took_s, len(slots))
                kept[model] = spread_slots(len(slots), count)

    for done, i in enumerate(order):
        while slot < len(slots) and slots[slot] == done:
            pass_slot(slot)
            slot += 1
        ctx.progress("ddp runs", done, total)
        row = rows[i]
        row["runs"].append(
            measure(
                ctx, pool, cases[i].model, cases[i].fleet, row["predicted"]["iteration_s"], colocation=True
            )
        )
    while slot < len(slots):
        pass_slot(slot)
        slot += 1
    ctx.progress("ddp runs", total, total)
    if ctx.timing_samples:
        pool_profiles(ctx)
    for case, row in zip(cases, rows, strict=True):
        found = colocation_factors(
            case.fleet, [Colocation.from_dict(r["colocation"]) for r in row["runs"] if r.get("colocation")]
        )
        if found is not None:
            row["colocation"] = found.to_dict()
        if ctx.timing_samples:
            row["single_pass_predicted"] = row["predicted"]
        if ctx.timing_samples or found is not None:
            row["predicted"] = predict_fleet(ctx, case.model, case.fleet)
        if found is not None:
            row["colocation"]["alone_iteration_s"] = row["predicted"]["iteration_s"]
            row["predicted"] = predict_fleet(ctx, case.model, case.fleet, found)
    for row in rows:
        finish_case(row)
    return rows


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
    colocated = row.get("colocation")
    if colocated is not None and means:
        colocated["alone_error"] = stats.relative_error(colocated["alone_iteration_s"], measured)
