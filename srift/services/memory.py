"""A plan's memory and device checks over its candidates: one place the plan and prediction services call.

`fit_candidates` refuses (or, asked, marks) CPU-measured profiles standing for GPU types
(`srift.domain.devices`) and lowers each GPU candidate's largest batch to what its GPUs' memory holds under
the training memory model (`srift.domain.memory`: DDP, the profile's optimizer or Adam), leaving out types
whose GPUs cannot hold the model at batch 1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from srift.domain.catalog import InstanceType
from srift.domain.devices import check_devices
from srift.domain.memory import BATCH_LIMIT_FACT, GIB, MARGIN_FRACTION, BatchLimit, gpu_batch_limit
from srift.domain.profile import ModelProfile
from srift.errors import InvalidInput
from srift.optimize.space import Candidate


def batch_limit(profile: ModelProfile, instance: InstanceType) -> BatchLimit | None:
    """The memory limit of `profile` on one of `instance`'s GPUs under DDP (None: no GPU or no model)."""
    if instance.gpu_count < 1:
        return None
    return gpu_batch_limit(profile, instance_type=instance.name, gpu_memory_gib=instance.gpu_memory_gib)


def within_memory(profile: ModelProfile, instance: InstanceType) -> ModelProfile:
    """`profile` with its largest batch lowered to what `instance`'s GPU memory holds (unchanged if it
    fits), the reason in `extra["batch_limit"]`."""
    limit = batch_limit(profile, instance)
    if limit is None or not limit.by_memory or limit.memory_batch < 1:
        return profile
    return dataclasses.replace(
        profile,
        max_batch=limit.memory_batch,
        extra={**(profile.extra or {}), BATCH_LIMIT_FACT: limit.reason()},
    )


def fit_candidates(
    candidates: Sequence[Candidate], *, allow_cpu_profiles: bool, field: str, memory: bool = True
) -> tuple[tuple[Candidate, ...], tuple[str, ...]]:
    """The candidates whose GPUs hold the model, each with its largest batch within memory, and notes
    (stand-in CPU profiles, batches capped by memory, types left out). With `memory` False only the
    devices are checked: a request that may shard has each fleet's memory checked per strategy instead
    (srift.services.sharding)."""
    notes = list(
        check_devices(
            ((c.profile, c.instance) for c in candidates), allow_cpu_profiles=allow_cpu_profiles, field=field
        )
    )
    if not memory:
        return tuple(candidates), tuple(notes)
    kept: list[Candidate] = []
    for cand in candidates:
        limit = batch_limit(cand.profile, cand.instance)
        if limit is not None and limit.memory_batch < 1:
            note = (
                f"{cand.name} left out: {cand.profile.model} does not fit one GPU's memory at batch 1 "
                f"({limit.memory.peak_bytes(1) / 2**30:.1f} GiB needed, {limit.capacity_bytes / 2**30:.1f} "
                "GiB less the margin available)"
            )
            if note not in notes:
                notes.append(note)
            continue
        fitted = within_memory(cand.profile, cand.instance)
        if fitted is not cand.profile:
            reason = fitted.extra[BATCH_LIMIT_FACT]
            if reason not in notes:
                notes.append(reason)
            cand = dataclasses.replace(cand, profile=fitted)
        kept.append(cand)
    return tuple(kept), tuple(notes)


def check_fleet_member(
    profile: ModelProfile,
    instance: InstanceType,
    *,
    per_gpu_batch: float,
    allow_cpu_profiles: bool,
    field: str,
    memory: bool = True,
    others: Iterable[InstanceType] = (),
) -> tuple[str, ...]:
    """A predicted fleet member: notes marking a stand-in CPU profile; InvalidInput naming `field` for a
    CPU profile not allowed, or (`memory`) a per-GPU batch above what the GPU's memory holds under DDP. A
    prediction under a strategy leaves `memory` out and checks each setup's memory instead
    (srift.services.sharding), as a plan that may shard does (`fit_candidates`). `others`, the request's
    priced types, are named in the hint when no batch fits (`check_ddp_memory`)."""
    notes = check_devices([(profile, instance)], allow_cpu_profiles=allow_cpu_profiles, field=field)
    if memory:
        check_ddp_memory(profile, instance, per_gpu_batch=per_gpu_batch, field=field, others=others)
    return notes


