"""A model's structure without its target GPU: per-layer FLOPs and bytes moved, and memory per sample.

Counted once by running the model on fake tensors (see `srift.profiling.structure`), it is what lets Srift
estimate compute on accelerators nobody profiled: the roofline estimator (`srift.estimate`) turns it and an
accelerator's specs into forward/backward curves and the largest batch that fits.

Every count is affine in the per-device batch b: value(b) = fixed + per_sample · b (weights are read once
per step whatever the batch; activations scale with it). FLOPs are those of matrix products, convolutions
and attention (what `torch.utils.flop_counter` counts, the work tensor cores do), with the convolutions' share
kept apart (`PassWork.conv_flops`: PyTorch runs float32 convolutions through cuDNN in TF32 by default, matrix
products in IEEE float32); bytes are every operator's inputs plus outputs, split into those of the
FLOP-counted operators and of all others (element-wise ops, normalisation, reductions: memory-bound work).
The FLOPs of half-precision matrix products with a leading dimension that is not a multiple of 16 bytes are
recorded too (`PassWork.unaligned_flops`), not priced apart: see `UNALIGNED_BYTES`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from srift.errors import InvalidInput, parse_choice
from srift.limits import LAYERS_PER_PROFILE

UNALIGNED_BYTES = 16
"""cuBLAS's tensor-core alignment: its GEMMs on fp16/bf16 tensor cores want every matrix's leading
dimension (the stride between rows of a row-major matrix) and pointer to be a multiple of 16 bytes (8
elements); NVIDIA, "Matrix Multiplication Background User's Guide", section "Tensor Core Requirements", and
the cuBLAS documentation's "Tensor Core Usage". A product that misses it (GPT-2's lm_head: 50,257 columns)
may run slower kernels. How much slower is not priced: the public operator-level measurements found
(2026-12-07, listed in docs/gpu.md, "Unaligned half-precision products") give no per-architecture rate for
such shapes, and the one large Hopper bf16 comparison among them shows none for an unaligned output."""


class Precision(StrEnum):
    """The arithmetic a profile was measured or counted in.

    FP32: float32 tensors under PyTorch's defaults: matrix products in IEEE float32
    (`torch.backends.cuda.matmul.allow_tf32` False) and cuDNN convolutions in TF32
    (`torch.backends.cudnn.allow_tf32` True; PyTorch docs, "CUDA semantics", TensorFloat-32 on Ampere and
    later devices). TF32: float32 tensors, matrix products and convolutions on TF32 tensor cores. FP16 /
    BF16: `torch.autocast` with that dtype (a gradient scaler for fp16); parameters and their gradients stay
    float32.
    """

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"

    @property
    def autocast(self) -> bool:
        return self in (Precision.FP16, Precision.BF16)

    @property
    def convolution(self) -> Precision:
        """The arithmetic of convolutions in this precision as PyTorch runs them by default: cuDNN may use
        TF32 for float32 convolutions (`torch.backends.cudnn.allow_tf32` defaults to True), so FP32 convolves
        in TF32; every other precision convolves in itself."""
        return Precision.TF32 if self is Precision.FP32 else self


def parse_precision(value: Any, *, field: str = "precision") -> Precision:
    """A Precision from its name (any case, spaces around ignored); InvalidInput listing the choices
    otherwise."""
    return parse_choice(Precision, str(value).strip().lower(), what="precision", field=field)


@dataclass(frozen=True, slots=True)
class Affine:
    """fixed + per_sample · batch, both ≥ 0."""

    fixed: float
    per_sample: float

    def at(self, batch: float) -> float:
        return self.fixed + self.per_sample * batch

    def plus(self, other: Affine) -> Affine:
        return Affine(self.fixed + other.fixed, self.per_sample + other.per_sample)

    def to_list(self) -> list[float]:
        return [self.fixed, self.per_sample]

    @classmethod
    def through(cls, *, b1: int, v1: float, b2: int, v2: float) -> Affine:
        """The line through two counts, clipped so neither part is negative."""
        slope = max((v2 - v1) / (b2 - b1), 0.0)
        return cls(max(v1 - slope * b1, 0.0), slope)


ZERO = Affine(0.0, 0.0)


@dataclass(frozen=True, slots=True)
class PassWork:
    """One layer's work in one pass (forward or backward).

    `matmul_flops` counts every FLOP-counted operator; `conv_flops` is the part of it done by convolutions
    (priced at `Precision.convolution`); structures counted before it was kept apart have 0 there, which
    prices their convolutions as matrix products. `unaligned_flops` is the part done by fp16/bf16 matrix
    products one of whose matrices has a leading dimension that is not a multiple of `UNALIGNED_BYTES`:
    recorded so an estimate can say how much of a model's work misses cuBLAS's tensor-core alignment, priced
    like every other matrix product (0 in structures counted before it was recorded).
    """

    matmul_flops: Affine
    matmul_bytes: Affine
    other_bytes: Affine
    kernels: int
    conv_flops: Affine = ZERO
    unaligned_flops: Affine = ZERO

    @property
    def product_flops(self) -> Affine:
        """The FLOPs of matrix products and attention: `matmul_flops` less the convolutions'."""
        return Affine(
            max(self.matmul_flops.fixed - self.conv_flops.fixed, 0.0),
            max(self.matmul_flops.per_sample - self.conv_flops.per_sample, 0.0),
        )

    def plus(self, other: PassWork) -> PassWork:
        return PassWork(
            self.matmul_flops.plus(other.matmul_flops),
            self.matmul_bytes.plus(other.matmul_bytes),
            self.other_bytes.plus(other.other_bytes),
            self.kernels + other.kernels,
            self.conv_flops.plus(other.conv_flops),
            self.unaligned_flops.plus(other.unaligned_flops),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "matmul_flops": self.matmul_flops.to_list(),
            "matmul_bytes": self.matmul_bytes.to_list(),
            "other_bytes": self.other_bytes.to_list(),
            "kernels": self.kernels,
        }
        if self.conv_flops != ZERO:
            out["conv_flops"] = self.conv_flops.to_list()
        if self.unaligned_flops != ZERO:
            out["unaligned_flops"] = self.unaligned_flops.to_list()
        return out


