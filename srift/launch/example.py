"""A training script that uses the helper: DDP with the plan's uneven per-rank batches on synthetic data.

Run each emitted torchrun line with this file as the script (`srift plan --emit torchrun --script
.../srift/launch/example.py`) and, after it, `--model MODULE:FACTORY --input MODULE:FACTORY`. Every rank
takes its slice of each global batch from the plan's sampler, weights its loss so that DDP's average is the
global batch's gradient, and rank 0 reports each step's time to the run (SRIFT_URL, SRIFT_RUN_ID,
SRIFT_RUN_TOKEN) from the helper's background thread. Torch and the standard library only.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import torch


def _load(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise SystemExit(
            f"error: {spec!r} is not MODULE:FACTORY. To fix: e.g. srift.profiling.testmodels:cnn"
        )
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _loss(output: Any) -> torch.Tensor:
    """The profiler's synthetic loss (mean square of the output), so the steps compute what was profiled."""
    if isinstance(output, tuple | list):
        output = output[0]
    loss: torch.Tensor = output.float().pow(2).mean()
    return loss


def main(argv: list[str] | None = None) -> int:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from srift.launch.helper import IterationReporter, RankShare, init_distributed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="MODULE:FACTORY building the model")
    parser.add_argument("--input", required=True, help="MODULE:FACTORY of a batch of inputs (takes the size)")
    parser.add_argument("--iterations", type=int, default=None, help="default: the plan's iterations")
    parser.add_argument("--epoch-batches", type=int, default=4, help="global batches in the synthetic data")
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args(argv)

    init_distributed()
    share = RankShare.from_env()
    torch.manual_seed(0)
    model = _load(args.model)()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    data = _load(args.input)(share.global_batch * args.epoch_batches)
    sampler = share.sampler(len(data), seed=0)
    reporter = IterationReporter.from_env(share)
    iterations = args.iterations or share.layout.iterations
    step = 0
    epoch = 0
    while step < iterations:
        sampler.set_epoch(epoch)
        for k, idx in enumerate(sampler):
            if step >= iterations:
                break
            loss = share.scale(
                _loss(ddp(data[idx])), local_samples=len(idx), global_samples=sampler.global_size(k)
            )
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            reporter.tick(step)
            step += 1
        epoch += 1
    delivered = reporter.close(timeout_s=30.0)
    if share.rank == 0:
        print(f"rank 0: {step} steps, reports delivered: {delivered}, sent {reporter.sent}", flush=True)
    dist.barrier()
    return 0


if __name__ == "__main__":
    # torch's gloo threads can abort the interpreter's teardown after a distributed run ("terminate called
    # without an active exception", see probes/ddp_train.py): a finished rank leaves at once.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
