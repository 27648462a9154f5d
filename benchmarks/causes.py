"""Experiments on the causes of the end-to-end underestimate (issue #17), on the validation testbed.

Each experiment brings up srift/validation/testbed.yaml under validation's measurement conditions (10 ms
CPU period, raised CPU weight, malloc keeping freed memory), runs real DDP training or probes through the
validation agents, prints what it measured and writes it as JSON (`--out`). docs/validation.md records the
commands and figures.

    sudo .venv/bin/python -m benchmarks.causes trace --model wide_mlp --fleet 2xtbv.small@32
    sudo .venv/bin/python -m benchmarks.causes trace --model transformer --fleet 2xtbv.small@16+2xtbv.large@48

`trace`: every rank's timeline of a DDP run (forward end, each gradient bucket handed to the allreduce and
reduced, backward end, optimizer step end; mean over the timed iterations), beside the forward and
backward times of a profiler-style timing pass on each type at the same batch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from srift.validation.matrix import MODELS, Fleet, Group


def parse_fleet(text: str) -> Fleet:
    """ "2xtbv.small@16+2xtbv.large@48" (× or x) → Fleet."""
    groups = []
    for part in text.replace("×", "x").split("+"):
        count, _, rest = part.strip().partition("x")
        type_name, _, batch = rest.partition("@")
        groups.append(Group(type_name.strip(), int(count), int(batch)))
    return Fleet(tuple(groups))


def model_spec(name: str) -> tuple[str, str]:
    if name in MODELS:
        return MODELS[name].factory, MODELS[name].input_factory
    factory, _, input_factory = name.partition(",")
    return factory, input_factory


@contextlib.contextmanager
def lab(workdir: Path, preload: list[str]) -> Iterator[tuple[Any, Any]]:
    """The validation testbed under validation's conditions, with an agent pool; torn down after."""
    from srift.settings import get_settings
    from srift.testbed import load_spec
    from srift.validation import conditions
    from srift.validation.ddp import AgentPool
    from srift.validation.pipeline import DEFAULT_SPEC, MALLOC_ENV
    from srift.validation.steps import bring_up as _bring_up

    spec = load_spec(DEFAULT_SPEC)
    testbed, brought_up = _bring_up(spec, get_settings().data_dir / "testbed", print)
    saved = []
    previous = {k: os.environ.get(k) for k in MALLOC_ENV}
    os.environ.update(MALLOC_ENV)
    try:
        for host in testbed.hosts:
            for directory in host.cgroups:
                got = conditions.tune_cgroup(directory, cpu_cores=host.cpu_cores)
                if got is not None:
                    saved.append(got)
        with AgentPool(testbed, workdir=workdir, preload=preload) as pool:
            yield testbed, pool
    finally:
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        conditions.restore(saved)
        if brought_up:
            testbed.down()


def hosts_for(testbed: Any, fleet: Fleet) -> list[str]:
    used: dict[str, int] = {}
    names = []
    for g in fleet.groups:
        pool = [h.name for h in testbed.hosts_of_type(g.type_name)]
        start = used.get(g.type_name, 0)
        names += pool[start : start + g.count]
        used[g.type_name] = start + g.count
    return names


