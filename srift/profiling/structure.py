"""Count a model's structure: per-layer FLOPs and bytes moved, and the memory a training step needs.

`count_structure` builds the model and runs one forward, loss and backward (and a plain SGD step) at two
small batches under a `TorchDispatchMode` that sees every aten operator:

- **FLOPs** of matrix products, convolutions and attention, by `torch.utils.flop_counter`'s formulas (the
  registry of its `FlopCounterMode`), plus CPU flash attention, which that registry lacks; the convolutions'
  share is also kept apart (PyTorch runs float32 convolutions in TF32 by default, matrix products not).
- **Attention as CUDA runs it**: `F.scaled_dot_product_attention` on CUDA runs a fused kernel
  (FlashAttention-2 or memory-efficient attention) that applies dropout inside the kernel and keeps no
  attention matrix; the CPU runs a call with dropout through its unfused math path (scores, softmax,
  dropout mask and their gradients, all materialised). So the counter runs such calls without dropout,
  which the CPU serves with its fused flash kernel: the bytes of q, k, v, the output and the log-sum-exp,
  as on CUDA.
- **Bytes moved** by every operator that launches work: the bytes of its tensor inputs plus its outputs
  (views move nothing; a broadcast input counts its storage once). That is what an unfused GPU kernel
  reads and writes, the memory traffic of a roofline model.
- **Unaligned half-precision products**: the FLOPs of fp16/bf16 matrix products (mm, addmm, bmm, baddbmm)
  one of whose matrices (operands or output) has a leading dimension, the stride between its rows or
  columns, that is not a multiple of 16 bytes (`srift.domain.structure.UNALIGNED_BYTES`): recorded apart.
- **Kernels**: operators that do work, the count behind the per-kernel launch floor.
- **Memory**: the peak of live tensor storage during the step (weak references tell when one is freed),
  parameters, gradients in their own dtype, and an optimizer state (Adam's two moments per parameter).

Work is attributed to the deepest module running (forward) or being differentiated (backward), tracked as
`torch.utils.module_tracker.ModuleTracker` does (module hooks, and gradient hooks on each module's outputs
and inputs) but keeping the order modules were entered in: of equally deep ones, the most recently entered,
so siblings that share an input (attention's query, key and value) are told apart; operators outside the
model (a separate loss) count as `<loss>`. Counts at two batches give each quantity as fixed + per_sample ·
batch.

It runs on **fake tensors** (`FakeTensorMode`): shapes and dtypes without arithmetic, so a 124 M-parameter
model is counted in about a second on a CPU. Models that cannot run on fake tensors (data-dependent
control flow, weights loaded from disk) are counted on real tensors on the CPU instead.

Mixed precision is counted under `torch.autocast` on the CPU, whose low-precision operator list (matrix
products and convolutions) is CUDA's; operators that CUDA autocast runs in float32 (softmax, layer_norm,
losses, … — the list in the PyTorch AMP documentation) are run in float32 here too, so the bytes follow
CUDA's dtypes.
"""

from __future__ import annotations

import gc
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import register_multi_grad_hook
from torch.multiprocessing.reductions import StorageWeakRef
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from srift.domain.structure import (
    UNALIGNED_BYTES,
    Affine,
    LayerWork,
    MemoryUse,
    ModelStructure,
    PassWork,
    Precision,
)
from srift.errors import InvalidInput
from srift.profiling.bench import call_model, default_loss, tensors_in, unique_trainable_parameters

COUNT_BATCHES = (2, 4)
"""The two batches counted; every count is the line through them."""

ADAM_STATE_TENSORS = 2
"""Adam keeps two moments per parameter, in the parameter's dtype (torch.optim.Adam)."""

OPTIMIZER = "adam (two moments per parameter, in its dtype)"

LOSS_LAYER = "<loss>"
ROOT_LAYER = "<root>"

