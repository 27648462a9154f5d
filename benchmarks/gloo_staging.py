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

    python -m benchmarks.gloo_staging [--tensor-mb 200 --repeats 3 --world-sizes 1 2] [--json F --no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks._report import write_section
from srift.profiling.memory import peak_rss_growth_bytes

COLLECTIVES = ("all_gather_into_tensor", "reduce_scatter_tensor")


def _rank(rank: int, world: int, store: str, tensor_bytes: int, repeats: int, out: dict) -> None:
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
    dist.destroy_process_group()


def measure(tensor_bytes: int, repeats: int, world_sizes: list[int]) -> dict[tuple[int, str], float]:
    """Median ratio over ranks of staging bytes to whole-tensor bytes, per (world size, collective)."""
    result: dict[tuple[int, str], float] = {}
    with mp.Manager() as manager:
        for world in world_sizes:
            out = manager.dict()
            with tempfile.TemporaryDirectory() as tmp:
                mp.spawn(
                    _rank,
                    args=(world, str(Path(tmp) / "store"), tensor_bytes, repeats, out),
                    nprocs=world,
                    join=True,
                )
            for name in COLLECTIVES:
                result[(world, name)] = statistics.median(out[(world, r, name)] for r in range(world))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensor-mb", type=int, default=200, help="whole (gathered) tensor, MB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", type=Path, help="also write the ratios and the figure to this file")
    parser.add_argument("--no-write", action="store_true", help="leave docs/BENCHMARKS.md as it is")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = measure(args.tensor_mb * 10**6, args.repeats, args.world_sizes)
    figure = round(statistics.median(result.values()))
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
        f"Load average when it ran: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
    ]
    for line in lines:
        print(line)
    if args.json:
        ratios = [{"world_size": w, "collective": c, "ratio": v} for (w, c), v in sorted(result.items())]
        args.json.write_text(json.dumps({"ratios": ratios, "figure": figure}))
    if args.no_write:
        return
    write_section(
        "gloo staging buffer (FSDP2 on CPU ranks)",
        "\n".join(lines),
        command="python -m benchmarks.gloo_staging",
    )


if __name__ == "__main__":
    main()
