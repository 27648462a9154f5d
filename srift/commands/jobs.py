"""CLI for probe/profile jobs: `srift worker`, `srift jobs list|show|submit`."""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.local import catalog_database, migrated_url
from srift.commands.options import JsonFlag, ServerUrl, UrlToken, add_group, in_cli_words
from srift.commands.remote import call_api, load_request_file, put_given
from srift.errors import InvalidInput, parse_choice

console = Console()

KIND_OPTION = typer.Option([], "--kind", help="only these kinds (probe, profile); repeatable")
PROVIDER_OPTION = typer.Option([], "--provider", help="only these providers; repeatable")
"""`srift worker`'s repeatable filters (an empty list: every kind, every provider)."""


def _split_sizes(text: str, field: str) -> list[int]:
    """`--sizes 4,64K,16M` as bytes."""
    from srift.bandwidth.local_probe import parse_size

    return [parse_size(p, field=field) for p in text.split(",") if p.strip()]


def _split_counts(text: str, field: str) -> list[int]:
    """`--nodes 2,4` as whole counts (no size suffixes: 2K is not 2048 nodes)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise InvalidInput(
            f"{text!r} is not a list of node counts", hint="write whole numbers ≥ 1, e.g. 2,4", field=field
        )
    return [int(p) for p in parts]


def _load_file(path: Path) -> dict[str, Any]:
    """The job request in --file: read as `srift plan FILE` reads its file (one-line errors naming --file)."""
    data = load_request_file(path, field="--file")
    if not isinstance(data, dict):
        raise InvalidInput(
            f"{path} does not hold a mapping", hint="write the request as a mapping", field="--file"
        )
    return data


def _submit(kind: str, body: dict[str, Any], *, url: str | None, token: str | None) -> dict[str, Any]:
    if url:
        path = "/probe-jobs" if kind == "probe" else "/profile-jobs"
        answer: dict[str, Any] = call_api("POST", url, "/v1" + path, token=token, body=body)
        return answer
    from srift.db.session import transaction
    from srift.jobs.spec import parse_probe_job, parse_profile_job
    from srift.services import jobs as service
    from srift.settings import get_settings

    spec = parse_probe_job(body) if kind == "probe" else parse_profile_job(body)
    # The job's instance types are checked against the catalog: the shipped one is loaded if missing, as
    # `srift probe run --quick` (and `srift serve`) load it, so a first submit does not find none.
    with transaction(catalog_database(get_settings())) as session:
        return service.submit_job(session=session, spec=spec)


def _print_job(job: dict[str, Any], *, with_log: bool, as_json: bool) -> None:
    """The job as JSON (--json), or as a table with its log below when `with_log`."""
    if as_json:
        typer.echo(json.dumps(job, indent=2, default=str))
        return
    table = Table(title=f"job {job['id']} · {job['kind']} · {job['provider']}", show_header=False)
    table.add_column("field")
    table.add_column("value")
    for key in ("state", "attempts", "worker_id", "created_at", "started_at", "finished_at", "error"):
        value = job.get(key)
        if value not in (None, ""):
            table.add_row(key, str(value))
    table.add_row("instance type(s)", _instance_types(job))
    if job.get("result"):
        table.add_row("result", json.dumps(job["result"])[:400])
    if job.get("token"):
        table.add_row("token (shown once)", job["token"])
    console.print(table)
    if with_log and job.get("log"):
        console.print(job["log"].rstrip(), highlight=False, markup=False)


CreatedJson = Annotated[bool, typer.Option("--json", help="print the created job as JSON")]
Provider = Annotated[str | None, typer.Option("--provider", help="local, testbed or ec2")]
TestbedPrefix = Annotated[str | None, typer.Option("--testbed-prefix", help="use this running testbed")]
RequestFile = Annotated[
    Path | None, typer.Option("--file", help="full request as YAML/JSON (flags override it)")
]


def worker(
    once: Annotated[bool, typer.Option("--once", help="run at most one job, then exit")] = False,
    poll_s: Annotated[float, typer.Option("--poll-s", min=0.05, help="seconds between queue polls")] = 2.0,
    heartbeat_s: Annotated[
        float, typer.Option("--heartbeat-s", min=0.05, help="seconds between heartbeats")
    ] = 5.0,
    stale_after_s: Annotated[
        float,
        typer.Option(
            "--stale-after-s", min=0.1, help="a running job without heartbeat this long is taken back"
        ),
    ] = 60.0,
    max_attempts: Annotated[
        int, typer.Option("--max-attempts", min=1, help="runs before a job is failed")
    ] = 2,
    kind: list[str] = KIND_OPTION,
    provider: list[str] = PROVIDER_OPTION,
) -> None:
    """Run queued probe and profile jobs from the configured database until stopped.

    Ctrl-C or SIGTERM stop the running job's processes and give the job back to the queue.

    Several workers may run at once (on one or more machines sharing the database): each job runs once.
    On start, and between jobs, jobs of dead workers are cleaned up and requeued (or failed after
    --max-attempts). Testbed jobs need root.

    Example: `sudo srift worker --provider testbed --provider local`
    """
    from srift.domain.states import JobKind
    from srift.jobs.spec import JobProvider
    from srift.jobs.worker import Worker, WorkerConfig
    from srift.settings import get_settings

    kinds = tuple(parse_choice(JobKind, k, what="job kind", field="--kind") for k in kind) or tuple(JobKind)
    providers = tuple(
        parse_choice(JobProvider, p, what="job provider", field="--provider") for p in provider
    ) or tuple(JobProvider)
    settings = get_settings()
    migrated_url()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = WorkerConfig(
        poll_s=poll_s,
        heartbeat_s=heartbeat_s,
        stale_after_s=stale_after_s,
        max_attempts=max_attempts,
        kinds=kinds,
        providers=providers,
    )
    runner = Worker(settings, config)
    console.print(f"worker {runner.worker_id}: {', '.join(kinds)} jobs on {', '.join(providers)}")
    if once:
        outcome = runner.run_once()
        console.print("queue empty" if outcome is None else f"job {outcome.job_id}: {outcome.state}")
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        runner.run_forever(stop=threading.Event())
    except KeyboardInterrupt:
        console.print("stopped; a job in progress went back to the queue")


def list_(
    kind: Annotated[str | None, typer.Option("--kind", help="probe or profile")] = None,
    state: Annotated[str | None, typer.Option("--state", help="queued, running, succeeded or failed")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 50,
    url: ServerUrl = None,
    token: UrlToken = None,
    as_json: JsonFlag = False,
) -> None:
    """List jobs, newest first.

    Example: `srift jobs list --state running`
    """
    from srift.domain.states import JobKind, JobState

    kind_v = parse_choice(JobKind, kind, what="job kind", field="--kind") if kind else None
    state_v = parse_choice(JobState, state, what="job state", field="--state") if state else None
    if url:
        query = (
            f"/probe-jobs?limit={limit}"
            + (f"&kind={kind}" if kind else "")
            + (f"&state={state}" if state else "")
        )
        rows = call_api("GET", url, "/v1" + query, token=token)["jobs"]
    else:
        from srift.db.session import transaction
        from srift.services import jobs as service

        with transaction(migrated_url()) as session:
            found, _ = service.list_jobs(session=session, kind=kind_v, state=state_v, limit=limit)
            rows = [_plain(service.job_document(j)) for j in found]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table(title="jobs")
    for col in ("id", "kind", "provider", "instance type(s)", "state", "attempts", "error"):
        table.add_column(col)
    for j in rows:
        table.add_row(
            str(j["id"]),
            j["kind"],
            j["provider"],
            _instance_types(j),
            j["state"],
            str(j["attempts"]),
            (j["error"] or "")[:60],
        )
    console.print(table)


def show(
    job_id: Annotated[int, typer.Argument(help="job id")],
    url: ServerUrl = None,
    token: UrlToken = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one job with its log.

    Example: `srift jobs show 12`
    """
    if url:
        job = call_api("GET", url, f"/v1/probe-jobs/{job_id}", token=token)
    else:
        from srift.db.session import transaction
        from srift.services import jobs as service

        with transaction(migrated_url()) as session:
            job = _plain(service.job_document(service.get_job(session=session, job_id=job_id)))
    _print_job(job, with_log=True, as_json=as_json)


