"""The operator grid: single operators timed on one device, each beside the roofline's figure for it.

Part (a) of issue #55's device check (part (b), whole reference models, is `benchmarks/gpu_check.py`). Each
group answers one question of docs/gpu.md ("Operator grid (device truth, part a)"):

- **host**: the host cost of one eager operator (add, mul, linear, conv2d, layer_norm, relu, gelu) on
  tensors too small for their arithmetic to count: a chain of `--chain` such modules run back to back
  `--host-reps` times with one synchronize at the end (wall clock, host-bound by construction), forward
  under `no_grad`, forward recording autograd, and forward + backward; divided by the operators
  `srift.profiling.structure` counts in the chain, against the estimate's floor per operator
  (`srift.estimate.host`: measured eager dispatch + the cited cudaLaunchKernel on CUDA).
- **matmul**: the products of BERT-base / GPT-2 small at `tokens` rows (768→768, 768→2,304, 768→3,072,
  3,072→768) and GPT-2's tied head at 50,257 (unaligned) and 50,304 (padded) outputs, in the three layouts
  training runs (forward X·Wᵀ, dX = dY·W, dW = dYᵀ·X), in IEEE fp32, tf32, fp16 and bf16; `pairs` gives the
  padded / unaligned ratio of achieved FLOP/s per dtype and layout.
- **conv**: ResNet-50's 7×7 stem, a 3×3 at 56×56×64 and a 1×1 at 14×14×1024→256, NCHW and channels_last,
  fp32 with cuDNN's TF32 (PyTorch's default) and without it, and bf16; forward and backward.
- **sdpa**: `F.scaled_dot_product_attention` at BERT-base's shape (12 heads of 64, 384 positions) and
  GPT-2 small's (1,024, causal), bf16 and fp32, forward and backward, with the aten operator that ran.
- **memory**: layer_norm, batch_norm (training), gelu, relu and add over a few sizes: achieved bytes/s.
- **cross_entropy**: over tokens × 50,257 fp32 logits (GPT-2's `.float()` path), forward and backward.
- **adamw**: one `torch.optim.AdamW` step, foreach (CUDA's default) and fused, over GPT-2 small's and
  ResNet-50's parameter tensors (`benchmarks.gpu_check.parameter_numels`), with the kernels the step
  launched (CUDA: the profiler) against `srift.estimate.host.adamw_launches`.

Every row carries the work as the structure counter counts it (FLOPs of products and convolutions, bytes
of inputs plus outputs: `count_structure` on the case as a module, formulas for the bare products) and,
with a spec (`--spec`, default this GPU's), the roofline's seconds for it (`srift.estimate.roofline.
layer_seconds` with the shipped calibration's efficiencies; the host floor is the host group's, not in
these), so each row says measured / estimated.

Timing: CUDA events around each call on a GPU (wall clock and one synchronize for the host group),
`time.perf_counter` on a CPU; `--warmup` calls, then the median and minimum of `--repeats`. No case starts
after `--budget-s`. Before it runs, the grid's time is planned from each case's FLOPs and bytes at the
spec's roofline (calls × the estimate, at least `MIN_CALL_S` a call, plus `CASE_OVERHEAD_S` per case for
its allocation and count): on an H200 the default grid plans at well under the 150 s budget.

`--device cpu` runs small sizes (`QUICK`), so a test runs the whole grid in seconds; its times are a
loaded CPU's. Writes "GPU operators" (or "GPU operators (cpu)") in docs/BENCHMARKS.md unless `--no-write`;
`--render REPORT` writes that section from a stored report (a lent device's, run with `--no-write`).
`--plan-only` counts the grid and prints its planned seconds without timing anything.

    python -m benchmarks.gpu_ops --device cuda --out ops.json          # on a GPU machine, ~1-2 min
    python -m benchmarks.gpu_ops --device cpu --spec H200-SXM-141GB --no-write --out /tmp/ops.json
    python -m benchmarks.gpu_ops --render docs/images/gpu/<gpu>-gpu-ops.json   # its section, from a report
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_BUDGET_S = 150.0
"""No new case starts after this many seconds (the grid plans well under it on an H100/H200)."""
MIN_CALL_S = 20e-6
"""Planning: the least one timed call is taken to cost (a launch-bound call is not shorter)."""
CASE_OVERHEAD_S = 0.1
"""Planning: seconds per case beyond its timed calls (allocation, the structure count, synchronizes)."""
HOST_PLAN_OP_S = 63e-6
"""Planning: host seconds per counted operator, the largest measured on the H200 at batch 1 (docs/gpu.md,
"The GPU check": 24-63 µs); the host group is planned at three operators per module and pass."""
HEAD = (50257, 50304)
"""GPT-2's vocabulary (the tied head's outputs) and nanoGPT's padding of it to a multiple of 64."""
LAYOUTS = ("forward X·Wᵀ", "dX = dY·W", "dW = dYᵀ·X")
DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}
HOST_OPS = ("add", "mul", "linear", "conv2d", "layer_norm", "relu", "gelu")


@dataclass(frozen=True)
class Sizes:
    """The grid's sizes: `GPU` on a device, `QUICK` on a CPU (same cases, small tensors)."""

    tokens: int
    hidden: int
    ffn: int
    image_batch: int
    spatial: tuple[int, int, int]  # stem input, 3×3 and 1×1 feature maps (224, 56, 14 in ResNet-50)
    wide_channels: int  # the 1×1's input channels (1,024 in ResNet-50)
    sdpa: tuple[tuple[int, int, bool], ...]  # (batch, positions, causal)
    elements: tuple[int, ...]
    norm_rows: tuple[int, ...]
    batch_norm: tuple[tuple[int, int, int], ...]  # (batch, channels, side)
    xent_tokens: int
    adamw_models: tuple[str, ...]
    chain: int
    host_reps: int
    warmup: int
    repeats: int
    few: bool = False  # one product shape besides the head, one convolution shape (a CPU's quick run)


