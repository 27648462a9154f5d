"""Run inside each testbed host of a ring: an allreduce timed back to back (as the bandwidth probe times it)
and after an idle or busy gap (as a DDP bucket is reduced after forward and backward).

Issue #17, cause 7 (d): tested whether the probe's back-to-back timing made small exchanges look slower
than DDP's; it did not (after compute the exchange was slower than back to back). Round 16 measured more:
after an idle gap the first allreduce is faster than back to back (the testbed link's token bucket), and
after a step of cnn faster on two small hosts, slower on two large ones, where the ranks' skew after the
step is inside the time (docs/validation.md).
For each size and each gap, `--reps` samples; a sample is a barrier, then the gap (`sleep` for
`--gaps-ms` milliseconds, or `model`: one forward+backward of `--model` at `--batch`), then one timed
allreduce, then (`--follow` times) further back-to-back allreduces of the same buffer, each timed. A
sample's time is the slowest rank's. Each rank also reads its process CPU clock (every thread, gloo's
included) over a sample's allreduces: `cpu_per_allreduce_s`, each rank's median per allreduce. Rank 0
prints one JSON object (medians per size and gap).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from typing import Any


def _load(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="65536,262144,624296,1048576,2621440")
    parser.add_argument("--gaps-ms", default="0,40")
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--follow", type=int, default=2)
    parser.add_argument("--model", default=None)
    parser.add_argument("--input", default=None)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    rank = dist.get_rank()
    step: Any = None
    if args.model:
        from srift.profiling.profiler import call_model, default_loss

        model = _load(args.model)()
        inputs = _load(args.input)(args.batch)

        def step() -> None:
            model.zero_grad(set_to_none=True)
            default_loss(call_model(model, inputs)).backward()  # type: ignore[no-untyped-call]

        step()

    results: dict[str, Any] = {}
    gaps: list[str] = args.gaps_ms.split(",") + (["model"] if step is not None else [])
    for size in (int(s) for s in args.sizes.split(",")):
        buf = torch.ones(size // 4)
        for _ in range(2):
            dist.all_reduce(buf)
        for gap in gaps:
            firsts, follows, cpus = [], [], []
            for _ in range(args.reps):
                dist.barrier()
                if gap == "model":
                    assert step is not None
                    step()
                elif float(gap) > 0:
                    time.sleep(float(gap) / 1e3)
                c0, t0 = time.process_time(), time.perf_counter()
                dist.all_reduce(buf)
                t1 = time.perf_counter()
                firsts.append(t1 - t0)
                for _ in range(args.follow):
                    t0 = time.perf_counter()
                    dist.all_reduce(buf)
                    follows.append(time.perf_counter() - t0)
                cpus.append((time.process_time() - c0) / (1 + args.follow))
            gathered: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, (firsts, follows, cpus))
            first = [max(v) for v in zip(*(g[0] for g in gathered), strict=True)]
            follow = [max(v) for v in zip(*(g[1] for g in gathered), strict=True)]
            results[f"{size}/{gap}"] = {
                "bytes": size,
                "gap": gap,
                "first_median_s": statistics.median(first),
                "follow_median_s": statistics.median(follow) if follow else None,
                "first_s": first,
                "follow_s": follow,
                "cpu_per_allreduce_s": [statistics.median(g[2]) for g in gathered],
            }
    if rank == 0:
        print(json.dumps(results))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
