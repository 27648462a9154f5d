"""DDP runs on testbed hosts with different warm-up counts: does the first timed iteration pay a one-off?

    sudo .venv/bin/python -m benchmarks.warmup_probe --model benchmarks.unseen7:densenet \\
        --input benchmarks.unseen7:densenet_input --hosts small0,small1,small2,small3 --batch 32 \\
        --warmups 1,2,1,2 --iters 4 --out docs/images/causes/warmup-densenet-s9.json

Runs probes/ddp_train.py through validation's agent pool on the running testbed (`--prefix`, default
val), one run per entry of `--warmups`, in that order, and prints and writes each run's timed iterations.
Keep the machine otherwise quiet.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="MODULE:FACTORY")
    parser.add_argument("--input", required=True, help="MODULE:FACTORY taking the batch size")
    parser.add_argument("--hosts", required=True, help="comma-separated testbed hosts, rank order")
    parser.add_argument("--batch", type=int, default=32, help="per-rank batch")
    parser.add_argument("--warmups", default="1,2,1,2", help="warm-up iterations of each run, in order")
    parser.add_argument("--iters", type=int, default=4, help="timed iterations per run")
    parser.add_argument("--prefix", default="val", help="the testbed's prefix")
    parser.add_argument("--out", type=Path, default=None, help="write the runs as JSON here")
    args = parser.parse_args(argv)

    from srift.settings import get_settings
    from srift.testbed import Testbed
    from srift.validation.context import MALLOC_ENV
    from srift.validation.ddp import AgentPool

    os.environ.update({**MALLOC_ENV, "PYTHONPATH": os.getcwd()})
    testbed = Testbed.attach(args.prefix, root=get_settings().data_dir / "testbed")
    hosts = args.hosts.split(",")
    runs = []
    module = args.model.partition(":")[0]
    with (
        tempfile.TemporaryDirectory() as work,
        AgentPool(testbed, workdir=Path(work), preload=[module]) as pool,
    ):
        for warmup in (int(w) for w in args.warmups.split(",")):
            result = pool.run_case(
                hosts,
                [args.batch] * len(hosts),
                model=args.model,
                input_factory=args.input,
                iters=args.iters,
                warmup=warmup,
                timeout_s=600.0,
            )
            print(f"warm-up {warmup}: " + ", ".join(f"{t:.3f}" for t in result.iter_times_s), flush=True)
            runs.append({"warmup": warmup, "iter_times_s": list(result.iter_times_s)})
    if args.out is not None:
        document = {
            "command": "python -m benchmarks.warmup_probe " + " ".join(argv or []),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "load_avg": os.getloadavg(),
            "model": args.model,
            "hosts": hosts,
            "batch": args.batch,
            "runs": runs,
        }
        args.out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
