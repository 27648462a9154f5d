"""Run inside one testbed host: forward+backward of a model, back to back and with idle gaps between steps.

Prints JSON: for each idle gap (ms), the median and mean seconds of the step (forward+backward) and of
forward alone. A CPU quota (CFS bandwidth control) may let a process that idles between steps compute
faster than one that never idles; this measures whether it does. Used by benchmarks.causes `duty`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--gaps-ms", default="0,10,30,100")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    from srift.profiling.loading import resolve_callable
    from srift.profiling.profiler import call_model, default_loss

    torch.set_num_threads(1)
    model = resolve_callable(args.model, what="model", field="model")()
    inputs = resolve_callable(args.input, what="input", field="input")(args.batch)
    gaps = [float(g) for g in args.gaps_ms.split(",")]
    found: dict[float, dict[str, list[float]]] = {g: {"step": [], "forward": [], "cpu": []} for g in gaps}
    for _ in range(2):
        model.zero_grad(set_to_none=True)
        default_loss(call_model(model, inputs)).backward()  # type: ignore[no-untyped-call]
    for _ in range(args.rounds):
        for gap in gaps:
            for _ in range(args.steps):
                model.zero_grad(set_to_none=True)
                c0 = time.thread_time()
                t0 = time.perf_counter()
                loss = default_loss(call_model(model, inputs))
                t1 = time.perf_counter()
                loss.backward()  # type: ignore[no-untyped-call]
                t2 = time.perf_counter()
                found[gap]["cpu"].append(time.thread_time() - c0)
                found[gap]["step"].append(t2 - t0)
                found[gap]["forward"].append(t1 - t0)
                if gap:
                    time.sleep(gap / 1e3)
    out = {
        str(g): {
            "step_median_s": statistics.median(v["step"]),
            "step_mean_s": statistics.fmean(v["step"]),
            "forward_median_s": statistics.median(v["forward"]),
            "cpu_median_s": statistics.median(v["cpu"]),
        }
        for g, v in found.items()
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
