"""Running probe and profile jobs on this machine (`local`) and on testbed hosts (`testbed`).

Probes: one run of probes/allreduce.py per node count, one process per rank, rendezvous by env:// on the
first host (what torchrun sets up, without its agent). Profiles: `srift profile` once per instance type,
inside a host of that type. Outputs are parsed and returned; the worker stores them in one transaction.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from operator import add
from pathlib import Path
from typing import IO, Any

from srift.bandwidth.local_probe import free_port
from srift.bandwidth.records import ProbeRecord, parse_jsonl
from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.domain.structure import Precision
from srift.errors import EnvironmentProblem, InvalidInput
from srift.jobs.run import MARKER_ENV, JobRun, supervise, tail
from srift.jobs.service import TypeFacts
from srift.jobs.spec import ProbeJobSpec, ProfileJobSpec

Launch = Callable[[int, list[str], dict[str, str], IO[Any]], "subprocess.Popen[Any]"]


def probe_script() -> Path:
    from srift.bandwidth.local_probe import probe_script_path

    return probe_script_path()


def probe_args(
    spec: ProbeJobSpec, *, nodes: int, run_id: str, out: Path, facts: TypeFacts, provider: str, ifname: str
) -> list[str]:
    """Command-line arguments of probes/allreduce.py for one run of the job."""
    return [
        "--sizes", ",".join(str(s) for s in spec.sizes),
        "--repeats", str(spec.repeats),
        "--warmup", str(spec.warmup),
        "--async-count", str(spec.async_count),
        "--backend", spec.backend,
        "--time-budget-s", f"{spec.time_budget_s:g}",
        "--nodes", str(nodes),
        "--ranks-per-node", str(spec.ranks_per_node),
        "--ifname", ifname,
        "--provider", provider,
        "--region", facts.region,
        "--instance-type", spec.instance_type,
        "--rated-gbps", f"{facts.rated_gbps:g}",
        "--run-id", run_id,
        "--out", str(out),
        *(["--collective", spec.collective] if spec.collective != "allreduce" else []),
    ]  # fmt: skip


def run_probe_grid(
    run: JobRun,
    spec: ProbeJobSpec,
    *,
    facts: TypeFacts,
    provider: str,
    ifname: str,
    master_addr: Callable[[int], str],
    launch: Launch,
    port: Callable[[int], int],
) -> list[ProbeRecord]:
    """Run the probe for every node count; `launch(node, argv, env, log)` starts one rank's process."""
    records: list[ProbeRecord] = []
    script = str(probe_script())
    per_node = spec.ranks_per_node
    for k, nodes in enumerate(spec.node_counts):
        run.check()
        world = nodes * per_node
        out = run.workdir / f"samples-n{nodes}.jsonl"
        out.unlink(missing_ok=True)
        run_id = f"{run.marker}-n{nodes}"
        args = probe_args(
            spec, nodes=nodes, run_id=run_id, out=out, facts=facts, provider=provider, ifname=ifname
        )
        base = {
            "MASTER_ADDR": master_addr(nodes),
            "MASTER_PORT": str(port(k)),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(per_node),
            "GLOO_SOCKET_IFNAME": ifname,
            "OMP_NUM_THREADS": "1",
            MARKER_ENV: run.marker,
        }
        run.log(f"probe: {nodes} nodes × {per_node} ranks, {len(spec.sizes)} sizes, {spec.repeats} repeats")
        procs: list[subprocess.Popen[Any]] = []
        logs: list[Path] = []
        handles: list[IO[Any]] = []
        try:
            for rank in range(world):
                node = rank // per_node
                env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank % per_node), "GROUP_RANK": str(node)}
                logs.append(run.workdir / f"n{nodes}-rank{rank}.log")
                handles.append(open(logs[-1], "w"))  # noqa: SIM115
                procs.append(launch(node, [sys.executable, script, *args], env, handles[-1]))
            supervise(procs, run=run, timeout_s=spec.time_budget_s + 120, what=f"the {nodes}-node probe")
        except EnvironmentProblem as exc:
            for path in logs:
                text = tail(path, 600)
                if text:
                    run.log(f"{path.name}: {text}")
            raise EnvironmentProblem(f"{exc.detail}; {tail(logs[0], 400)}", hint=exc.hint) from exc
        finally:
            for h in handles:
                h.close()
        if not out.exists() or not out.read_text().strip():
            raise EnvironmentProblem(
                f"the {nodes}-node probe wrote no samples ({tail(logs[0], 400)})",
                hint="raise time_budget_s, or use smaller sizes",
            )
        got = parse_jsonl(out.read_text(), source=str(out))
        run.log(f"probe: {nodes} nodes gave {len(got)} samples")
        records.extend(got)
    return records