GPU = Sizes(
    tokens=8192,  # GPT-2 small at batch 8 × 1,024 positions (BERT-base: ~21 × 384)
    hidden=768,
    ffn=3072,
    image_batch=32,
    spatial=(224, 56, 14),
    wide_channels=1024,
    sdpa=((32, 384, False), (8, 1024, True)),
    elements=(1 << 20, 1 << 23, 1 << 26),
    norm_rows=(1024, 16384),
    batch_norm=((32, 64, 56), (32, 256, 56)),
    xent_tokens=8192,
    adamw_models=("gpt2-small", "resnet50"),
    chain=100,
    host_reps=10,
    warmup=3,
    repeats=10,
)
QUICK = Sizes(
    tokens=8,
    hidden=64,
    ffn=256,
    image_batch=1,
    spatial=(32, 8, 4),
    wide_channels=64,
    sdpa=((1, 32, False), (1, 32, True)),
    elements=(1 << 10, 1 << 14),
    norm_rows=(16,),
    batch_norm=((2, 8, 8),),
    xent_tokens=8,
    adamw_models=("cnn",),
    chain=10,
    host_reps=3,
    warmup=1,
    repeats=3,
    few=True,
)


@dataclass
class Case:
    """One timed operator: what the JSON row says of it, and how to set it up (`make` returns the call to
    time); `work` is its counted work (None for the host and AdamW groups, which count their own)."""

    kind: str
    name: str
    shape: dict[str, Any]
    dtype: str
    layout: str
    pass_: str
    make: Callable[[], Callable[[], Any]]
    work: Any = None
    batch: float = 1.0
    precision: str = "fp32"
    strict_fp32: bool = False
    calls: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# --- timing -------------------------------------------------------------------------------------------


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(call: Callable[[], Any], *, device: Any, warmup: int, repeats: int) -> list[float]:
    """Seconds of each of `repeats` calls after `warmup` untimed ones: CUDA events on a GPU (the device's
    time between the call's first and last kernel, launch gaps included), perf_counter on a CPU."""
    from srift.profiling.bench import cuda_event

    for _ in range(warmup):
        call()
    _sync(device)
    if device.type == "cuda":
        events = [(cuda_event(), cuda_event()) for _ in range(repeats)]
        for start, end in events:
            start.record()
            call()
            end.record()
        _sync(device)
        return [start.elapsed_time(end) / 1e3 for start, end in events]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def wall_per_call(call: Callable[[], Any], *, device: Any, calls: int, repeats: int) -> list[float]:
    """Seconds per call of `calls` back-to-back calls with one synchronize at the end (host-bound work: the
    device waits for the host), each of `repeats` times, after one warm-up round."""
    out = []
    for i in range(repeats + 1):
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        _sync(device)
        if i:
            out.append((time.perf_counter() - t0) / calls)
    return out


# --- counting and estimating ----------------------------------------------------------------------------


def countable(factory: Callable[[], Any]) -> Callable[[], Any]:
    """`factory` for `count_structure`, which takes an SGD step and so refuses a module without
    parameters: such a module is lent one that its forward never uses (no work, no gradient)."""
    import torch

    def made() -> Any:
        module = factory()
        if not any(True for _ in module.parameters()):
            module.register_parameter("_unused", torch.nn.Parameter(torch.zeros(1)))
        return module

    return made


def _counted(factory: Callable[[], Any], inputs: Callable[[int], Any]) -> Any:
    """The structure of `factory()`'s one operator module on `inputs(batch)` (`count_structure`, no
    autocast: the tensors carry the dtype): its root layer (forward and backward work)."""
    from srift.profiling.structure import count_structure

    structure = count_structure(countable(factory), inputs)
    (layer,) = [x for x in structure.layers if x.name != "<loss>"]
    return layer


def product_work(m: int, n: int, k: int, element_bytes: int) -> Any:
    """An (m×k)·(k×n) product as the structure counts it: 2mnk FLOPs, its operands and output moved."""
    from srift.domain.structure import Affine, PassWork

    flops = 2.0 * m * n * k
    moved = float(element_bytes * (m * k + k * n + m * n))
    return PassWork(
        matmul_flops=Affine(flops, 0.0), matmul_bytes=Affine(moved, 0.0), other_bytes=Affine(0, 0), kernels=1
    )


def estimate_s(case: Case, spec: Any) -> float | None:
    """The roofline's seconds for the case's counted work on `spec` (no host floor), None without a spec."""
    from srift.domain.structure import Precision
    from srift.estimate.calibration import shipped_calibration
    from srift.estimate.roofline import layer_seconds

    if spec is None or case.work is None:
        return None
    return layer_seconds(
        case.work,
        spec=spec,
        precision=Precision(case.precision),
        batch=case.batch,
        efficiency=shipped_calibration().efficiency,
        strict_fp32=case.strict_fp32,
    )


# --- the cases -------------------------------------------------------------------------------------------


def _flags(case: Case, device: Any) -> Any:
    """The float32 arithmetic of the case (`srift.profiling.bench.precision_flags`): IEEE for fp32 products
    and strict fp32 convolutions, TF32 for tf32, PyTorch's defaults otherwise."""
    from srift.domain.structure import Precision
    from srift.profiling.bench import precision_flags

    return precision_flags(Precision(case.precision), device, strict_fp32=case.strict_fp32)


