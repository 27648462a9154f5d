"""simulate(): one iteration on a fleet = compute with stragglers + overlapped gradient exchange (§4.3).

Compute. Member m (k VMs of one type) has mean forward and backward times fw_m, bw_m at its per-device
batch. Each iteration every VM draws its compute time (see `srift.sim.compute`); the iteration's compute
ends when the slowest VM of the whole fleet is done, and C̄ is the mean over `straggler_iters` iterations.
C̄ is never below the slowest member's mean (fw + bw): with one VM the draws are noise, not waiting.

Exchange. Layer j's gradient can be reduced once *every* VM has produced it. Member m produces it at
ρ_m·(fw_m + ready_frac_j·bw_m), where ρ_m ≥ 1 is the mean ratio of the member's slowest VM to its mean, so
a_j = max over members. For one member this is Srift's ready_frac·t_bw measured from the start of backward
(ρ·t_fw later); for a mixed fleet the slowest member bounds it. The transfers then go through the stages
of `srift.sim.network` (intra-node, then network) with Srift eq. 2 sharing (`srift.sim.exchange`).

Iteration. t_iter = max(C̄, last transfer finished) + t_update — for one member exactly
t_fw + max(t_bw, t_pe) + t_update with stragglers folded into both; t_update is the slowest member's
optimizer step (the profile's `update_s`, 0 when not measured), which starts once every gradient is
reduced. Breakdown (Stash's terms): compute_s = slowest member's fw + bw, plus t_update;
straggler_wait_s = C̄ − compute_s; exposed communication = t_iter − C̄, of which exposed_network_s is the
time after C̄ during which the network stage was busy and exposed_intra_s the rest. communication_s is
the time during which any stage was busy; granularity = compute_s / communication_s (Erben et al.).

Uncertainty. With mc_samples = 0, p10/p50/p90 are the quantiles of the per-iteration straggler draws
plus the mean exposed communication (the exchange is simulated once). With mc_samples > 0, each sample
draws one iteration's straggler times and one multiplicative error per stage, Normal(1, residual_cv) of
the bandwidth answers (clipped at 0.05), and simulates that iteration's exchange; the quantiles come from
those samples, while iteration_s and the breakdown stay the mean-case values. When a member's profile
is an estimate (not measured on its accelerator, `ModelProfile.estimate`), its compute is uncertain by
the estimate's spread σ (relative, log-normal, measured out of sample): the band widens by the compute
time's own p10/p90 under that error, c·(e^{±1.2816σ} − 1) with c the compute end and σ the largest
spread among the members, added in quadrature to the straggler/bandwidth band (`widen_for_estimates`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from srift.domain import Breakdown, BusBandwidthModel, FleetMember, InstanceType
from srift.errors import InvalidInput
from srift.sim.compute import member_keys, straggler_draws, straggler_rows
from srift.sim.exchange import ExchangeResult, Kernel, Stage, exchange
from srift.sim.layers import LayerArrays, bucket_groups, bucketed, layer_arrays
from srift.sim.network import StagePlan, exchange_plans
from srift.sim.result import CommMode, IterationEstimate

MAX_STRAGGLER_ITERS = 100_000
MAX_MC_SAMPLES = 10_000
MIN_BANDWIDTH_FACTOR = 0.05


@functools.lru_cache(maxsize=1024)
def _matches_accelerator(instance: InstanceType, accelerator: str) -> bool:
    """`instance.matches_accelerator`, remembered: the optimizer asks about the same pairs again and again."""
    return instance.matches_accelerator(accelerator)


def validate_fleet(fleet: Sequence[FleetMember], *, field: str = "fleet") -> None:
    """Raise InvalidInput naming the member at fault (counts, batches, profiles that do not fit)."""
    if not fleet:
        raise InvalidInput(
            "the fleet is empty", hint="give at least one instance type with count ≥ 1", field=field
        )
    for i, m in enumerate(fleet):
        where = f"{field}[{i}]"
        if m.count < 1:
            raise InvalidInput(
                f"count {m.count} is below 1",
                hint="use a count ≥ 1 or leave the type out",
                field=f"{where}.count",
            )
        if m.batch < 1:
            raise InvalidInput(
                f"batch {m.batch} is below 1", hint="give each VM at least one sample", field=f"{where}.batch"
            )
        if not _matches_accelerator(m.instance, m.profile.accelerator):
            raise InvalidInput(
                f"the profile was made on {m.profile.accelerator!r}, not on {m.instance.name}'s "
                f"{m.instance.accelerator!r}",
                hint=f"profile the model on {m.instance.accelerator}, or pick a type with a matching profile",
                field=f"{where}.profile",
            )
        if m.per_device_batch > m.profile.max_batch:
            raise InvalidInput(
                f"batch {m.batch} on {m.instance.devices} device(s) is {m.per_device_batch:g} per device, "
                f"above the profile's max_batch {m.profile.max_batch}",
                hint=f"use a batch ≤ {m.profile.max_batch * m.instance.devices} per {m.instance.name}",
                field=f"{where}.batch",
            )


def quantiles(values: np.ndarray) -> tuple[float, float, float]:
    """p10, p50, p90 with linear interpolation (numpy's default method), without np.quantile's overhead."""
    ordered = np.sort(values).tolist()
    last = len(ordered) - 1
    out = []
    for p in (0.1, 0.5, 0.9):
        h = last * p
        lo = int(h)
        hi = min(lo + 1, last)
        out.append(ordered[lo] + (ordered[hi] - ordered[lo]) * (h - lo))
    return out[0], out[1], out[2]


def _exchange(
    arrivals: np.ndarray,
    canon: LayerArrays,
    stages: Sequence[Stage],
    *,
    presorted: bool = False,
    kernel: Kernel = "auto",
) -> ExchangeResult | None:
    if not stages or arrivals.size == 0:
        return None
    if not presorted and arrivals.size > 1 and bool(np.any(arrivals[1:] < arrivals[:-1])):
        order = np.argsort(arrivals, kind="stable")
        return exchange(
            arrivals[order].tolist(),
            canon.bits[order].tolist(),
            canon.klass[order].tolist(),
            stages,
            checked=False,
            kernel=kernel,
        )
    return exchange(
        arrivals.tolist(), canon.bits_list, canon.klass_list, stages, checked=False, kernel=kernel
    )


def simulate(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    seed: int = 0,
    straggler_iters: int = 100,
    mc_samples: int = 0,
    comm: CommMode = CommMode.ALLREDUCE,
    ps_servers: int = 1,
    bucket_cap_mb: float | None = None,
    kernel: Kernel = "auto",
) -> IterationEstimate:
    """Predict one training iteration of `fleet`: mean seconds, p10/p50/p90, breakdown and sources.

    `seed` makes the answer reproducible; `comm` picks ring allreduce (Srift) or parameter servers (Li et
    al., `ps_servers` servers, see `srift.sim.ps`). `bucket_cap_mb` reduces gradients in PyTorch DDP's
    buckets of that many MiB (see `srift.sim.layers`; DDP's default is 25) instead of layer by layer (None,
    Srift's model). `kernel` picks the exchange's stage implementation (see `srift.sim.exchange`). Raises
    InvalidInput for a fleet that cannot run.
    """
    validate_fleet(fleet)
    if bucket_cap_mb is not None and CommMode(comm) is CommMode.ALLREDUCE:
        fleet = with_buckets(fleet, bucket_cap_mb=bucket_cap_mb)
    if not 1 <= straggler_iters <= MAX_STRAGGLER_ITERS:
        raise InvalidInput(
            f"straggler_iters {straggler_iters} is outside 1..{MAX_STRAGGLER_ITERS}",
            hint="100 is plenty",
            field="straggler_iters",
        )
    if not 0 <= mc_samples <= MAX_MC_SAMPLES:
        raise InvalidInput(
            f"mc_samples {mc_samples} is outside 0..{MAX_MC_SAMPLES}",
            hint="use 0 (no Monte Carlo) or a few hundred",
            field="mc_samples",
        )
    comm = CommMode(comm)
    fw = [m.profile.forward.time_s(m.per_device_batch) for m in fleet]
    bw = [m.profile.backward.time_s(m.per_device_batch) for m in fleet]
    means = [f + b for f, b in zip(fw, bw, strict=True)]
    cvs = [m.profile.straggler_cv for m in fleet]
    counts = [m.count for m in fleet]
    keys = member_keys(fleet)
    slow = max(range(len(fleet)), key=means.__getitem__)
    compute_s = means[slow]
    profile_sources = tuple(
        dict.fromkeys(
            f"profile:{m.profile.model}@{m.profile.accelerator}"
            + (f" ({m.profile.estimate.source})" if m.profile.estimate is not None else "")
            for m in fleet
        )
    )
    if comm is CommMode.PARAMETER_SERVER:
        from srift.sim.ps import simulate_ps

        return simulate_ps(
            fleet,
            bandwidth=bandwidth,
            seed=seed,
            fw_s=fw,
            bw_s=bw,
            keys=keys,
            servers=ps_servers,
            mc_samples=mc_samples,
            profile_sources=profile_sources,
        )

    rows = straggler_rows(means, cvs, counts, keys, seed=seed, iters=straggler_iters)
    per_iteration = rows[0] if len(rows) == 1 else functools.reduce(np.maximum, rows)
    row_means = [float(row.sum()) / straggler_iters for row in rows]
    rho = [max(1.0, row_means[i] / means[i]) if means[i] > 0 else 1.0 for i in range(len(fleet))]
    compute_end = max(
        float(per_iteration.sum()) / straggler_iters, max(r * m for r, m in zip(rho, means, strict=True))
    )

    canon = layer_arrays(fleet[0].profile)
    plans = exchange_plans(fleet, canon.sizes, bandwidth)
    stages = [p.stage for p in plans]
    ready = [canon.aligned_ready_frac(layer_arrays(m.profile)) for m in fleet]

    def arrivals_for(factors: Sequence[float]) -> np.ndarray:
        out = factors[0] * (fw[0] + ready[0] * bw[0])
        for i in range(1, len(fleet)):
            out = np.maximum(out, factors[i] * (fw[i] + ready[i] * bw[i]))
        return np.asarray(out)

    # One member: arrivals follow the (sorted) ready fractions, so they are already in order.
    result = _exchange(
        arrivals_for(rho),
        canon,
        stages,
        presorted=len(fleet) == 1 and ready[0] is canon.ready_frac,
        kernel=kernel,
    )
    end = result.end_s if result is not None else 0.0
    exposed = max(compute_end, end) - compute_end
    update_s = max(m.profile.update_s for m in fleet)
    iteration_s = compute_end + exposed + update_s
    net_index = next((i for i, p in enumerate(plans) if p.stage.name == "network"), None)
    exposed_network = 0.0
    if result is not None and net_index is not None:
        exposed_network = min(exposed, result.busy_after(net_index, compute_end))
    communication_s = result.busy_total() if result is not None else 0.0

    if mc_samples > 0 and stages:
        mc = straggler_draws(means, cvs, counts, keys, seed=seed, iters=mc_samples, stream=1)
        factors = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, 2]).normal(
            1.0, 1.0, size=(mc_samples, len(plans))
        )
        samples = np.empty(mc_samples)
        for s in range(mc_samples):
            scale = [
                max(MIN_BANDWIDTH_FACTOR, 1.0 + (f - 1.0) * p.residual_cv)
                for f, p in zip(factors[s], plans, strict=True)
            ]
            scaled = [
                Stage(st.name, tuple(r * k for r in st.rates_bps), st.cap_bps * k)
                for st, k in zip(stages, scale, strict=True)
            ]
            iteration_rho = [float(mc[i, s]) / means[i] if means[i] > 0 else 1.0 for i in range(len(fleet))]
            sample = _exchange(
                arrivals_for(iteration_rho),
                canon,
                scaled,
                presorted=len(fleet) == 1 and ready[0] is canon.ready_frac,
                kernel=kernel,
            )
            samples[s] = max(float(mc[:, s].max()), sample.end_s if sample is not None else 0.0) + update_s
        p10, p50, p90 = quantiles(samples)
    else:
        p10, p50, p90 = (q + exposed + update_s for q in quantiles(per_iteration))
    p10, p90, estimate_note = widen_for_estimates(fleet, p10=p10, p50=p50, p90=p90, compute_s=compute_end)

    granularity = compute_s / communication_s if communication_s > 0 else math.inf
    warnings = [w for p in plans for w in p.warnings]
    if estimate_note:
        warnings.append(estimate_note)
    if granularity < 1.0:
        warnings.append(
            f"granularity {granularity:.2f} < 1: gradient exchange ({communication_s:.3g} s) outlasts "
            f"compute ({compute_s:.3g} s); the fleet is communication-bound: fewer or better-connected VMs, "
            "or a larger batch per VM, would use it better"
        )
    breakdown = Breakdown(
        forward_s=fw[slow],
        backward_s=bw[slow],
        compute_s=compute_s + update_s,
        straggler_wait_s=compute_end - compute_s,
        exposed_intra_s=exposed - exposed_network,
        exposed_network_s=exposed_network,
        communication_s=communication_s,
        granularity=granularity,
        warnings=tuple(warnings),
        update_s=update_s,
    )
    sources = profile_sources + tuple(dict.fromkeys(s for p in plans for s in p.sources))
    return IterationEstimate(iteration_s, p10, p50, p90, breakdown, sources)


Z90 = 1.2815515655446004
"""The standard normal's 90th percentile."""


def widen_for_estimates(
    fleet: Sequence[FleetMember], *, p10: float, p50: float, p90: float, compute_s: float
) -> tuple[float, float, str]:
    """p10 and p90 widened for members whose compute is estimated (module docstring), and a note saying so."""
    estimated = [m for m in fleet if m.profile.estimate is not None]
    if not estimated:
        return p10, p90, ""
    spread = max(m.profile.estimate.spread for m in estimated if m.profile.estimate is not None)
    up = compute_s * math.expm1(Z90 * spread)
    down = compute_s * -math.expm1(-Z90 * spread)
    names = ", ".join(
        sorted({f"{m.instance.name} ({m.profile.estimate.source})" for m in estimated if m.profile.estimate})
    )
    note = (
        f"compute of {names} is estimated, not measured on that GPU (±{100 * spread:.0f} %, 1 σ): "
        "profile the model there for a measured answer; the p10–p90 band includes the estimate's error"
    )
    return p50 - math.hypot(p50 - p10, down), p50 + math.hypot(p90 - p50, up), note


def with_buckets(fleet: Sequence[FleetMember], *, bucket_cap_mb: float) -> list[FleetMember]:
    """The fleet with every member's layers merged into DDP buckets (grouped as the first member's)."""
    if not (math.isfinite(bucket_cap_mb) and bucket_cap_mb > 0):
        raise InvalidInput(
            f"bucket_cap_mb {bucket_cap_mb} is not a positive number",
            hint="use DDP's bucket_cap_mb (default 25)",
            field="bucket_cap_mb",
        )
    groups = bucket_groups(fleet[0].profile, cap_bytes=int(bucket_cap_mb * 2**20))
    return [replace(m, profile=bucketed(m.profile, groups)) for m in fleet]


def with_warnings(estimate: IterationEstimate, *extra: str) -> IterationEstimate:
    """The same estimate with more warnings in its breakdown."""
    return replace(
        estimate, breakdown=replace(estimate.breakdown, warnings=(*estimate.breakdown.warnings, *extra))
    )


__all__ = ["StagePlan", "simulate", "validate_fleet", "with_buckets", "with_warnings"]
