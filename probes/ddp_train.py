"""Real data-parallel training on synthetic data, timed per iteration: the ground truth Srift predicts.

Runs under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT from the environment) or as a
single process. Each rank builds the model from MODULE:FACTORY and its batch from an input factory (a
callable of the batch size returning a tensor, a tuple/list of positional tensors or a dict of keyword
tensors), wraps the model in DistributedDataParallel (gloo on the CPU by default; with --backend nccl on GPU
LOCAL_RANK, set as the current device before the process group starts), and times `--iters` iterations of
forward, backward (with DDP's gradient allreduce) and an SGD step after `--warmup` untimed ones. Every
collective of the script itself goes through `Group`, on the process group's device (NCCL: this rank's
GPU; gloo: the CPU), and its barriers name the GPU under NCCL. Rank 0 prints one JSON object: the mean,
median and spread of iteration time and the per-iteration times.

Per-rank batch sizes may differ (`--batches 32,64` gives rank i the i-th entry), as in Srift's mixed fleets.
`--strategy` trains sharded instead (srift.domain.sharding): zero1 (DDP with ZeroRedundancyOptimizer),
zero2 (FSDP2 `fully_shard(..., reshard_after_forward=False)`) or full_shard (FSDP2 `fully_shard`), the FSDP
units being the model's repeated blocks (the largest nn.ModuleList / nn.Sequential of one class) and the
root, the model built on the meta device and materialised shard by shard; torch 2.13 runs FSDP2 over gloo
on CPU. Every run then takes `--memory-steps` more steps (untimed) and reports each rank's peak memory in
use over what was in use before the model was built (`peak_bytes`): glibc's mallinfo2 (bytes malloc has
handed out and not taken back, in every arena and mapping), sampled before and after every module's forward
and backward, around the optimizer step, and every half millisecond by a thread (collectives' staging
copies live while the training thread waits). That is the CPU's analogue of
CUDA's max_memory_allocated: tensors FSDP2 frees by resizing their storage count, and the allocator's own
slack does not. `--late-gloo-release` (tests and diagnostics) keeps each reduce-scatter's gloo work, and with
it the staging copy it holds, until the next collective has returned: what gloo does whenever its worker
thread runs late (see `_late_gloo_release`).
With `--colocation-rounds`, compute-only steps after the timed iterations measure how much slower each rank
computes while every other rank computes too (`srift validate`'s co-location factor; see srift.validation).
Uses torch and the standard library only, so it runs on a bare host or testbed namespace.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def _load(spec: str) -> Callable[..., Any]:
    """MODULE:CALLABLE or path/to/file.py:CALLABLE."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"error: {spec!r} is not MODULE:CALLABLE. To fix: e.g. mypkg.models:build.")
    obj: Any
    if module_name.endswith(".py") or os.sep in module_name:
        found = importlib.util.spec_from_file_location(f"ddp_user_{abs(hash(module_name))}", module_name)
        if found is None or found.loader is None:
            raise SystemExit(f"error: cannot load {module_name}. To fix: give an existing .py file.")
        obj = importlib.util.module_from_spec(found)
        sys.modules[found.name] = obj
        found.loader.exec_module(obj)
    else:
        obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemExit(f"error: {spec} is not callable. To fix: name a function or class.")
    return obj  # type: ignore[no-any-return]


