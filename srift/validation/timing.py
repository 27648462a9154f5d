"""A further timing pass over a profile's breakpoints, run by the validation agent inside a testbed host.

`main(["--model", M, "--input", I, "--batches", "1,21,43,64", "--repeats", "3", "--warmup", "1",
"--out", FILE])` times forward and backward at those batches exactly as `srift profile` times its points
(`srift.profiling.profiler.sample_curve_points`, one thread) and writes the samples as JSON to FILE.
Validation pools such passes, spread over its run, into each profile (see srift.validation.pipeline).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="MODULE:FACTORY returning an nn.Module")
    parser.add_argument("--input", required=True, help="MODULE:FACTORY taking the batch size")
    parser.add_argument(
        "--batches", required=True, help="comma-separated batches (the profile's breakpoints)"
    )
    parser.add_argument("--loss", default=None, help="MODULE:FUNCTION of the output (the profile's loss)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds over the batches")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", required=True, help="write the samples here (JSON)")
    args = parser.parse_args(argv)

    from srift.profiling.loading import resolve_callable
    from srift.profiling.profiler import sample_curve_points

    samples = sample_curve_points(
        resolve_callable(args.model, what="model factory", field="model"),
        resolve_callable(args.input, what="input factory", field="input"),
        [int(b) for b in args.batches.split(",")],
        loss_fn=resolve_callable(args.loss, what="loss", field="loss") if args.loss else None,
        threads=args.threads,
        repeats=args.repeats,
        warmup=args.warmup,
    )
    Path(args.out).write_text(json.dumps(samples.to_dict()) + "\n")
    return 0