EMPTY_PASS = PassWork(ZERO, ZERO, ZERO, 0, ZERO, ZERO)


@dataclass(frozen=True, slots=True)
class LayerWork:
    """The work done directly by one module (not by its children), in forward order.

    `backward_order` ranks the layers by when their backward work ends (0 ends first): gradients of the
    layer's own parameters are ready then. `grad_bytes` are those gradients' bytes (0 for a module without
    parameters of its own; a shared parameter belongs to the first module that owns it).
    """

    name: str
    forward: PassWork
    backward: PassWork
    backward_order: int
    grad_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "forward": self.forward.to_dict(),
            "backward": self.backward.to_dict(),
            "backward_order": self.backward_order,
            "grad_bytes": self.grad_bytes,
        }


@dataclass(frozen=True, slots=True)
class MemoryUse:
    """Bytes one device needs to train the model, at a per-device batch b.

    `parameter_bytes`, `gradient_bytes` (in the gradients' dtype) and `optimizer_state_bytes` (the state of
    `optimizer`) do not depend on b. `activation_bytes` is the peak of everything else alive during a
    forward+backward step (activations saved for backward, their gradients, temporaries, the input batch);
    `saved_bytes` is the part saved for backward.
    """

    parameter_bytes: int
    gradient_bytes: int
    optimizer_state_bytes: int
    optimizer: str
    activation_bytes: Affine
    saved_bytes: Affine

    def step_bytes(self, batch: float) -> float:
        """Peak bytes of a training step at per-device batch `batch`."""
        fixed = self.parameter_bytes + self.gradient_bytes + self.optimizer_state_bytes
        return fixed + self.activation_bytes.at(batch)

    def to_dict(self) -> dict[str, Any]:
        return {
            "parameter_bytes": self.parameter_bytes,
            "gradient_bytes": self.gradient_bytes,
            "optimizer_state_bytes": self.optimizer_state_bytes,
            "optimizer": self.optimizer,
            "activation_bytes": self.activation_bytes.to_list(),
            "saved_bytes": self.saved_bytes.to_list(),
        }


@dataclass(frozen=True, slots=True)
class ModelStructure:
    """Per-layer work and memory of one model in one precision (see the module docstring)."""

    precision: Precision
    layers: tuple[LayerWork, ...]
    memory: MemoryUse
    update_bytes: int
    update_kernels: int
    method: str

    @property
    def forward(self) -> PassWork:
        return _total(layer.forward for layer in self.layers)

    @property
    def backward(self) -> PassWork:
        return _total(layer.backward for layer in self.layers)

    def unaligned_share(self, batch: float) -> float:
        """The share of a training step's FLOP-counted work (forward and backward) at `batch` done by
        half-precision matrix products that miss cuBLAS's alignment (`PassWork.unaligned_flops`); 0 when
        the step counts no FLOPs."""
        forward, backward = self.forward, self.backward
        total = forward.matmul_flops.at(batch) + backward.matmul_flops.at(batch)
        unaligned = forward.unaligned_flops.at(batch) + backward.unaligned_flops.at(batch)
        return unaligned / total if total > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision.value,
            "method": self.method,
            "memory": self.memory.to_dict(),
            "update_bytes": self.update_bytes,
            "update_kernels": self.update_kernels,
            "layers": [layer.to_dict() for layer in self.layers],
        }

    @classmethod
    def from_dict(cls, data: Any, *, field: str = "structure") -> ModelStructure:
        """Parse a structure document; InvalidInput names the field at fault."""
        if not isinstance(data, dict):
            raise InvalidInput("must be an object", hint="give the structure written by srift", field=field)
        precision = parse_precision(data.get("precision", "fp32"), field=f"{field}.precision")
        raw_layers = data.get("layers")
        if not isinstance(raw_layers, list) or not raw_layers:
            raise InvalidInput(
                "must be a non-empty list", hint="list the model's layers", field=f"{field}.layers"
            )
        LAYERS_PER_PROFILE.check(len(raw_layers), field=f"{field}.layers")
        layers = tuple(_layer(raw, f"{field}.layers[{i}]") for i, raw in enumerate(raw_layers))
        mem = data.get("memory")
        where = f"{field}.memory"
        if not isinstance(mem, dict):
            raise InvalidInput("must be an object", hint="give the memory use", field=where)
        memory = MemoryUse(
            parameter_bytes=_count(mem, "parameter_bytes", where),
            gradient_bytes=_count(mem, "gradient_bytes", where),
            optimizer_state_bytes=_count(mem, "optimizer_state_bytes", where),
            optimizer=_text(mem, "optimizer", where),
            activation_bytes=_affine(mem.get("activation_bytes"), f"{where}.activation_bytes"),
            saved_bytes=_affine(mem.get("saved_bytes"), f"{where}.saved_bytes"),
        )
        return cls(
            precision=precision,
            layers=layers,
            memory=memory,
            update_bytes=_count(data, "update_bytes", field),
            update_kernels=_count(data, "update_kernels", field),
            method=_text(data, "method", field),
        )