def matmul_cases(sizes: Sizes, device: Any) -> Iterator[Case]:
    import torch

    t, h = sizes.tokens, sizes.hidden
    shapes = [
        ("attention out", h, h),
        ("qkv (GPT-2 c_attn)", 3 * h, h),
        ("ffn up", sizes.ffn, h),
        ("ffn down", h, sizes.ffn),
        *[(f"head {v}", v, h) for v in HEAD],
    ]
    if sizes.few:
        shapes = shapes[2:3] + shapes[-2:]
    for precision, dtype_name in DTYPES.items():
        dtype = getattr(torch, dtype_name)
        for name, n, k in shapes:
            for layout in LAYOUTS:
                # forward: (t×k)·(k×n); dX: (t×n)·(n×k); dW: (n×t)·(t×k)
                m_, n_, k_ = {LAYOUTS[0]: (t, n, k), LAYOUTS[1]: (t, k, n), LAYOUTS[2]: (n, k, t)}[layout]

                def make(
                    n: int = n, k: int = k, layout: str = layout, dtype: Any = dtype
                ) -> Callable[[], Any]:
                    x = torch.randn(t, k, device=device, dtype=dtype)
                    w = torch.randn(n, k, device=device, dtype=dtype)
                    dy = torch.randn(t, n, device=device, dtype=dtype)
                    if layout == LAYOUTS[0]:
                        return lambda: torch.mm(x, w.t())
                    if layout == LAYOUTS[1]:
                        return lambda: torch.mm(dy, w)
                    return lambda: torch.mm(dy.t(), x)

                yield Case(
                    kind="matmul",
                    name=name,
                    shape={"m": m_, "n": n_, "k": k_, "tokens": t, "features": [k, n]},
                    dtype=precision,
                    layout=layout,
                    pass_={LAYOUTS[0]: "forward"}.get(layout, "backward"),
                    make=make,
                    work=product_work(m_, n_, k_, torch.tensor([], dtype=dtype).element_size()),
                    precision=precision,
                    strict_fp32=precision == "fp32",
                )


def _module_cases(
    *,
    kind: str,
    name: str,
    shape: dict[str, Any],
    dtype: str,
    layout: str,
    factory: Callable[[], Any],
    inputs: Callable[[int], Any],
    batch: int,
    device: Any,
    precision: str,
    strict_fp32: bool = False,
    passes: tuple[str, ...] = ("forward", "backward"),
    prepare: Callable[[Any, Any], tuple[Any, Any]] | None = None,
) -> Iterator[Case]:
    """Forward and backward cases of one operator module: the forward with autograd recording, the
    backward as `torch.autograd.grad` of the output over the inputs and parameters that require it
    (retaining the graph, so each call is one backward)."""
    import torch

    from srift.profiling.bench import call_model, to_device

    layer = _counted(factory, inputs)

    def built() -> tuple[Any, Any]:
        with torch.device(device):  # parameters and inputs made on the device, not copied there
            module, args = factory(), inputs(batch)
        module, args = module.to(device), to_device(args, device)
        if prepare is not None:
            module, args = prepare(module, args)
        return module, args

    def make_forward() -> Callable[[], Any]:
        module, args = built()
        return lambda: call_model(module, args)

    def make_backward() -> Callable[[], Any]:
        module, args = built()
        out = call_model(module, args)
        leaves = [p for p in module.parameters() if p.requires_grad]
        leaves += [a for a in (args if isinstance(args, tuple) else (args,)) if a.requires_grad]
        seed = torch.ones_like(out) if out.dim() == 0 else torch.randn_like(out)
        return lambda: torch.autograd.grad(out, leaves, seed, retain_graph=True)

    for pass_ in passes:
        yield Case(
            kind=kind,
            name=name,
            shape=shape,
            dtype=dtype,
            layout=layout,
            pass_=pass_,
            make=make_forward if pass_ == "forward" else make_backward,
            work=layer.forward if pass_ == "forward" else layer.backward,
            batch=batch,
            precision=precision,
            strict_fp32=strict_fp32,
        )


def _leaf(*shape: int, dtype: Any = None, grad: bool = True) -> Any:
    import torch

    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def conv_cases(sizes: Sizes, device: Any) -> Iterator[Case]:
    import torch
    from torch import nn

    stem, mid, small = sizes.spatial
    wide = sizes.wide_channels
    shapes = [
        ("stem 7×7/2, 3→64", 3, 64, 7, 2, 3, stem, False),  # the image needs no gradient
        ("3×3, 64→64", 64, 64, 3, 1, 1, mid, True),
        (f"1×1, {wide}→{wide // 4}", wide, wide // 4, 1, 1, 0, small, True),
    ]
    if sizes.few:
        shapes = shapes[1:2]
    maths = (
        ("fp32 (cuDNN TF32)", "fp32", False, torch.float32),
        ("fp32 (IEEE)", "fp32", True, torch.float32),
    )
    maths += (("bf16", "bf16", False, torch.bfloat16),)
    for label, c_in, c_out, kernel, stride, pad, side, grad in shapes:
        for dtype_label, precision, strict, dtype in maths:
            for layout in ("NCHW", "channels_last"):
                memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format

                def factory(
                    c_in: int = c_in, c_out: int = c_out, k: int = kernel, s: int = stride, p: int = pad,
                    dtype: Any = dtype,
                ) -> Any:  # fmt: skip
                    return nn.Conv2d(c_in, c_out, k, stride=s, padding=p, bias=False).to(dtype)

                def inputs(
                    b: int, c_in: int = c_in, side: int = side, dtype: Any = dtype, grad: bool = grad
                ) -> Any:
                    return _leaf(b, c_in, side, side, dtype=dtype, grad=grad)

                def prepare(module: Any, x: Any, memory_format: Any = memory_format) -> tuple[Any, Any]:
                    x = x.detach().contiguous(memory_format=memory_format).requires_grad_(x.requires_grad)
                    return module.to(memory_format=memory_format), x

                yield from _module_cases(
                    kind="conv",
                    name=label,
                    shape={
                        "batch": sizes.image_batch,
                        "channels": [c_in, c_out],
                        "side": side,
                        "kernel": kernel,
                    },
                    dtype=dtype_label,
                    layout=layout,
                    factory=factory,
                    inputs=inputs,
                    batch=sizes.image_batch,
                    device=device,
                    precision=precision,
                    strict_fp32=strict,
                    prepare=prepare,
                )


def attention_module(causal: bool) -> Any:
    """`F.scaled_dot_product_attention(q, k, v)` as a module, so the structure counter can count it."""
    from torch import nn
    from torch.nn import functional

    class Attention(nn.Module):
        def forward(self, q: Any, k: Any, v: Any) -> Any:
            return functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return Attention()


def sdpa_cases(sizes: Sizes, device: Any) -> Iterator[Case]:
    import torch

    heads, dim = 12, 64
    for batch, positions, causal in sizes.sdpa:
        name = f"{'GPT-2 small, causal' if causal else 'BERT-base'}, {positions} positions"
        for precision, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):

            def inputs(b: int, positions: int = positions, dtype: Any = dtype) -> Any:
                return tuple(_leaf(b, heads, positions, dim, dtype=dtype) for _ in range(3))

            for case in _module_cases(
                kind="sdpa",
                name=name,
                shape={
                    "batch": batch,
                    "heads": heads,
                    "positions": positions,
                    "head_dim": dim,
                    "causal": causal,
                },
                dtype=precision,
                layout="(batch, heads, positions, dim)",
                factory=lambda causal=causal: attention_module(causal),
                inputs=inputs,
                batch=batch,
                device=device,
                precision=precision,
            ):
                case.extra["probe"] = lambda case=case: _sdpa_backend(case, device)
                yield case


