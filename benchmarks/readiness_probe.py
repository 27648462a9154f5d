"""Run inside one testbed host: when each layer's gradient is ready, as a fraction of backward, read on the
wall clock and on the process's CPU clock, with steps back to back and after an idle gap.

Prints JSON: for each gap (ms) and layer, the median wall and CPU fractions over the steps, and the median
backward wall seconds. Under a CPU quota the wall clock stops whenever the period's quota is spent, so a
layer's wall fraction depends on where in its period the step began; this measures by how much, against
the CPU fraction `srift profile` reads (srift.profiling.profiler, step 4). Used by benchmarks.causes
`readiness`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--gaps-ms", default="0,30")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)

    import torch

    from srift.profiling.bench import (
        call_model,
        default_loss,
        trainable_layers,
        unique_trainable_parameters,
    )
    from srift.profiling.loading import resolve_callable

    torch.set_num_threads(1)
    model = resolve_callable(args.model, what="model", field="model")()
    make_input = resolve_callable(args.input, what="input", field="input")
    params = unique_trainable_parameters(model)
    layers = trainable_layers(model)
    stamps: dict[int, tuple[float, float]] = {}

    def hook_for(i: int) -> Any:
        def hook(_: torch.Tensor) -> None:
            stamps[i] = (time.perf_counter(), time.process_time())

        return hook

    handles = [p.register_post_accumulate_grad_hook(hook_for(i)) for i, p in enumerate(params)]  # type: ignore[no-untyped-call]
    gaps = [float(g) for g in args.gaps_ms.split(",")]
    found: dict[float, dict[str, list[float]]] = {g: {"backward_s": []} for g in gaps}
    for warm in (True, *([False] * args.rounds)):
        for gap in gaps:
            for _ in range(args.steps):
                inputs = make_input(args.batch)
                model.zero_grad(set_to_none=True)
                stamps.clear()
                if gap:
                    time.sleep(gap / 1e3)
                loss = default_loss(call_model(model, inputs))
                w1, c1 = time.perf_counter(), time.process_time()
                loss.backward()  # type: ignore[no-untyped-call]
                w2, c2 = time.perf_counter(), time.process_time()
                if warm:
                    continue
                found[gap]["backward_s"].append(w2 - w1)
                for layer in layers:
                    seen = [stamps[i] for i in layer.params if i in stamps]
                    if seen:
                        wall = max(s[0] for s in seen)
                        cpu = max(s[1] for s in seen)
                        found[gap].setdefault(f"{layer.name} wall", []).append((wall - w1) / (w2 - w1))
                        found[gap].setdefault(f"{layer.name} cpu", []).append((cpu - c1) / max(c2 - c1, 1e-9))
    for handle in handles:
        handle.remove()
    out = {
        str(g): {
            "backward_median_s": statistics.median(v["backward_s"]),
            "layers": {
                layer.name: {
                    "wall": statistics.median(v[f"{layer.name} wall"]),
                    "cpu": statistics.median(v[f"{layer.name} cpu"]),
                }
                for layer in layers
                if f"{layer.name} wall" in v
            },
        }
        for g, v in found.items()
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
