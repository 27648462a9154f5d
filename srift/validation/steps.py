"""The steps of `srift validate`: testbed, profiles, bandwidth, predictions and DDP runs (see pipeline)."""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srift.bandwidth.mixed import ring_name
from srift.documents import copy_fields
from srift.errors import EnvironmentProblem, InvalidInput, SriftError
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
    leading_hosts,
    types_in_scope,
)
from srift.validation.ddp import AgentPool, Colocation, DdpResult
from srift.validation.estimates import estimate_document
from srift.validation.matrix import Case, Fleet, build_matrix
from srift.validation.profiles import (
    drop_job_folder,
    job_run,
    pass_positions,
    passes_within,
    pool_profiles,
    spread_slots,
    timing_models,
    timing_pass,
)

if TYPE_CHECKING:
    from srift.bandwidth.records import ProbeRecord
    from srift.domain import BusBandwidthModel, FleetMember
    from srift.settings import Settings
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
        models=ctx.options.matrix_models(),
        known=tuple(ctx.options.model_specs()),
        full=ctx.options.full,
        max_cores=ctx.options.resolved_max_cores(),
        max_hosts=ctx.options.max_hosts,
    )
    allowed = set(types_in_scope(ctx))
    cases = [c for c in cases if set(c.fleet.types) <= allowed]
    if (ctx.options.sharded or ctx.options.sharded_only) and not ctx.options.across_only:
        from srift.validation.sharded import sharded_cases

        cases += sharded_cases(spec, allowed=sorted(allowed), max_cores=ctx.options.resolved_max_cores())
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


# -- bandwidth --------------------------------------------------------------------------------------------


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
    collectives = probe_collectives(ctx, [t for t, c in plan if 2 in c])
    tick = time.perf_counter()
    with transaction(ctx.url) as session:
        store_samples(session=session, records=[*records, *collectives], origin="validate")
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
        "collective_samples": len(collectives),
    }


def probe_collectives(ctx: Context, types: Sequence[str]) -> list[ProbeRecord]:
    """All-gather and reduce-scatter probes on two hosts of each type, for the sharded cases' predictions
    (srift.bandwidth.collectives.MeasuredCollectives); none when those cases do not run."""
    if not (ctx.options.sharded or ctx.options.sharded_only):
        return []
    out: list[ProbeRecord] = []
    for type_name in types:
        for collective in ("all_gather", "reduce_scatter"):
            out.extend(probe_ring(ctx, (type_name,), (2,), collective=collective))
    return out


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


def probe_ring(
    ctx: Context, types: Sequence[str], counts: tuple[int, ...], *, collective: str = "allreduce"
) -> list[ProbeRecord]:
    """One probe job on each of `counts` hosts: of one type, or a mixed ring of `types` (equal hosts of
    each, in their order); of `collective` (allreduce unless said)."""
    from srift.jobs.runners import run_testbed_mixed_probe, run_testbed_probe
    from srift.jobs.service import TypeFacts
    from srift.jobs.spec import JobProvider, ProbeJobSpec

    name = ring_name(types) if len(types) > 1 else types[0]
    what = f"mixed ring {' + '.join(types)}" if len(types) > 1 else name
    what += f" ({collective})" if collective != "allreduce" else ""
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
        collective=collective,
    )
    run = job_run(ctx, "probe", spec)
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
        drop_job_folder(ctx, run.job_id)


# -- predictions and runs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseInputs:
    """What a case's prediction reads besides the case: the run's database (profiles, instance types, the
    active bandwidth model) and how the run was made."""

    url: str
    settings: Settings
    spec: TestbedSpec
    profile_ids: Mapping[tuple[str, str], int]
    effort: Effort
    seed: int
    bandwidth: BandwidthSource

    @classmethod
    def of(cls, ctx: Context) -> CaseInputs:
        """This run's: its database, spec, stored profiles, effort, seed and bandwidth source."""
        return copy_fields(cls, ctx, seed=ctx.options.seed, bandwidth=ctx.options.bandwidth)


