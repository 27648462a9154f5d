"""Host time of one eager PyTorch kernel: the floor under every estimated forward/backward pass.

A GPU runs a pass no faster than the host issues its kernels. This measures what issuing one costs in
PyTorch eager mode (Python, dispatcher, autograd) on this machine's CPU: a 300-module chain of tiny
Linear/LayerNorm/GELU layers (4 features, batch 2: the arithmetic is negligible) runs forward and
backward on the CPU, and the time of a step is divided by its kernels (counted by
srift.profiling.structure). The median over sessions of the per-session medians is reported and is what
srift/estimate/public.py's EAGER_KERNEL_S holds. A GPU host adds the CUDA launch itself, so the floor is a
lower bound there.

    python -m benchmarks.eager_overhead [--sessions 7 --steps 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import nn

from benchmarks._report import write_section
from srift.profiling.structure import count_structure


def chain() -> nn.Module:
    return nn.Sequential(*[m for _ in range(100) for m in (nn.Linear(4, 4), nn.LayerNorm(4), nn.GELU())])


def chain_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=7)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    structure = count_structure(chain, chain_input)
    kernels = structure.forward.kernels + structure.backward.kernels
    model, x = chain(), chain_input(2)
    per_session = []
    for _ in range(args.sessions):
        times = []
        for _ in range(args.steps):
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            model(x).mean().backward()
            times.append(time.perf_counter() - t0)
        per_session.append(statistics.median(times[5:]) / kernels)
    median = statistics.median(per_session)
    load = os.getloadavg()
    lines = [
        f"Kernels per step: {kernels} (forward {structure.forward.kernels}, backward "
        f"{structure.backward.kernels}); one thread.",
        "",
        "| session | µs per kernel |",
        "|---:|---:|",
        *[f"| {i + 1} | {1e6 * v:.2f} |" for i, v in enumerate(per_session)],
        "",
        f"**Median: {1e6 * median:.2f} µs per eager kernel** (load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} when it ran). srift/estimate/public.py's EAGER_KERNEL_S holds this figure; the "
        "estimator uses it as the floor of a pass (kernels × it).",
    ]
    text = "\n".join(lines)
    print(text)
    write_section(
        "eager kernel overhead (estimate floor)", text, command="python -m benchmarks.eager_overhead"
    )


if __name__ == "__main__":
    main()