def summarize_trace(path_prefix: Path, world: int) -> list[dict[str, Any]]:
    """Per rank: mean instants (ms from the iteration's start) over the timed iterations."""
    out = []
    for rank in range(world):
        data = json.loads(Path(f"{path_prefix}.rank{rank}.json").read_text())
        its = data["iterations"]

        def mean_ms(key: str, items: list[dict[str, Any]]) -> float:
            return 1e3 * statistics.fmean(it[key] - it["start"] for it in items)

        buckets: dict[int, dict[str, Any]] = {}
        for it in its:
            for b in it.get("buckets", []):
                entry = buckets.setdefault(b["index"], {"bytes": b["bytes"], "ready": [], "reduced": []})
                entry["ready"].append(1e3 * (b["ready"] - it["start"]))
                entry["reduced"].append(1e3 * (b["reduced"] - it["start"]))
        starts = [it["start"] for it in its]
        out.append(
            {
                "rank": rank,
                "batch": data["batch"],
                "forward_end_ms": mean_ms("forward_end", its),
                "backward_end_ms": mean_ms("backward_end", its),
                "step_end_ms": mean_ms("step_end", its),
                "buckets": [
                    {
                        "index": i,
                        "bytes": e["bytes"],
                        "ready_ms": statistics.fmean(e["ready"]),
                        "reduced_ms": statistics.fmean(e["reduced"]),
                    }
                    for i, e in sorted(buckets.items())
                ],
                "starts": starts,
            }
        )
    t0 = [min(r["starts"][k] for r in out) for k in range(len(out[0]["starts"]))]
    for r in out:
        r["start_offset_ms"] = 1e3 * statistics.fmean(s - z for s, z in zip(r.pop("starts"), t0, strict=True))
    return out


def sim_timeline(db: Path, model: str, fleet: Fleet) -> dict[str, Any]:
    """The simulator's view of one case from a validation work folder's database (its profiles and
    bandwidth model): per member fw/bw, each DDP bucket's arrival and finish, the iteration."""
    import numpy as np

    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_instance_type
    from srift.db.session import transaction
    from srift.domain import FleetMember
    from srift.profiling.store import find_profiles
    from srift.settings import get_settings
    from srift.sim import simulate
    from srift.sim.exchange import exchange
    from srift.sim.iteration import with_buckets
    from srift.sim.layers import layer_arrays
    from srift.sim.network import network_stage

    url = f"sqlite:///{db}"
    settings = get_settings().model_copy(update={"database_url": url, "models_dir": db.parent / "models"})
    with transaction(url) as session:
        bandwidth = active_model(session=session, settings=settings)
        found = find_profiles(session=session, model=model)
        latest: dict[str, tuple[int, Any]] = {}
        for pid, prof in found:
            if prof.accelerator not in latest or pid > latest[prof.accelerator][0]:
                latest[prof.accelerator] = (pid, prof)
        members = [
            FleetMember(
                instance=get_instance_type(session=session, provider="testbed", name=g.type_name),
                count=g.count,
                batch=g.batch,
                profile=latest[g.type_name][1],
            )
            for g in fleet.groups
        ]
    est = simulate(members, bandwidth=bandwidth, bucket_cap_mb=25.0)
    bucketed = with_buckets(members, bucket_cap_mb=25.0)
    fw = [m.profile.forward.time_s(m.per_device_batch) for m in bucketed]
    bw = [m.profile.backward.time_s(m.per_device_batch) for m in bucketed]
    canon = layer_arrays(bucketed[0].profile)
    arrive = np.max(
        [
            f + canon.aligned_ready_frac(layer_arrays(m.profile)) * b
            for m, f, b in zip(bucketed, fw, bw, strict=True)
        ],
        axis=0,
    )
    out: dict[str, Any] = {
        "iteration_ms": 1e3 * est.iteration_s,
        "members": [
            {
                "type": m.instance.name,
                "batch": m.batch,
                "forward_ms": 1e3 * f,
                "backward_ms": 1e3 * b,
                "update_ms": 1e3 * m.profile.update_s,
            }
            for m, f, b in zip(bucketed, fw, bw, strict=True)
        ],
        "buckets": [],
    }
    plan = network_stage(bucketed, canon.sizes, bandwidth)
    if plan is not None:
        res = exchange(arrive.tolist(), canon.bits_list, canon.klass_list, [plan.stage])
        out["buckets"] = [
            {"bytes": bits / 8, "ready_ms": 1e3 * a, "reduced_ms": 1e3 * f}
            for bits, a, f in zip(canon.bits_list, arrive.tolist(), res.finish_s[-1], strict=True)
        ]
        out["rates_mbit"] = [r / 1e6 for r in plan.stage.rates_bps]
    return out