def _sdpa_backend(case: Case, device: Any) -> str | None:
    """The aten attention operator a call ran (flash, efficient, cudnn, math, …), from the profiler's
    operator names (CPU activity only: cheap)."""
    from torch.profiler import ProfilerActivity, profile

    call = case.make()
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            call()
            _sync(device)
    except Exception:  # the profiler is optional here: a row without its backend name
        return None
    names = {e.key for e in prof.key_averages() if "attention" in e.key and e.key.startswith("aten::_")}
    return ", ".join(sorted(names)) or None


def memory_cases(sizes: Sizes, device: Any) -> Iterator[Case]:
    import torch
    from torch import nn

    h = sizes.hidden
    for rows in sizes.norm_rows:
        yield from _module_cases(
            kind="memory",
            name="layer_norm",
            shape={"rows": rows, "features": h},
            dtype="fp32",
            layout="rows × features",
            factory=lambda: nn.LayerNorm(h),
            inputs=lambda b: _leaf(b, h),
            batch=rows,
            device=device,
            precision="fp32",
        )
    for batch, channels, side in sizes.batch_norm:
        yield from _module_cases(
            kind="memory",
            name="batch_norm (training)",
            shape={"batch": batch, "channels": channels, "side": side},
            dtype="fp32",
            layout="NCHW",
            factory=lambda channels=channels: nn.BatchNorm2d(channels),
            inputs=lambda b, channels=channels, side=side: _leaf(b, channels, side, side),
            batch=batch,
            device=device,
            precision="fp32",
        )

    class Add(nn.Module):
        def forward(self, a: Any, b: Any) -> Any:
            return a + b

    largest = sizes.elements[-1]
    for elements in sizes.elements:
        for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            if precision == "bf16" and elements != largest:
                continue
            for name, factory, passes in (
                ("gelu", nn.GELU, ("forward", "backward")),
                ("relu", nn.ReLU, ("forward",)),
                ("add", Add, ("forward",)),
            ):
                arity = 2 if name == "add" else 1
                # rows of 1,024: the structure's counts are lines in the batch (here, the rows)
                yield from _module_cases(
                    kind="memory",
                    name=name,
                    shape={"elements": elements},
                    dtype=precision,
                    layout="contiguous",
                    factory=factory,
                    inputs=lambda b, dtype=dtype, arity=arity: tuple(
                        _leaf(b, 1024, dtype=dtype) for _ in range(arity)
                    ),
                    batch=elements // 1024,
                    device=device,
                    precision=precision,
                    passes=passes,
                )


def cross_entropy_cases(sizes: Sizes, device: Any) -> Iterator[Case]:
    import torch
    from torch import nn
    from torch.nn import functional

    vocab = HEAD[0]

    class CrossEntropy(nn.Module):
        def forward(self, logits: Any, target: Any) -> Any:
            return functional.cross_entropy(logits, target)

    def inputs(b: int) -> Any:
        return _leaf(b, vocab), torch.randint(0, vocab, (b,))

    yield from _module_cases(
        kind="cross_entropy",
        name="cross_entropy, fp32 logits",
        shape={"tokens": sizes.xent_tokens, "vocab": vocab},
        dtype="fp32",
        layout="tokens × vocab",
        factory=CrossEntropy,
        inputs=inputs,
        batch=sizes.xent_tokens,
        device=device,
        precision="fp32",
    )


# --- the host group and AdamW, which time and count their own way -------------------------------------------


def host_module(op: str) -> Any:
    """One tiny module of kind `op`: its arithmetic is nothing beside its dispatch."""
    import torch
    from torch import nn

    class Scale(nn.Module):
        def __init__(self, how: str) -> None:
            super().__init__()
            self.how = how
            self.c = nn.Parameter(torch.ones(8))

        def forward(self, x: Any) -> Any:
            return x + self.c if self.how == "add" else x * self.c

    if op in ("add", "mul"):
        return Scale(op)
    return {
        "linear": lambda: nn.Linear(8, 8),
        "conv2d": lambda: nn.Conv2d(4, 4, 3, padding=1),
        "layer_norm": lambda: nn.LayerNorm(8),
        "relu": nn.ReLU,
        "gelu": nn.GELU,
    }[op]()