class Group:
    """This rank's collectives: every tensor on the process group's device (NCCL: this rank's GPU, the
    current device; gloo: the CPU) and, under NCCL, barriers that name the GPU (`device_ids`), as NCCL
    needs. The one place this script calls torch.distributed's collectives."""

    def __init__(self, dist: Any, device: Any, *, nccl: bool) -> None:
        self.dist = dist
        self.device = device
        self.nccl = nccl

    def barrier(self) -> None:
        if self.nccl:
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()

    def read(self, tensor: Any) -> list[Any]:
        """A collective's result as Python values (copied to the host)."""
        return list(tensor.cpu().tolist())

    def broadcast_int(self, value: int, *, src: int = 0) -> int:
        import torch

        t = torch.tensor([value], dtype=torch.int64, device=self.device)
        self.dist.broadcast(t, src=src)
        return int(self.read(t)[0])

    def max_floats(self, values: list[float]) -> list[float]:
        """Element-wise maximum over ranks."""
        import torch

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [float(v) for v in self.read(t)]

    def all_reduce_async(self, tensor: Any) -> Any:
        """An asynchronous sum of `tensor` (a DDP bucket, already on the group's device)."""
        return self.dist.all_reduce(tensor, async_op=True)

    def warm(self) -> None:
        """One tiny collective of each kind FSDP and DDP use, so that what the library allocates once
        is in use before a memory baseline is read."""
        import torch

        n = self.dist.get_world_size()
        self.dist.all_reduce(torch.zeros(4, device=self.device))
        self.dist.all_gather_into_tensor(
            torch.zeros(4 * n, device=self.device), torch.zeros(4, device=self.device)
        )
        self.dist.reduce_scatter_tensor(
            torch.zeros(4, device=self.device), torch.zeros(4 * n, device=self.device)
        )

    def all_gather(self, tensor: Any, world_size: int) -> list[Any]:
        """Every rank's `tensor`, as (nested) Python lists."""
        import torch

        mine = tensor.to(self.device)
        gathered = [torch.empty_like(mine) for _ in range(world_size)]
        self.dist.all_gather(gathered, mine)
        return [self.read(g) for g in gathered]


def device_for(backend: str) -> Any:
    """The rank's device: under NCCL GPU LOCAL_RANK, made the current device (before the process group
    starts, so NCCL's communicator lands on it); under gloo the CPU."""
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


def call(net: Any, inputs: Any) -> Any:
    """The model on an input factory's value: a dict as keyword arguments, a tuple or list as positional
    ones, anything else as the one argument."""
    if isinstance(inputs, dict):
        return net(**inputs)
    if isinstance(inputs, list | tuple):
        return net(*inputs)
    return net(inputs)


def _loss(output: Any) -> Any:
    if isinstance(output, tuple | list):
        output = output[0]
    return output.float().pow(2).mean()


