"""Accelerator specs: what a GPU model can do per second, from its vendor's datasheet."""

from __future__ import annotations

from dataclasses import dataclass, field

from srift.domain.structure import Precision


@dataclass(frozen=True, slots=True)
class AcceleratorSpec:
    """One GPU model's peak dense arithmetic per precision and its memory, with where the figures come from.

    Units: `peak_tflops` 10^12 FLOP/s per precision (fp16/bf16: tensor cores with FP32 accumulation),
    `memory_gib` GiB, `memory_gbps` 10^9 bytes/s, `memory_type` the DRAM technology (HBM…, GDDR…).
    `match_gpu_model`/`match_memory_gib` tie it to catalog instance types; `names` are device names and
    labels that profiles may carry. `compute_capability` is NVIDIA's major.minor ("8.0"), with its source.
    """

    name: str
    memory_gib: float
    memory_gbps: float
    peak_tflops: dict[Precision, float] = field(hash=False)
    source: str
    source_text: str
    source_as_of: str
    memory_type: str = ""
    names: tuple[str, ...] = ()
    match_gpu_model: str | None = None
    match_memory_gib: float | None = None
    note: str = ""
    compute_capability: str = ""
    compute_capability_source: str = ""

    @property
    def capability(self) -> tuple[int, int] | None:
        """The compute capability as (major, minor), None when not known."""
        if not self.compute_capability:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    def peak_flops(self, precision: Precision) -> float:
        """Peak FLOP/s for matrix products in `precision`."""
        return self.peak_tflops[precision] * 1e12

    @property
    def hbm(self) -> bool:
        """High-bandwidth memory (stacked HBM), as opposed to GDDR."""
        return self.memory_type.upper().startswith("HBM")

    @property
    def memory_bytes_per_s(self) -> float:
        return self.memory_gbps * 1e9

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * 2**30)
