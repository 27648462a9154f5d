"""The validation matrix's sharded cases: real FSDP2 training on the testbed, time and memory predicted.

What runs on CPU over gloo with torch 2.13 (checked with two and four processes on this machine): FSDP2's
`fully_shard` (both `reshard_after_forward=True`, full sharding, and `False`, ZeRO-2), with
`MixedPrecisionPolicy(bf16)`, on a 2-D device mesh (hybrid sharding: 2 replicas × 2 shards), with
activation checkpointing (`torch.distributed._composable.checkpoint`); `ZeroRedundancyOptimizer` over DDP
(ZeRO-1); gloo's `all_gather_into_tensor` and `reduce_scatter_tensor`. FSDP1 (`FullyShardedDataParallel`)
does not: "FSDP needs a non-CPU accelerator device". The cases below run zero2 and full_shard in fp32
without checkpointing: the testbed's hosts have one rank each (hybrid sharding would shard over one rank),
the runs step plain SGD (ZeRO-1 would shard nothing), `srift profile` does not count block facts
(checkpointing), and CPU autocast is not what the hosts' fp32 profiles measured. Those remain for a GPU
check (benchmarks/gpu_check.py).

Cases (`sharded_cases`): the 57.5 MB blocks model (`srift.validation.shardmodels`) under zero2 and
full_shard on two hosts of the type with the fastest link and on a mixed pair (the weaker type at half the
batch). Each is predicted by the served configuration's sharded simulator (`srift.sim.sharded`, the
testbed adapter's inputs as every case) and judged like every other case; besides, each rank's peak memory
in use (probes/ddp_train.py, glibc mallinfo2) against `srift.domain.sharding.strategy_memory` for a CPU
rank stepping SGD, from the stored profile's measured training memory. Before the cases, one host of each
type measures what each strategy's own CPU work (FSDP2's hooks, copy-in and copy-out) adds per iteration
(`measure_overheads`: one rank under the strategy against the plain model), which the predictions carry
(`srift.sim.sharded.OVERHEAD_KEY`): on a quarter-core host it is a tenth of a second or more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from srift.domain import BusBandwidthModel, FleetMember
from srift.domain.memory import Optimizer
from srift.domain.sharding import Setup, Strategy, fsdp_units, memory_basis, strategy_memory
from srift.testbed import TestbedSpec
from srift.validation import stats
from srift.validation.context import leading_hosts
from srift.validation.estimates import estimate_document
from srift.validation.matrix import SHARDED_MODEL, Case, Fleet, Group, home_location, types_by_cpu

STRATEGIES = (Strategy.ZERO2, Strategy.FULL_SHARD)
BATCH = 32
RUN_OPTIMIZER = Optimizer.SGD
"""probes/ddp_train.py steps torch.optim.SGD without momentum: no optimizer state."""


def sharded_cases(spec: TestbedSpec, *, allowed: Sequence[str], max_cores: float) -> list[Case]:
    """The sharded cases this spec, its allowed types and the CPU quota can run (module docstring)."""
    order = [t for t in types_by_cpu(spec) if t in allowed]
    if not order:
        return []
    home = home_location(spec)
    fast = max(order, key=lambda t: (spec.type_named(t).rate_mbit, spec.type_named(t).cpu_cores))
    fleets = []
    if sum(1 for h in spec.hosts if h.type_name == fast) >= 2:
        fleets.append(Fleet((Group(fast, 2, BATCH, home),)))
    if len(order) >= 2:
        weak, strong = order[0], order[-1]
        fleets.append(Fleet((Group(weak, 1, BATCH // 2, home), Group(strong, 1, BATCH, home))))
    fleets = [f for f in fleets if f.cores(spec) <= max_cores + 1e-9]
    return [Case(SHARDED_MODEL.name, f, strategy=s.value) for s in STRATEGIES for f in fleets]


def predict_sharded(
    members: Sequence[FleetMember],
    inputs: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int,
    iterations: int,
    runs: int,
    strategy: str,
) -> dict[str, Any]:
    """A sharded case's prediction document: the iteration time with its band (the adapter's `inputs`),
    the same on the profiles as stored, and each rank's predicted peak memory."""
    from srift.sim.sharded import simulate_sharded

    setup = Setup(Strategy(strategy))
    estimate = simulate_sharded(
        inputs, bandwidth=bandwidth, setup=setup, seed=seed, iterations=iterations, runs=runs
    )
    unadapted = simulate_sharded(members, bandwidth=bandwidth, setup=setup, seed=seed, band=False)
    return {
        **estimate_document(estimate, iterations=iterations),
        "per_layer_iteration_s": estimate.iteration_s,
        "unadapted_iteration_s": unadapted.iteration_s,
        "memory": rank_memory(members, setup),
    }


