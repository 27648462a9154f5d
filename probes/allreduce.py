"""Allreduce bandwidth probe: times all_reduce over a grid of buffer sizes and prints JSON lines (Srift §4.2).

Runs under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the
environment) or with those variables set by hand (plain env:// init), with the gloo (CPU) or NCCL (GPU)
backend. For each buffer size (powers of two, 4 B .. 512 MiB by default) every rank runs `--warmup`
untimed allreduces, then `--repeats` timed samples, each started after a barrier. A sample averages
`--iters` back-to-back allreduces (as nccl-tests does; fewer for large buffers, so that a sample takes
about `--max-sample-s` at most), launched one after another with one synchronisation after the last, as
nccl-tests times them; its time is the slowest rank's. With `--async-count N`, each allreduce is N
concurrent asynchronous allreduces on separate buffers. Under NCCL the rank's GPU is LOCAL_RANK, made the
current device before the process group starts; every collective runs on it and barriers name it
(`Group`). Ranks of one host (torchrun's LOCAL_WORLD_SIZE, or `--ranks-per-node`) are recorded as one node
with that many ranks: the intra-node level. `--collective all_gather` or `reduce_scatter` times that
collective instead (all_gather_into_tensor into, and reduce_scatter_tensor from, a buffer of the size: the
whole buffer, as nccl-tests sizes them; sizes are rounded down to a multiple of 4·world_size bytes), for
sharded data parallelism (srift.domain.sharding).

Rank 0 writes one JSON object per sample (schema "srift-probe/1") to `--out` or stdout:
  time_s, algbw_gbps = 8·s/t/1e9, busbw_gbps = algbw_gbps · 2(n−1)/n for allreduce, · (n−1)/n for
  all-gather and reduce-scatter (nccl-tests' bus bandwidth; GIGABITS/s where nccl-tests prints GB/s),
  buffer_bytes, world_size, nodes, ranks_per_node, backend, async_count, repeat, run_id, collective,
  the host's features: provider, region, zone, instance_type (from flags or SRIFT_PROVIDER, SRIFT_REGION,
  SRIFT_ZONE, SRIFT_INSTANCE_TYPE, SRIFT_RATED_GBPS), gpu_name, cpu_name, cpu_cores, memory_gib, rated_gbps.
Progress goes to stderr as `progress DONE/TOTAL size=BYTES busbw_gbps=X`. The probe stops before
`--time-budget-s` would be exceeded (rank 0 decides, all ranks follow), so it is bounded in time.

Uses torch and the standard library only, so it runs on a bare VM or a testbed host.

Examples:
  torchrun --nnodes 2 --nproc-per-node 1 --rdzv-endpoint HOST:29500 allreduce.py --out samples.jsonl
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python allreduce.py --sizes 4,1K,1M
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import sys
import time
import uuid
from typing import Any, TextIO

SCHEMA = "srift-probe/1"
PROBE_VERSION = "1"
_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20}
_SUFFIX.update({"MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30})


def parse_size(text: str) -> int:
    """'4', '64K', '512M', '1G' → bytes (binary multiples)."""
    raw = text.strip().upper()
    digits = raw.rstrip("BKMGI")
    suffix = raw[len(digits) :]
    if not digits.isdigit() or suffix not in _SUFFIX:
        raise ValueError(f"{text!r} is not a size (examples: 4, 64K, 512M, 1G)")
    return int(digits) * _SUFFIX[suffix]


def size_grid(*, min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from min_bytes to max_bytes inclusive (min rounded up to a power of two)."""
    size = 1
    while size < min_bytes:
        size *= 2
    grid = []
    while size <= max_bytes:
        grid.append(size)
        size *= 2
    return grid


def _cgroup_cpus() -> float | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _cpu_cores() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(cores, int(quota + 0.999))) if quota else cores


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    total = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        if limit != "max" and (not total or int(limit) < total):
            total = int(limit)
    except (OSError, ValueError):
        pass
    return round(total / 2**30, 2)