def _spawn(argv: list[str], env: dict[str, str], log: IO[Any]) -> subprocess.Popen[Any]:
    """A process of a `local` job on this machine: this environment plus `env`, no input, its output to
    `log`, in a session of its own (so the job's processes can be stopped together)."""
    return subprocess.Popen(
        argv,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run_local_probe(run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> list[ProbeRecord]:
    """`local`: every rank a process on this machine, talking over loopback."""
    ports = [free_port() for _ in spec.node_counts]

    def launch(node: int, argv: list[str], env: dict[str, str], log: IO[Any]) -> subprocess.Popen[Any]:
        return _spawn(argv, env, log)

    return run_probe_grid(
        run,
        spec,
        facts=facts,
        provider="local",
        ifname="lo",
        master_addr=lambda _n: "127.0.0.1",
        launch=launch,
        port=lambda k: ports[k],
    )


# ----- testbed -------------------------------------------------------------------------------------


def testbed_type_document(facts: TypeFacts) -> dict[str, Any]:
    """A testbed spec type with the catalog type's quota, link shape and price."""
    extra = facts.extra
    doc: dict[str, Any] = {
        "name": facts.instance_type,
        "cpu_cores": float(extra.get("cpu_cores") or max(facts.cpu_cores, 1)),
        "rate_mbit": float(extra.get("rate_mbit") or facts.rated_gbps * 1000),
        "delay_ms": float(extra.get("delay_ms") or 0.0),
        "jitter_ms": float(extra.get("jitter_ms") or 0.0),
        "loss_pct": float(extra.get("loss_pct") or 0.0),
        "price_usd_per_hr": float(facts.price_usd_per_hr or 0.0),
    }
    if extra.get("memory_mib"):
        doc["memory_mib"] = int(extra["memory_mib"])
    return doc


@contextmanager
def testbed_hosts(
    run: JobRun, *, prefix: str | None, wanted: Sequence[tuple[TypeFacts, int]]
) -> Iterator[tuple[Any, dict[str, list[str]]]]:
    """Hosts of the wanted types: from the running testbed `prefix`, or a testbed of the job's own
    (prefix j<job id>) that is removed afterwards. Yields the Testbed and type → host names."""
    from srift.testbed import Testbed, down, parse_spec

    root = run.settings.data_dir / "testbed"
    if prefix is not None:
        testbed = Testbed.attach(prefix, root=root)
        chosen: dict[str, list[str]] = {}
        for facts, count in wanted:
            hosts = [h.name for h in testbed.hosts_of_type(facts.instance_type)]
            if len(hosts) < count:
                raise InvalidInput(
                    f"testbed {prefix!r} has {len(hosts)} hosts of type {facts.instance_type}, "
                    f"the job needs {count}",
                    hint="bring up more hosts of that type, or drop testbed_prefix (the job gets its own)",
                    field="testbed_prefix",
                )
            chosen[facts.instance_type] = hosts[:count]
        yield testbed, chosen
        return
    own = f"j{run.job_id % 10**9}"
    mtus = [int(f.extra.get("mtu") or 9001) for f, _ in wanted]
    document = {
        "prefix": own,
        "subnet": f"10.213.{100 + run.job_id % 100}.0/24",
        "mtu": max(mtus) if mtus else 9001,
        "description": f"srift job {run.job_id}",
        "types": [testbed_type_document(f) for f, _ in wanted],
        "hosts": [{"type": f.instance_type, "count": n} for f, n in wanted],
    }
    run.log(f"testbed: bringing up {own} ({', '.join(f'{n}× {f.instance_type}' for f, n in wanted)})")
    testbed = Testbed.up(parse_spec(document), root=root)
    try:
        chosen = {
            f.instance_type: [h.name for h in testbed.hosts_of_type(f.instance_type)] for f, _ in wanted
        }
        yield testbed, chosen
    finally:
        down(own, root=root)
        run.log(f"testbed: {own} removed")


def run_testbed_probe(run: JobRun, spec: ProbeJobSpec, facts: TypeFacts) -> list[ProbeRecord]:
    """`testbed`: one rank process per host (ranks_per_node of them), across hosts of the type."""
    with testbed_hosts(run, prefix=spec.testbed_prefix, wanted=[(facts, spec.max_nodes)]) as (
        testbed,
        chosen,
    ):
        base_port = 20000 + (run.job_id * 16) % 20000
        names = chosen[facts.instance_type]
        return _grid_on(run, spec, facts, testbed, names, port=lambda k: base_port + k)


def run_testbed_mixed_probe(
    run: JobRun, spec: ProbeJobSpec, members: Sequence[TypeFacts]
) -> list[ProbeRecord]:
    """`testbed`: a ring of several types, an equal number of hosts of each per node count, in the order of
    `members` (the ring a fleet of them runs). Records carry the ring's name (`srift.bandwidth.mixed`)."""
    from srift.bandwidth.mixed import ring_name

    name = ring_name(f.instance_type for f in members)
    if spec.instance_type != name:
        raise InvalidInput(
            f"a ring of {[f.instance_type for f in members]} probes as {name!r}, not {spec.instance_type!r}",
            hint=f"set instance_type to {name!r}",
            field="instance_type",
        )
    uneven = [n for n in spec.node_counts if n % len(members)]
    if uneven:
        raise InvalidInput(
            f"node counts {uneven} do not split evenly over {len(members)} types",
            hint=f"use multiples of {len(members)}",
            field="node_counts",
        )
    per_type = spec.max_nodes // len(members)
    facts = TypeFacts(
        provider=members[0].provider,
        instance_type=name,
        region=members[0].region,
        rated_gbps=min(f.rated_gbps for f in members),
    )
    records: list[ProbeRecord] = []
    with testbed_hosts(run, prefix=spec.testbed_prefix, wanted=[(f, per_type) for f in members]) as (
        testbed,
        chosen,
    ):
        base_port = 20000 + (run.job_id * 16) % 20000
        for k, nodes in enumerate(spec.node_counts):
            names = [h for f in members for h in chosen[f.instance_type][: nodes // len(members)]]
            one = replace(spec, node_counts=(nodes,))
            records += _grid_on(run, one, facts, testbed, names, port=functools.partial(add, base_port + k))
    return records


def _grid_on(
    run: JobRun,
    spec: ProbeJobSpec,
    facts: TypeFacts,
    testbed: Any,
    names: list[str],
    *,
    port: Callable[[int], int],
) -> list[ProbeRecord]:
    """`run_probe_grid` with node i on testbed host names[i]."""

    def launch(node: int, argv: list[str], env: dict[str, str], log: IO[Any]) -> subprocess.Popen[Any]:
        proc: subprocess.Popen[Any] = testbed.popen_in(
            names[node], argv, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        return proc

    address = testbed.host(names[0]).address
    return run_probe_grid(
        run,
        spec,
        facts=facts,
        provider="testbed",
        ifname="eth0",
        master_addr=lambda _n: address,
        launch=launch,
        port=port,
    )


# ----- profiles ------------------------------------------------------------------------------------


def srift_command() -> list[str]:
    script = Path(sys.executable).with_name("srift")
    if script.exists():
        return [str(script)]
    found = shutil.which("srift")
    return [found] if found else [sys.executable, "-c", "from srift.cli import main; main()"]


PRECISION_FLAGS = {
    Precision.FP32: [],
    Precision.TF32: ["--tf32"],
    Precision.FP16: ["--amp", "fp16"],
    Precision.BF16: ["--amp", "bf16"],
}
"""`srift profile`'s options for each precision."""


def profile_device(facts: TypeFacts | None) -> str:
    """Where a type's profile runs: "cuda" on a type with GPUs (as the catalog says), else "cpu"."""
    return "cuda" if facts is not None and facts.gpu_name else "cpu"


def profile_argv(
    spec: ProfileJobSpec,
    *,
    out: Path,
    accelerator: str | None,
    threads: int | None,
    device: str = "cpu",
) -> list[str]:
    """The `srift profile` command line of a profile job: on `device` (cuda for a GPU type), in the job's
    precision, labelled `accelerator`."""
    argv = [*srift_command(), "profile", spec.model, "--input", spec.input, "--out", str(out)]
    argv += ["--device", device, *PRECISION_FLAGS[spec.precision]]
    argv += ["--repeats", str(spec.repeats), "--iterations", str(spec.iterations)]
    if accelerator:
        argv += ["--accelerator", accelerator]
    if threads:
        argv += ["--threads", str(threads)]
    if spec.loss:
        argv += ["--loss", spec.loss]
    if spec.model_name:
        argv += ["--model-name", spec.model_name]
    if spec.max_batch:
        argv += ["--max-batch", str(spec.max_batch)]
    return [*argv, *spec.extra_args]


def _read_profile(out: Path, log: Path, what: str) -> ModelProfile:
    if not out.exists():
        raise EnvironmentProblem(f"{what} wrote no profile: {tail(log, 600)}", hint="see the job log")
    return read_profile(json.loads(out.read_text()))


def run_profiles(
    run: JobRun,
    spec: ProfileJobSpec,
    *,
    launch: Callable[[str, list[str], IO[Any]], subprocess.Popen[Any]],
    threads: Callable[[str], int | None],
    accelerator: Callable[[str], str | None],
) -> list[ModelProfile]:
    """Profile on each type in turn (one at a time, so hosts do not compete for this machine's cores)."""
    profiles = []
    for type_name in spec.instance_types:
        run.check()
        safe = "".join(c if c.isalnum() else "-" for c in type_name)
        out = run.workdir / f"profile-{safe}.json"
        log = run.workdir / f"profile-{safe}.log"
        out.unlink(missing_ok=True)
        argv = profile_argv(spec, out=out, accelerator=accelerator(type_name), threads=threads(type_name))
        run.log(f"profile: {spec.model} on {type_name}")
        with open(log, "w") as handle:
            proc = launch(type_name, argv, handle)
            try:
                supervise([proc], run=run, timeout_s=spec.time_budget_s, what=f"profiling on {type_name}")
            except EnvironmentProblem as exc:
                raise EnvironmentProblem(f"{exc.detail}: {tail(log, 800)}", hint=exc.hint) from exc
        profile = _read_profile(out, log, f"profiling on {type_name}")
        run.log(f"profile: {type_name} done, max batch {profile.max_batch}")
        profiles.append(profile)
    return profiles


def run_local_profiles(run: JobRun, spec: ProfileJobSpec) -> list[ModelProfile]:
    def launch(_type: str, argv: list[str], log: IO[Any]) -> subprocess.Popen[Any]:
        return _spawn(argv, {MARKER_ENV: run.marker}, log)

    return run_profiles(
        run,
        spec,
        launch=launch,
        threads=lambda _t: None,
        accelerator=lambda t: None if t == "local" else t,
    )


def run_testbed_profiles(run: JobRun, spec: ProfileJobSpec, facts: Sequence[TypeFacts]) -> list[ModelProfile]:
    wanted = [(f, 1) for f in facts]
    with testbed_hosts(run, prefix=spec.testbed_prefix, wanted=wanted) as (testbed, chosen):

        def launch(type_name: str, argv: list[str], log: IO[Any]) -> subprocess.Popen[Any]:
            proc: subprocess.Popen[Any] = testbed.popen_in(
                chosen[type_name][0], argv, env={MARKER_ENV: run.marker}, stdout=log, stderr=subprocess.STDOUT
            )
            return proc

        def threads(type_name: str) -> int:
            cores: float = testbed.host(chosen[type_name][0]).cpu_cores
            return max(1, math.ceil(cores - 1e-9))

        return run_profiles(run, spec, launch=launch, threads=threads, accelerator=lambda t: t)