_SUBMIT_OPTIONS = {
    "provider": "--provider",
    "testbed_prefix": "--testbed-prefix",
    "ec2.image_id": "--image-id",
    "ec2.results_url": "--results-url",
}
"""The request fields both `srift jobs submit` commands take as options."""
EC2_OPTIONS = (
    "give --image-id (an AMI with python3, e.g. ami-0123456789abcdef0) and --results-url (this server as the "
    "instances reach it, e.g. http://10.0.0.5:8000); the other ec2 options (region, market, subnet_id, caps) "
    "go in a request file's `ec2:` mapping, passed with --file (every ec2 option: POST /v1/probe-jobs in "
    "docs/jobs.md)"
)
"""How a CLI user gives a job's EC2 options, in place of the API's "add them"."""
_SUBMIT_HINTS = {
    "add them": EC2_OPTIONS,
    "drop `ec2`, or use provider ec2": "drop --image-id and --results-url (and a file's `ec2:`), or use "
    "--provider ec2",
    "give an id like ami-0123456789abcdef0": "give --image-id an id like ami-0123456789abcdef0",
    "give this server's http(s) URL as VMs see it": "give --results-url this server's http(s) URL as the "
    "instances reach it, e.g. http://10.0.0.5:8000",
}
"""API hints both `srift jobs submit` commands say in their own words."""


