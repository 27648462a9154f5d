"""CLI commands `srift probe run|import`: measure allreduce bandwidth here, or import probe output."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.local import catalog_database
from srift.commands.options import Region, UrlToken, add_group
from srift.settings import get_settings

if TYPE_CHECKING:
    from srift.bandwidth.local_probe import LocalProbe
    from srift.bandwidth.records import ProbeRecord

console = Console()

QUICK_SIZES = (1 << 20, 4 << 20, 16 << 20, 64 << 20)
"""1–64 MiB: the bandwidth-bound sizes the node rate is read from (srift.services.network.RATE_MIN_BYTES)."""
QUICK_REPEATS = 3
QUICK_TIME_BUDGET_S = 300.0
"""Most of a quick probe is start-up (torch import, process group); the 2-node grid itself takes seconds."""
QUICK_EC2_TIMEOUT_S = 900.0
"""EC2 instances of a quick probe are terminated after 15 minutes whatever happens (bounds its cost)."""
DEFAULT_QUICK_MAX_COST_USD = 5.0


@dataclass(frozen=True, slots=True)
class QuickProbe:
    """What `srift probe run --quick` measures (a type of a provider, over a backend) and, on EC2, where and
    under which cost cap."""

    provider: str
    instance_type: str
    backend: str
    max_cost_usd: float
    image_id: str | None
    results_url: str | None
    region: str | None
    market: str
    testbed_prefix: str | None
    provider_defaulted: bool = False
    """The user left --provider at local (which probes this machine, not a cloud type) and `provider` is
    the one the type's name implies: errors then say so instead of asking for the implied one's options."""

    def body(self) -> dict[str, Any]:
        """The probe-job request: 2 nodes, one rank each, 1–64 MiB, 3 repeats."""
        from srift.errors import InvalidInput

        body: dict[str, Any] = {
            "provider": self.provider,
            "instance_type": self.instance_type,
            "node_counts": [2],
            "sizes": list(QUICK_SIZES),
            "repeats": QUICK_REPEATS,
            "warmup": 1,
            "ranks_per_node": 1,
            "backend": self.backend,
            "time_budget_s": QUICK_TIME_BUDGET_S,
        }
        if self.provider == "testbed":
            if self.testbed_prefix:
                body["testbed_prefix"] = self.testbed_prefix
            return body
        if self.provider != "ec2":
            raise InvalidInput(
                f"--quick measures a cloud type, not provider {self.provider!r}",
                hint="use --provider ec2 (an AWS type) or --provider testbed",
                field="--provider",
            )
        example = "--image-id ami-0123456789abcdef0 --results-url http://10.0.0.5:8000"
        if self.provider_defaulted and not (self.image_id and self.results_url):
            raise InvalidInput(
                f"the default provider, local, probes this machine over loopback and cannot run "
                f"{self.instance_type}, a cloud type; measuring it takes two EC2 instances",
                hint=f"pass --provider ec2 {example} (an AMI with Python 3.11, and this server as the "
                "instances reach it), or drop --quick to probe this machine",
                field="--provider",
            )
        if not self.image_id or not self.results_url:
            raise InvalidInput(
                "an EC2 quick probe needs --image-id (an AMI with Python 3.11) and --results-url (this "
                "server as the instances reach it)",
                hint=f"pass both, e.g. {example}",
                field="--image-id" if not self.image_id else "--results-url",
            )
        body["ec2"] = {
            "image_id": self.image_id,
            "results_url": self.results_url,
            "region": self.region or "us-east-1",
            "market": self.market,
            "max_instances": 2,
            "max_cost_usd": self.max_cost_usd,
            "timeout_s": QUICK_EC2_TIMEOUT_S,
        }
        return body


def _quick(quick: QuickProbe, *, url: str | None, token: str | None, as_json: bool) -> None:
    from srift.commands.jobs import _submit
    from srift.errors import InvalidInput

    if quick.instance_type == "local":
        raise InvalidInput(
            "--quick needs the instance type to measure",
            hint="pass --instance-type (e.g. g4dn.12xlarge with --provider ec2)",
            field="--instance-type",
        )
    if quick.provider == "local":
        testbed = quick.instance_type.startswith(("tb.", "bw."))
        quick = replace(quick, provider="testbed" if testbed else "ec2", provider_defaulted=True)
    body = quick.body()
    if not url:
        catalog_database(get_settings())
    job = _submit("probe", body, url=url, token=token)
    if as_json:
        typer.echo(json.dumps(job, indent=2, default=str))
        return
    console.print(
        f"queued quick probe job {job['id']}: 2 × {quick.instance_type} ({quick.provider}), 1–64 MiB, "
        f"{QUICK_REPEATS} repeats, {quick.backend}",
        highlight=False,
    )
    if quick.provider == "ec2":
        console.print(
            f"cost cap ${quick.max_cost_usd:g} "
            f"(instances are terminated after {QUICK_EC2_TIMEOUT_S / 60:g} min)",
            highlight=False,
        )
    console.print(
        f"run it with `srift worker --once --provider {quick.provider}` (or a running worker), check it with "
        f"`srift jobs show {job['id']}`, then predict with network.probe_job_ids: [{job['id']}]",
        highlight=False,
        soft_wrap=True,
    )


Nodes = Annotated[int, typer.Option("--nodes", help="processes (emulated nodes, one rank each), ≥ 2")]
Sizes = Annotated[str | None, typer.Option("--sizes", help="comma-separated sizes, e.g. 4,1K,1M,64M")]
MinBytes = Annotated[str, typer.Option("--min-bytes", help="smallest size of the power-of-two grid")]
MaxBytes = Annotated[str, typer.Option("--max-bytes", help="largest size of the grid")]
ProbeRepeats = Annotated[int, typer.Option("--repeats", min=1, max=1000, help="timed repetitions per size")]
ProbeWarmup = Annotated[int, typer.Option("--warmup", min=0, max=100, help="untimed allreduces per size")]
AsyncCount = Annotated[int, typer.Option("--async-count", min=1, max=64, help="concurrent async allreduces")]
Backend = Annotated[str, typer.Option("--backend", help="gloo (CPU) or nccl (GPUs)")]
TimeBudget = Annotated[float, typer.Option("--time-budget-s", min=1.0, help="stop before this long")]
RecordedProvider = Annotated[str, typer.Option("--provider", help="provider recorded with the samples")]
RecordedType = Annotated[str, typer.Option("--instance-type", help="instance type recorded")]
RatedGbps = Annotated[float, typer.Option("--rated-gbps", min=0.0, help="rated network Gbit/s recorded")]
JsonLinesOut = Annotated[Path | None, typer.Option("--out", help="also write the JSON lines here")]
Store = Annotated[bool, typer.Option("--store", help="store the samples in the database")]
JsonLines = Annotated[bool, typer.Option("--json", help="print the samples as JSON lines")]
Quick = Annotated[
    bool,
    typer.Option(
        "--quick",
        help="measure a cloud or testbed type's node-to-node rate in minutes: queue a 2-node probe job "
        "(1–64 MiB, 3 repeats) under a cost cap; its id goes into network.probe_job_ids",
    ),
]
MaxCostUsd = Annotated[
    float, typer.Option("--max-cost-usd", min=0.0, help="--quick on EC2: refuse above this")
]
ImageId = Annotated[str | None, typer.Option("--image-id", help="--quick on EC2: the AMI to launch")]
ResultsUrl = Annotated[
    str | None,
    typer.Option("--results-url", help="--quick on EC2: this server's URL as the instances reach it"),
]
QuickRegion = Annotated[str | None, typer.Option("--region", help="--quick on EC2: region (us-east-1)")]
Market = Annotated[str, typer.Option("--market", help="--quick on EC2: on_demand or spot")]
QuickTestbedPrefix = Annotated[
    str | None, typer.Option("--testbed-prefix", help="--quick on the testbed: use this running testbed")
]
QueueUrl = Annotated[str | None, typer.Option("--url", help="--quick: queue on a running server")]


def run(
    nodes: Nodes = 2,
    sizes: Sizes = None,
    min_bytes: MinBytes = "4",
    max_bytes: MaxBytes = "64M",
    repeats: ProbeRepeats = 5,
    warmup: ProbeWarmup = 2,
    async_count: AsyncCount = 1,
    backend: Backend = "gloo",
    time_budget_s: TimeBudget = 300.0,
    provider: RecordedProvider = "local",
    instance_type: RecordedType = "local",
    rated_gbps: RatedGbps = 0.0,
    out: JsonLinesOut = None,
    store: Store = False,
    as_json: JsonLines = False,
    quick: Quick = False,
    max_cost_usd: MaxCostUsd = DEFAULT_QUICK_MAX_COST_USD,
    image_id: ImageId = None,
    results_url: ResultsUrl = None,
    region: QuickRegion = None,
    market: Market = "on_demand",
    testbed_prefix: QuickTestbedPrefix = None,
    url: QueueUrl = None,
    token: UrlToken = None,
) -> None:
    """Run probes/allreduce.py with NODES local processes over loopback and summarise busbw per size.

    Bus bandwidth is in Gbit/s (busbw = 2s(n−1)/(n·t)). With --quick it instead queues a short probe
    job on two instances of --instance-type (EC2 or testbed; `srift worker` runs it), whose worst
    case (2 instances × price × 15 min) must stay under --max-cost-usd.

    Examples:

      srift probe run --nodes 2 --max-bytes 16M

      srift probe run --nodes 4 --sizes 4,4K,4M --repeats 10 --out samples.jsonl \\
          --store

      srift probe run --quick --provider ec2 --instance-type g4dn.12xlarge \\
          --backend nccl --image-id ami-0123456789abcdef0 \\
          --results-url http://10.0.0.5:8000

      srift probe run --quick --provider testbed --instance-type tb.small
    """
    if quick:
        job = QuickProbe(
            provider=provider.lower(),
            instance_type=instance_type,
            backend=backend,
            max_cost_usd=max_cost_usd,
            image_id=image_id,
            results_url=results_url,
            region=region,
            market=market,
            testbed_prefix=testbed_prefix,
        )
        _quick(job, url=url, token=token, as_json=as_json)
        return
    from srift.bandwidth.local_probe import LocalProbe, parse_size
    from srift.errors import InvalidInput

    if backend not in ("gloo", "nccl"):
        raise InvalidInput(f"unknown backend {backend!r}", hint="use gloo or nccl", field="--backend")
    spec = LocalProbe(
        nodes=nodes,
        sizes=tuple(parse_size(s, field="--sizes") for s in sizes.split(",") if s.strip()) if sizes else (),
        min_bytes=parse_size(min_bytes, field="--min-bytes"),
        max_bytes=parse_size(max_bytes, field="--max-bytes"),
        repeats=repeats,
        warmup=warmup,
        async_count=async_count,
        backend=backend,
        time_budget_s=time_budget_s,
        provider=provider.lower(),
        instance_type=instance_type,
        rated_gbps=rated_gbps,
    )
    records = _probe_here(spec, out=out, transient=as_json)
    stored = _store(records) if store else None
    if as_json:
        for r in records:
            typer.echo(r.to_json())
        return
    _print_summary(records, spec)
    if stored is not None:
        console.print(f"stored {stored} new samples")


def _probe_here(spec: LocalProbe, *, out: Path | None, transient: bool) -> list[ProbeRecord]:
    """Run the local probe with a progress bar on stderr (cleared afterwards when `transient`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from srift.bandwidth.local_probe import run_local_probe

    with Progress(
        TextColumn("[bold]probing[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=transient,
    ) as progress:
        task = progress.add_task("starting ranks", total=None)

        def on_progress(done: int, total: int, size: int) -> None:
            progress.update(task, completed=done, total=total, description=f"{size} B")

        return run_local_probe(spec, on_progress=on_progress, out=out)


def _store(records: list[ProbeRecord]) -> int:
    """Store the samples in the database; the number that were new."""
    from srift.bandwidth.samples import store_samples
    from srift.db.session import transaction

    with transaction(catalog_database(get_settings())) as session:
        return store_samples(session=session, records=records, origin="probe")


def _print_summary(records: list[ProbeRecord], spec: LocalProbe) -> None:
    """Median time and bus bandwidth per size."""
    from srift.bandwidth.local_probe import summarize

    table = Table(title=f"allreduce, {spec.nodes} ranks on loopback ({spec.backend}, {len(records)} samples)")
    for header in ("size B", "median time s", "median busbw Gbit/s"):
        table.add_column(header, justify="right")
    for size, _world, time_s, busbw in summarize(records):
        table.add_row(str(size), f"{time_s:.3g}", f"{busbw:.4g}")
    console.print(table)


def import_(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="file to import")],
    fmt: Annotated[str, typer.Option("--format", help="jsonl (probes/allreduce.py) or nccl-tests")] = "jsonl",
    instance_type: Annotated[
        str | None,
        typer.Option(
            "--instance-type",
            help="type the test ran on; a mixed ring's types joined by '+', each once, in any order",
        ),
    ] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", help="instances the test spanned")] = None,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", help="ranks per instance")] = None,
    provider: Annotated[str | None, typer.Option("--provider", help="default aws for nccl-tests")] = None,
    region: Region = None,
    zone: Annotated[str | None, typer.Option("--zone", help="e.g. us-east-1a")] = None,
    collective: Annotated[
        str | None,
        typer.Option(
            "--collective",
            help="nccl-tests: allreduce, all_gather or reduce_scatter (default: what the output's header "
            "names, else allreduce)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print {parsed, stored, ...} as JSON")] = False,
) -> None:
    """Store the samples of FILE; importing the same file again adds nothing.

    nccl-tests output is read as printed (out-of-place columns; busbw GB/s is stored ×8 as Gbit/s),
    from all_reduce_perf, all_gather_perf or reduce_scatter_perf (bus bandwidth as nccl-tests defines
    it for each; only allreduce samples train bandwidth models). Examples:

      srift probe import a.txt --format nccl-tests --instance-type p5.48xlarge \\
          --nodes 2 --gpus-per-node 8

      srift probe import ag.txt --format nccl-tests --collective all_gather \\
          --instance-type p5.48xlarge --nodes 2 --gpus-per-node 8

      srift probe import samples.jsonl

    A probe across VMs of several types (a mixed ring) is imported with its
    types joined by "+"; `srift models train` keeps what the ring measured
    against its slowest type alone, and plans for fleets of those types use
    it (docs/simulator.md, "Mixed ring"):

      srift probe import ring.jsonl --instance-type g4dn.12xlarge+g5.12xlarge

      srift probe import ring.txt --format nccl-tests \\
        --instance-type p4d.24xlarge+p5.48xlarge --nodes 2

    Each of a ring's types must be in the catalog; --gpus-per-node defaults
    to the GPUs its types share.
    """
    from srift.bandwidth.imports import ImportFormat, import_text
    from srift.db.session import transaction
    from srift.domain.bandwidth import Collective
    from srift.errors import InvalidInput, parse_choice

    chosen = (
        parse_choice(Collective, collective, what="collective", field="collective")
        if collective is not None
        else None
    )
    parsed_fmt = parse_choice(ImportFormat, fmt.lower(), what="format", field="format")
    try:
        text = file.read_text()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file} is not text", hint="give the probe's text output") from exc
    with transaction(catalog_database(get_settings())) as session:
        result = import_text(
            session=session,
            text=text,
            fmt=parsed_fmt,
            source=file.name,
            provider=provider,
            instance_type=instance_type,
            region=region,
            zone=zone,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            collective=chosen,
        )
    if as_json:
        fields = {"parsed": result.parsed, "stored": result.stored, "sizes": result.sizes}
        typer.echo(json.dumps({**fields, "instance_types": list(result.instance_types)}))
        return
    console.print(
        f"{file.name}: {result.parsed} samples ({result.sizes} sizes) "
        f"for {', '.join(result.instance_types)}; "
        f"{result.stored} new, {result.parsed - result.stored} already stored"
    )


def register(app: typer.Typer) -> None:
    """Add the `probe` group."""
    add_group(
        app,
        "probe",
        help=(
            "Allreduce bandwidth probes: the samples the bus-bandwidth models learn from.\n\n"
            "`srift probe run` measures this machine (N processes on loopback); `srift probe import` stores "
            "output of probes/allreduce.py run elsewhere (JSON lines) or of nccl-tests' all_reduce_perf."
        ),
        commands={"run": run, "import": import_},
    )