def cmd_trace(args: argparse.Namespace) -> dict[str, Any]:
    from srift.validation import conditions
    from srift.validation.colocation import colocation_factors, solo_ranks
    from srift.validation.ddp import TimingJob

    factory, input_factory = model_spec(args.model)
    fleets = [parse_fleet(f) for f in args.fleet]
    results: dict[str, Any] = {"model": args.model, "fleets": []}
    workdir = Path(tempfile.mkdtemp(prefix="causes-"))
    preload = sorted({factory.partition(":")[0], "srift.profiling.testmodels"})
    with lab(workdir, preload) as (testbed, pool):
        for fleet in fleets:
            hosts = hosts_for(testbed, fleet)
            timing = {}
            if not args.no_timing:
                jobs = []
                seen = set()
                for g in fleet.groups:
                    if g.type_name in seen:
                        continue
                    seen.add(g.type_name)
                    host = testbed.hosts_of_type(g.type_name)[0].name
                    batches = tuple(sorted({x.batch for x in fleet.groups if x.type_name == g.type_name}))
                    jobs.append(TimingJob(host, factory, input_factory, batches, args.timing_repeats, 1))
                found = pool.time_points(jobs, timeout_s=600)
                for job, samples in zip(jobs, found, strict=True):
                    for i, b in enumerate(samples.batches):
                        timing[f"{testbed.host(job.host).type_name}@{b}"] = {
                            "forward_ms": 1e3 * statistics.median(samples.forward_s[i]),
                            "backward_ms": 1e3 * statistics.median(samples.backward_s[i]),
                        }
            trace = workdir / f"trace-{len(results['fleets'])}"
            result = pool.run_case(
                hosts,
                fleet.batches,
                model=factory,
                input_factory=input_factory,
                iters=args.iters,
                warmup=args.warmup,
                timeout_s=900,
                loss=args.loss,
                bucket_cap_mb=args.bucket_cap_mb,
                trace=trace if fleet.hosts > 1 else None,
                colocation_rounds=args.colocation_rounds,
                solo_ranks=solo_ranks(fleet),
                colocation_idle_s=conditions.longest_period_s(testbed.host(h).cpu_cores for h in hosts),
            )
            ranks = summarize_trace(trace, fleet.hosts) if fleet.hosts > 1 else []
            entry = {
                "fleet": fleet.label(),
                "hosts": hosts,
                "mean_iter_ms": 1e3 * result.mean_iter_s,
                "timing": timing,
                "ranks": ranks,
            }
            if result.colocation is not None:
                entry["colocation"] = result.colocation.to_dict()
                for clock in ("cpu", "wall"):
                    sample = result.colocation.on_clock(clock)
                    found = colocation_factors(fleet, [sample]) if sample is not None else None
                    if found is not None:
                        entry[f"colocation_{clock}"] = found.to_dict()
                        cvs = ", ".join("-" if c is None else f"{c:.3f}" for c in found.straggler_cv)
                        factors = ", ".join(f"x{f:.3f}" for f in found.factors)
                        print(f"   colocation ({clock} clock): factors {factors}; straggler cv {cvs}")
            if args.db is not None:
                entry["sim"] = sim_timeline(args.db, args.model if args.model in MODELS else factory, fleet)
            results["fleets"].append(entry)
            print(f"\n== {args.model} on {fleet.label()}: mean iteration {entry['mean_iter_ms']:.1f} ms")
            for key, t in timing.items():
                fw_ms, bw_ms = t["forward_ms"], t["backward_ms"]
                print(f"   timing pass {key}: forward {fw_ms:.1f} ms, backward {bw_ms:.1f} ms")
            sim = entry.get("sim")
            if sim:
                mem = "  ".join(
                    f"{m['type']}@{m['batch']} fw {m['forward_ms']:.0f} bw {m['backward_ms']:.0f} "
                    f"up {m['update_ms']:.1f}"
                    for m in sim["members"]
                )
                bks = "  ".join(
                    f"{b['bytes'] / 1e6:.2f}MB ready {b['ready_ms']:.0f} reduced {b['reduced_ms']:.0f}"
                    for b in sim["buckets"]
                )
                print(f"   sim: iteration {sim['iteration_ms']:.1f} ms | {mem} | {bks}")
            for r in ranks:
                bks = "  ".join(
                    f"b{b['index']} {b['bytes'] / 1e6:.2f}MB ready {b['ready_ms']:.0f} "
                    f"reduced {b['reduced_ms']:.0f}"
                    for b in r["buckets"]
                )
                print(
                    f"   rank {r['rank']} @{r['batch']}: offset {r['start_offset_ms']:.1f}  "
                    f"fw {r['forward_end_ms']:.0f}"
                    f"  bw-end {r['backward_end_ms']:.0f}  step-end {r['step_end_ms']:.0f}  | {bks}"
                )
    return results