def _ec2_field(field: str, what: str) -> Any:
    """The `srift jobs submit` option that sets ec2.<field> (`--image-id` sets ec2.image_id)."""
    return typer.Option("--" + field.replace("_", "-"), help=f"provider ec2: {what} (ec2.{field})")


Ec2ImageId = Annotated[str | None, _ec2_field("image_id", "the AMI to launch, e.g. ami-0123456789abcdef0")]
Ec2ResultsUrl = Annotated[
    str | None, _ec2_field("results_url", "this server's URL as the instances reach it")
]


def _put_ec2(body: dict[str, Any], *, image_id: str | None, results_url: str | None) -> None:
    """Set ec2.image_id and ec2.results_url the command line gave over a request file's `ec2:` mapping,
    whose other options (region, market, caps, ...) stay. Refuses them, naming the first option given,
    for a job whose provider (the command line's or the file's) is local or testbed: the request would
    first be refused for the ec2 options the user did not give (`results_url is missing`)."""
    from srift.jobs.spec import JobProvider

    given = {
        key: value
        for key, value in {"image_id": image_id, "results_url": results_url}.items()
        if value is not None
    }
    provider = body.get("provider")
    if given and provider in {p.value for p in JobProvider if p is not JobProvider.EC2}:
        flags = [f"--{key.replace('_', '-')}" for key in given]
        raise InvalidInput(
            f"only for --provider ec2, and this job's provider is {provider}",
            hint=f"drop {' and '.join(flags)}, or use --provider ec2",
            field=flags[0],
        )
    if given:
        ec2 = body.get("ec2")
        body["ec2"] = {**(ec2 if isinstance(ec2, dict) else {}), **given}


@in_cli_words(
    {
        **_SUBMIT_OPTIONS,
        "instance_type": "--instance-type",
        "node_counts": "--nodes",
        "sizes": "--sizes",
        "repeats": "--repeats",
    },
    hints={**_SUBMIT_HINTS, "give hosts per run, e.g. [2, 4]": "give hosts per run, e.g. --nodes 2,4"},
    file="file",
)
def submit_probe(
    provider: Provider = None,
    instance_type: Annotated[
        str | None, typer.Option("--instance-type", help="a catalog type of the provider")
    ] = None,
    nodes: Annotated[str | None, typer.Option("--nodes", help="node counts, e.g. 2,4")] = None,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="buffer sizes, e.g. 4,64K,16M (default 4 B..64 MiB)")
    ] = None,
    repeats: Annotated[int | None, typer.Option("--repeats", help="timed repetitions per size")] = None,
    testbed_prefix: TestbedPrefix = None,
    image_id: Ec2ImageId = None,
    results_url: Ec2ResultsUrl = None,
    file: RequestFile = None,
    url: ServerUrl = None,
    token: UrlToken = None,
    as_json: CreatedJson = False,
) -> None:
    """Queue an allreduce probe job (see POST /v1/probe-jobs for every field).

    Examples:

      srift jobs submit probe --provider testbed --instance-type tb.small \\
          --nodes 2,4 --sizes 4,1M

      srift jobs submit probe --provider ec2 --instance-type g4dn.xlarge \\
          --nodes 2 --image-id ami-0123456789abcdef0 \\
          --results-url http://10.0.0.5:8000

    EC2's other options (region, market, subnet, caps) go in --file's `ec2:` mapping; flags override it.
    """
    body = _load_file(file) if file else {}
    put_given(
        body, provider=provider, instance_type=instance_type, repeats=repeats, testbed_prefix=testbed_prefix
    )
    _put_ec2(body, image_id=image_id, results_url=results_url)
    if nodes:
        body["node_counts"] = _split_counts(nodes, "--nodes")
    if sizes:
        body["sizes"] = _split_sizes(sizes, "--sizes")
    _submit_and_print("probe", body, url=url, token=token, as_json=as_json)