def _traced_allreduce(current: dict[str, Any], group: Group, world_size: int) -> Callable[..., Any]:
    """DDP's default allreduce hook (divide, allreduce, return the bucket), recording into `current`
    each bucket's index, bytes, the instant DDP handed it over and the instant its reduction completed."""

    def hook(_state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects annotations other than its own
        tensor = bucket.buffer()
        record = {
            "index": bucket.index(),
            "bytes": tensor.numel() * tensor.element_size(),
            "ready": time.perf_counter(),
        }
        current.setdefault("buckets", []).append(record)
        tensor.div_(world_size)
        record["launched"] = time.perf_counter()

        def done(fut: Any) -> Any:
            record["reduced"] = time.perf_counter()
            return fut.value()[0]

        return group.all_reduce_async(tensor).get_future().then(done)

    return hook


def _colocation(
    max_rounds: int,
    solo_ranks: list[int],
    *,
    group: Group,
    rank: int,
    world_size: int,
    step: Callable[[], tuple[float, float]],
    budget_s: float | None = None,
    idle_s: float = 0.0,
    clock: str = "cpu",
) -> dict[str, Any] | None:
    """Rounds of: every rank's compute step at once, then each of `solo_ranks` alone while the others wait
    at a barrier. `max_rounds` rounds, or with `budget_s` as many as fit that many wall seconds of
    together-steps by rank 0's first one (at least 1, at most `max_rounds`). Every timed step starts
    `idle_s` after its barrier, so that under a CPU quota each starts on a fresh one (`idle_s` at least the
    quota's period): otherwise the rounds' fixed order puts a solo rank's together-step right after its own
    solo step (throttled) and its solo step after an idle wait, a false factor. `step` returns (wall
    seconds, CPU seconds). Returns, on rank 0, every rank's step seconds together and alone (None for a rank
    never timed alone) on `clock` ("cpu" or "wall"), and with "cpu" on the wall clock beside; None on the
    other ranks."""
    import torch

    together: list[tuple[float, float]] = []
    alone: list[tuple[float, float]] = []
    rounds = max_rounds
    k = 0
    while k < rounds:
        group.barrier()
        time.sleep(idle_s)
        together.append(step())
        wall_s = together[-1][0]
        for solo in solo_ranks:
            group.barrier()
            if rank == solo:
                time.sleep(idle_s)
                alone.append(step())
        if k == 0 and budget_s is not None:
            wanted = max(1, min(max_rounds, math.ceil(budget_s / max(wall_s, 1e-6))))
            rounds = group.broadcast_int(wanted, src=0)
        k += 1
    group.barrier()
    mine = torch.full((2, 2, rounds), float("nan"), dtype=torch.float64)
    mine[0] = torch.tensor(together, dtype=torch.float64).T
    if alone:
        mine[1] = torch.tensor(alone, dtype=torch.float64).T
    gathered = group.all_gather(mine, world_size)
    if rank != 0:
        return None
    judged, other = (1, 0) if clock == "cpu" else (0, 1)
    out: dict[str, Any] = {
        "rounds": rounds,
        "clock": clock,
        "idle_s": idle_s,
        "solo_ranks": solo_ranks,
        "together_s": [g[0][judged] for g in gathered],
        "alone_s": [g[1][judged] if r in solo_ranks else None for r, g in enumerate(gathered)],
    }
    if clock == "cpu":
        out["together_wall_s"] = [g[0][other] for g in gathered]
        out["alone_wall_s"] = [g[1][other] if r in solo_ranks else None for r, g in enumerate(gathered)]
    return out


SAMPLE_S = 0.0005
"""How often the memory steps' sampler thread reads mallinfo2 besides the hooks: collectives run in
gloo's threads while the training thread waits, and their staging copies live only that long."""


def _mallinfo() -> Any:
    """glibc's mallinfo2 (glibc ≥ 2.33) through ctypes, or None elsewhere."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                "fordblks", "keepcost",
            )
        ]  # fmt: skip

    try:
        libc = ctypes.CDLL("libc.so.6")
        call = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    call.restype = MallInfo2
    return call


def _in_use_bytes() -> int:
    """Bytes malloc has handed out and not taken back (heap arenas plus mmapped blocks); 0 without glibc."""
    info = _mallinfo()
    if info is None:
        return 0
    found = info()
    return int(found.uordblks + found.hblkhd)


def _warm_runtime(distributed: bool, strategy: str, device: Any, group: Group) -> None:
    """What the runtime allocates once, in use before the baseline is read: the modules a strategy imports
    (the first torch.optim optimizer alone imports 23 MB of Python objects), one tiny backward and
    optimizer step, and one tiny collective of each kind."""
    import torch

    if strategy in ("zero2", "full_shard"):
        import torch.distributed.fsdp
    if strategy == "zero1":
        import torch.distributed.optim
    x = torch.ones(4, requires_grad=True, device=device)
    (x * 2).sum().backward()
    torch.optim.SGD([x], lr=0.1).step()
    if distributed:
        group.warm()


def _peak_in_use(net: Any, step: Callable[[], None], steps: int, *, base: int) -> int:
    """The largest memory in use over `base` during `steps` steps, sampled at every module's forward and
    backward hooks and after each step (hooks removed afterwards)."""
    if _mallinfo() is None:
        return 0
    peak = [0]

    def sample(*_: Any, **__: Any) -> None:
        peak[0] = max(peak[0], _in_use_bytes() - base)

    import threading

    done = threading.Event()

    def sampler() -> None:
        while not done.wait(SAMPLE_S):
            sample()

    handles = []
    for module in net.modules():
        handles += [
            module.register_forward_pre_hook(sample),
            module.register_forward_hook(sample),
            module.register_full_backward_pre_hook(sample),
            module.register_full_backward_hook(sample),
        ]
    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        for _ in range(steps):
            step()
            sample()
    finally:
        done.set()
        thread.join()
        for handle in handles:
            handle.remove()
    return peak[0]


def _late_gloo_release(dist: Any) -> None:
    """Make every reduce-scatter's gloo staging copy outlive its call until the next collective has returned.

    Gloo's `reduce_scatter_tensor` (torch 2.13, ProcessGroupGloo::reduce_scatter_tensor_coalesced) clones the
    whole input and allreduces the clone on one of the process group's worker threads. The worker marks the
    work complete, which wakes the training thread, and drops its own reference to the work (and so frees
    the clone) only when it next runs (ProcessGroupGloo::runLoop: execute, then lock and reset). On a busy
    CPU that is late: the training thread has already gone on to the next unit's all-gather with the clone
    still alive. This reproduces that case deterministically: each reduce-scatter runs asynchronously, is
    waited on, and its work is kept until the training thread's next all-gather or reduce-scatter returns.
    FSDP2 calls both through the `torch.distributed` module's attributes, which this replaces."""
    held: list[Any] = []
    reduce_scatter, all_gather = dist.reduce_scatter_single, dist.all_gather_single

    def late_reduce_scatter(*args: Any, async_op: bool = False, **kwargs: Any) -> Any:
        work = reduce_scatter(*args, async_op=True, **kwargs)
        if async_op:
            return work
        work.wait()
        held.clear()  # the previous copy goes as this call returns, as the worker would have run by now
        held.append(work)
        return None

    def late_all_gather(*args: Any, **kwargs: Any) -> Any:
        result = all_gather(*args, **kwargs)
        held.clear()
        return result

    dist.reduce_scatter_single = late_reduce_scatter
    dist.all_gather_single = late_all_gather


def _repeated_blocks(model: Any) -> list[Any]:
    """The elements of the largest nn.ModuleList / nn.Sequential whose elements share one class."""
    from torch import nn

    best: list[Any] = []
    for module in model.modules():
        if isinstance(module, nn.ModuleList | nn.Sequential):
            kids = list(module.children())
            if len(kids) >= 2 and len({type(k) for k in kids}) == 1 and len(kids) > len(best):
                best = kids
    return best


def _fully_sharded(factory: Callable[..., Any], *, reshard: bool, device: Any) -> Any:
    """The model built on the meta device, each repeated block then the root under FSDP2's fully_shard,
    then materialised (each rank allocates its shards only) and initialised by its modules'
    reset_parameters."""
    import torch
    from torch.distributed.fsdp import fully_shard

    with torch.device("meta"):
        model = factory()
    for block in _repeated_blocks(model):
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    model.to_empty(device=device or "cpu")
    with torch.no_grad():
        for module in model.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
    return model


def main(argv: list[str] | None = None) -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--model", required=True, help="MODULE:FACTORY returning an nn.Module")
    parser.add_argument("--input", required=True, help="MODULE:FACTORY taking the batch size")
    parser.add_argument(
        "--loss",
        default=None,
        help="MODULE:FUNCTION taking the model's output and returning the scalar to backpropagate "
        "(default: the mean square of the first output)",
    )
    parser.add_argument("--batch", type=int, default=None, help="per-rank batch (same on every rank)")
    parser.add_argument("--batches", default=None, help="comma-separated per-rank batches, by rank")
    parser.add_argument("--iters", type=int, default=20, help="timed iterations (at most)")
    parser.add_argument(
        "--time-budget-s",
        type=float,
        default=None,
        help="bound the timed part by time: rank 0 times the last warm-up iteration and every rank runs "
        "about this many seconds' worth of iterations (at least --min-iters, at most --iters)",
    )
    parser.add_argument("--min-iters", type=int, default=2, help="timed iterations at least, with a budget")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    parser.add_argument(
        "--bucket-cap-mb",
        type=float,
        default=None,
        help="DDP gradient bucket size in MiB (default: DDP's own, 25 MiB with a first bucket of 1 MiB; "
        "torch 2.13 gives an explicitly passed cap to the first bucket too)",
    )
    parser.add_argument(
        "--colocation-rounds",
        type=int,
        default=0,
        help="after the timed iterations, this many rounds of compute-only steps (forward and backward "
        "under DDP's no_sync, no exchange), each round every rank at once and then each --solo-ranks rank "
        "alone, barrier-synchronised: how much slower a rank computes while the other hosts compute too "
        "(hosts that share one machine, as the testbed's do), in CPU seconds on a CPU (the work itself; the "
        "wall seconds beside) and wall seconds with CUDA; rank 0 reports them as `colocation`",
    )
    parser.add_argument(
        "--colocation-idle-s",
        type=float,
        default=0.0,
        help="each colocation step starts this many seconds after its barrier: at least the CPU quota's "
        "period, so that every step starts on a fresh quota (default 0: no quota)",
    )
    parser.add_argument(
        "--colocation-budget-s",
        type=float,
        default=None,
        help="bound the colocation rounds by time: as many as fit this many seconds of together-steps, by "
        "rank 0's first (at least 1, at most --colocation-rounds)",
    )
    parser.add_argument(
        "--solo-ranks",
        default="0",
        help="comma-separated ranks timed alone in each colocation round (one of each type is enough)",
    )
    parser.add_argument(
        "--strategy",
        default="ddp",
        choices=["ddp", "zero1", "zero2", "full_shard"],
        help="data-parallel strategy (see above; colocation rounds are DDP's only)",
    )
    parser.add_argument(
        "--memory-steps", type=int, default=2, help="untimed steps that measure peak memory (0: none)"
    )
    parser.add_argument(
        "--late-gloo-release",
        action="store_true",
        help="tests and diagnostics: keep each reduce-scatter's gloo staging copy alive until the next "
        "collective has returned, as gloo does when its worker thread runs late on a busy CPU",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write rank 0's JSON here as well as stdout")
    parser.add_argument(
        "--trace",
        default=None,
        help="write each rank's timeline (forward end, every gradient bucket's ready and reduced instants, "
        "backward end, step end, per timed iteration) to TRACE.rank<r>.json; diagnostics only: it reduces "
        "through a Python comm hook, which costs a little time per bucket",
    )
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if args.batches:
        batches = [int(b) for b in args.batches.split(",")]
        if len(batches) != world_size:
            raise SystemExit(f"error: --batches has {len(batches)} entries for {world_size} ranks.")
        batch = batches[rank]
    elif args.batch:
        batch = args.batch
    else:
        raise SystemExit("error: give --batch or --batches.")

    sharded = args.strategy in ("zero2", "full_shard")
    # one NCCL rank still trains under DDP; one sharded rank still needs FSDP2's process group
    distributed = world_size > 1 or args.backend == "nccl" or sharded
    on = device_for(args.backend)
    device = on if on.type == "cuda" else None
    if distributed:
        dist.init_process_group(args.backend, rank=rank, world_size=world_size)
    if args.late_gloo_release:
        _late_gloo_release(dist)
    group = Group(dist, on, nccl=args.backend == "nccl")
    _warm_runtime(distributed, args.strategy, on, group)
    base_bytes = _in_use_bytes()
    if sharded:
        model = _fully_sharded(_load(args.model), reshard=args.strategy == "full_shard", device=device)
    else:
        model = _load(args.model)().to(on)
    inputs = to_device(_load(args.input)(batch), on)
    ddp_options = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
    if device is not None:
        ddp_options["device_ids"] = [device.index]
    net: Any = DistributedDataParallel(model, **ddp_options) if distributed and not sharded else model
    if args.strategy == "zero1" and distributed:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        opt: Any = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD, lr=1e-4)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    loss_fn = _load(args.loss) if args.loss else _loss
    trace: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    if args.trace and distributed:
        net.register_comm_hook(None, _traced_allreduce(current, group, world_size))

    def step() -> None:
        if args.trace:
            current.clear()
            current.update(start=time.perf_counter(), buckets=[])
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(call(net, inputs))
        if args.trace:
            current["forward_end"] = time.perf_counter()
        loss.backward()
        if args.trace:
            current["backward_end"] = time.perf_counter()
        opt.step()
        if device is not None:
            torch.cuda.synchronize(device)
        if args.trace:
            current["step_end"] = time.perf_counter()
            trace.append(dict(current))

    def compute_step() -> tuple[float, float]:
        """Forward and backward without DDP's exchange (no_sync): (wall seconds, the process's CPU
        seconds). The local gradients are dropped."""
        opt.zero_grad(set_to_none=True)
        start, start_cpu = time.perf_counter(), time.process_time()
        with net.no_sync():
            loss_fn(call(net, inputs)).backward()
        if device is not None:
            torch.cuda.synchronize(device)
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
        opt.zero_grad(set_to_none=True)
        return wall_s, cpu_s

    warm_s = 0.0
    for _ in range(args.warmup):
        start = time.perf_counter()
        step()
        warm_s = time.perf_counter() - start
    iters = args.iters
    if args.time_budget_s is not None:
        wanted = math.ceil(args.time_budget_s / max(warm_s, 1e-6)) if warm_s > 0 else args.iters
        iters = max(min(args.min_iters, args.iters), min(args.iters, wanted))
        if distributed:  # rank 0's count for everyone (before the timed loop, so it times nothing)
            iters = group.broadcast_int(iters, src=0)
    if distributed:
        group.barrier()
    times_s: list[float] = []
    trace.clear()
    for _ in range(iters):
        start = time.perf_counter()
        step()
        times_s.append(time.perf_counter() - start)
    peak = _peak_in_use(net, step, args.memory_steps, base=base_bytes) if args.memory_steps > 0 else 0
    colocation = None
    if distributed and args.colocation_rounds > 0 and args.strategy == "ddp":
        solo_ranks = sorted({int(r) for r in args.solo_ranks.split(",") if r.strip()})
        colocation = _colocation(
            args.colocation_rounds,
            solo_ranks,
            group=group,
            rank=rank,
            world_size=world_size,
            step=compute_step,
            budget_s=args.colocation_budget_s,
            idle_s=args.colocation_idle_s,
            clock="wall" if device is not None else "cpu",
        )
    if args.trace:
        with open(f"{args.trace}.rank{rank}.json", "w") as fh:
            json.dump({"rank": rank, "batch": batch, "world_size": world_size, "iterations": trace}, fh)
    peaks = [peak]
    if distributed:
        # every rank's step ends at the synchronising allreduce, so rank 0's times are the fleet's
        times_s = group.max_floats(times_s)
        peaks = [int(row[0]) for row in group.all_gather(torch.tensor([peak], dtype=torch.int64), world_size)]
        group.barrier()
        dist.destroy_process_group()
    if rank == 0:
        result = {
            "world_size": world_size,
            "batch": batch,
            "batches": args.batches,
            "iters": iters,
            "mean_iter_s": statistics.fmean(times_s),
            "median_iter_s": statistics.median(times_s),
            "stdev_iter_s": statistics.stdev(times_s) if len(times_s) > 1 else 0.0,
            "iter_times_s": times_s,
            "strategy": args.strategy,
            "peak_bytes": peaks,
            "memory_method": "glibc mallinfo2 at module hooks" if _mallinfo() is not None else "none",
        }
        if colocation is not None:
            result["colocation"] = colocation
        text = json.dumps(result)
        print(text, flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    # A finished run leaves at once: torch 2.13's gloo threads can abort the interpreter's teardown after a
    # distributed run ("terminate called without an active exception", seen on 1 in 10 three-rank runs on
    # loopback), which would turn a run whose output is written into a failure.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
