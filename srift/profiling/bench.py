"""The profiler's bench: a model, its input factory and loss on one device, one timed training step.

Also what every stage of the profiler shares: the device and clock choices, the default loss, how inputs
reach the model (`call_model`), the trainable layers as DDP sees them, and out-of-memory recognition.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch
from torch import nn

from srift.domain.structure import Precision
from srift.errors import EnvironmentProblem, Infeasible, InvalidInput, parse_choice
from srift.profiling.loading import describe


class Clock(StrEnum):
    """What the profiler's timings measure.

    WALL: elapsed time (perf_counter; CUDA-synchronised) — what a training step costs on a machine of
    its own. THREAD: CPU time of the profiling thread (CPU device, one thread only) — excludes time the
    process waits for a core, so profiles and checks stay meaningful on a shared, loaded machine.
    """

    WALL = "wall"
    THREAD = "thread"


ProgressFn = Callable[[str, float], None]
"""Called with the stage ("check", "max batch", "timing", "readiness", "done") and the overall fraction."""

DEFAULT_LOSS_NAME = "default: sum of the means of the output's floating-point tensors"

_STAGES = {"check": (0.0, 0.03), "max batch": (0.03, 0.25), "timing": (0.25, 0.75), "readiness": (0.75, 1.0)}


def default_loss(output: Any) -> torch.Tensor:
    """Sum of the means of every floating-point tensor in `output` (tensor, sequence or mapping)."""
    tensors = [t for t in tensors_in(output) if t.is_floating_point() or t.is_complex()]
    if not tensors:
        raise TypeError(f"the model's output ({type(output).__name__}) holds no floating-point tensor")
    total = tensors[0].float().mean()
    for t in tensors[1:]:
        total = total + t.float().mean()
    return total.real if total.is_complex() else total


def parse_device(device: str) -> torch.device:
    """Accept "cpu", "cuda" or "cuda:N"; CUDA must be present here."""
    text = device.strip().lower()
    if text != "cpu" and text != "cuda" and not (text.startswith("cuda:") and text[5:].isdigit()):
        raise InvalidInput(
            f"device {device!r} is not cpu, cuda or cuda:N",
            hint="pass --device cpu or cuda:0",
            field="device",
        )
    if text == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            f"device {device!r} was asked for but this machine has no usable CUDA device",
            hint="profile on a GPU host (e.g. via a profile job) or pass --device cpu",
            field="device",
        )
    index = int(text[5:]) if ":" in text else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise InvalidInput(
            f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)",
            hint="pick an index below the device count",
            field="device",
        )
    return torch.device("cuda", index)


def clock_function(clock: Clock | str, *, device: torch.device, threads: int) -> Callable[[], float]:
    """The timer for `clock`; THREAD needs the CPU device and one intra-op thread."""
    chosen = parse_choice(Clock, clock, what="clock", field="clock")
    if chosen is Clock.WALL:
        return time.perf_counter
    if device.type != "cpu" or threads != 1:
        raise InvalidInput(
            f"the thread clock needs --device cpu and --threads 1 (got {device}, {threads} threads)",
            hint="add --threads 1, or use --clock wall",
            field="clock",
        )
    return time.thread_time


@dataclass(frozen=True, slots=True)
class Layer:
    name: str
    params: tuple[int, ...]
    grad_bytes: int


SPLIT_ABOVE_PARAMS = 2
"""A module owning more trainable parameters than this (a multi-layer GRU or LSTM: four per layer; a user's
module of many `nn.Parameter`s) is one layer per parameter: its parameters get their gradients at
different times of backward and DDP buckets them one by one (docs/validation.md at 0856b84, cause 7). A
weight and its bias stay one layer."""


def trainable_layers(model: nn.Module) -> list[Layer]:
    """Modules that own trainable parameters, each parameter (tied ones included) assigned once; a module
    with more than `SPLIT_ABOVE_PARAMS` of them is split into one layer per parameter (`module.param`).

    Parameter indices refer to `unique_trainable_parameters(model)`.
    """
    index = {id(p): i for i, p in enumerate(unique_trainable_parameters(model))}
    seen: set[int] = set()
    layers: list[Layer] = []
    for name, module in model.named_modules():
        own: list[tuple[str, int, int]] = []
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            own.append((param_name, index[id(param)], param.numel() * param.element_size()))
        layer = name or "<root>"
        if len(own) > SPLIT_ABOVE_PARAMS:
            layers += [Layer(name=f"{layer}.{p}", params=(i,), grad_bytes=b) for p, i, b in own]
        elif own:
            layers.append(
                Layer(name=layer, params=tuple(i for _, i, _ in own), grad_bytes=sum(b for *_, b in own))
            )
    return layers


def unique_trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def trainable_bytes(model: nn.Module) -> int:
    """Bytes of the model's trainable parameters, shared parameters counted once."""
    return sum(p.numel() * p.element_size() for p in unique_trainable_parameters(model))


