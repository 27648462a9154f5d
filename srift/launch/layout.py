"""A plan as a launch sees it: nodes in rank order, each VM's ranks and every rank's share of the batch.

Pure and standard-library only: the training-script helper (srift.launch.helper) imports it next to torch.
The order is the plan's: its choices in turn, each choice's VMs one after another, so node rank k and global
rank r mean the same VM and process in every emitted file and in the helper. A VM runs one rank per GPU it
uses (a CPU-only type runs one); its batch is split across its ranks as evenly as integers allow, the first
ranks taking one more sample when it does not divide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class LayoutError(ValueError):
    """A plan document that cannot be launched as it is (a field missing or out of range)."""


@dataclass(frozen=True, slots=True)
class FleetPart:
    """One homogeneous part of the fleet: `count` VMs of one type, market and location."""

    index: int
    instance_type: str
    market: str
    location: str | None
    count: int
    batch: int
    procs_per_node: int
    gpus_per_node: int
    first_node: int

    @property
    def rank_batches(self) -> tuple[int, ...]:
        """The per-rank batches of one VM of this part."""
        return split_evenly(self.batch, self.procs_per_node)

    @property
    def provider(self) -> str | None:
        return self.location.split("/", 1)[0] if self.location and "/" in self.location else None

    @property
    def region(self) -> str | None:
        return self.location.split("/", 1)[1] if self.location and "/" in self.location else self.location


@dataclass(frozen=True, slots=True)
class Layout:
    """Every VM and rank of a plan, with what the plan predicted and assumed about the network."""

    plan_id: int | None
    global_batch: int
    iterations: int
    parts: tuple[FleetPart, ...]
    provider: str
    region: str | None
    predicted_iteration_s: float | None
    network: Mapping[str, Any]

    @property
    def nodes(self) -> int:
        return sum(p.count for p in self.parts)

    @property
    def launch_name(self) -> str:
        """The name launched clusters and jobs of this plan start with: srift-plan-ID, or srift-plan
        for a plan document without an id (Kubernetes JobSets and SkyPilot clusters alike)."""
        return f"srift-plan-{self.plan_id}" if self.plan_id is not None else "srift-plan"

    @property
    def world_size(self) -> int:
        return sum(p.count * p.procs_per_node for p in self.parts)

    @property
    def backend(self) -> str:
        """nccl when every VM has GPUs and the plan assumed NCCL, else gloo (CPU ranks cannot use NCCL)."""
        library = str(self.network.get("library") or "nccl")
        return "nccl" if library == "nccl" and all(p.gpus_per_node > 0 for p in self.parts) else "gloo"

    @property
    def locations(self) -> tuple[str | None, ...]:
        return tuple(dict.fromkeys(p.location for p in self.parts))

    def part_of_node(self, node_rank: int) -> FleetPart:
        for part in self.parts:
            if part.first_node <= node_rank < part.first_node + part.count:
                return part
        raise LayoutError(f"node rank {node_rank} is outside the plan's {self.nodes} nodes")

    def first_rank_of_node(self, node_rank: int) -> int:
        rank = 0
        for part in self.parts:
            before = min(part.count, max(0, node_rank - part.first_node))
            rank += before * part.procs_per_node
        return rank

    def rank_batches(self) -> tuple[int, ...]:
        """Every global rank's batch, in rank order; they sum to the global batch."""
        out: list[int] = []
        for part in self.parts:
            for _ in range(part.count):
                out.extend(part.rank_batches)
        return tuple(out)


def split_evenly(total: int, parts: int) -> tuple[int, ...]:
    """`total` samples over `parts` ranks, as even as integers allow (the first ranks take the remainder)."""
    if parts < 1:
        raise LayoutError(f"cannot split a batch over {parts} ranks")
    base, extra = divmod(total, parts)
    return tuple(base + (1 if k < extra else 0) for k in range(parts))


def apportion(total: int, weights: Sequence[int]) -> tuple[int, ...]:
    """`total` split in proportion to `weights` by largest remainders (Hamilton): the counts sum to `total`
    and each is within one of its exact share; ties go to the lower index."""
    whole = sum(weights)
    if whole <= 0:
        raise LayoutError("cannot apportion over weights that sum to zero")
    exact = [total * w / whole for w in weights]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda k: (-(exact[k] - counts[k]), k))
    for k in order[: total - sum(counts)]:
        counts[k] += 1
    return tuple(counts)


def _int(doc: Mapping[str, Any], key: str, where: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LayoutError(f"{where}.{key} must be a non-negative integer, got {value!r}")
    return value


def layout_of(plan: Mapping[str, Any]) -> Layout:
    """The launch layout of a plan document (as POST/GET /v1/plans or `srift plan --json` answer it)."""
    choices = plan.get("choices")
    if not isinstance(choices, list) or not choices:
        raise LayoutError("the plan has no choices (is this a plan document from srift plan --json?)")
    request = plan.get("request") or {}
    parts: list[FleetPart] = []
    first = 0
    for k, ch in enumerate(choices):
        where = f"choices[{k}]"
        count = _int(ch, "count", where)
        batch = _int(ch, "batch", where)
        devices = _int(ch, "gpus", where) if ch.get("gpus") is not None else 1
        instance_gpus = ch.get("instance_gpus")
        gpus_per_node = devices if instance_gpus is None or int(instance_gpus) > 0 else 0
        procs = max(1, gpus_per_node)
        if batch < procs:
            raise LayoutError(f"{where}: batch {batch} is smaller than its {procs} ranks")
        parts.append(
            FleetPart(
                index=k,
                instance_type=str(ch["instance_type"]),
                market=str(ch.get("market") or "on_demand"),
                location=ch.get("location"),
                count=count,
                batch=batch,
                procs_per_node=procs,
                gpus_per_node=gpus_per_node,
                first_node=first,
            )
        )
        first += count
    global_batch = _int(plan, "global_batch", "plan")
    total = sum(p.count * p.batch for p in parts)
    if total != global_batch:
        raise LayoutError(f"the choices' batches add up to {total}, not the global batch {global_batch}")
    predicted = plan.get("predicted") or {}
    plan_id = plan.get("id")
    return Layout(
        plan_id=int(plan_id) if isinstance(plan_id, int) else None,
        global_batch=global_batch,
        iterations=_int(plan, "iterations", "plan"),
        parts=tuple(parts),
        provider=str(request.get("provider") or "aws"),
        region=request.get("region"),
        predicted_iteration_s=predicted.get("iteration_s"),
        network={**(request.get("network") or {}), **(plan.get("network") or {})},
    )
