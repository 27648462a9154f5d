"""Gloo's staging buffer: the memory a CPU rank's all-gather and reduce-scatter hold beside their tensors.

FSDP2 on CPU ranks (gloo, the testbed's backend) runs `all_gather_into_tensor` and `reduce_scatter_tensor`
once per unit. NCCL writes the output in place; gloo's implementation of both copies through a temporary
the size of the whole (gathered) tensor. srift.domain.sharding.GLOO_STAGING_TENSORS holds how many whole
tensors that temporary is, and this script measures it: every rank (gloo over loopback, a file store in a
temporary folder) allocates and touches its input and output, resets the kernel's peak-RSS mark
(/proc/self/clear_refs, "5"), runs the collective and reads how far the resident set rose above what it
held before (VmHWM − VmRSS), as a multiple of the whole tensor. The script reports the median over repeats
per collective and world size, and the figure the constant takes: their median, rounded to a whole number
of tensors (a temporary is a whole buffer or none).

It also measures how long the temporary lives. Gloo's reduce-scatter allreduces a clone of its input on a
worker thread, which wakes the caller and only then, when it next runs, drops the work that holds the clone
(ProcessGroupGloo::runLoop). So every rank runs `--late-calls` calls of each collective back to back on a
`--late-tensor-mb` tensor and reads glibc's bytes in use (mallinfo2) before and right after each: the copies
still alive after a call returned are its reading less the lowest reading, in whole tensors. The most any
call left is srift.domain.sharding.GLOO_LATE_RELEASED_REDUCES (the reduce-scatter's, over ranks and world
sizes); the share of calls that left one says how often a caller runs on beside it.

    python -m benchmarks.gloo_staging [--tensor-mb 200 --repeats 3 --world-sizes 1 2]
        [--late-tensor-mb 8 --late-calls 200] [--json F --no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks._report import write_section
from srift.profiling.memory import malloc_in_use_bytes, peak_rss_growth_bytes

COLLECTIVES = ("all_gather_into_tensor", "reduce_scatter_tensor")


def _late_copies(run: Callable[[], None], tensor_bytes: int, calls: int) -> tuple[int, float]:
    """(the most whole tensors still in use right after a call returned, the share of calls that left at
    least one), over `calls` calls back to back, against the lowest reading before or after any of them."""
    before: list[int] = []
    after: list[int] = []
    for _ in range(calls):
        before.append(malloc_in_use_bytes() or 0)
        run()
        after.append(malloc_in_use_bytes() or 0)
    floor = min(before + after)
    held = [round((reading - floor) / tensor_bytes) for reading in after]
    return max(held), sum(h > 0 for h in held) / len(held)


def _rank(
    rank: int, world: int, store: str, tensor_bytes: int, repeats: int, late: tuple[int, int], out: dict
) -> None:
    # torch 2.13 names these two deprecated; FSDP2's CPU path still calls them, so they are what is measured.
    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    whole = torch.ones(tensor_bytes // 4, dtype=torch.float32)
    shard = torch.ones(whole.numel() // world, dtype=torch.float32)
    gathered = torch.zeros(shard.numel() * world, dtype=torch.float32)
    reduced = torch.zeros(shard.numel(), dtype=torch.float32)
    runs = {
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(gathered, shard),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(reduced, gathered),
    }
    for name in COLLECTIVES:
        runs[name]()  # first call: gloo's own setup, not the staging
        dist.barrier()
        ratios = [peak_rss_growth_bytes(runs[name]) / (gathered.numel() * 4) for _ in range(repeats)]
        out[(world, rank, name)] = statistics.median(ratios)
        dist.barrier()
    del whole
    late_bytes, late_calls = late
    small = torch.ones(late_bytes // 4 // world * world, dtype=torch.float32)
    small_shard = torch.ones(small.numel() // world, dtype=torch.float32)
    late_runs = {
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(small, small_shard),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(small_shard, small),
    }
    for name in COLLECTIVES:
        late_runs[name]()
        dist.barrier()
        out[(world, rank, name, "late")] = _late_copies(late_runs[name], small.numel() * 4, late_calls)
        dist.barrier()
    dist.destroy_process_group()


def measure(
    tensor_bytes: int, repeats: int, world_sizes: list[int], late: tuple[int, int] = (8 * 10**6, 200)
) -> tuple[dict[tuple[int, str], float], dict[tuple[int, str], tuple[int, float]]]:
    """Median ratio over ranks of staging bytes to whole-tensor bytes, per (world size, collective); and
    per (world size, collective) the most copies a call left alive over ranks and the largest share of
    calls that left one (`late`: tensor bytes and calls)."""
    result: dict[tuple[int, str], float] = {}
    lasting: dict[tuple[int, str], tuple[int, float]] = {}
    with mp.Manager() as manager:
        for world in world_sizes:
            out = manager.dict()
            with tempfile.TemporaryDirectory() as tmp:
                # Forked, not spawned: the ranks start with torch imported (a spawned rank imports it
                # again, about 1.5 s of a 2-core host each); the parent has run no operator, so no
                # thread pool is copied half-started. What a rank measures is growth over its own start.
                mp.start_processes(
                    _rank,
                    args=(world, str(Path(tmp) / "store"), tensor_bytes, repeats, late, out),
                    nprocs=world,
                    join=True,
                    start_method="fork",
                )
            for name in COLLECTIVES:
                result[(world, name)] = statistics.median(out[(world, r, name)] for r in range(world))
                found = [out[(world, r, name, "late")] for r in range(world)]
                lasting[(world, name)] = (max(f[0] for f in found), max(f[1] for f in found))
    return result, lasting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensor-mb", type=int, default=200, help="whole (gathered) tensor, MB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--late-tensor-mb", type=int, default=8, help="tensor of the back-to-back calls, MB")
    parser.add_argument("--late-calls", type=int, default=200, help="back-to-back calls per collective")
    parser.add_argument("--json", type=Path, help="also write the ratios and the figure to this file")
    parser.add_argument("--no-write", action="store_true", help="leave docs/BENCHMARKS.md as it is")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result, lasting = measure(
        args.tensor_mb * 10**6, args.repeats, args.world_sizes, (args.late_tensor_mb * 10**6, args.late_calls)
    )
    figure = round(statistics.median(result.values()))
    late_figure = max(most for (_, name), (most, _) in lasting.items() if name == "reduce_scatter_tensor")
    lines = [
        f"Whole tensor {args.tensor_mb} MB (fp32), {args.repeats} repeats per collective, gloo over "
        f"loopback, torch {torch.__version__}. Extra resident memory while the collective runs, as a "
        "multiple of the whole tensor (median over repeats, then over ranks):",
        "",
        "| world size | collective | staging / whole tensor |",
        "|---:|---|---:|",
    ]
    lines += [f"| {w} | `{name}` | {v:.2f} |" for (w, name), v in sorted(result.items())]
    lines += [
        "",
        f"GLOO_STAGING_TENSORS (srift/domain/sharding.py) = {figure}: the median, rounded to whole tensors. "
        "It applies only to CPU ranks (gloo); NCCL's collectives on a GPU write in place.",
        "",
        f"How long it lives: {args.late_calls} calls of each back to back on a {args.late_tensor_mb} MB "
        "tensor, glibc's bytes in use (mallinfo2) read right after each call returned, less the lowest "
        "reading, in whole tensors (the most over ranks; the largest share over ranks):",
        "",
        "| world size | collective | copies still alive after the call, most | calls that left one |",
        "|---:|---|---:|---:|",
    ]
    lines += [
        f"| {w} | `{name}` | {most} | {share:.1%} |" for (w, name), (most, share) in sorted(lasting.items())
    ]
    lines += [
        "",
        f"GLOO_LATE_RELEASED_REDUCES (srift/domain/sharding.py) = {late_figure}: the most reduce-scatter "
        "copies a call left alive. Gloo's worker thread frees the reduce-scatter's clone of its input after "
        "it has woken the caller, so a caller that runs on at once (FSDP2's next all-gather) may run beside "
        "it; the all-gather's temporary is freed inside the call.",
        "",
        f"Load average when it ran: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
    ]
    for line in lines:
        print(line)
    if args.json:
        ratios = [{"world_size": w, "collective": c, "ratio": v} for (w, c), v in sorted(result.items())]
        held = [
            {"world_size": w, "collective": c, "most": most, "share": share}
            for (w, c), (most, share) in sorted(lasting.items())
        ]
        args.json.write_text(
            json.dumps({"ratios": ratios, "figure": figure, "late": held, "late_figure": late_figure})
        )
    if args.no_write:
        return
    write_section(
        "gloo staging buffer (FSDP2 on CPU ranks)",
        "\n".join(lines),
        command="python -m benchmarks.gloo_staging",
    )


if __name__ == "__main__":
    main()