def check_ddp_memory(
    profile: ModelProfile,
    instance: InstanceType,
    *,
    per_gpu_batch: float,
    field: str,
    others: Iterable[InstanceType] = (),
    suggest_strategy: bool = True,
) -> None:
    """InvalidInput naming the batch beside `field` when `per_gpu_batch` is above what `instance`'s GPU
    memory holds under DDP (the training memory model, with its margin). When not even batch 1 fits it names
    the instance type instead: the hint says how much memory per GPU DDP needs, which of `others` (the
    request's priced types) have GPUs that hold it, and (`suggest_strategy`) that a sharded strategy spreads
    the model over the fleet's GPUs, never "use at most 0 per GPU"."""
    limit = batch_limit(profile, instance)
    if limit is None or per_gpu_batch <= limit.memory_batch:
        return
    most = limit.memory_batch
    detail = (
        f"{per_gpu_batch:g} samples per GPU on {instance.name} need "
        f"{limit.memory.peak_bytes(per_gpu_batch) / GIB:.1f} GiB of its "
        f"{limit.capacity_bytes / GIB:.1f} GiB ({limit.memory.optimizer.value}, DDP, with the margin)"
    )
    if most >= 1:
        raise InvalidInput(
            detail,
            hint=f"use at most {most} per GPU ({most * instance.devices} per VM), or more VMs",
            field=field.rsplit(".", 1)[0] + ".batch",
        )
    raise InvalidInput(
        f"{detail}; no batch fits: DDP keeps the whole model, its gradients and optimizer state on every GPU",
        hint=no_batch_fits_hint(profile, limit, others=others, suggest_strategy=suggest_strategy),
        field=field.rsplit(".", 1)[0] + ".instance_type",
    )


MOST_TYPES_NAMED = 3
"""A hint names at most this many instance types whose GPUs would hold the model."""


def types_to_name(holding: Iterable[InstanceType]) -> list[str]:
    """The types a hint names of those that would hold a model (`holding`): the smallest type (fewest GPUs,
    then vCPUs) of each GPU model, smallest GPUs first, at most MOST_TYPES_NAMED; the DDP 422
    (`no_batch_fits_hint`) and the 409 when no fleet holds the model (srift.services.sharding) share it."""
    by_gpu: dict[tuple[str, float], str] = {}
    for other in sorted(holding, key=lambda t: (t.gpu_memory_gib, t.gpu_count, t.vcpus, t.name)):
        by_gpu.setdefault((other.gpu_model or "", other.gpu_memory_gib), other.name)
    return list(by_gpu.values())[:MOST_TYPES_NAMED]


def no_batch_fits_hint(
    profile: ModelProfile, limit: BatchLimit, *, others: Iterable[InstanceType], suggest_strategy: bool
) -> str:
    """What to do when DDP cannot hold `profile` at batch 1 on `limit`'s GPU: GPUs of at least the memory
    batch 1 needs (with the margin), naming for each of the smallest such GPU models of `others` its
    smallest type (under the same memory model), or saying none has them, and (`suggest_strategy`) a
    sharded strategy."""
    need_gib = math.ceil(10 * limit.memory.peak_bytes(1) / (1.0 - MARGIN_FRACTION) / GIB) / 10
    named = types_to_name(
        other for other in others if (fits := batch_limit(profile, other)) and fits.memory_batch >= 1
    )
    gpus = f"an instance type whose GPUs have at least {need_gib:.1f} GiB each"
    gpus += f" (e.g. {', '.join(named)})" if named else " (no type of this region has GPUs that large)"
    if not suggest_strategy:
        return f"use {gpus}"
    return (
        f"use {gpus}, or a sharded strategy, which spreads the model over the fleet's GPUs: strategy auto "
        "(the fastest setup that fits) or full_shard"
    )
