"""Overlap probe: how much compute and a concurrent allreduce slow each other down on one instance type.

Runs under torchrun (or with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set by hand) with gloo
(CPU) or NCCL (GPU LOCAL_RANK, made the current device before the process group starts; every collective on
it, barriers naming it). Every rank times, in rounds (so slow spells of the host hit every phase alike):

1. `compute alone`: forward+backward steps of a model (MODULE:FACTORY with an input factory; default a
   built-in 3-layer MLP) at `--batch`;
2. `allreduce alone`: allreduces of `--bytes`;
3. `together`: a thread runs as many allreduces as take about as long as the compute steps, while the
   main thread keeps computing; the steps that ran entirely while the allreduces did are timed.

What DDP does during backward is phase 3: gradients of early buckets are reduced (gloo: TCP sends, memory
copies and sums on the host's CPU; NCCL: kernels on the GPU's SMs) while later gradients are computed.
Rank 0 prints one JSON object (schema "srift-overlap/1"): the medians over rounds and ranks of
`compute_slowdown` (step time together / alone) and `comm_slowdown` (allreduce time together / alone),
`compute_slowdown_spread` (1.4826 × the median absolute deviation of the slowdown's logs), each round's
values, and the timings they come from. Put `compute_slowdown` and its spread into the model's profile for
that type as `extra.overlap_slowdown` / `extra.overlap_slowdown_spread`, and `comm_slowdown` as
`extra.comm_overlap_slowdown`: the simulator then slows each member's backward by the first while the
exchange is busy, and the exchange by the second while members compute (docs/simulator.md).

Uses torch and the standard library only, so it runs on a bare VM or a testbed host.

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 python overlap.py --bytes 16M
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

SCHEMA = "srift-overlap/1"


def _load(spec: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


class Group:
    """This rank's collectives: every tensor on the process group's device (NCCL: this rank's GPU, the
    current device; gloo: the CPU), barriers naming the GPU under NCCL. The one place this script calls
    torch.distributed's collectives."""

    def __init__(self, dist: Any, device: Any, *, nccl: bool) -> None:
        self.dist = dist
        self.device = device
        self.nccl = nccl

    def barrier(self) -> None:
        if self.nccl:
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()

    def all_reduce(self, tensor: Any) -> None:
        """Sum `tensor` (on the group's device) in place."""
        self.dist.all_reduce(tensor)

    def read(self, tensor: Any) -> list[Any]:
        return list(tensor.cpu().tolist())

    def max_float(self, value: float) -> float:
        """The largest value over ranks."""
        import torch

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(self.read(t)[0])

    def all_gather_object(self, value: Any, world_size: int) -> list[Any]:
        """Every rank's `value` (NCCL moves it through the current device, set by `device_for`)."""
        gathered: list[Any] = [None] * world_size
        self.dist.all_gather_object(gathered, value)
        return gathered