def _probe_each_type(types: str, module: str, probe_args: list[str]) -> dict[str, Any]:
    """`python -m module probe_args` in one host of each type at once; the last line of each, as JSON."""
    import subprocess

    workdir = Path(tempfile.mkdtemp(prefix="causes-"))
    found: dict[str, Any] = {}
    with lab(workdir, []) as (testbed, _pool):
        procs = {
            type_name: testbed.popen_in(
                testbed.hosts_of_type(type_name)[0].name,
                [sys.executable, "-m", module, *probe_args],
                cwd=str(Path(__file__).resolve().parents[1]),
                stdout=subprocess.PIPE,
                text=True,
            )
            for type_name in types.split(",")
        }
        for type_name, proc in procs.items():
            out, _ = proc.communicate(timeout=900)
            found[type_name] = json.loads(out.strip().splitlines()[-1])
    return found


def cmd_duty(args: argparse.Namespace) -> dict[str, Any]:
    """Compute with idle gaps between steps vs back to back, in one host of each type at once."""
    factory, input_factory = model_spec(args.model)
    probe = ["--model", factory, "--input", input_factory, "--batch", str(args.batch)]
    probe += ["--gaps-ms", args.gaps_ms, "--steps", str(args.steps)]
    results: dict[str, Any] = {"model": args.model, "batch": args.batch, "types": {}}
    for type_name, data in _probe_each_type(args.types, "benchmarks.duty_probe", probe).items():
        results["types"][type_name] = data
        print(f"== {args.model}@{args.batch} on {type_name}")
        for gap, v in data.items():
            print(
                f"   gap {float(gap):5.0f} ms: step median {1e3 * v['step_median_s']:.1f} ms, mean "
                f"{1e3 * v['step_mean_s']:.1f} ms, forward {1e3 * v['forward_median_s']:.1f} ms, "
                f"cpu {1e3 * v['cpu_median_s']:.1f} ms"
            )
    return results


def cmd_readiness(args: argparse.Namespace) -> dict[str, Any]:
    """Layer readiness by wall and by CPU clock, back to back and after a gap, in one host of each type."""
    factory, input_factory = model_spec(args.model)
    probe = ["--model", factory, "--input", input_factory, "--batch", str(args.batch)]
    probe += ["--gaps-ms", args.gaps_ms, "--steps", str(args.steps), "--rounds", str(args.rounds)]
    results: dict[str, Any] = {"model": args.model, "batch": args.batch, "types": {}}
    for type_name, data in _probe_each_type(args.types, "benchmarks.readiness_probe", probe).items():
        results["types"][type_name] = data
        print(f"== {args.model}@{args.batch} on {type_name} (ready fraction of backward: wall / cpu)")
        for gap, v in data.items():
            cells = "  ".join(f"{n} {x['wall']:.2f}/{x['cpu']:.2f}" for n, x in v["layers"].items())
            print(f"   gap {float(gap):3.0f} ms, backward {1e3 * v['backward_median_s']:.1f} ms: {cells}")
    return results