@dataclass
class Bench:
    """The model, its inputs and loss on one device, with one timed training step."""

    model: nn.Module
    make_input: Callable[[int], Any]
    loss_fn: Callable[[Any], torch.Tensor]
    device: torch.device
    model_desc: str
    input_desc: str
    loss_desc: str
    now: Callable[[], float] = time.perf_counter
    precision: Precision = Precision.FP32
    scaler: Any = None

    def __post_init__(self) -> None:
        if self.precision is Precision.FP16:
            self.scaler = torch.amp.GradScaler(self.device.type)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def inputs(self, batch: int) -> Any:
        return to_device(self.make_input(batch), self.device)

    def host_inputs(self, batch: int) -> Any:
        """An input batch kept in host memory (moved to the device only for the step that uses it)."""
        return to_device(self.make_input(batch), torch.device("cpu")) if self.cuda else self.inputs(batch)

    def autocast(self) -> AbstractContextManager[Any]:
        """`torch.autocast` in the profile's dtype for fp16/bf16; nothing otherwise."""
        if self.precision.autocast:
            dtype = torch.float16 if self.precision is Precision.FP16 else torch.bfloat16
            return torch.autocast(self.device.type, dtype=dtype)
        return nullcontext()

    def loss(self, inputs: Any) -> torch.Tensor:
        """Forward and loss, under autocast for fp16/bf16."""
        with self.autocast():
            return self.loss_fn(call_model(self.model, inputs))

    def backward(self, loss: torch.Tensor) -> None:
        """Backward; for fp16 through the gradient scaler, as mixed-precision training runs it."""
        _backward(self.scaler.scale(loss) if self.scaler is not None else loss)

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def step(self, inputs: Any) -> tuple[float, float]:
        """One forward (with loss) and backward; returns their seconds.

        On CUDA the two phases are timed with CUDA events recorded on the stream around them, read after
        a synchronisation; elsewhere with the bench's clock.
        """
        self.model.zero_grad(set_to_none=True)
        if self.cuda:
            start, mid, end = cuda_event(), cuda_event(), cuda_event()
            self.sync()
            start.record()
            loss = self.loss(inputs)
            mid.record()
            self.backward(loss)
            end.record()
            end.synchronize()
            return start.elapsed_time(mid) / 1e3, mid.elapsed_time(end) / 1e3
        t0 = self.now()
        loss = self.loss(inputs)
        t1 = self.now()
        self.backward(loss)
        t2 = self.now()
        return t1 - t0, t2 - t1


class Progress:
    def __init__(self, fn: ProgressFn | None, stages: dict[str, tuple[float, float]] | None = None) -> None:
        self.fn = fn
        self.stages = _STAGES if stages is None else stages

    def __call__(self, stage: str, fraction: float) -> None:
        if self.fn is None:
            return
        lo, hi = self.stages.get(stage, (1.0, 1.0))
        self.fn(stage, lo + (hi - lo) * min(max(fraction, 0.0), 1.0))


DEFAULT_FLOAT32_MATH = ("ieee", "tf32")
"""PyTorch's defaults since 1.12: float32 matrix products in IEEE float32 (`torch.backends.cuda.matmul`),
cuDNN convolutions and RNNs allowed to use TF32 (`torch.backends.cudnn`); PyTorch docs, "CUDA semantics",
TensorFloat-32 (TF32) on Ampere (and later) devices."""
STRICT_FLOAT32_MATH = ("ieee", "ieee")
"""`--strict-fp32`: IEEE float32 everywhere (matrix products and cuDNN)."""
TF32_MATH = ("tf32", "tf32")
"""Precision tf32: TF32 tensor cores for matrix products and cuDNN."""


def float32_math(precision: Precision, *, strict_fp32: bool = False) -> tuple[str, str]:
    """(matmul, cuDNN) arithmetic for float32 tensors: "tf32" or "ieee"."""
    if precision is Precision.TF32:
        return TF32_MATH
    return STRICT_FLOAT32_MATH if strict_fp32 else DEFAULT_FLOAT32_MATH