# CUDA ops that autocast to float32, from the PyTorch documentation (torch.amp, "CUDA Ops that can autocast
# to float32", PyTorch 2.x docs, https://pytorch.org/docs/stable/amp.html). CPU autocast leaves these in
# the low-precision dtype, so the counter casts their floating-point inputs to float32 itself.
CUDA_FLOAT32_OPS = frozenset(
    {
        "__pow__",
        "__rdiv__",
        "__rpow__",
        "__rtruediv__",
        "acos",
        "asin",
        "binary_cross_entropy_with_logits",
        "cosh",
        "cosine_embedding_loss",
        "cdist",
        "cosine_similarity",
        "cross_entropy",
        "cumprod",
        "cumsum",
        "dist",
        "erfinv",
        "exp",
        "expm1",
        "group_norm",
        "hinge_embedding_loss",
        "kl_div",
        "l1_loss",
        "layer_norm",
        "log",
        "log_softmax",
        "log10",
        "log1p",
        "log2",
        "margin_ranking_loss",
        "mse_loss",
        "multilabel_margin_loss",
        "multi_margin_loss",
        "nll_loss",
        "norm",
        "normalize",
        "pdist",
        "poisson_nll_loss",
        "pow",
        "prod",
        "reciprocal",
        "rsqrt",
        "sinh",
        "smooth_l1_loss",
        "soft_margin_loss",
        "softmax",
        "softmin",
        "softplus",
        "sum",
        "renorm",
        "tan",
        "triplet_margin_loss",
    }
)

_LOW = (torch.float16, torch.bfloat16)
_SKIP = {
    torch.ops.prim.device.default,
    torch.ops.aten.is_contiguous.default,
    torch.ops.aten.sym_size.default,
    torch.ops.aten.sym_stride.default,
    torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_storage_offset.default,
    torch.ops.aten.size.default,
    torch.ops.aten.stride.default,
    torch.ops.aten.numel.default,
    torch.ops.aten.dim.default,
    torch.ops.aten.storage_offset.default,
}
_ALLOCATE_ONLY = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"}


def _sdpa_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> int:
    """QKᵀ and PV as batched matrix products: 2·b·h·s_q·s_k·(d_qk + d_v)."""
    *lead, s_q, d_qk = query.shape
    s_k, d_v = key.shape[-2], value.shape[-1]
    return 2 * math.prod(lead) * s_q * s_k * (d_qk + d_v)


def _cpu_flash_forward(query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kw: Any) -> int:
    return _sdpa_flops(query, key, value)


def _cpu_flash_backward(
    grad: Any, query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kw: Any
) -> int:
    # The backward recomputes QKᵀ and forms dQ, dK, dV and dP: five products where the forward has two.
    return _sdpa_flops(query, key, value) * 5 // 2


def _flop_registry() -> dict[Any, Callable[..., int]]:
    registry: dict[Any, Callable[..., int]] = dict(FlopCounterMode(display=False).flop_registry)
    aten = torch.ops.aten
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        registry[aten._scaled_dot_product_flash_attention_for_cpu] = _cpu_flash_forward
        registry[aten._scaled_dot_product_flash_attention_for_cpu_backward] = _cpu_flash_backward
    return registry


class _CudaAutocastFloat32(TorchFunctionMode):
    """While CPU autocast is on, run CUDA autocast's float32 operators in float32 (see CUDA_FLOAT32_OPS)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in CUDA_FLOAT32_OPS and torch.is_autocast_enabled("cpu"):
            args, kwargs = torch.utils._pytree.tree_map(_to_float32, (args, kwargs))
        return func(*args, **kwargs)


class CudaFusedAttention(TorchFunctionMode):
    """Run `F.scaled_dot_product_attention` as CUDA does, fused (module docstring): a call with dropout is
    counted without it, so the CPU picks its fused flash kernel (the FLOPs are the same; CUDA's kernels
    draw the dropout mask inside and store none)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.nn.functional.scaled_dot_product_attention:
            if len(args) > 4:  # (query, key, value, attn_mask, dropout_p, ...)
                args = (*args[:4], 0.0, *args[5:])
            else:
                kwargs["dropout_p"] = 0.0
        return func(*args, **kwargs)


