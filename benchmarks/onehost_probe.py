"""Run inside one testbed host: a training step timed as the profiler times it and as a training loop runs it.

Issue #17's one-host experiment (deepfm measured 17–25 % slower on one host than its profile predicted).
Round-robin over `--rounds`, each variant runs `--steps` steps after one untimed one:

* `profile` — as `srift profile` times a point: gradients set to None *untimed*, then forward+loss and
  backward timed; the SGD step timed in its own loop (a step after each forward+backward, as
  `_update_time` does). Prediction of one host = forward + backward + update.
* `loop` — probes/ddp_train.py's step on one host (what validation measures): `zero_grad(set_to_none=True)`,
  forward+loss, backward, `opt.step()`, every phase timed, back to back.
* `loop_keep` — the same with `zero_grad(set_to_none=False)` (gradients zeroed in place, never freed).
* `ddp1` — the loop through DistributedDataParallel at world size 1 (gloo, an in-process store).

Each phase reports its median wall and CPU (thread) seconds. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="profile,loop,loop_keep,ddp1")
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from srift.profiling.loading import resolve_callable
    from srift.profiling.profiler import call_model, default_loss

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = resolve_callable(args.model, what="model", field="model")()
    inputs = resolve_callable(args.input, what="input", field="input")(args.batch)
    opt = torch.optim.SGD(model.parameters(), lr=1e-12)
    variants = args.variants.split(",")
    ddp: Any = None
    if "ddp1" in variants:
        store = dist.HashStore()  # type: ignore[attr-defined]
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        ddp = DistributedDataParallel(model)
    found: dict[str, dict[str, list[float]]] = {v: {} for v in variants}

    def clock() -> tuple[float, float]:
        return time.perf_counter(), time.thread_time()

    def record(variant: str, phase: str, t0: tuple[float, float]) -> tuple[float, float]:
        t1 = clock()
        found[variant].setdefault(phase + "_s", []).append(t1[0] - t0[0])
        found[variant].setdefault(phase + "_cpu_s", []).append(t1[1] - t0[1])
        return t1

    def loop_step(variant: str, net: Any, *, to_none: bool) -> None:
        t = clock()
        start = t
        opt.zero_grad(set_to_none=to_none)
        t = record(variant, "zero_grad", t)
        loss = default_loss(call_model(net, inputs))
        t = record(variant, "forward", t)
        loss.backward()  # type: ignore[no-untyped-call]
        t = record(variant, "backward", t)
        opt.step()
        record(variant, "step", t)
        record(variant, "total", start)

    def profile_step(variant: str, *, timed: bool) -> None:
        model.zero_grad(set_to_none=True)
        t = clock()
        start = t
        loss = default_loss(call_model(model, inputs))
        t = record(variant, "forward", t) if timed else clock()
        loss.backward()  # type: ignore[no-untyped-call]
        if timed:
            record(variant, "backward", t)
            record(variant, "fw_bw", start)

    def run(variant: str, steps: int, *, timed: bool = True) -> None:
        for _ in range(steps):
            if variant == "profile":
                profile_step(variant, timed=timed)
            elif variant in ("loop", "loop_keep"):
                loop_step(variant, model, to_none=variant == "loop")
            elif variant == "ddp1":
                loop_step(variant, ddp, to_none=True)
        if variant == "profile":  # the update, as _update_time measures it
            for _ in range(steps):
                profile_step(variant, timed=False)
                t = clock()
                opt.step()
                if timed:
                    record(variant, "update", t)

    for v in variants:
        run(v, 1, timed=False)
        found[v].clear()
    for _ in range(args.rounds):
        for v in variants:
            run(v, args.steps)
    out: dict[str, Any] = {
        "model": args.model,
        "batch": args.batch,
        "malloc_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_")},
        "variants": {v: {k: statistics.median(x) for k, x in d.items()} for v, d in found.items()},
    }
    prof = out["variants"].get("profile")
    if prof:
        prof["predicted_s"] = prof["forward_s"] + prof["backward_s"] + prof["update_s"]
    if ddp is not None:
        dist.destroy_process_group()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