def cmd_onehost(args: argparse.Namespace) -> dict[str, Any]:
    """benchmarks/onehost_probe.py in one host of each type at once (`--one-at-a-time`: each type alone,
    one after another), for each model in turn."""
    import subprocess

    workdir = Path(tempfile.mkdtemp(prefix="causes-"))
    repo = Path(__file__).resolve().parents[1]
    results: dict[str, Any] = {"batch": args.batch, "runs": []}
    with lab(workdir, []) as (testbed, _pool):
        for name in args.model:
            factory, input_factory = model_spec(name)
            procs = {}
            for type_name in args.types.split(","):
                host = testbed.hosts_of_type(type_name)[0].name
                argv = [sys.executable, "-m", "benchmarks.onehost_probe", "--model", factory]
                argv += ["--input", input_factory, "--batch", str(args.batch), "--steps", str(args.steps)]
                argv += ["--rounds", str(args.rounds), "--variants", args.variants]
                procs[type_name] = testbed.popen_in(
                    host, argv, cwd=str(repo), stdout=subprocess.PIPE, text=True
                )
                if args.one_at_a_time:
                    procs[type_name].wait(timeout=900)
            for type_name, proc in procs.items():
                out, _ = proc.communicate(timeout=900)
                data = json.loads(out.strip().splitlines()[-1])
                data["type"] = type_name
                data["one_at_a_time"] = args.one_at_a_time
                results["runs"].append(data)
                malloc = " ".join(f"{k}={v}" for k, v in data["malloc_env"].items()) or "glibc defaults"
                mode = "alone" if args.one_at_a_time else "types at once"
                print(f"== {name}@{args.batch} on {type_name}, {mode} ({malloc})")
                for variant, v in data["variants"].items():
                    phases = "  ".join(
                        f"{k[:-2]} {1e3 * x:.1f}"
                        for k, x in v.items()
                        if k.endswith("_s") and not k.endswith("cpu_s")
                    )
                    cpu = "  ".join(f"{k[:-6]} {1e3 * x:.1f}" for k, x in v.items() if k.endswith("cpu_s"))
                    print(f"   {variant:9s} wall ms: {phases}\n             cpu ms: {cpu}")
    return results


def cmd_overlap(args: argparse.Namespace) -> dict[str, Any]:
    """probes/overlap.py on `--hosts` hosts of each type: compute and allreduce slowing each other."""
    import subprocess

    factory, input_factory = model_spec(args.model) if args.model else ("", "")
    workdir = Path(tempfile.mkdtemp(prefix="causes-"))
    repo = Path(__file__).resolve().parents[1]
    results: dict[str, Any] = {"model": args.model, "runs": []}
    with lab(workdir, []) as (testbed, _pool):
        for type_name in args.types.split(","):
            for size in args.bytes.split(","):
                hosts = [h for h in testbed.hosts_of_type(type_name)][: args.hosts]
                master = hosts[0].address
                procs = []
                for rank, host in enumerate(hosts):
                    argv = [
                        sys.executable,
                        str(repo / "probes" / "overlap.py"),
                        "--bytes",
                        size,
                        "--batch",
                        str(args.batch),
                        "--instance-type",
                        type_name,
                        "--rounds",
                        str(args.rounds),
                        "--steps",
                        str(args.steps),
                    ]
                    if factory:
                        argv += ["--model", factory, "--input", input_factory]
                    env = {
                        "RANK": str(rank),
                        "WORLD_SIZE": str(len(hosts)),
                        "MASTER_ADDR": master,
                        "MASTER_PORT": str(29_650 + len(results["runs"])),
                        "PYTHONPATH": os.pathsep.join(
                            filter(None, [str(repo), os.environ.get("PYTHONPATH")])
                        ),
                    }
                    procs.append(
                        testbed.popen_in(
                            host.name, argv, env=env, cwd=str(repo), stdout=subprocess.PIPE, text=True
                        )
                    )
                outs = [p.communicate(timeout=900)[0] for p in procs]
                data = json.loads(outs[0].strip().splitlines()[-1])
                results["runs"].append(data)
                rounds = [r for per in data["rounds"] for r in per]
                print(
                    f"== {type_name} ×{len(hosts)}, {size} allreduce, compute {data['model']}@{args.batch}: "
                    f"compute slowdown {data['compute_slowdown']:.2f}, "
                    f"comm slowdown {data['comm_slowdown']:.2f}"
                )
                for r in rounds:
                    print(
                        "   compute {:.1f} → {:.1f} ms ({:.0f} steps), "
                        "allreduce {:.1f} → {:.1f} ms ({:.0f})".format(
                            1e3 * r["compute_alone_s"],
                            1e3 * r["compute_together_s"],
                            r["together_steps"],
                            1e3 * r["comm_alone_s"],
                            1e3 * r["comm_together_s"],
                            r["allreduces"],
                        )
                    )
    return results