def _imds(path: str) -> str:
    """Read one EC2 instance-metadata value (IMDSv2), or '' when not on EC2."""
    import urllib.request

    base = "http://169.254.169.254/latest"
    try:
        req = urllib.request.Request(
            f"{base}/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        )
        token = urllib.request.urlopen(req, timeout=1).read().decode()
        req = urllib.request.Request(f"{base}/meta-data/{path}", headers={"X-aws-ec2-metadata-token": token})
        return str(urllib.request.urlopen(req, timeout=1).read().decode().strip())
    except OSError:
        return ""


def host_features(args: argparse.Namespace, *, gpu_name: str) -> dict[str, Any]:
    """The features Srift learns bandwidth from, for this host (flags, then SRIFT_* variables, then IMDS)."""

    def pick(flag: str | None, env: str, default: str = "") -> str:
        return flag if flag is not None else os.environ.get(env, default)

    feats = {
        "provider": pick(args.provider, "SRIFT_PROVIDER", "local"),
        "region": pick(args.region, "SRIFT_REGION"),
        "zone": pick(args.zone, "SRIFT_ZONE"),
        "instance_type": pick(args.instance_type, "SRIFT_INSTANCE_TYPE", "local"),
        "rated_gbps": float(
            pick(None if args.rated_gbps is None else str(args.rated_gbps), "SRIFT_RATED_GBPS", "0")
        ),
    }
    if args.from_imds:
        feats["instance_type"] = _imds("instance-type") or feats["instance_type"]
        feats["zone"] = _imds("placement/availability-zone") or feats["zone"]
        feats["region"] = _imds("placement/region") or feats["region"]
        feats["provider"] = "aws" if feats["zone"] else feats["provider"]
    feats.update(gpu_name=gpu_name, cpu_name=_cpu_name(), cpu_cores=_cpu_cores(), memory_gib=_memory_gib())
    return feats


def _node_identity() -> str:
    """Hostname plus network-namespace inode: distinct per VM and per testbed host."""
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"{socket.gethostname()}:{netns}"


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

    def all_gather_into_tensor(self, output: Any, tensor: Any, *, async_op: bool = False) -> Any:
        return self.dist.all_gather_into_tensor(output, tensor, async_op=async_op)

    def reduce_scatter_tensor(self, output: Any, tensor: Any, *, async_op: bool = False) -> Any:
        return self.dist.reduce_scatter_tensor(output, tensor, async_op=async_op)

    def all_reduce(self, tensor: Any, *, async_op: bool = False) -> Any:
        """Sum `tensor` (on the group's device) in place; the work handle with `async_op`."""
        return self.dist.all_reduce(tensor, async_op=async_op)

    def read(self, tensor: Any) -> list[Any]:
        return list(tensor.cpu().tolist())

    def broadcast_int(self, value: int, *, src: int = 0) -> int:
        import torch

        t = torch.tensor([value], dtype=torch.int32, device=self.device)
        self.dist.broadcast(t, src=src)
        return int(self.read(t)[0])

    def max_floats(self, values: list[float]) -> list[float]:
        import torch

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [float(v) for v in self.read(t)]

    def all_gather_object(self, value: Any, world_size: int) -> list[Any]:
        gathered: list[Any] = [None] * world_size
        self.dist.all_gather_object(gathered, value)
        return gathered


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend", default=None, choices=["gloo", "nccl"], help="default: nccl if CUDA, else gloo"
    )
    parser.add_argument("--min-bytes", type=parse_size, default=4, help="smallest buffer (default 4)")
    parser.add_argument(
        "--max-bytes", type=parse_size, default=512 << 20, help="largest buffer (default 512M)"
    )
    parser.add_argument("--sizes", default=None, help="explicit comma-separated sizes, e.g. 4,1K,64M")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed allreduces per size")
    parser.add_argument("--iters", type=int, default=10, help="allreduces averaged into one sample (at most)")
    parser.add_argument(
        "--max-sample-s", type=float, default=0.25, help="fewer iters when a sample would take longer"
    )
    parser.add_argument(
        "--async-count", type=int, default=1, help="concurrent async allreduces per repetition"
    )
    parser.add_argument("--time-budget-s", type=float, default=600.0, help="stop before this much wall time")
    parser.add_argument("--nodes", type=int, default=None, help="hosts (default: from torchrun or detected)")
    parser.add_argument("--ranks-per-node", type=int, default=None, help="ranks per host (default: detected)")
    parser.add_argument("--ifname", default=None, help="network interface for gloo/NCCL sockets")
    parser.add_argument("--provider", default=None)
    parser.add_argument("--region", default=None)
    parser.add_argument("--zone", default=None)
    parser.add_argument("--instance-type", default=None)
    parser.add_argument("--rated-gbps", type=float, default=None, help="provider's rated network Gbit/s")
    parser.add_argument("--from-imds", action="store_true", help="read type/region/zone from EC2 metadata")
    parser.add_argument("--run-id", default=None, help="identifier of this run (default: random)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--out", default=None, help="JSON-lines file (default: stdout)")
    parser.add_argument(
        "--allow-one-rank",
        action="store_true",
        help="run with WORLD_SIZE 1 (a smoke test of the probe on one GPU: busbw is 0 by definition)",
    )
    parser.add_argument(
        "--collective",
        default="allreduce",
        choices=["allreduce", "all_gather", "reduce_scatter"],
        help="the collective to time (default allreduce)",
    )
    args = parser.parse_args(argv)
    if args.sizes:
        try:
            args.grid = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
        except ValueError as exc:
            parser.error(str(exc))
    else:
        args.grid = size_grid(min_bytes=args.min_bytes, max_bytes=args.max_bytes)
    if not args.grid:
        parser.error("the size grid is empty; To fix: give --min-bytes ≤ --max-bytes or --sizes")
    bad = [s for s in args.grid if s <= 0 or s % 4]
    if bad:
        parser.error(f"sizes must be positive multiples of 4 bytes (float32), got {bad}")
    for name in ("repeats", "async_count", "iters"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be ≥ 1")
    if args.warmup < 0 or args.time_budget_s <= 0:
        parser.error("--warmup must be ≥ 0 and --time-budget-s > 0")
    args.grid = sorted(set(args.grid))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if args.ifname:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", args.ifname)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", args.ifname)

    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world < 2 and not args.allow_one_rank:
        print(
            "error: WORLD_SIZE must be ≥ 2. To fix: run under torchrun or set RANK/WORLD_SIZE "
            "(or --allow-one-rank for a smoke test on one GPU).",
            file=sys.stderr,
        )
        return 2
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device("cpu")
    gpu_name = ""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if local_rank < gpus:
        torch.cuda.set_device(local_rank)
        gpu_name = torch.cuda.get_device_name(local_rank)
        if backend == "nccl":
            device = torch.device("cuda", local_rank)
    elif backend == "nccl":
        print(
            f"error: NCCL needs a GPU per rank on a host, but LOCAL_RANK {local_rank} has none "
            f"({gpus} GPU(s) here). To fix: run at most {gpus} ranks per host, or use --backend gloo.",
            file=sys.stderr,
        )
        return 2
    timeout = dt.timedelta(seconds=max(120.0, args.time_budget_s))
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
    group = Group(dist, device, nccl=backend == "nccl")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    ids = group.all_gather_object((_node_identity(), args.run_id or uuid.uuid4().hex), world)
    if args.nodes is not None:
        nodes = args.nodes
    elif os.environ.get("LOCAL_WORLD_SIZE"):
        nodes = world // int(os.environ["LOCAL_WORLD_SIZE"])
    else:
        nodes = len({node for node, _ in ids})
    per_node = args.ranks_per_node or max(1, world // max(nodes, 1))
    if nodes * per_node != world:
        if rank == 0:
            print(f"error: nodes {nodes} × ranks per node {per_node} ≠ world size {world}.", file=sys.stderr)
        dist.destroy_process_group()
        return 2
    run_id = ids[0][1]
    feats = host_features(args, gpu_name=gpu_name) if rank == 0 else {}

    out: TextIO | None = None
    if rank == 0:
        out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115
    last_iter_s = 0.0
    last_size = 0
    done = 0
    try:
        warm = torch.zeros(1024, dtype=torch.float32, device=device)
        for _ in range(3):
            group.all_reduce(warm)
        sync()
        for size in args.grid:
            go = 0
            if rank == 0:
                guess_s = last_iter_s * max(1.0, size / max(last_size, 1)) if last_iter_s else 0.0
                timed_s = args.repeats * max(guess_s + 0.002, min(args.max_sample_s, args.iters * guess_s))
                needed_s = args.warmup * (guess_s + 0.002) + timed_s + 0.05
                go = 1 if time.monotonic() - started + needed_s <= args.time_budget_s else 0
            if not group.broadcast_int(go, src=0):
                if rank == 0:
                    print(
                        f"budget: stopped before size {size} after {done} sizes", file=sys.stderr, flush=True
                    )
                break
            if args.collective != "allreduce":
                size = max(4 * world, size // (4 * world) * 4 * world)
            count = size // 4
            bufs = [torch.zeros(count, dtype=torch.float32, device=device) for _ in range(args.async_count)]
            shards = [torch.zeros(count // world, dtype=torch.float32, device=device) for _ in bufs]

            def run(buf: Any, shard: Any, async_op: bool) -> Any:
                if args.collective == "all_gather":
                    return group.all_gather_into_tensor(buf, shard, async_op=async_op)
                if args.collective == "reduce_scatter":
                    return group.reduce_scatter_tensor(shard, buf, async_op=async_op)
                return group.all_reduce(buf, async_op=async_op)

            def launch(bufs: list[Any] = bufs, shards: list[Any] = shards) -> None:
                """One collective (or `--async-count` concurrent ones), launched: under NCCL waiting on
                the works only orders the GPU's stream, it does not block the host."""
                if len(bufs) == 1:
                    run(bufs[0], shards[0], False)
                else:
                    for work in [run(b, s, True) for b, s in zip(bufs, shards, strict=True)]:
                        work.wait()

            t0 = time.perf_counter()
            for _ in range(args.warmup):
                launch()
                sync()
            # iterations per sample: up to --iters, as many as fit in --max-sample-s (rank 0's warm-up says)
            fit = args.iters
            if rank == 0:
                per_op_s = (time.perf_counter() - t0) / max(args.warmup, 1) if args.warmup else last_iter_s
                fit = max(
                    1, min(args.iters, int(args.max_sample_s / per_op_s) if per_op_s > 0 else args.iters)
                )
            iters = group.broadcast_int(fit, src=0)
            times_s = []
            for _ in range(args.repeats):
                group.barrier()
                sync()
                t0 = time.perf_counter()
                for _ in range(iters):
                    launch()
                sync()
                times_s.append((time.perf_counter() - t0) / iters)
            times_s = group.max_floats(times_s)
            last_iter_s, last_size = max(times_s), size
            done += 1
            del bufs, shards
            factor = (2.0 if args.collective == "allreduce" else 1.0) * (world - 1) / world
            if rank == 0 and out is not None:
                now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                for rep, t in enumerate(times_s):
                    algbw = size * 8 / t / 1e9
                    busbw = algbw * factor
                    sample = {
                        "schema": SCHEMA,
                        "probe_version": PROBE_VERSION,
                        "run_id": run_id,
                        "timestamp": now,
                        "time_s": t,
                        "algbw_gbps": algbw,
                        "busbw_gbps": busbw,
                        "buffer_bytes": size,
                        "dtype": "float32",
                        "world_size": world,
                        "nodes": nodes,
                        "ranks_per_node": per_node,
                        "backend": backend,
                        "async_count": args.async_count,
                        "repeat": rep,
                        "iters": iters,
                        "collective": args.collective,
                        **feats,
                    }
                    out.write(json.dumps(sample, sort_keys=True) + "\n")
                out.flush()
                mid = sorted(times_s)[len(times_s) // 2]
                mid_busbw = size * 8 / mid / 1e9 * factor
                print(
                    f"progress {done}/{len(args.grid)} size={size} busbw_gbps={mid_busbw:.6g}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if out is not None and out is not sys.stdout:
            out.close()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
