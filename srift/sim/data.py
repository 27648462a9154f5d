"""Data-loading feasibility: can a VM's CPUs and reads feed its GPUs at the batch it is given (Stash)?

A profile's `input_pipeline` says what one CPU core of the input pipeline delivers (samples/s) and how many
bytes each sample reads. A VM runs one training process per GPU and leaves its other vCPUs to the loader
(at least one), so it decodes at (vcpus − devices) × samples_per_s_per_core; it reads at `read_gbps`
(the request's, else the VM's rated network bandwidth, which is where cloud data comes from), i.e.
read_gbps·1e9/8 / bytes_per_sample samples/s. The loader prefetches while the GPUs compute, so a VM that
needs `batch` samples per iteration adds a data stall of max(0, batch / min(decode, read) − t_iter).
The fleet waits for its slowest VM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from srift.domain import FleetMember


@dataclass(frozen=True, slots=True)
class FeedRate:
    """What one VM of a member can feed per second, which limit binds, and the seconds per iteration."""

    decode_samples_per_s: float
    read_samples_per_s: float
    loader_cores: int
    data_s: float

    @property
    def samples_per_s(self) -> float:
        return min(self.decode_samples_per_s, self.read_samples_per_s)

    @property
    def bound(self) -> str:
        return "decode" if self.decode_samples_per_s <= self.read_samples_per_s else "read"


def loader_cores(member: FleetMember) -> int:
    """vCPUs left to the input pipeline: all but one per training process, at least one."""
    return max(member.instance.vcpus - member.instance.devices, 1)


def feed_rate(member: FleetMember, *, read_gbps: float | None = None) -> FeedRate | None:
    """The member's input-pipeline rate, or None when its profile carries no input pipeline."""
    pipe = member.profile.input_pipeline
    if pipe is None:
        return None
    cores = loader_cores(member)
    decode = cores * pipe.samples_per_s_per_core
    gbps = read_gbps if read_gbps is not None else member.instance.network_gbps
    read = math.inf if pipe.bytes_per_sample <= 0 else gbps * 1e9 / 8 / pipe.bytes_per_sample
    return FeedRate(decode, read, cores, member.batch / min(decode, read))


def data_time_s(fleet: Sequence[FleetMember], *, read_gbps: float | None = None) -> tuple[float, int | None]:
    """Seconds the slowest VM's input pipeline needs per iteration and that member's index (0, None: none)."""
    worst, index = 0.0, None
    for i, m in enumerate(fleet):
        rate = feed_rate(m, read_gbps=read_gbps)
        if rate is not None and rate.data_s > worst:
            worst, index = rate.data_s, i
    return worst, index


def stall_warning(member: FleetMember, rate: FeedRate, *, iteration_s: float) -> str:
    """Why a VM type cannot feed its GPUs, in the user's terms."""
    need = member.batch / iteration_s if iteration_s > 0 else math.inf
    if rate.bound == "decode":
        why = f"its {rate.loader_cores} loader vCPU(s) decode {rate.decode_samples_per_s:.0f} samples/s"
    else:
        why = f"its reads deliver {rate.read_samples_per_s:.0f} samples/s"
    return (
        f"data stall on {member.instance.name}: {why}, but its GPUs train {need:.0f} samples/s at batch "
        f"{member.batch}; it adds {rate.data_s - iteration_s:.3g} s per iteration. To fix: more vCPUs per "
        "GPU, a faster input pipeline, or faster storage"
    )