def _kernel_jiffies() -> int:
    """The machine's system + irq + softirq time so far (/proc/stat, clock ticks): the kernel's network
    work (veth, bridge, tc) runs there, outside any host's CPU quota."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[3]) + int(fields[6]) + int(fields[7])


def cmd_gap(args: argparse.Namespace) -> dict[str, Any]:
    """benchmarks/gap_probe.py on `--hosts` hosts of each type, or on each `--fleet` (a ring of mixed
    types): an allreduce back to back vs after a gap, and the kernel's CPU while it ran."""
    import subprocess

    factory, input_factory = model_spec(args.model) if args.model else ("", "")
    workdir = Path(tempfile.mkdtemp(prefix="causes-"))
    repo = Path(__file__).resolve().parents[1]
    results: dict[str, Any] = {"model": args.model, "batch": args.batch, "runs": []}
    with lab(workdir, []) as (testbed, _pool):
        rings: list[tuple[str, list[Any]]] = []
        for spec in args.fleet or []:
            by_name = {h.name: h for h in testbed.hosts}
            rings.append((spec, [by_name[n] for n in hosts_for(testbed, parse_fleet(spec))]))
        if not args.fleet:
            for type_name in args.types.split(","):
                rings.append((type_name, [h for h in testbed.hosts_of_type(type_name)][: args.hosts]))
        for type_name, hosts in rings:
            kernel_before, wall_before = _kernel_jiffies(), time.monotonic()
            procs = []
            for rank, host in enumerate(hosts):
                argv = [sys.executable, "-m", "benchmarks.gap_probe", "--sizes", args.sizes]
                argv += ["--gaps-ms", args.gaps_ms, "--reps", str(args.reps), "--batch", str(args.batch)]
                if factory:
                    argv += ["--model", factory, "--input", input_factory]
                env = {
                    "RANK": str(rank),
                    "WORLD_SIZE": str(len(hosts)),
                    "MASTER_ADDR": hosts[0].address,
                    "MASTER_PORT": str(29_700 + len(results["runs"])),
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
                }
                procs.append(
                    testbed.popen_in(
                        host.name, argv, env=env, cwd=str(repo), stdout=subprocess.PIPE, text=True
                    )
                )
            outs = [p.communicate(timeout=900)[0] for p in procs]
            kernel_cpus = (_kernel_jiffies() - kernel_before) / os.sysconf("SC_CLK_TCK")
            kernel_share = kernel_cpus / max(1e-9, time.monotonic() - wall_before)
            data = json.loads(outs[0].strip().splitlines()[-1])
            results["runs"].append(
                {"type": type_name, "hosts": len(hosts), "kernel_cpus": kernel_share, "samples": data}
            )
            print(f"== {type_name} ×{len(hosts)}: kernel (system, irq, softirq) {kernel_share:.2f} CPUs")
            for v in data.values():
                follow = v["follow_median_s"]
                first = 1e3 * v["first_median_s"]
                cpus = ", ".join(f"{1e3 * c:.2f}" for c in v["cpu_per_allreduce_s"])
                print(
                    f"   {v['bytes']:>9d} B after gap {v['gap']:>5s}: first {first:.2f} ms"
                    + (f", back to back {1e3 * follow:.2f} ms" if follow is not None else "")
                    + f"; CPU per allreduce {cpus} ms (each rank)"
                )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    trace = sub.add_parser("trace", help="per-rank DDP timelines")
    trace.add_argument("--model", required=True, help="a shipped test model, or FACTORY,INPUT_FACTORY")
    trace.add_argument("--fleet", action="append", required=True, help="e.g. 2xtbv.small@32 (repeatable)")
    trace.add_argument("--iters", type=int, default=8)
    trace.add_argument("--warmup", type=int, default=2)
    trace.add_argument("--loss", default="srift.profiling.profiler:default_loss")
    trace.add_argument("--timing-repeats", type=int, default=5)
    trace.add_argument("--bucket-cap-mb", type=float, default=None, help="pass DDP this cap (default: none)")
    trace.add_argument("--no-timing", action="store_true")
    trace.add_argument("--db", type=Path, default=None, help="a validation work folder's validate.db")
    trace.add_argument(
        "--colocation-rounds",
        type=int,
        default=0,
        help="end each multi-host run with this many co-location rounds (srift.validation.colocation): "
        "prints each group's factor and straggler cv on the wall clock and on the CPU clock",
    )
    duty = sub.add_parser("duty", help="compute with idle gaps between steps vs back to back")
    duty.add_argument("--model", required=True)
    duty.add_argument("--batch", type=int, default=32)
    duty.add_argument("--types", default="tbv.small,tbv.large")
    duty.add_argument("--gaps-ms", default="0,10,30,100")
    duty.add_argument("--steps", type=int, default=15)
    ready = sub.add_parser(
        "readiness", help="layer readiness by wall and by CPU clock, with and without a gap"
    )
    ready.add_argument("--model", required=True)
    ready.add_argument("--batch", type=int, default=21)
    ready.add_argument("--types", default="tbv.small,tbv.large")
    ready.add_argument("--gaps-ms", default="0,30")
    ready.add_argument("--steps", type=int, default=4)
    ready.add_argument("--rounds", type=int, default=8)
    ov = sub.add_parser("overlap", help="probes/overlap.py on each type")
    ov.add_argument("--model", default=None)
    ov.add_argument("--batch", type=int, default=32)
    ov.add_argument("--types", default="tbv.small,tbv.large")
    ov.add_argument("--bytes", default="16M")
    ov.add_argument("--hosts", type=int, default=2)
    ov.add_argument("--rounds", type=int, default=3)
    ov.add_argument("--steps", type=int, default=6)
    one = sub.add_parser("onehost", help="a step timed as the profiler does and as a training loop runs it")
    one.add_argument("--model", action="append", required=True, help="repeatable")
    one.add_argument("--batch", type=int, default=32)
    one.add_argument("--types", default="tbv.small,tbv.large")
    one.add_argument("--steps", type=int, default=8)
    one.add_argument("--rounds", type=int, default=3)
    one.add_argument("--variants", default="profile,loop,loop_keep,ddp1")
    one.add_argument("--one-at-a-time", action="store_true", help="each type alone, one after another")
    gap = sub.add_parser("gap", help="benchmarks/gap_probe.py: allreduce back to back vs after a gap")
    gap.add_argument("--model", default=None, help="also a gap of one forward+backward of this model")
    gap.add_argument("--batch", type=int, default=32)
    gap.add_argument("--types", default="tbv.small,tbv.large")
    gap.add_argument("--sizes", default="65536,262144,624296,1048576,2621440")
    gap.add_argument("--gaps-ms", default="0,40")
    gap.add_argument("--hosts", type=int, default=2)
    gap.add_argument("--reps", type=int, default=8)
    gap.add_argument(
        "--fleet",
        action="append",
        help="a ring of these hosts instead (repeatable), e.g. 2xtbv.small@0+2xtbv.large@0",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    commands = {
        "trace": cmd_trace,
        "duty": cmd_duty,
        "readiness": cmd_readiness,
        "overlap": cmd_overlap,
        "onehost": cmd_onehost,
        "gap": cmd_gap,
    }
    results = commands[args.command](args)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
