"""Every collective of the probes runs on the process group's device: the rank's GPU under NCCL (barriers
naming it), the CPU under gloo. A recording stand-in for torch.distributed notes the device of every
tensor each collective receives: under gloo it passes them on to a real one-rank group; for a configured
CUDA device (this machine has none) the tensors are fake CUDA tensors (FakeTensorMode) and nothing is sent.
A source check shows the probes call collectives nowhere but through their `Group`."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode

from srift.settings import REPO_ROOT

PROBES = ("ddp_train", "overlap", "allreduce")
COLLECTIVES = (
    r"barrier|all_reduce|broadcast|all_gather|all_gather_object|all_to_all|reduce_scatter|reduce|gather|"
    r"scatter"
)


def _probe(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"probe_{name}", REPO_ROOT / "probes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Done:
    """A finished collective's work handle (and its future)."""

    def wait(self) -> None:
        return None

    def get_future(self) -> _Done:
        return self

    def then(self, fn: Any) -> _Done:
        return self


class RecordingDist:
    """torch.distributed as the probes call it, noting (collective, device of each tensor, device_ids)."""

    ReduceOp = dist.ReduceOp

    def __init__(self, *, real: bool) -> None:
        self.real = real
        self.calls: list[tuple[str, tuple[str, ...], Any]] = []

    def _note(self, name: str, tensors: list[Any], device_ids: Any = None) -> None:
        self.calls.append((name, tuple(str(t.device) for t in tensors), device_ids))

    def barrier(self, device_ids: Any = None) -> None:
        self._note("barrier", [], device_ids)
        if self.real:
            dist.barrier()

    def broadcast(self, tensor: Any, src: int = 0) -> Any:
        self._note("broadcast", [tensor])
        return dist.broadcast(tensor, src=src) if self.real else None

    def all_reduce(self, tensor: Any, op: Any = dist.ReduceOp.SUM, async_op: bool = False) -> Any:
        self._note("all_reduce", [tensor])
        if self.real:
            return dist.all_reduce(tensor, op=op, async_op=async_op)
        return _Done() if async_op else None

    def all_gather(self, out: list[Any], tensor: Any) -> None:
        self._note("all_gather", [*out, tensor])
        if self.real:
            dist.all_gather(out, tensor)

    def all_gather_object(self, out: list[Any], value: Any) -> None:
        self._note("all_gather_object", [])
        if self.real:
            dist.all_gather_object(out, value)
        else:
            out[:] = [value] * len(out)


@pytest.fixture
def one_rank_gloo() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        dist.destroy_process_group()


def _ones(shape: tuple[int, ...]) -> Any:
    """Nested lists of 1.0 in `shape`: what a collective's result reads as where nothing was sent."""
    return [_ones(shape[1:]) for _ in range(shape[0])] if shape else 1.0


def _setup(
    module: ModuleType, configured: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, RecordingDist, Any]:
    """The probe's Group on `configured` ("cpu" or "cuda:1"), its recorder and the tensor mode to run in."""
    device = torch.device(configured)
    recorder = RecordingDist(real=device.type == "cpu")
    group = module.Group(recorder, device, nccl=device.type == "cuda")
    mode: AbstractContextManager[Any] = nullcontext()
    if device.type == "cuda":
        mode = FakeTensorMode()
        monkeypatch.setattr(module.Group, "read", lambda self, t: _ones(tuple(t.shape)))
    return group, recorder, mode


def _check(recorder: RecordingDist, configured: str) -> None:
    assert recorder.calls
    for name, devices, device_ids in recorder.calls:
        assert all(d == configured for d in devices), (name, devices)
        if name == "barrier":
            assert device_ids == ([1] if configured.startswith("cuda") else None)


CONFIGURED = ["cpu", "cuda:1"]


@pytest.mark.parametrize("configured", CONFIGURED)
def test_the_training_probes_collectives_run_on_the_groups_device(
    configured: str, one_rank_gloo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = _probe("ddp_train")
    group, recorder, mode = _setup(probe, configured, monkeypatch)
    with mode:
        assert group.broadcast_int(5) in (5, 1)
        assert len(group.max_floats([0.1, 0.2])) == 2
        out = probe._colocation(
            2, [0], group=group, rank=0, world_size=1, step=lambda: (0.01, 0.01), budget_s=0.03
        )
        assert out is not None and out["rounds"] >= 1
        hook = probe._traced_allreduce({}, group, 1)

        class Bucket:
            def __init__(self) -> None:
                self.t = torch.ones(4, device=torch.device(configured))

            def buffer(self) -> Any:
                return self.t

            def index(self) -> int:
                return 0

        hook(None, Bucket())
    names = {name for name, _, _ in recorder.calls}
    assert names == {"barrier", "broadcast", "all_reduce", "all_gather"}
    _check(recorder, configured)


@pytest.mark.parametrize("configured", CONFIGURED)
def test_the_overlap_probes_collectives_run_on_the_groups_device(
    configured: str, one_rank_gloo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = _probe("overlap")
    group, recorder, mode = _setup(probe, configured, monkeypatch)
    with mode:
        group.barrier()
        group.all_reduce(torch.ones(8, device=torch.device(configured)))
        group.max_float(0.5)
        assert group.all_gather_object({"r": 1}, 1) == [{"r": 1}]
    _check(recorder, configured)


@pytest.mark.parametrize("configured", CONFIGURED)
def test_the_allreduce_probes_collectives_run_on_the_groups_device(
    configured: str, one_rank_gloo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = _probe("allreduce")
    group, recorder, mode = _setup(probe, configured, monkeypatch)
    with mode:
        group.barrier()
        group.all_reduce(torch.ones(8, device=torch.device(configured)))
        group.all_reduce(torch.ones(8, device=torch.device(configured)), async_op=True).wait()
        group.broadcast_int(3)
        group.max_floats([1.0, 2.0])
        group.all_gather_object(("host", "run"), 1)
    _check(recorder, configured)


@pytest.mark.parametrize("name", PROBES)
def test_no_probe_calls_a_collective_outside_its_group(name: str) -> None:
    source = (REPO_ROOT / "probes" / f"{name}.py").read_text()
    outside = re.findall(rf"(?<!self\.)\bdist\.(?:{COLLECTIVES})\(", source)
    assert outside == [], f"{name}: collectives outside Group: {outside}"


@pytest.mark.parametrize("name", ["ddp_train", "overlap"])
def test_under_nccl_the_rank_uses_gpu_local_rank(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setenv("LOCAL_RANK", "3")
    probe = _probe(name)
    assert probe.device_for("nccl") == torch.device("cuda", 3) and chosen == [3]
    assert probe.device_for("gloo") == torch.device("cpu") and chosen == [3]


def test_dict_and_tuple_inputs_reach_the_model() -> None:
    probe = _probe("ddp_train")

    def model(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return args, kwargs

    assert probe.call(model, {"x": 1, "y": 2}) == ((), {"x": 1, "y": 2})
    assert probe.call(model, (1, 2)) == ((1, 2), {})
    assert probe.call(model, 7) == ((7,), {})
    moved = probe.to_device({"a": torch.ones(1), "b": (torch.ones(1), 3)}, torch.device("cpu"))
    assert moved["b"][1] == 3 and moved["a"].device.type == "cpu"
