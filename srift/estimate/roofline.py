"""Roofline times of a model's structure on an accelerator: what forward, backward and the update take.

Per layer and pass, at per-device batch b (FLOPs F and bytes B are the structure's counts at b):

    t_layer = max(F_mm / (P · η_c) + F_conv / (P_conv · η_c), B_mm / (W · η_mm)) + B_other / (W · η_other)

where P is the accelerator's peak for matrix products in the precision and P_conv its peak for
convolutions in `Precision.convolution` of it (PyTorch's defaults: float32 convolutions run in TF32 through
cuDNN, float32 matrix products in IEEE float32; with `strict_fp32`, as `srift profile --strict-fp32` and
`torch.backends.cudnn.allow_tf32 = False` run them, float32 convolutions too run in IEEE float32), F_conv
the convolutions' FLOPs and F_mm the others (matrix products, attention), W the DRAM bandwidth, and the η the
fractions of those peaks that real kernels reach (`Efficiency`, calibrated on public measurements by
`srift.estimate.calibration`). On GPUs with stacked HBM memory the bandwidth fractions are multiplied by
`Efficiency.hbm_bandwidth`: calibrated on the same table, where HBM GPUs (V100, A100, H100) reach a smaller
share of their datasheet bandwidth than GDDR GPUs in these unfused kernels. Matrix products run at the
slower of their arithmetic and their operands' traffic; every other operator is memory-bound. A pass is
never shorter than the host floor of its operators (`srift.estimate.host`: each operator's measured eager
dispatch time, `Efficiency.kernel_s`, plus the host side of its CUDA launch): at small batches the GPU
waits for the CPU to issue work. The update (plain SGD, as the profiler times it) moves
`update_bytes` at η_other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from srift.domain.accelerator import AcceleratorSpec
from srift.domain.memory import DEFAULT_OPTIMIZER, TrainingMemory, training_memory
from srift.domain.structure import ModelStructure, PassWork, Precision
from srift.estimate.host import HostCost


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
    """Seconds of one forward, backward and update at one batch; `backward_layers_s` per structure layer.

    `forward_s` and `backward_s` are the GPU's time or the host floor, whichever is longer; the GPU's
    forward time and both floors are kept apart (`forward_gpu_s`, `*_host_s`; the backward's GPU time is
    the sum of `backward_layers_s`) for what scales one and not the other (a model's factor).
    """

    forward_s: float
    backward_s: float
    update_s: float
    backward_layers_s: tuple[float, ...]
    forward_gpu_s: float = 0.0
    forward_host_s: float = 0.0
    backward_host_s: float = 0.0


def convolution_precision(precision: Precision, *, strict_fp32: bool = False) -> Precision:
    """The arithmetic convolutions run in at `precision`: `Precision.convolution` (cuDNN's TF32 default for
    float32), except that `strict_fp32` (cuDNN's TF32 disabled) keeps float32 convolutions in IEEE float32;
    autocast and tf32 convolutions are unaffected (`srift.profiling.bench.float32_math`)."""
    if strict_fp32 and precision is Precision.FP32:
        return Precision.FP32
    return precision.convolution


def layer_seconds(
    work: PassWork,
    *,
    spec: AcceleratorSpec,
    precision: Precision,
    batch: float,
    efficiency: Efficiency,
    strict_fp32: bool = False,
) -> float:
    """Roofline seconds of one layer's pass at `batch` (see the module docstring)."""
    bandwidth = efficiency.bandwidth(spec)
    conv_peak = spec.peak_flops(convolution_precision(precision, strict_fp32=strict_fp32))
    compute = work.product_flops.at(batch) / (spec.peak_flops(precision) * efficiency.compute) + (
        work.conv_flops.at(batch) / (conv_peak * efficiency.compute)
    )
    operands = work.matmul_bytes.at(batch) / (bandwidth * efficiency.matmul_memory)
    return max(compute, operands) + work.other_bytes.at(batch) / (bandwidth * efficiency.other_memory)


def roofline_times(
    structure: ModelStructure,
    *,
    spec: AcceleratorSpec,
    batch: float,
    efficiency: Efficiency,
    precision: Precision | None = None,
    strict_fp32: bool = False,
) -> RooflineTimes:
    """Forward, backward and update seconds of `structure` on `spec` at per-device `batch`.

    `precision` defaults to the structure's own; the bytes are always the structure's (counted in its
    precision), only the peaks change (fp32 structures priced at tf32 use TF32 tensor cores for matrix
    products too; at fp32 only their convolutions do, and with `strict_fp32` none). Every layer
    at once: the same operations as `layer_seconds` in the same order, on columns of the structure's counts
    (bit for bit the same seconds; a catalog's reference profiles take ~2,500 of these calls).
    """
    prec = precision or structure.precision
    columns = _columns(structure)
    bandwidth = efficiency.bandwidth(spec)
    peaks = (
        spec.peak_flops(prec) * efficiency.compute,
        bandwidth * efficiency.matmul_memory,
        bandwidth * efficiency.other_memory,
        spec.peak_flops(convolution_precision(prec, strict_fp32=strict_fp32)) * efficiency.compute,
    )
    forward = sum(_pass_seconds(columns.forward, batch, peaks).tolist())
    backward_layers = tuple(_pass_seconds(columns.backward, batch, peaks).tolist())
    host = HostCost(dispatch_s=efficiency.kernel_s)  # the host floor: srift.estimate.host
    fw_floor = host.pass_s(columns.forward_kernels)
    bw_floor = host.pass_s(columns.backward_kernels)
    update = structure.update_bytes / (efficiency.bandwidth(spec) * efficiency.other_memory)
    return RooflineTimes(
        forward_s=max(forward, fw_floor),
        backward_s=max(sum(backward_layers), bw_floor),
        update_s=max(update, structure.update_kernels * efficiency.kernel_s),
        backward_layers_s=backward_layers,
        forward_gpu_s=forward,
        forward_host_s=fw_floor,
        backward_host_s=bw_floor,
    )


@dataclass(frozen=True)
class _Columns:
    """A structure's per-layer counts, one row per count (FLOPs of matrix products and attention, matmul
    bytes, other bytes, convolution FLOPs; each as fixed and per-sample parts), one column per layer, and
    each pass's kernel total."""

    forward: npt.NDArray[np.float64]
    backward: npt.NDArray[np.float64]
    forward_kernels: int
    backward_kernels: int


# Columns by the identity of their structure (kept beside them, so the id is not reused while cached):
# hashing a structure by value walks all its layers, which cost more than the pricing itself.
_COLUMNS: dict[int, tuple[ModelStructure, _Columns]] = {}
_COLUMNS_KEPT = 64


def _columns(structure: ModelStructure) -> _Columns:
    """The structure's counts as columns (built once per structure object: the estimator prices each at
    ~10 batches on every catalog GPU)."""
    hit = _COLUMNS.get(id(structure))
    if hit is not None and hit[0] is structure:
        return hit[1]
    made = _build_columns(structure)
    if len(_COLUMNS) >= _COLUMNS_KEPT:
        _COLUMNS.clear()
    _COLUMNS[id(structure)] = (structure, made)
    return made


def _build_columns(structure: ModelStructure) -> _Columns:

    def rows(works: list[PassWork]) -> npt.NDArray[np.float64]:
        return np.array(
            [
                [w.product_flops.fixed for w in works],
                [w.product_flops.per_sample for w in works],
                [w.matmul_bytes.fixed for w in works],
                [w.matmul_bytes.per_sample for w in works],
                [w.other_bytes.fixed for w in works],
                [w.other_bytes.per_sample for w in works],
                [w.conv_flops.fixed for w in works],
                [w.conv_flops.per_sample for w in works],
            ],
            dtype=np.float64,
        )

    forward = [layer.forward for layer in structure.layers]
    backward = [layer.backward for layer in structure.layers]
    return _Columns(
        forward=rows(forward),
        backward=rows(backward),
        forward_kernels=sum(w.kernels for w in forward),
        backward_kernels=sum(w.kernels for w in backward),
    )


def _pass_seconds(
    rows: npt.NDArray[np.float64], batch: float, peaks: tuple[float, float, float, float]
) -> npt.NDArray[np.float64]:
    """`layer_seconds` of every layer of one pass: rows as `_Columns` holds them, peaks as
    (FLOP/s, matmul bytes/s, other bytes/s, convolution FLOP/s) at their efficiencies."""
    compute = (rows[0] + rows[1] * batch) / peaks[0] + (rows[6] + rows[7] * batch) / peaks[3]
    operands = (rows[2] + rows[3] * batch) / peaks[1]
    other = (rows[4] + rows[5] * batch) / peaks[2]
    result: npt.NDArray[np.float64] = np.maximum(compute, operands) + other
    return result


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
