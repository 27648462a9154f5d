"""From plan to running job and back, on the testbed: predictions that learn from the runs they planned.

    sudo .venv/bin/python -m benchmarks.launch_calibration [--runs 3] [--iterations 80] [--write]

1. Brings up a testbed of mixed types (2 × tb.small + 1 × tb.large, and a host for the server), profiles the
   model on each type with a testbed profile job (`srift worker --once`), and plans a mixed fleet.
2. Emits the plan as torchrun commands (`srift plan --plan-id N --emit torchrun`) with
   srift/launch/example.py as the training script (the helper: per-rank batches, sampler, weighted loss,
   background reporter), and serves Srift inside the testbed (the hosts reach nothing outside it).
3. For each run: predicts the fleet (POST /v1/predictions's service, so it is calibrated on the runs so far),
   starts a tracked run (`srift run start`, its token to node 0), runs every VM's emitted command in its
   host, and reads the observation the run filed when it completed (measured mean iteration after warm-up).

Prints, per run, the prediction before it, the measured iteration, the error and whether the prediction's
p10–p90 band covered it; checks the acceptance (error no larger after each run, or within the runs' repeat
noise; the third at most half the first; the band covers the next run) and exits 1 when it fails.
`--write` puts the table in docs/BENCHMARKS.md. Needs root (network namespaces, cgroups).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SECTION = "Launch and calibration on the testbed"
SRIFT = str(Path(sys.executable).parent / "srift")

SPEC = """\
description: launch_calibration, 2 small + 1 large hosts and one for the server
prefix: {prefix}
subnet: 10.214.0.0/24
mtu: 9001
types:
  - {{name: tb.small, cpu_cores: 0.5, rate_mbit: 100, delay_ms: 2, price_usd_per_hr: 0.10}}
  - {{name: tb.large, cpu_cores: 1.0, rate_mbit: 400, delay_ms: 1, price_usd_per_hr: 0.25}}
  - {{name: tb.ctl, cpu_cores: 0.5, rate_mbit: 1000, delay_ms: 0, price_usd_per_hr: 0.01}}
hosts:
  - {{type: tb.small, count: 2}}
  - {{type: tb.large, count: 1}}
  - {{name: ctl, type: tb.ctl}}
"""


def _srift(env: dict[str, str], *args: str, timeout_s: float = 900) -> str:
    done = subprocess.run([SRIFT, *args], env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise SystemExit(f"srift {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _predict(plan: dict[str, Any]) -> dict[str, Any]:
    """The fleet's prediction as POST /v1/predictions answers it now (calibrated on the runs so far)."""
    from srift.api.schemas.predictions import parse_prediction_request
    from srift.db.session import transaction
    from srift.services.predictions import answer
    from srift.settings import get_settings

    body = {
        "profile_ids": plan["request"]["profile_ids"],
        "provider": "testbed",
        "region": "local",
        "iterations": plan["iterations"],
        "network": plan["request"]["network"],
        "config": {
            "choices": [
                {k: c[k] for k in ("instance_type", "market", "count", "batch")} for c in plan["choices"]
            ]
        },
    }
    settings = get_settings()
    with transaction(settings.resolved_database_url) as session:
        doc: dict[str, Any] = answer(
            session=session, settings=settings, query=parse_prediction_request(body).to_domain()
        )
    return doc


def _observation(job_id: int) -> dict[str, Any] | None:
    from sqlalchemy import select

    from srift.db.session import transaction
    from srift.db.tables import CalibrationObservation
    from srift.services.calibration import observation_document
    from srift.settings import get_settings

    with transaction(get_settings().resolved_database_url) as session:
        row = session.scalars(
            select(CalibrationObservation).where(CalibrationObservation.job_id == job_id)
        ).first()
        return None if row is None else observation_document(row)