def _total(parts: Iterable[PassWork]) -> PassWork:
    """The sum of `parts`, as `PassWork.plus` folds them from EMPTY_PASS (the same additions in the same
    order, so the same floats), without building a PassWork and five Affines per part: the estimator reads
    a structure's forward and backward totals thousands of times while it calibrates."""
    mf = mf_s = mb = mb_s = ob = ob_s = cf = cf_s = uf = uf_s = 0.0
    kernels = 0
    for p in parts:
        m, b, o, c, u = p.matmul_flops, p.matmul_bytes, p.other_bytes, p.conv_flops, p.unaligned_flops
        mf += m.fixed
        mf_s += m.per_sample
        mb += b.fixed
        mb_s += b.per_sample
        ob += o.fixed
        ob_s += o.per_sample
        cf += c.fixed
        cf_s += c.per_sample
        uf += u.fixed
        uf_s += u.per_sample
        kernels += p.kernels
    return PassWork(
        Affine(mf, mf_s), Affine(mb, mb_s), Affine(ob, ob_s), kernels, Affine(cf, cf_s), Affine(uf, uf_s)
    )


def _count(data: dict[str, Any], key: str, where: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(
            f"{value!r} is not a count ≥ 0", hint=f"give `{key}` as an integer", field=f"{where}.{key}"
        )
    return value


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or len(value) > 1000:
        raise InvalidInput(
            "must be a string (≤ 1000 characters)", hint=f"give `{key}` as text", field=f"{where}.{key}"
        )
    return value


def _affine(value: Any, where: str) -> Affine:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        or not all(math.isfinite(v) and v >= 0 for v in value)
    ):
        raise InvalidInput(
            f"{value!r} is not [fixed, per_sample]",
            hint="give two finite numbers ≥ 0: the batch-independent part and the part per sample",
            field=where,
        )
    return Affine(float(value[0]), float(value[1]))


def _pass(value: Any, where: str) -> PassWork:
    if not isinstance(value, dict):
        raise InvalidInput(
            "must be an object", hint="give matmul_flops, matmul_bytes, other_bytes, kernels", field=where
        )
    return PassWork(
        matmul_flops=_affine(value.get("matmul_flops"), f"{where}.matmul_flops"),
        matmul_bytes=_affine(value.get("matmul_bytes"), f"{where}.matmul_bytes"),
        other_bytes=_affine(value.get("other_bytes"), f"{where}.other_bytes"),
        kernels=_count(value, "kernels", where),
        conv_flops=_affine(value.get("conv_flops", [0.0, 0.0]), f"{where}.conv_flops"),
        unaligned_flops=_affine(value.get("unaligned_flops", [0.0, 0.0]), f"{where}.unaligned_flops"),
    )


def _layer(raw: Any, where: str) -> LayerWork:
    if not isinstance(raw, dict):
        raise InvalidInput(
            "must be an object", hint="give name, forward, backward, backward_order", field=where
        )
    name = raw.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 1000:
        raise InvalidInput(
            "must be a module name of 1–1000 characters", hint="name the module", field=f"{where}.name"
        )
    return LayerWork(
        name=name,
        forward=_pass(raw.get("forward"), f"{where}.forward"),
        backward=_pass(raw.get("backward"), f"{where}.backward"),
        backward_order=_count(raw, "backward_order", where),
        grad_bytes=_count({"grad_bytes": raw.get("grad_bytes", 0)}, "grad_bytes", where),
    )