def device_for(backend: str) -> Any:
    """The rank's device: under NCCL GPU LOCAL_RANK, made the current device; under gloo the CPU."""
    import torch

    if backend != "nccl":
        return torch.device("cpu")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def to_device(value: Any, device: Any) -> Any:
    """Tensors, and tensors inside tuples, lists and dicts, moved to `device`."""
    if hasattr(value, "to") and hasattr(value, "device"):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def call(model: Any, inputs: Any) -> Any:
    """The model on an input: a dict as keyword arguments, a tuple or list as positional ones."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, list | tuple):
        return model(*inputs)
    return model(inputs)


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    raw = text.strip().upper().rstrip("B").rstrip("I")
    return int(raw[:-1]) * units[raw[-1]] if raw and raw[-1] in units else int(raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="MODULE:FACTORY (default: a built-in MLP)")
    parser.add_argument("--input", default=None, help="MODULE:FACTORY taking the batch size")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--bytes", default="16M", help="allreduce buffer size (e.g. 16M)")
    parser.add_argument("--steps", type=int, default=6, help="compute steps per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    parser.add_argument("--instance-type", default=os.environ.get("SRIFT_INSTANCE_TYPE", ""))
    parser.add_argument("--out", default=None, help="write rank 0's JSON here as well as stdout")
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    on = device_for(args.backend)
    device = on if on.type == "cuda" else None
    dist.init_process_group(args.backend, rank=rank, world_size=world)
    group = Group(dist, on, nccl=args.backend == "nccl")
    if args.model:
        model = _load(args.model)()
        inputs = _load(args.input)(args.batch)
    else:
        model = nn.Sequential(
            nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )
        inputs = torch.randn(args.batch, 512)
    model = model.to(on)
    inputs = to_device(inputs, on)
    buffer = torch.ones(_parse_size(args.bytes) // 4, dtype=torch.float32, device=on)

    def sync() -> None:
        if device is not None:
            torch.cuda.synchronize(device)

    def step() -> float:
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        out = call(model, inputs)
        out = out[0] if isinstance(out, tuple | list) else out
        out.float().mean().backward()
        sync()
        return time.perf_counter() - t0

    def reduce_once() -> float:
        t0 = time.perf_counter()
        group.all_reduce(buffer)
        sync()
        return time.perf_counter() - t0

    def agree(value: float) -> float:
        """The largest value over ranks (every rank uses the same count of collectives)."""
        return group.max_float(value)

    for _ in range(2):
        step()
        reduce_once()
    rounds: list[dict[str, float]] = []
    for _ in range(args.rounds):
        group.barrier()
        alone = [step() for _ in range(args.steps)]
        group.barrier()
        comm = [reduce_once() for _ in range(max(2, args.steps // 2))]
        compute_s = statistics.median(alone)
        comm_s = agree(statistics.median(comm))
        count = max(2, round(agree(args.steps * compute_s) / comm_s))
        span: dict[str, float] = {}

        def reducer(count: int = count, span: dict[str, float] = span) -> None:
            span["start"] = time.perf_counter()
            for _ in range(count):
                group.all_reduce(buffer)
            sync()
            span["end"] = time.perf_counter()

        group.barrier()
        thread = threading.Thread(target=reducer)
        thread.start()
        while "start" not in span:
            time.sleep(0)
        spans: list[tuple[float, float]] = []
        while thread.is_alive():
            t0 = time.perf_counter()
            spans.append((t0, t0 + step()))
        thread.join()
        together = [b - a for a, b in spans if a >= span["start"] and b <= span["end"]] or [
            b - a for a, b in spans
        ]
        comm_together_s = (span["end"] - span["start"]) / count
        rounds.append(
            {
                "compute_alone_s": compute_s,
                "compute_together_s": statistics.median(together),
                "comm_alone_s": comm_s,
                "comm_together_s": agree(comm_together_s),
                "together_steps": float(len(together)),
                "allreduces": float(count),
            }
        )
    gathered = group.all_gather_object(rounds, world)
    group.barrier()
    dist.destroy_process_group()
    if rank == 0:
        flat = [r for per_rank in gathered for r in per_rank]
        logs = [math.log(r["compute_together_s"] / r["compute_alone_s"]) for r in flat]
        mid = statistics.median(logs)
        result = {
            "schema": SCHEMA,
            "instance_type": args.instance_type,
            "world_size": world,
            "backend": args.backend,
            "buffer_bytes": buffer.numel() * 4,
            "batch": args.batch,
            "model": args.model or "builtin-mlp",
            "compute_slowdown": statistics.median(
                r["compute_together_s"] / r["compute_alone_s"] for r in flat
            ),
            "compute_slowdown_spread": 1.4826 * statistics.median(abs(x - mid) for x in logs),
            "comm_slowdown": statistics.median(r["comm_together_s"] / r["comm_alone_s"] for r in flat),
            "rounds": gathered,
        }
        text = json.dumps(result)
        print(text, flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