def uses_fp32_precision_api(backends: Any = None) -> bool:
    """True where torch has the `fp32_precision` settings (torch ≥ 2.9); older torch has only the legacy
    `allow_tf32` flags. Mixing the two raises on recent torch, so only one family is ever touched."""
    chosen = torch.backends if backends is None else backends
    return hasattr(chosen.cuda.matmul, "fp32_precision") and hasattr(chosen.cudnn, "conv")


@contextmanager
def precision_flags(
    precision: Precision, device: torch.device, *, strict_fp32: bool = False, backends: Any = None
) -> Iterator[dict[str, str]]:
    """On CUDA, set float32 arithmetic for the run (`float32_math`) through the API the installed torch
    offers, and restore it afterwards; yields what was set (empty on a CPU, where there is nothing to set).

    tf32 allows TF32 tensor cores in matrix products and convolutions; fp32, fp16 and bf16 train under
    PyTorch's defaults (IEEE matmul, TF32 cuDNN) unless `strict_fp32`."""
    if device.type != "cuda":
        yield {}
        return
    chosen = torch.backends if backends is None else backends
    matmul, conv = float32_math(precision, strict_fp32=strict_fp32)
    if uses_fp32_precision_api(chosen):
        old = (
            chosen.cuda.matmul.fp32_precision,
            chosen.cudnn.conv.fp32_precision,
            chosen.cudnn.rnn.fp32_precision,
        )
        chosen.cuda.matmul.fp32_precision = matmul
        chosen.cudnn.conv.fp32_precision = conv
        chosen.cudnn.rnn.fp32_precision = conv
        try:
            yield {"matmul": matmul, "cudnn": conv, "api": "fp32_precision"}
        finally:
            (
                chosen.cuda.matmul.fp32_precision,
                chosen.cudnn.conv.fp32_precision,
                chosen.cudnn.rnn.fp32_precision,
            ) = old
        return
    legacy = (chosen.cuda.matmul.allow_tf32, chosen.cudnn.allow_tf32)
    chosen.cuda.matmul.allow_tf32 = matmul == "tf32"
    chosen.cudnn.allow_tf32 = conv == "tf32"
    try:
        yield {"matmul": matmul, "cudnn": conv, "api": "allow_tf32"}
    finally:
        chosen.cuda.matmul.allow_tf32, chosen.cudnn.allow_tf32 = legacy


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(old)


@contextmanager
def no_gc() -> Iterator[None]:
    """Keep Python's cyclic collector from pausing inside timed regions."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from tensors_in(v)


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def call_model(model: nn.Module, inputs: Any) -> Any:
    """The model on an input factory's value: a dict as keyword arguments, a tuple or list as positional
    ones, anything else as the one argument."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, list | tuple):
        return model(*inputs)
    return model(inputs)


def nbytes_of(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_in(value))


def numel_of(value: Any) -> int:
    return sum(t.numel() for t in tensors_in(value))


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


@contextmanager
def _failing_as(what: str, *, hint: str, field: str) -> Iterator[None]:
    """Run the user's code (a factory, loss or model) inside: whatever it raises becomes InvalidInput
    "`what`: <the failure>" naming `field`, so a broken callable is a clear 422, never a 500."""
    try:
        yield
    except Exception as exc:
        raise InvalidInput(f"{what}: {_failure(exc)}", hint=hint, field=field) from exc