def _to_float32(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _LOW:
        return value.float()
    return value


@dataclass
class _Tally:
    matmul_flops: float = 0.0
    matmul_bytes: float = 0.0
    other_bytes: float = 0.0
    kernels: int = 0
    conv_flops: float = 0.0
    unaligned_flops: float = 0.0


def _is_convolution(func: Any) -> bool:
    """Whether a FLOP-counted operator is a convolution (aten.convolution, its backward, cudnn_convolution,
    _slow_conv2d_forward, ...): the work cuDNN does, in TF32 for float32 tensors by default."""
    return "conv" in func._overloadpacket.__name__


_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm"})
"""The aten matrix products cuBLAS runs as (batched) GEMMs."""


def leading_dimension(t: torch.Tensor) -> int | None:
    """The leading dimension of the matrix in `t`'s last two dimensions, in elements: the stride of the
    dimension that is not unit-stride (BLAS's lda of a row- or column-major matrix); None when neither is
    (no BLAS layout) or the matrix is a single row or column (its leading dimension is never used)."""
    if t.dim() < 2 or t.shape[-1] <= 1 or t.shape[-2] <= 1:
        return None
    rows, cols = t.stride(-2), t.stride(-1)
    if cols == 1:
        return int(rows)
    if rows == 1:
        return int(cols)
    return None


def is_unaligned_half_product(func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> bool:
    """Whether `func(*args, **kwargs) -> out` is a fp16/bf16 matrix product with a matrix whose leading
    dimension is not a multiple of `UNALIGNED_BYTES` (cuBLAS's tensor-core alignment)."""
    if func._overloadpacket.__name__ not in _PRODUCTS:
        return False
    matrices = [t for t in tensors_in((args, kwargs, out)) if t.dim() >= 2]
    if not matrices or any(t.dtype not in _LOW for t in matrices):
        return False
    for t in matrices:
        ld = leading_dimension(t)
        if ld is not None and (ld * t.element_size()) % UNALIGNED_BYTES:
            return True
    return False


@dataclass
class _Count:
    """Everything one counted step produced."""

    forward: dict[str, _Tally] = field(default_factory=lambda: defaultdict(_Tally))
    backward: dict[str, _Tally] = field(default_factory=lambda: defaultdict(_Tally))
    first_forward: dict[str, int] = field(default_factory=dict)
    last_backward: dict[str, int] = field(default_factory=dict)
    update: _Tally = field(default_factory=_Tally)
    peak_bytes: int = 0
    saved_bytes: int = 0


class _Tracker:
    """Which modules are running forward or being differentiated, with the order they were entered in."""

    def __init__(self, model: nn.Module) -> None:
        self.names = {module: name or ROOT_LAYER for name, module in model.named_modules()}
        self.depth = {name: 0 if name == ROOT_LAYER else name.count(".") + 1 for name in self.names.values()}
        self.active: dict[str, int] = {}
        self.entered = 0
        self.handles: list[Any] = []

    @property
    def is_bw(self) -> bool:
        return bool(torch._C._current_graph_task_id() != -1)

    def current(self) -> str:
        """The deepest active module (the most recently entered among equally deep ones), else `<loss>`."""
        if not self.active:
            return LOSS_LAYER
        return max(self.active, key=lambda n: (self.depth[n], self.active[n]))

    def _enter(self, name: str) -> Callable[..., None]:
        def enter(*_: Any) -> None:
            self.entered += 1
            self.active[name] = self.entered

        return enter

    def _leave(self, name: str) -> Callable[..., None]:
        def leave(*_: Any) -> None:
            self.active.pop(name, None)

        return leave

    def _grad_hook(self, value: Any, fn: Callable[..., None]) -> None:
        tensors = [t for t in tensors_in(value) if t.requires_grad]
        if tensors:
            self.handles.append(register_multi_grad_hook(tensors, fn))

    def _pre(self, module: nn.Module, args: Any) -> None:
        name = self.names.get(module)
        if name is not None:
            self._enter(name)()
            self._grad_hook(args, self._leave(name))

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        name = self.names.get(module)
        if name is not None:
            self._leave(name)()
            self._grad_hook(output, self._enter(name))

    def __enter__(self) -> _Tracker:
        self.handles += [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post),
        ]
        return self

    def __exit__(self, *_: Any) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


class _Counter(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Tallies FLOPs, bytes and kernels per (module, pass) and tracks the peak of live storage."""

    def __init__(self, tracker: _Tracker, registry: dict[Any, Callable[..., int]]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.tracker = tracker
        self.registry = registry
        self.count = _Count()
        self.updating = False
        self.ops = 0
        self.live: dict[Any, int] = {}
        self.events: list[tuple[Any, int]] = []

    def _layer(self) -> str:
        return self.tracker.current()

    def _track(self, out: Any) -> None:
        """Log storages freed since the last operator and those this one created (for `peak_bytes`)."""
        for ref in [r for r in self.live if r.expired()]:
            self.events.append((ref, -self.live.pop(ref)))
        for t in tensors_in(out):
            ref = _storage_ref(t)
            if ref not in self.live:
                size = t.untyped_storage().nbytes()
                self.live[ref] = size
                self.events.append((ref, size))

    def peak_bytes(self, *, excluding: set[Any]) -> int:
        """The largest total of live storage over the step, leaving out `excluding` (parameter gradients)."""
        live = peak = 0
        for ref, delta in self.events:
            if ref not in excluding:
                live += delta
                peak = max(peak, live)
        return peak

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _SKIP:
            return out
        returns = func._schema.returns
        if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
            return out  # a view: no kernel, no bytes, no new storage
        self._track(out)
        if func._overloadpacket.__name__ in _ALLOCATE_ONLY:
            return out
        self.ops += 1
        moved = _moved_bytes(func, args, kwargs, out)
        counter = self.registry.get(func._overloadpacket)
        flops = float(counter(*args, **kwargs, out_val=out)) if counter is not None else 0.0
        if self.updating:
            tally = self.count.update
        else:
            name = self._layer()
            if self.tracker.is_bw:
                tally = self.count.backward[name]
                self.count.last_backward[name] = self.ops
            else:
                tally = self.count.forward[name]
                self.count.first_forward.setdefault(name, self.ops)
        if counter is not None:
            tally.matmul_flops += flops
            tally.matmul_bytes += moved
            if _is_convolution(func):
                tally.conv_flops += flops
            elif is_unaligned_half_product(func, args, kwargs, out):
                tally.unaligned_flops += flops
        else:
            tally.other_bytes += moved
        tally.kernels += 1
        return out


def _unique(tensors: Iterator[torch.Tensor]) -> list[torch.Tensor]:
    seen: set[int] = set()
    out = []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def _moved_bytes(func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> int:
    """Bytes read (every tensor input once) plus bytes written: new outputs, and inputs the op mutates."""
    read = sum(_nbytes(t) for t in _unique(tensors_in((args, kwargs))))
    schema = func._schema
    mutated: list[Any] = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            mutated.append(args[i] if i < len(args) else kwargs.get(arg.name))
    returns = schema.returns
    outputs = out if isinstance(out, tuple | list) and len(returns) > 1 else (out,)
    fresh = [o for o, r in zip(outputs, returns, strict=False) if r.alias_info is None]
    written = sum(_nbytes(t) for t in tensors_in(fresh)) + sum(_nbytes(t) for t in tensors_in(mutated))
    return read + written


def _storage_ref(t: torch.Tensor) -> Any:
    """A hashable weak reference to `t`'s storage (equal for every view of it); `.expired()` once freed."""
    return StorageWeakRef(t.untyped_storage())  # type: ignore[no-untyped-call]


def _nbytes(t: torch.Tensor) -> int:
    """Bytes an operator touches in `t`: its elements, at most its storage (a broadcast reads it once)."""
    return min(t.numel() * t.element_size(), t.untyped_storage().nbytes())


def _precision_context(precision: Precision) -> AbstractContextManager[Any]:
    if precision is Precision.FP16:
        return torch.autocast("cpu", dtype=torch.float16)
    if precision is Precision.BF16:
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return nullcontext()


def _require_trainable(model: nn.Module) -> None:
    """InvalidInput unless `model` has a parameter to train: without one the step has no backward to time, no
    gradient to all-reduce and no update, so there is nothing to plan (and torch's own failure, an optimizer
    given an empty parameter list, would say none of that)."""
    if unique_trainable_parameters(model):
        return
    total = sum(1 for _ in model.parameters())
    what = (
        f"none of the model's {total} parameter tensors is trainable (requires_grad is False on every one)"
        if total
        else f"the model ({type(model).__name__}) has no parameters"
    )
    raise InvalidInput(
        f"{what}: a training step has nothing to train and no gradient to all-reduce",
        hint="profile the module that holds the weights to be trained (a parameter-free module such as "
        "nn.ReLU has no training step), or set requires_grad=True on the parameters to be trained",
        field="model_factory",
    )


def _own_gradient_bytes(model: nn.Module) -> dict[str, int]:
    """Gradient bytes of each module's own trainable parameters (shared ones with their first owner)."""
    seen: set[int] = set()
    out: dict[str, int] = {}
    for name, module in model.named_modules():
        total = 0
        for param in module.parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            held = param.grad if param.grad is not None else param
            total += held.numel() * held.element_size()
        if total:
            out[name or ROOT_LAYER] = total
    return out


def _count_step(
    model: nn.Module,
    inputs: Any,
    loss_fn: Callable[[Any], torch.Tensor],
    *,
    precision: Precision,
    registry: dict[Any, Callable[..., int]],
) -> _Count:
    """One forward+loss, backward and plain SGD step under the counter."""
    model.zero_grad(set_to_none=True)
    params = unique_trainable_parameters(model)
    optimizer = torch.optim.SGD(params, lr=1e-3, foreach=True)
    saved: dict[Any, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[_storage_ref(t)] = t.untyped_storage().nbytes()
        return t

    param_refs = {_storage_ref(p) for p in params}
    with _Tracker(model) as tracker:
        counter = _Counter(tracker, registry)
        with counter, _CudaAutocastFloat32(), CudaFusedAttention():
            with _precision_context(precision), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = loss_fn(call_model(model, inputs))
            loss.backward()  # type: ignore[no-untyped-call]
            del loss
            counter.updating = True
            optimizer.step()
    count = counter.count
    count.saved_bytes = sum(size for ref, size in saved.items() if ref not in param_refs)
    gradients = {_storage_ref(p.grad) for p in params if p.grad is not None}
    count.peak_bytes = counter.peak_bytes(excluding=gradients)
    return count


@contextmanager
def _maybe_fake(fake: bool) -> Iterator[None]:
    if not fake:
        yield
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield


def count_structure(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    *,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    precision: Precision | str = Precision.FP32,
    fake: bool | None = None,
) -> ModelStructure:
    """Count the structure of the model `model_factory()` trained on `input_factory(batch)` batches.

    `precision` picks the arithmetic (autocast for fp16/bf16; tf32 moves the same bytes as fp32). `fake`
    True runs on fake tensors, False on real CPU tensors, None tries fake tensors first. Raises
    InvalidInput when the model has no trainable parameter (on either kind of tensor: no step to count) or
    cannot run either way.
    """
    prec = Precision(precision)
    loss = loss_fn or default_loss
    attempts = [True, False] if fake is None else [fake]
    failure: Exception | None = None
    for use_fake in attempts:
        try:
            return _count(model_factory, input_factory, loss, precision=prec, fake=use_fake)
        except InvalidInput:  # the model itself is at fault, not the fake tensors: real ones change nothing
            raise
        except Exception as exc:  # any other failure on fake tensors sends us to real ones
            failure = exc
            gc.collect()
    assert failure is not None
    raise InvalidInput(
        f"could not count the model's FLOPs and bytes: {type(failure).__name__}: {failure}",
        hint="make the model's forward and backward run at batch 2 and 4 on the CPU",
        field="model_factory",
    ) from failure


def _count(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    loss_fn: Callable[[Any], torch.Tensor],
    *,
    precision: Precision,
    fake: bool,
) -> ModelStructure:
    registry = _flop_registry()
    counts: list[_Count] = []
    input_bytes: list[int] = []
    with _maybe_fake(fake):
        model = model_factory().train()
        _require_trainable(model)
        for batch in COUNT_BATCHES:
            inputs = input_factory(batch)
            input_bytes.append(sum(_nbytes(t) for t in tensors_in(inputs)))
            counts.append(_count_step(model, inputs, loss_fn, precision=precision, registry=registry))
            del inputs
        params = unique_trainable_parameters(model)
        own_grads = _own_gradient_bytes(model)
        parameter_bytes = sum(p.numel() * p.element_size() for p in params)
        gradient_bytes = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
        optimizer_state_bytes = ADAM_STATE_TENSORS * parameter_bytes
        model.zero_grad(set_to_none=True)
    (b1, b2), (c1, c2) = COUNT_BATCHES, counts
    names = list(dict.fromkeys([*c2.first_forward, *c2.forward, *c2.backward]))
    names.sort(key=lambda n: c2.first_forward.get(n, math.inf))
    by_end = sorted(names, key=lambda n: c2.last_backward.get(n, -1))
    rank = {n: i for i, n in enumerate(by_end)}

    def line(get: Callable[[_Count], float]) -> Affine:
        return Affine.through(b1=b1, v1=get(c1), b2=b2, v2=get(c2))

    def pass_work(side: str, name: str) -> PassWork:
        def tally(c: _Count) -> _Tally:
            return getattr(c, side).get(name) or _Tally()

        return PassWork(
            matmul_flops=line(lambda c: tally(c).matmul_flops),
            matmul_bytes=line(lambda c: tally(c).matmul_bytes),
            other_bytes=line(lambda c: tally(c).other_bytes),
            kernels=tally(c2).kernels,
            conv_flops=line(lambda c: tally(c).conv_flops),
            unaligned_flops=line(lambda c: tally(c).unaligned_flops),
        )

    layers = tuple(
        LayerWork(
            name=n,
            forward=pass_work("forward", n),
            backward=pass_work("backward", n),
            backward_order=rank[n],
            grad_bytes=own_grads.get(n, 0),
        )
        for n in names
    )
    activation = Affine.through(
        b1=b1, v1=c1.peak_bytes + input_bytes[0], b2=b2, v2=c2.peak_bytes + input_bytes[1]
    )
    memory = MemoryUse(
        parameter_bytes=parameter_bytes,
        gradient_bytes=gradient_bytes,
        optimizer_state_bytes=optimizer_state_bytes,
        optimizer=OPTIMIZER,
        activation_bytes=activation,
        saved_bytes=Affine.through(b1=b1, v1=c1.saved_bytes, b2=b2, v2=c2.saved_bytes),
    )
    method = (
        f"srift.profiling.structure on {'fake' if fake else 'real CPU'} tensors at batches {b1} and {b2}, "
        f"torch {torch.__version__}"
        + (", CPU autocast with CUDA's float32 operator list" if precision.autocast else "")
    )
    return ModelStructure(
        precision=precision,
        layers=layers,
        memory=memory,
        update_bytes=int(c2.update.other_bytes + c2.update.matmul_bytes),
        update_kernels=c2.update.kernels,
        method=method,
    )
