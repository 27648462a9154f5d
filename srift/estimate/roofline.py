"""Roofline times of a model's structure on an accelerator: what forward, backward and the update take.

Per layer and pass, at per-device batch b (FLOPs F and bytes B are the structure's counts at b):

    t_layer = max(F / (P · η_c), B_mm / (W · η_mm)) + B_other / (W · η_other)

where P is the accelerator's peak for matrix products in the precision, W its DRAM bandwidth, and the η the
fractions of those peaks that real kernels reach (`Efficiency`, calibrated on public measurements by
`srift.estimate.calibration`). On GPUs with stacked HBM memory the bandwidth fractions are multiplied by
`Efficiency.hbm_bandwidth`: calibrated on the same table, where HBM GPUs (V100, A100, H100) reach a smaller
share of their datasheet bandwidth than GDDR GPUs in these unfused kernels. Matrix products run at the
slower of their arithmetic and their operands' traffic; every other operator is memory-bound. A pass is
never shorter than its kernels × the host time of one eager kernel (`Efficiency.kernel_s`): at small batches
the GPU waits for the CPU to issue work. The update (plain SGD, as the profiler times it) moves
`update_bytes` at η_other.
"""

from __future__ import annotations

from dataclasses import dataclass

from srift.domain.accelerator import AcceleratorSpec
from srift.domain.memory import DEFAULT_OPTIMIZER, TrainingMemory, training_memory
from srift.domain.structure import ModelStructure, PassWork, Precision


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Fractions of the datasheet peaks that kernels reach, and the host time of one eager kernel launch."""

    compute: float
    matmul_memory: float
    other_memory: float
    kernel_s: float
    hbm_bandwidth: float = 1.0

    def bandwidth(self, spec: AcceleratorSpec) -> float:
        """Bytes/s the spec's memory delivers at full efficiency: its peak, scaled on HBM parts."""
        return spec.memory_bytes_per_s * (self.hbm_bandwidth if spec.hbm else 1.0)


@dataclass(frozen=True, slots=True)
class RooflineTimes:
    """Seconds of one forward, backward and update at one batch; `backward_layers_s` per structure layer."""

    forward_s: float
    backward_s: float
    update_s: float
    backward_layers_s: tuple[float, ...]


def layer_seconds(
    work: PassWork, *, spec: AcceleratorSpec, precision: Precision, batch: float, efficiency: Efficiency
) -> float:
    """Roofline seconds of one layer's pass at `batch` (see the module docstring)."""
    return _Rates.of(spec, precision, efficiency).seconds(work, batch)


@dataclass(frozen=True, slots=True)
class _Rates:
    """The denominators of `layer_seconds` (FLOP/s and bytes/s actually reached), computed once per
    structure and batch rather than once per layer: the reference profiles price ~1M layer passes."""

    flops_per_s: float
    matmul_bytes_per_s: float
    other_bytes_per_s: float

    @classmethod
    def of(cls, spec: AcceleratorSpec, precision: Precision, efficiency: Efficiency) -> _Rates:
        bandwidth = efficiency.bandwidth(spec)
        return cls(
            flops_per_s=spec.peak_flops(precision) * efficiency.compute,
            matmul_bytes_per_s=bandwidth * efficiency.matmul_memory,
            other_bytes_per_s=bandwidth * efficiency.other_memory,
        )

    def seconds(self, work: PassWork, batch: float) -> float:
        flops, operands, other = work.matmul_flops, work.matmul_bytes, work.other_bytes
        compute = (flops.fixed + flops.per_sample * batch) / self.flops_per_s
        traffic = (operands.fixed + operands.per_sample * batch) / self.matmul_bytes_per_s
        return max(compute, traffic) + (other.fixed + other.per_sample * batch) / self.other_bytes_per_s


def roofline_times(
    structure: ModelStructure,
    *,
    spec: AcceleratorSpec,
    batch: float,
    efficiency: Efficiency,
    precision: Precision | None = None,
) -> RooflineTimes:
    """Forward, backward and update seconds of `structure` on `spec` at per-device `batch`.

    `precision` defaults to the structure's own; the bytes are always the structure's (counted in its
    precision), only the peak changes (fp32 structures priced at tf32 use TF32 tensor cores).
    """
    rates = _Rates.of(spec, precision or structure.precision, efficiency)
    layers = structure.layers
    forward = sum(rates.seconds(layer.forward, batch) for layer in layers)
    backward_layers = tuple(rates.seconds(layer.backward, batch) for layer in layers)
    # the kernel counts alone: summing whole PassWorks (structure.forward) per call cost as much as the times
    fw_floor = sum(layer.forward.kernels for layer in layers) * efficiency.kernel_s
    bw_floor = sum(layer.backward.kernels for layer in layers) * efficiency.kernel_s
    update = structure.update_bytes / rates.other_bytes_per_s
    return RooflineTimes(
        forward_s=max(forward, fw_floor),
        backward_s=max(sum(backward_layers), bw_floor),
        update_s=max(update, structure.update_kernels * efficiency.kernel_s),
        backward_layers_s=backward_layers,
    )


def fitting_batch(structure: ModelStructure, *, memory_bytes: float, cap: int = 1 << 20) -> int:
    """The largest per-device batch whose training step fits in `memory_bytes` (0 when none does).

    The training memory model of one CUDA rank (`srift.domain.memory`, what `srift profile` uses on a GPU):
    parameters, gradients, Adam's state and update temporaries, the CUDA context, and the structure's
    activations at that batch (counted by `srift.profiling.structure`), under the memory less the margin.
    """
    memory = structure_memory(structure)
    return memory.largest_batch(memory_bytes, cap=cap)


def structure_memory(structure: ModelStructure) -> TrainingMemory:
    """One CUDA rank training `structure` with Adam (the estimate's assumption; plans redo it per fleet)."""
    use = structure.memory
    return training_memory(
        parameter_bytes=use.parameter_bytes,
        activation_bytes=use.activation_bytes,
        optimizer=DEFAULT_OPTIMIZER,
        cuda=True,
        distributed=False,
        activation_source=f"counted: {structure.method}",
    )