def predict_case(
    inputs: CaseInputs,
    model: str,
    fleet: Fleet,
    colocation: ColocationFactors | None = None,
    *,
    strategy: str = "ddp",
    overheads: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """The served simulator's prediction for one model on one fleet (`srift.sim.simulate` with the served
    configuration, as `POST /v1/predictions` runs it), from the stored profiles, the catalog's instance
    types and the active bandwidth model, with the testbed's own inputs from its adapter
    (srift.validation.adapter: fresh CPU quota after a wait, and `colocation`, what the fleet's runs
    measured of its hosts computing at once). For comparison the same inputs layer by layer (the Srift
    paper's exchange) and the served simulator on the profiles as `srift profile` wrote them. A stored
    run's work folder gives the same inputs again (srift.validation.rescore)."""
    from srift.bandwidth.prior import AlphaBetaPrior
    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_instance_type
    from srift.db.session import transaction
    from srift.domain import FleetMember
    from srift.domain.geo import Location
    from srift.domain.network import Library, NetworkSpec
    from srift.profiling.store import get_profile

    with transaction(inputs.url) as session:
        testbed = NetworkSpec(library=Library.GLOO)  # the DDP runs use gloo over the testbed's TCP links
        bandwidth = (
            AlphaBetaPrior(network=testbed)
            if inputs.bandwidth is BandwidthSource.PRIOR
            else active_model(session=session, settings=inputs.settings, network=testbed)
        )
        if strategy != "ddp":
            from srift.bandwidth.collectives import MeasuredCollectives
            from srift.bandwidth.records import SampleQuery
            from srift.bandwidth.samples import load_samples

            measured = load_samples(
                session=session, query=SampleQuery(providers=("testbed",), collective=None)
            )
            bandwidth = MeasuredCollectives(bandwidth, measured)
        members = [
            FleetMember(
                instance=get_instance_type(session=session, provider="testbed", name=g.type_name),
                count=g.count,
                batch=g.batch,
                profile=get_profile(session=session, profile_id=inputs.profile_ids[(model, g.type_name)]),
                location=Location("testbed", g.location) if fleet.across and g.location else None,
            )
            for g in fleet.groups
        ]
    geo = testbed_geo(inputs.spec) if fleet.across else None
    if strategy != "ddp":
        from srift.validation.sharded import with_overheads

        return predict_sharded_members(
            with_overheads(members, fleet, {k: dict(v) for k, v in (overheads or {}).items()}),
            bandwidth=bandwidth,
            seed=inputs.seed,
            effort=inputs.effort,
            strategy=strategy,
        )
    return predict_members(
        members, bandwidth=bandwidth, seed=inputs.seed, effort=inputs.effort, geo=geo, colocation=colocation
    )


def predict_sharded_members(
    members: Sequence[FleetMember], *, bandwidth: BusBandwidthModel, seed: int, effort: Effort, strategy: str
) -> dict[str, Any]:
    """A sharded case's prediction (srift.validation.sharded) on the testbed adapter's inputs."""
    from srift.domain.sharding import Setup, Strategy
    from srift.sim.sharded import simulate_sharded
    from srift.validation import adapter
    from srift.validation.sharded import predict_sharded

    inputs = adapter.testbed_fleet(members, bandwidth=bandwidth, seed=seed)
    point = simulate_sharded(
        inputs, bandwidth=bandwidth, setup=Setup(Strategy(strategy)), seed=seed, band=False
    )
    measured_iterations = iterations_for(effort, point.iteration_s) * effort.repeats
    return predict_sharded(
        members,
        inputs,
        bandwidth=bandwidth,
        seed=seed,
        iterations=measured_iterations,
        runs=effort.repeats,
        strategy=strategy,
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
    """A case's prediction document for a fleet of stored profiles (see `predict_case`): `iteration_s`
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
    return {
        **estimate_document(estimate, iterations=measured_iterations),
        "per_layer_iteration_s": per_layer.iteration_s,
        "unadapted_iteration_s": unadapted.iteration_s,
        "adapter": {
            "compute_scale": [m.profile.extra.get("compute_scale", 1.0) for m in inputs],
            "straggler_cv": [m.profile.straggler_cv for m in inputs],
        },
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
    from srift.services.placement import MeasuredLink, geo_context

    links = [
        MeasuredLink(
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
    ctx: Context,
    pool: AgentPool,
    model: str,
    fleet: Fleet,
    predicted_s: float,
    *,
    colocation: bool = False,
    strategy: str = "ddp",
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
            colocation_rounds=effort.colocation_rounds if colocation and strategy == "ddp" else 0,
            strategy=strategy,
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
        "peak_bytes": list(result.peak_bytes),
        **({"colocation": result.colocation.to_dict()} if result.colocation is not None else {}),
    }


def run_matrix(ctx: Context, pool: AgentPool, cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Step 4: predict every case, run its repeats in shuffled rounds with the timing passes spread over
    them, then re-predict from the pooled profiles and score each case."""
    repeats = ctx.effort.repeats
    ctx.log(f"matrix: {len(cases)} cases × {repeats} repeats, {ctx.effort.timing_passes} timing passes")
    rows: list[dict[str, Any]] = []
    overheads: dict[str, dict[str, float]] = {}
    if any(c.strategy != "ddp" for c in cases):
        from srift.validation.sharded import measure_overheads

        overheads = measure_overheads(ctx, pool, cases)
    for case in cases:
        predicted = predict_case(
            CaseInputs.of(ctx), case.model, case.fleet, strategy=case.strategy, overheads=overheads
        )
        rows.append(
            {
                "strategy": case.strategy,
                **({"sharded_overhead_s": overheads} if case.strategy != "ddp" else {}),
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
                ctx,
                pool,
                cases[i].model,
                cases[i].fleet,
                row["predicted"]["iteration_s"],
                colocation=True,
                strategy=cases[i].strategy,
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
            row["predicted"] = predict_case(
                CaseInputs.of(ctx), case.model, case.fleet, strategy=case.strategy, overheads=overheads
            )
        if found is not None:
            row["colocation"]["alone_iteration_s"] = row["predicted"]["iteration_s"]
            row["predicted"] = predict_case(CaseInputs.of(ctx), case.model, case.fleet, found)
    for row in rows:
        finish_case(row)
    return rows


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
    if row.get("strategy", "ddp") != "ddp":
        from srift.validation.sharded import memory_errors

        memory_errors(row)
    colocated = row.get("colocation")
    if colocated is not None and means:
        colocated["alone_error"] = stats.relative_error(colocated["alone_iteration_s"], measured)