def rank_memory(members: Sequence[FleetMember], setup: Setup) -> dict[str, Any]:
    """Each rank's predicted peak memory (bytes, rank order) and its parts, for CPU ranks stepping SGD."""
    world = sum(m.count for m in members)
    peaks: list[int | None] = []
    parts: list[dict[str, int] | None] = []
    for m in members:
        basis = memory_basis(m.profile)
        if basis is None:
            peaks += [None] * m.count
            parts += [None] * m.count
            continue
        use = strategy_memory(
            basis,
            fsdp_units(m.profile),
            setup,
            world_size=world,
            gpus_per_node=1,
            mixed=False,
            optimizer=RUN_OPTIMIZER,
            cuda=False,
        )
        doc = use.to_dict(m.per_device_batch)
        peaks += [doc["peak_bytes"]] * m.count
        parts += [doc["parts"]] * m.count
    return {"peak_bytes": peaks, "parts": parts, "source": "srift.domain.sharding.strategy_memory (CPU, SGD)"}


def memory_errors(row: dict[str, Any]) -> None:
    """Each rank's predicted-over-measured peak memory error, from the case's runs (the largest measured
    peak of each rank over its repeats)."""
    predicted = (row.get("predicted") or {}).get("memory", {}).get("peak_bytes")
    measured_runs = [r.get("peak_bytes") for r in row["runs"] if r.get("ok") and r.get("peak_bytes")]
    if not predicted or not measured_runs:
        return
    measured = [max(run[i] for run in measured_runs) for i in range(len(measured_runs[0]))]
    errors = [
        stats.relative_error(p, m) if p is not None and m > 0 else None
        for p, m in zip(predicted, measured, strict=False)
    ]
    row["memory"] = {"predicted_peak_bytes": predicted, "measured_peak_bytes": measured, "errors": errors}


def sharded_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """MAPE and underestimates of the sharded cases, and the memory errors per rank."""
    mine = [r for r in rows if r.get("strategy", "ddp") != "ddp" and r.get("error") is not None]
    if not mine:
        return None
    memory = [e for r in mine for e in (r.get("memory") or {}).get("errors", []) if e is not None]
    return {
        "cases": len(mine),
        "time": stats.summarize([r["error"] for r in mine]).to_dict(),
        "by_strategy": {
            s: stats.summarize([r["error"] for r in mine if r["strategy"] == s]).to_dict()
            for s in sorted({r["strategy"] for r in mine})
        },
        "memory_max_abs_error": max((abs(e) for e in memory), default=None),
        "memory_errors": memory,
    }


def overhead_key(type_name: str, batch: int) -> str:
    return f"{type_name}@{batch}"


def measure_overheads(ctx: Any, pool: Any, cases: Sequence[Case]) -> dict[str, dict[str, float]]:
    """What each strategy's own CPU work adds per iteration on each (type, batch) of the sharded cases:
    one host of the type trains the plain model (one rank, no DDP) and then under each strategy (one rank:
    FSDP2's hooks and copies, no exchange), `ctx.effort`'s timed budget each; the difference of their mean
    iterations, at least 0. Keyed `type@batch`, then by strategy (`srift.sim.sharded.OVERHEAD_KEY`)."""
    effort = ctx.effort
    spec = ctx.model(SHARDED_MODEL.name)
    groups = sorted({(g.type_name, g.batch) for c in cases if c.strategy != "ddp" for g in c.fleet.groups})
    strategies = sorted({c.strategy for c in cases if c.strategy != "ddp"})
    out: dict[str, dict[str, float]] = {}
    for type_name, batch in groups:
        host = leading_hosts(ctx, type_name)[0]

        def mean_s(strategy: str, host: str = host, batch: int = batch) -> float:
            found = pool.run_case(
                [host],
                [batch],
                model=spec.factory,
                input_factory=spec.input_factory,
                loss=spec.run_loss,
                iters=effort.max_iters,
                warmup=effort.warmup,
                timeout_s=600.0,
                time_budget_s=effort.target_run_s,
                min_iters=effort.min_iters,
                strategy=strategy,
            )
            return float(found.mean_iter_s)

        plain = mean_s("ddp")
        out[overhead_key(type_name, batch)] = {s: max(0.0, mean_s(s) - plain) for s in strategies}
        ctx.log(
            f"sharded overhead on {type_name} at batch {batch}: "
            + ", ".join(f"{s} {1000 * v:.0f} ms" for s, v in out[overhead_key(type_name, batch)].items())
        )
    return out


def with_overheads(
    members: Sequence[FleetMember], fleet: Fleet, overheads: dict[str, dict[str, float]] | None
) -> list[FleetMember]:
    """The members with their measured strategy overheads in their profiles (`OVERHEAD_KEY`)."""
    from dataclasses import replace

    from srift.sim.sharded import OVERHEAD_KEY

    if not overheads:
        return list(members)
    out = []
    for m, g in zip(members, fleet.groups, strict=True):
        found = overheads.get(overhead_key(g.type_name, g.batch))
        if found:
            m = replace(m, profile=replace(m.profile, extra={**(m.profile.extra or {}), OVERHEAD_KEY: found}))
        out.append(m)
    return out