@in_cli_words(
    {
        **_SUBMIT_OPTIONS,
        "instance_types": "--instance-types",
        "model": "--model",
        "input": "--input",
        "max_batch": "--max-batch",
    },
    hints=_SUBMIT_HINTS,
    file="file",
)
def submit_profile(
    provider: Provider = None,
    instance_types: Annotated[
        str | None, typer.Option("--instance-types", help="comma-separated types")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", metavar="MODULE:FACTORY")] = None,
    input_: Annotated[str | None, typer.Option("--input", metavar="MODULE:FACTORY")] = None,
    max_batch: Annotated[int | None, typer.Option("--max-batch")] = None,
    testbed_prefix: TestbedPrefix = None,
    image_id: Ec2ImageId = None,
    results_url: Ec2ResultsUrl = None,
    file: RequestFile = None,
    url: ServerUrl = None,
    token: UrlToken = None,
    as_json: CreatedJson = False,
) -> None:
    """Queue a profile job: `srift profile` on a host of each instance type.

    Examples:

      srift jobs submit profile --provider testbed \\
          --instance-types tb.small,tb.large \\
          --model srift.profiling.testmodels:cnn \\
          --input srift.profiling.testmodels:cnn_input

      srift jobs submit profile --provider ec2 \\
          --instance-types g4dn.xlarge,g5.xlarge \\
          --model srift.profiling.testmodels:cnn \\
          --input srift.profiling.testmodels:cnn_input \\
          --image-id ami-0123456789abcdef0 --results-url http://10.0.0.5:8000

    EC2's other options (region, market, subnet, caps) go in --file's `ec2:` mapping; flags override it.
    """
    body = _load_file(file) if file else {}
    put_given(
        body, provider=provider, model=model, input=input_, max_batch=max_batch, testbed_prefix=testbed_prefix
    )
    _put_ec2(body, image_id=image_id, results_url=results_url)
    if instance_types:
        body["instance_types"] = [t.strip() for t in instance_types.split(",") if t.strip()]
    _submit_and_print("profile", body, url=url, token=token, as_json=as_json)


def _submit_and_print(
    kind: str, body: dict[str, Any], *, url: str | None, token: str | None, as_json: bool
) -> None:
    """Queue the job and print it (as JSON with --json), its token shown once."""
    _print_job(_submit(kind, body, url=url, token=token), with_log=False, as_json=as_json)


def _plain(document: dict[str, Any]) -> dict[str, Any]:
    """A job document as its JSON reads back (times as text), the same locally as from a server."""
    plain: dict[str, Any] = json.loads(json.dumps(document, default=str))
    return plain


def _instance_types(job: dict[str, Any]) -> str:
    """The instance type a job's request names, or its instance types joined."""
    req = job.get("request", {})
    return str(req.get("instance_type") or ", ".join(req.get("instance_types", [])))


def register(app: typer.Typer) -> None:
    """Add `worker` and the `jobs` group."""
    app.command("worker")(worker)
    jobs = add_group(
        app,
        "jobs",
        help="Probe and profile jobs: submit them, list them, see their logs. `srift worker` runs them.",
        commands={"list": list_, "show": show},
    )
    add_group(
        jobs,
        "submit",
        help="Queue a probe or profile job.",
        commands={"probe": submit_probe, "profile": submit_profile},
    )