def host_rows(op: str, sizes: Sizes, device: Any, *, launch_s: float) -> Iterator[dict[str, Any]]:
    """The host group's rows for one op kind (module docstring): seconds per counted operator for forward
    under no_grad, forward with autograd, and forward + backward, against `kernel_s` + `launch_s`."""
    import torch
    from torch import nn

    from srift.estimate.calibration import shipped_calibration
    from srift.profiling.structure import count_structure

    floor_s = shipped_calibration().efficiency.kernel_s + launch_s
    started = time.perf_counter()

    def chain(op: str = op) -> Any:
        return nn.Sequential(*[host_module(op) for _ in range(sizes.chain)])

    def inputs(b: int, op: str = op) -> Any:
        # an input that needs its gradient, as every layer's but the first does in a model
        return _leaf(b, 4, 8, 8) if op == "conv2d" else _leaf(b, 8)

    structure = count_structure(countable(chain), inputs)
    layers = [x for x in structure.layers if x.name != "<loss>"]
    forward_ops = sum(x.forward.kernels for x in layers)
    backward_ops = sum(x.backward.kernels for x in layers)
    model, x = chain().to(device), inputs(2).detach().to(device).requires_grad_()
    y = model(x)
    seed = torch.ones_like(y)

    def forward(model: Any = model, x: Any = x) -> None:
        model(x)

    def no_grad(model: Any = model, x: Any = x) -> None:
        with torch.no_grad():
            model(x)

    def step(model: Any = model, x: Any = x, seed: Any = seed) -> None:
        # as a training step: gradients set to None first, so backward accumulates into none
        model.zero_grad(set_to_none=True)
        x.grad = None
        model(x).backward(seed)

    forward_s = 0.0
    for pass_, call, ops in (
        ("forward (no_grad)", no_grad, forward_ops),
        ("forward (autograd)", forward, forward_ops),
        ("forward + backward", step, forward_ops + backward_ops),
    ):
        times = wall_per_call(call, device=device, calls=sizes.host_reps, repeats=sizes.repeats)
        per_op = [t / ops for t in times]
        median = statistics.median(per_op)
        row: dict[str, Any] = {
            "kind": "host",
            "name": op,
            "shape": {"chain": sizes.chain, "input": list(inputs(2).shape)},
            "dtype": "fp32",
            "layout": "chain",
            "pass": pass_,
            "ops_per_call": ops,
            "calls": sizes.host_reps,
            "repeats": len(per_op),
            "median_s": median * ops,
            "min_s": min(per_op) * ops,
            "per_op_us": round(1e6 * median, 3),
            "per_op_min_us": round(1e6 * min(per_op), 3),
            "estimated_per_op_us": round(1e6 * floor_s, 3),
            "measured_over_estimate": round(median / floor_s, 3),
            "case_s": round(time.perf_counter() - started, 2),
        }
        if pass_ == "forward (autograd)":
            forward_s = statistics.median(times)
        elif pass_ == "forward + backward":
            # the backward alone: the step's median less the recorded forward's, per backward operator
            row["backward_per_op_us"] = round(1e6 * (statistics.median(times) - forward_s) / backward_ops, 3)
        yield row
    model.zero_grad(set_to_none=True)


def _launched_kernels(call: Callable[[], Any], device: Any) -> int | None:
    """CUDA kernels one call launched (the profiler's CUDA activity), None on a CPU or when it fails."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            call()
            _sync(device)
    except Exception:  # the profiler is optional here: a row without its kernel count
        return None
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


FUSED_BYTES_PER_ELEMENT = 28
"""A fused AdamW step per fp32 parameter element: reads parameter, gradient and both moments, writes the
parameter and both moments (7 × 4 bytes)."""


def foreach_bytes_per_element() -> int:
    """A foreach AdamW step per fp32 element: each `_foreach_*` kernel of `ADAMW_FOREACH` reads its `depth`
    lists and, in place, writes its first one (out of place, its output is one of the `depth`)."""
    from srift.estimate.host import ADAMW_FOREACH

    return 4 * sum(op.depth + (1 if "_(" in op.name else 0) for op in ADAMW_FOREACH if op.on_gpu)


def adamw_row(
    model: str, mode: str, *, sizes: Sizes, device: Any, spec: Any, launch_s: float
) -> dict[str, Any]:
    """One AdamW step (`mode` foreach or fused) over `model`'s parameter tensors (module docstring)."""
    import torch

    from benchmarks.gpu_check import parameter_numels
    from srift.estimate.calibration import shipped_calibration
    from srift.estimate.host import HostCost, adamw_launches

    efficiency = shipped_calibration().efficiency
    cost = HostCost(dispatch_s=efficiency.kernel_s, launch_s=launch_s)
    numels = parameter_numels(model)
    started = time.perf_counter()
    params = [torch.nn.Parameter(torch.randn(n, device=device)) for n in numels]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4, **{mode: True})
    times = time_calls(opt.step, device=device, warmup=sizes.warmup, repeats=sizes.repeats)
    launched = _launched_kernels(opt.step, device)
    median = statistics.median(times)
    per_element = foreach_bytes_per_element() if mode == "foreach" else FUSED_BYTES_PER_ELEMENT
    moved = per_element * sum(numels)
    row: dict[str, Any] = {
        "kind": "adamw",
        "name": model,
        "shape": {"tensors": len(numels), "elements": sum(numels)},
        "dtype": "fp32",
        "layout": mode,
        "pass": "step",
        "repeats": len(times),
        "median_s": median,
        "min_s": min(times),
        "bytes": moved,
        "bytes_per_s": moved / median,
        "launched_kernels": launched,
        "modelled_launches": adamw_launches(numels) if mode == "foreach" else None,
        "host_floor_s": cost.adamw_s(numels) if mode == "foreach" else None,
    }
    if spec is not None:
        memory_s = moved / (efficiency.bandwidth(spec) * efficiency.other_memory)
        row["memory_estimate_s"] = memory_s
        row["estimated_s"] = max(memory_s, row["host_floor_s"] or 0.0)
        row["measured_over_estimate"] = round(median / row["estimated_s"], 3)
    row["case_s"] = round(time.perf_counter() - started, 2)
    del opt, params
    return row