def _wait_for_server(tb: Any, host: str, url: str, timeout_s: float) -> None:
    probe = (
        f"import httpx,sys; sys.exit(0 if httpx.get('{url}/v1/health', timeout=2).status_code == 200 else 1)"
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if tb.exec_in(host, [sys.executable, "-c", probe], check=False, timeout_s=10).returncode == 0:
            return
        time.sleep(1.0)
    raise SystemExit(f"the server at {url} did not answer within {timeout_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=80)
    parser.add_argument("--global-batch", type=int, default=384, help="384 makes a mixed fleet of the cnn")
    parser.add_argument("--model", default="srift.profiling.testmodels:cnn")
    parser.add_argument("--input", default="srift.profiling.testmodels:cnn_input")
    parser.add_argument("--prefix", default="lc46")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--keep", action="store_true", help="leave the testbed up")
    parser.add_argument("--write", action="store_true", help="write the section of docs/BENCHMARKS.md")
    args = parser.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="srift-launch-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["SRIFT_DATA_DIR"] = str(work / "data")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    spec_file = work / "testbed.yaml"
    spec_file.write_text(SPEC.format(prefix=args.prefix))
    print(f"work folder {work}", flush=True)

    from srift.testbed import Testbed

    _srift(env, "testbed", "up", "--spec", str(spec_file))
    tb = Testbed.attach(args.prefix)
    server: subprocess.Popen[Any] | None = None
    try:
        job = json.loads(
            _srift(
                env,
                "jobs",
                "submit",
                "profile",
                "--provider",
                "testbed",
                "--instance-types",
                "tb.small,tb.large",
                "--model",
                args.model,
                "--input",
                args.input,
                "--testbed-prefix",
                args.prefix,
                "--json",
            )
        )
        print(f"profiling on tb.small and tb.large (job {job['id']})", flush=True)
        _srift(env, "worker", "--once", "--provider", "testbed", timeout_s=3600)
        shown = json.loads(_srift(env, "jobs", "show", str(job["id"]), "--json"))
        if shown["state"] != "succeeded":
            raise SystemExit(f"the profile job {shown['state']}: {shown.get('error')}")
        profile_ids = [int(p) for p in shown["result"]["profile_ids"]]
        request = {
            "profile_ids": profile_ids,
            "global_batch": args.global_batch,
            "iterations": args.iterations,
            "objective": "min_time",
            "provider": "testbed",
            "region": "local",
            "availability": {"tb.small": 2, "tb.large": 1},
            "network": {"library": "gloo"},
            "price_interruptions": False,
            "solve_budget_s": 5,
        }
        (work / "request.json").write_text(json.dumps(request))
        plan = json.loads(_srift(env, "plan", str(work / "request.json"), "--json"))
        print(f"plan {plan['id']}: {plan['label']}", flush=True)
        if len({c["instance_type"] for c in plan["choices"]}) < 2:
            print("warning: the plan is not a mixed fleet; a larger --global-batch makes one", flush=True)
        hosts_by_type: dict[str, list[str]] = {}
        for h in tb.hosts:
            hosts_by_type.setdefault(h.type_name, []).append(h.name)
        from srift.launch.layout import layout_of
        from srift.launch.torchrun import node_commands

        layout = layout_of(plan)
        taken: dict[str, int] = {}
        node_hosts = []
        for part in layout.parts:
            for _ in range(part.count):
                k = taken.get(part.instance_type, 0)
                node_hosts.append(hosts_by_type[part.instance_type][k])
                taken[part.instance_type] = k + 1
        master = tb.host(node_hosts[0]).address
        launch_dir = work / "launch"
        _srift(
            env,
            "plan",
            "--plan-id",
            str(plan["id"]),
            "--emit",
            "torchrun",
            "--out",
            str(launch_dir),
            "--script",
            str(REPO / "srift" / "launch" / "example.py"),
            "--master-addr",
            master,
        )
        plan_file = launch_dir / f"plan-{plan['id']}.json"
        script_args = ("--model", args.model, "--input", args.input)
        commands = node_commands(
            layout,
            script=str(REPO / "srift" / "launch" / "example.py"),
            script_args=script_args,
            plan_ref=str(plan_file),
            master_addr=master,
        )
        ctl = tb.host("ctl")
        url = f"http://{ctl.address}:8046"
        log = (work / "server.log").open("w")
        server = tb.popen_in(
            "ctl",
            [SRIFT, "serve", "--host", ctl.address, "--port", "8046", "--workers", "1"],
            env={"SRIFT_DATA_DIR": os.environ["SRIFT_DATA_DIR"], "PYTHONPATH": str(REPO)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _wait_for_server(tb, node_hosts[0], url, 180)
        rows = []
        for k in range(args.runs):
            predicted = _predict(plan)
            p = predicted["predicted"]
            started = json.loads(_srift(env, "run", "start", str(plan["id"]), "--json"))
            procs = []
            for cmd in commands:
                extra = {
                    "SRIFT_URL": url,
                    "SRIFT_RUN_ID": str(started["id"]),
                    "SRIFT_RUN_TOKEN": started["token"],
                }
                node_env = {s.name: s.value for s in cmd.env} | (extra if cmd.node_rank == 0 else {})
                node_env |= {"PYTHONPATH": str(REPO), "MASTER_PORT": str(29_600 + k)}
                argv = [sys.executable, "-m", "torch.distributed.run", *cmd.argv[1:]]
                argv = [a.replace("--master-port=29500", f"--master-port={29_600 + k}") for a in argv]
                out = (work / f"run{k}-node{cmd.node_rank}.log").open("w")
                procs.append(
                    tb.popen_in(
                        node_hosts[cmd.node_rank], argv, env=node_env, stdout=out, stderr=subprocess.STDOUT
                    )
                )
            codes = [proc.wait(timeout=3600) for proc in procs]
            if any(codes):
                raise SystemExit(f"run {k + 1}: node exit codes {codes}; logs in {work}")
            observation = _observation(int(started["id"]))
            if observation is None:
                raise SystemExit(f"run {k + 1} filed no observation; see {work}/run{k}-node0.log")
            measured = float(observation["measured_s"])
            low = p["total_time_p10_s"] / plan["iterations"]
            high = p["total_time_p90_s"] / plan["iterations"]
            calibrated = next(
                (s for s in predicted["sources"] if s.startswith("calibration: ")), "uncalibrated"
            )
            rows.append(
                {
                    "run": k + 1,
                    "predicted_s": p["iteration_s"],
                    "low_s": low,
                    "high_s": high,
                    "measured_s": measured,
                    "error": abs(p["iteration_s"] - measured) / measured,
                    "covered": low <= measured <= high,
                    "calibration": calibrated,
                }
            )
            r = rows[-1]
            print(
                f"run {k + 1}: predicted {r['predicted_s'] * 1e3:.1f} ms ({low * 1e3:.1f}–{high * 1e3:.1f}), "
                f"measured {measured * 1e3:.1f} ms, error {100 * r['error']:.1f} %, "
                f"{'inside' if r['covered'] else 'outside'} the band; {calibrated}",
                flush=True,
            )
        after = _predict(plan)["predicted"]
        final_error = abs(after["iteration_s"] - rows[-1]["measured_s"]) / rows[-1]["measured_s"]
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
        if not args.keep:
            _srift(env, "testbed", "down", "--prefix", args.prefix)
    measured_all = [r["measured_s"] for r in rows]
    noise = (max(measured_all) - min(measured_all)) / min(measured_all)
    errors = [r["error"] for r in rows] + [final_error]
    monotone = all(b <= max(a, noise) for a, b in itertools.pairwise(errors))
    halved = errors[min(3, len(errors) - 1)] <= max(errors[0] / 2, noise)
    covered = all(r["covered"] for r in rows[1:])
    print(
        f"errors {', '.join(f'{100 * e:.1f} %' for e in errors)} (the last: after run {len(rows)}); repeat "
        f"noise {100 * noise:.1f} %; no larger after each run: {monotone}; third at most half the first: "
        f"{halved}; calibrated bands covered the next run: {covered}"
    )
    if args.write:
        from benchmarks._report import write_section

        lines = [
            f"Plan {plan['label']} (model {args.model}, global batch {args.global_batch}, {args.iterations} "
            "iterations), run through the emitted torchrun commands and srift.launch.example on the testbed.",
            "",
            "| run | predicted (p10–p90) | measured | error | in band | calibration |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            band = f"{r['low_s'] * 1e3:.1f}–{r['high_s'] * 1e3:.1f}"
            inside = "yes" if r["covered"] else "no"
            lines.append(
                f"| {r['run']} | {r['predicted_s'] * 1e3:.1f} ms ({band}) | {r['measured_s'] * 1e3:.1f} ms "
                f"| {100 * r['error']:.1f} % | {inside} | {r['calibration']} |"
            )
        lines += [
            "",
            f"After run {len(rows)}: error {100 * final_error:.1f} %; repeat noise {100 * noise:.1f} %.",
        ]
        write_section(SECTION, "\n".join(lines))
    return 0 if monotone and halved and covered else 1


if __name__ == "__main__":
    raise SystemExit(main())