def build_bench(
    model_factory: Callable[[], nn.Module],
    input_factory: Callable[[int], Any],
    loss_fn: Callable[[Any], torch.Tensor] | None,
    device: torch.device,
    *,
    precision: Precision = Precision.FP32,
) -> Bench:
    """Build the model and check one training step at batch 1 and 2, naming the culprit on failure."""
    model_desc, input_desc = describe(model_factory), describe(input_factory)
    loss_desc = describe(loss_fn) if loss_fn is not None else DEFAULT_LOSS_NAME
    with _failing_as(
        f"model factory `{model_desc}` failed",
        hint="make the factory build the model without arguments",
        field="model_factory",
    ):
        model = model_factory()
    if not isinstance(model, nn.Module):
        raise InvalidInput(
            f"model factory `{model_desc}` returned {type(model).__name__}, not a torch.nn.Module",
            hint="return the nn.Module itself (not a class, tuple or state dict)",
            field="model_factory",
        )
    with _failing_as(
        f"model from `{model_desc}` could not move to {device}", hint="check the device", field="device"
    ):
        model = model.to(device).train()
    bench = Bench(
        model=model,
        make_input=input_factory,
        loss_fn=loss_fn or default_loss,
        device=device,
        model_desc=model_desc,
        input_desc=input_desc,
        loss_desc=loss_desc,
        precision=precision,
    )
    numel = {}
    for batch in (1, 2):
        inputs = checked_inputs(bench, batch)
        numel[batch] = numel_of(inputs)
        checked_step(bench, inputs)
    if numel[2] <= numel[1]:
        raise InvalidInput(
            f"input factory `{input_desc}` returned {numel[2]} elements for batch 2, {numel[1]} for batch 1",
            hint="make the input factory's first argument the batch size and return that many samples",
            field="input_factory",
        )
    if not unique_trainable_parameters(model):
        raise InvalidInput(
            f"model from `{model_desc}` has no trainable parameters",
            hint="profile a model with parameters that require gradients",
            field="model_factory",
        )
    bench.model.zero_grad(set_to_none=True)
    return bench


def checked_inputs(bench: Bench, batch: int) -> Any:
    with _failing_as(
        f"input factory `{bench.input_desc}` failed for batch {batch}",
        hint="make the input factory take the batch size and return the input batch",
        field="input_factory",
    ):
        inputs = bench.make_input(batch)
    if not any(True for _ in tensors_in(inputs)):
        raise InvalidInput(
            f"input factory `{bench.input_desc}` returned {type(inputs).__name__}, not a tensor or tensors",
            hint="return a tensor, a tuple/list of tensors (positional inputs) or a dict (keyword inputs)",
            field="input_factory",
        )
    return to_device(inputs, bench.device)


def checked_step(bench: Bench, inputs: Any) -> None:
    bench.model.zero_grad(set_to_none=True)
    try:
        with bench.autocast():
            output = call_model(bench.model, inputs)
    except Exception as exc:
        if is_out_of_memory(exc):
            raise Infeasible(
                f"model from `{bench.model_desc}` ran out of memory on {bench.device} at batch 1 or 2: "
                f"{_failure(exc)}",
                hint="use a device with more memory or a smaller model",
                field="device",
            ) from exc
        raise InvalidInput(
            f"model from `{bench.model_desc}` failed on the batch from input factory `{bench.input_desc}`: "
            f"{_failure(exc)}",
            hint="make the input factory return a batch of the shape and type the model expects",
            field="input_factory",
        ) from exc
    with (
        _failing_as(
            f"loss `{bench.loss_desc}` failed on the model's output",
            hint="pass --loss MODULE:FN taking the model's output and returning a scalar tensor",
            field="loss_fn",
        ),
        bench.autocast(),
    ):
        loss = bench.loss_fn(output)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
        raise InvalidInput(
            f"loss `{bench.loss_desc}` returned {_describe_value(loss)}, not a scalar tensor that needs grad",
            hint="return a one-element tensor computed from the model's output",
            field="loss_fn",
        )
    with _failing_as(
        f"backward through the model from `{bench.model_desc}` failed",
        hint="make sure the model is differentiable (no in-place edits of saved tensors, no detach)",
        field="model_factory",
    ):
        bench.backward(loss.reshape(()))


def _backward(loss: torch.Tensor) -> None:
    loss.backward()  # type: ignore[no-untyped-call]


def cuda_event() -> Any:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} (requires_grad={value.requires_grad})"
    return f"a {type(value).__name__}"


OUT_OF_MEMORY_MESSAGES = (
    "out of memory",
    "alloc_failed",
    "allocation_failed",
    "can't allocate memory",
    "not enough memory",
)
"""Lower-case parts of the messages of allocation failures that torch raises as a plain RuntimeError: the
caching allocator's "CUDA out of memory" (torch.OutOfMemoryError, torch ≥ 2.5), a raw "CUDA error: out of
memory", cuBLAS's CUBLAS_STATUS_ALLOC_FAILED (handle or workspace creation), cuDNN's
CUDNN_STATUS_ALLOC_FAILED and cuDNN 9's CUDNN_STATUS_INTERNAL_ERROR_*_ALLOCATION_FAILED, cuSOLVER's and
cuFFT's ALLOC_FAILED, and the CPU allocator's "can't allocate memory" / "not enough memory"."""


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is a failure to allocate memory (device or host), by type or by message."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(part in text for part in OUT_OF_MEMORY_MESSAGES)