# --- running ------------------------------------------------------------------------------------------------


def run_case(case: Case, *, device: Any, spec: Any, warmup: int, repeats: int) -> dict[str, Any]:
    """Time one case (`time_calls` under its float32 arithmetic) and describe it as a JSON row."""
    started = time.perf_counter()
    with _flags(case, device) as flags:
        call = case.make()
        times = time_calls(call, device=device, warmup=warmup, repeats=repeats)
        del call
        extra = {k: probe() for k, probe in case.extra.items() if k == "probe"}
    median = statistics.median(times)
    work = case.work
    flops = work.matmul_flops.at(case.batch)
    moved = work.matmul_bytes.at(case.batch) + work.other_bytes.at(case.batch)
    row: dict[str, Any] = {
        "kind": case.kind,
        "name": case.name,
        "shape": case.shape,
        "dtype": case.dtype,
        "layout": case.layout,
        "pass": case.pass_,
        "float32_math": flags or None,
        "repeats": len(times),
        "median_s": median,
        "min_s": min(times),
        "flops": flops,
        "bytes": moved,
        "kernels": work.kernels,
        "flops_per_s": flops / median if flops else None,
        "bytes_per_s": moved / median,
    }
    if "probe" in extra:
        row["backend"] = extra["probe"]
    est = estimate_s(case, spec)
    if est is not None:
        row["estimated_s"] = est
        row["measured_over_estimate"] = round(median / est, 3)
    row["case_s"] = round(time.perf_counter() - started, 3)
    return row


def planned_s(cases: list[Case], spec: Any, *, sizes: Sizes, groups: list[str]) -> float | None:
    """The grid's seconds planned from its FLOPs and bytes (module docstring), None without a spec: each
    case's calls at its roofline estimate (at least `MIN_CALL_S`) plus `CASE_OVERHEAD_S`; the host group at
    `HOST_PLAN_OP_S` per operator; AdamW's steps at their bytes' roofline time."""
    from srift.estimate.calibration import shipped_calibration

    if spec is None:
        return None
    calls = sizes.warmup + sizes.repeats
    total = sum(calls * max(estimate_s(case, spec) or 0.0, MIN_CALL_S) + CASE_OVERHEAD_S for case in cases)
    if "host" in groups:
        rounds = (sizes.repeats + 1) * sizes.host_reps
        total += len(HOST_OPS) * 3 * (rounds * 3 * sizes.chain * HOST_PLAN_OP_S + CASE_OVERHEAD_S)
    if "adamw" in groups:
        from benchmarks.gpu_check import parameter_numels

        efficiency = shipped_calibration().efficiency
        for model in sizes.adamw_models:
            moved = (foreach_bytes_per_element() + FUSED_BYTES_PER_ELEMENT) * sum(parameter_numels(model))
            total += (
                calls * moved / (efficiency.bandwidth(spec) * efficiency.other_memory) + 2 * CASE_OVERHEAD_S
            )
    return total


def pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPT-2 head at 50,257 (unaligned) and 50,304 (padded) outputs, per dtype and layout: the padded
    product's achieved FLOP/s over the unaligned one's (> 1: the unaligned product is slower per FLOP)."""
    heads = {(r["dtype"], r["layout"], r["name"]): r for r in rows if r["kind"] == "matmul"}
    out = []
    for (dtype, layout, name), r in heads.items():
        if name != f"head {HEAD[0]}" or (dtype, layout, f"head {HEAD[1]}") not in heads:
            continue
        padded = heads[(dtype, layout, f"head {HEAD[1]}")]
        out.append(
            {
                "dtype": dtype,
                "layout": layout,
                "unaligned_s": r["median_s"],
                "padded_s": padded["median_s"],
                "unaligned_flops_per_s": r["flops_per_s"],
                "padded_flops_per_s": padded["flops_per_s"],
                "padded_over_unaligned": round(padded["flops_per_s"] / r["flops_per_s"], 4),
            }
        )
    return out


def versions(device: Any) -> dict[str, Any]:
    import platform

    import torch

    cuda = device.type == "cuda"
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# --- the summary --------------------------------------------------------------------------------------------


def _ms(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{1e3 * s:.3f} ms" if s >= 1e-3 else f"{1e6 * s:.2f} µs"


def _or_dash(value: Any) -> str:
    return "–" if value is None else str(value)


def _ratio(r: dict[str, Any]) -> str:
    v = r.get("measured_over_estimate")
    return "–" if v is None else f"{v:.2f}"


def markdown(report: dict[str, Any]) -> str:
    """The report's tables (one per group), for docs/BENCHMARKS.md."""
    rows = report["rows"]
    by = {kind: [r for r in rows if r["kind"] == kind] for kind in dict.fromkeys(r["kind"] for r in rows)}
    planned = report.get("planned_s")
    lines = [
        f"Device: {report['device_name']} ({report['device']}), torch {report['torch']}, "
        f"CUDA {report['cuda']}, cuDNN {report['cudnn']}; {len(rows)} rows in {report['elapsed_s']:.0f} s"
        + (f" (planned {planned:.0f} s from FLOPs and bytes)" if planned is not None else "")
        + f". Estimates: the roofline for {report.get('spec') or 'no spec'} with the shipped calibration, "
        "no host floor (measured / estimated > 1: slower than estimated)."
        + (
            " On a CPU this only exercises the script: its times are a loaded CPU's, the estimates a GPU's."
            if report["device"] == "cpu"
            else ""
        ),
    ]
    if by.get("host"):
        lines += [
            "",
            "Host cost of one eager operator (a chain of tiny modules, wall clock, one synchronize per "
            "round), per operator counted by `srift.profiling.structure`, against the estimate's floor "
            "(`srift.estimate.host`):",
            "",
            "| op | pass | ops per call | µs per op (median) | min | estimate | measured / estimate | "
            "backward alone, µs per op |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['name']} | {r['pass']} | {r['ops_per_call']} | {r['per_op_us']:.2f} | "
            f"{r['per_op_min_us']:.2f} | {r['estimated_per_op_us']:.2f} | {_ratio(r)} | "
            f"{_or_dash(r.get('backward_per_op_us'))} |"
            for r in by["host"]
        ]
    if by.get("matmul"):
        lines += ["", "Matrix products (m×k · k×n; fp32 is IEEE):", ""]
        lines += [
            "| product | layout | m, n, k | dtype | median | TFLOP/s | estimate | measured / estimate |"
        ]
        lines += ["|---|---|---|---|---:|---:|---:|---:|"]
        lines += [
            f"| {r['name']} | {r['layout']} | {r['shape']['m']}, {r['shape']['n']}, {r['shape']['k']} | "
            f"{r['dtype']} | {_ms(r['median_s'])} | {r['flops_per_s'] / 1e12:.2f} | "
            f"{_ms(r.get('estimated_s'))} | {_ratio(r)} |"
            for r in by["matmul"]
        ]
    if report.get("pairs"):
        lines += ["", f"GPT-2's head, {HEAD[0]} (unaligned) against {HEAD[1]} (padded) outputs:", ""]
        lines += [
            "| dtype | layout | unaligned | padded | padded / unaligned FLOP/s |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {p['dtype']} | {p['layout']} | {_ms(p['unaligned_s'])} | {_ms(p['padded_s'])} | "
            f"{p['padded_over_unaligned']:.3f} |"
            for p in report["pairs"]
        ]
    for kind, title in (
        ("conv", "Convolutions"),
        ("sdpa", "Scaled dot-product attention (FLOPs as counted: causal counted whole)"),
        ("memory", "Memory-bound operators"),
        ("cross_entropy", "Cross-entropy over GPT-2's fp32 logits"),
    ):
        if not by.get(kind):
            continue
        lines += ["", f"{title}:", ""]
        lines += [
            "| op | shape | dtype | layout | pass | median | TFLOP/s | GB/s | estimate | "
            "measured / estimate |"
        ]
        lines += ["|---|---|---|---|---|---:|---:|---:|---:|---:|"]
        for r in by[kind]:
            shape = ", ".join(f"{k} {v}" for k, v in r["shape"].items())
            layout = r["layout"] + (f" ({r['backend']})" if r.get("backend") else "")
            tflops = f"{r['flops_per_s'] / 1e12:.2f}" if r.get("flops_per_s") else "–"
            lines.append(
                f"| {r['name']} | {shape} | {r['dtype']} | {layout} | {r['pass']} | {_ms(r['median_s'])} | "
                f"{tflops} | {r['bytes_per_s'] / 1e9:.1f} | {_ms(r.get('estimated_s'))} | {_ratio(r)} |"
            )
    if by.get("adamw"):
        lines += [
            "",
            "AdamW step (fp32 parameters; estimate: the larger of the host floor, foreach only, and the "
            f"bytes at the roofline's bandwidth, {foreach_bytes_per_element()} B per element foreach, "
            f"{FUSED_BYTES_PER_ELEMENT} fused):",
            "",
            "| model | mode | tensors | elements | median | kernels launched | `adamw_launches` | "
            "host floor | estimate | measured / estimate |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in by["adamw"]:
            lines.append(
                f"| {r['name']} | {r['layout']} | {r['shape']['tensors']} | {r['shape']['elements']:,} | "
                f"{_ms(r['median_s'])} | {_or_dash(r['launched_kernels'])} | "
                f"{_or_dash(r['modelled_launches'])} | "
                f"{_ms(r['host_floor_s'])} | {_ms(r.get('estimated_s'))} | {_ratio(r)} |"
            )
    if report.get("load_average"):
        lines += ["", "Load average when it ended: " + " ".join(map(str, report["load_average"])) + "."]
    if report.get("failed"):
        lines += ["", "Failed (the grid went on): " + "; ".join(report["failed"]) + "."]
    if report["skipped"]:
        lines += [
            "",
            f"Skipped for the time budget ({report['budget_s']:.0f} s): {len(report['skipped'])} cases.",
        ]
    return "\n".join(lines)


def section_name(report: dict[str, Any]) -> str:
    return "GPU operators (cpu)" if report["device"] == "cpu" else "GPU operators"


def render(path: Path, *, write: bool) -> int:
    """Print (and unless `write` is False, write to docs/BENCHMARKS.md) the section of a stored report,
    stamped with when and on what it was measured: how a lent device's report reaches the docs."""
    report = json.loads(path.read_text())
    text = markdown(report)
    print(text)
    if write:
        from benchmarks._report import write_section

        measured = dt.datetime.strptime(report["date"], "%Y-%m-%d %H:%M UTC").replace(tzinfo=dt.UTC)
        host = f"{report['device_name']}, torch {report['torch']}, Python {report['python']}"
        command = f"python -m benchmarks.gpu_ops --render {path}"
        write_section(section_name(report), text, command=command, measured_at=measured, host=host)
    return 0


# --- the command --------------------------------------------------------------------------------------------

GROUPS = ("host", "matmul", "cross_entropy", "sdpa", "conv", "memory", "adamw")
"""In the order they run: what docs/gpu.md asks first comes first, should the budget end the grid; AdamW
last, as its kernel count starts CUDA's profiler (CUPTI), which may stay attached and slow later launches."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--device", default="cuda", help="cuda, cuda:N or cpu (small sizes: exercise the grid)"
    )
    parser.add_argument(
        "--spec", default=None, help="GPU spec to estimate for (default: this GPU's; cpu: none)"
    )
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"of {', '.join(GROUPS)}")
    parser.add_argument("--quick", action="store_true", help="the small sizes (always on a CPU)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the JSON report here")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/BENCHMARKS.md")
    parser.add_argument(
        "--plan-only",
        action="store_true",
        help="count and plan the grid (GPU sizes unless --quick); time nothing",
    )
    parser.add_argument(
        "--render",
        default=None,
        help="write the section of this stored report (a device run's); runs nothing",
    )
    args = parser.parse_args(argv)
    if args.render:
        return render(Path(args.render), write=not args.no_write)

    import torch

    from srift.estimate.host import CUDA_LAUNCH_S
    from srift.profiling.bench import parse_device

    started = time.perf_counter()
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    if unknown := [g for g in groups if g not in GROUPS]:
        print(f"error: unknown groups {unknown}. To fix: use some of {', '.join(GROUPS)}.", file=sys.stderr)
        return 2
    try:
        device = parse_device(args.device)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    sizes = QUICK if args.quick or not (cuda or args.plan_only) else GPU
    if args.repeats:
        sizes = replace(sizes, repeats=args.repeats)
    from benchmarks.gpu_check import _gpu_spec

    spec = _gpu_spec(args.spec, str(device))
    launch_s = CUDA_LAUNCH_S if cuda else 0.0
    report: dict[str, Any] = {
        "device": args.device,
        **versions(device),
        "spec": spec.name if spec is not None else None,
        "sizes": sizes.__dict__,
        "budget_s": args.budget_s,
        "groups": groups,
        "rows": [],
        "skipped": [],
        "failed": [],
    }

    def save() -> None:
        """Write the report so far: a run cut short (a device's time limit) still leaves its rows."""
        report["elapsed_s"] = round(time.perf_counter() - started, 1)
        report["load_average"] = [round(x, 2) for x in os.getloadavg()]
        report["pairs"] = pairs(report["rows"])
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=2) + "\n")

    makers = {
        "matmul": matmul_cases,
        "cross_entropy": cross_entropy_cases,
        "sdpa": sdpa_cases,
        "conv": conv_cases,
        "memory": memory_cases,
    }
    cases = {g: list(makers[g](sizes, device)) for g in groups if g in makers}
    report["planned_s"] = planned_s(
        [c for cs in cases.values() for c in cs], spec, sizes=sizes, groups=groups
    )
    planned = (
        "no spec to plan with" if report["planned_s"] is None else f"planned {report['planned_s']:.0f} s"
    )
    print(
        f"{sum(map(len, cases.values()))} cases besides the host and AdamW groups, {planned} on "
        f"{report['spec']}; counted in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    if args.plan_only:
        return 0
    # What the imports and the counting made (torch, torch._dynamo, the cases) lives to the end: one last
    # collection, then out of the cyclic collector's reach (gc.freeze), so that the collections between
    # groups and no_gc's walk only what the cases make, not torch's million objects (0.14 s a walk on a
    # 2-core host, eight of them). Objects made from here on are collected as before.
    gc.collect()
    gc.freeze()

    def budget_left() -> bool:
        return time.perf_counter() - started < args.budget_s

    from srift.profiling.bench import no_gc, torch_threads

    # Python's cyclic collector stays off while cases run (collected between groups); a CPU runs one
    # thread, as the eager-overhead measurement does, so a shared machine's other work disturbs it less.
    def attempt(what: str, run: Callable[[], list[dict[str, Any]]]) -> None:
        """Run one case; a case that raises is recorded in `failed` and the grid goes on (a lent device's
        one run should not be lost to one operator)."""
        if not budget_left():
            report["skipped"].append(what)
            return
        try:
            report["rows"].extend(run())
        except Exception as exc:  # recorded in the report: every other case still runs
            report["failed"].append(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")
            print(f"failed: {report['failed'][-1]}", file=sys.stderr, flush=True)

    with no_gc(), torch_threads(None if cuda else 1):
        for group in groups:
            if group == "host":
                for op in HOST_OPS:
                    attempt(f"host {op}", lambda op=op: list(host_rows(op, sizes, device, launch_s=launch_s)))
            elif group == "adamw":
                for model in sizes.adamw_models:
                    for mode in ("foreach", "fused"):
                        attempt(
                            f"adamw {model} {mode}",
                            lambda model=model, mode=mode: [
                                adamw_row(
                                    model, mode, sizes=sizes, device=device, spec=spec, launch_s=launch_s
                                )
                            ],
                        )
            else:
                for case in cases[group]:
                    attempt(
                        f"{case.kind} {case.name} {case.dtype} {case.layout} {case.pass_}",
                        lambda case=case: [
                            run_case(
                                case, device=device, spec=spec, warmup=sizes.warmup, repeats=sizes.repeats
                            )
                        ],
                    )
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            save()
            print(f"{group}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    save()
    text = markdown(report)
    print(text)
    if not args.no_write:
        from benchmarks._report import write_section

        command = " ".join(["python -m benchmarks.gpu_ops", *(argv if argv is not None else sys.argv[1:])])
        write_section(section_name(report), text, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
