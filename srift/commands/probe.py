"""CLI commands `srift probe run|import`: measure allreduce bandwidth here, or import probe output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from srift.settings import Settings, get_settings

console = Console()

QUICK_SIZES = (1 << 20, 4 << 20, 16 << 20, 64 << 20)
"""1–64 MiB: the bandwidth-bound sizes the node rate is read from (srift.services.network.RATE_MIN_BYTES)."""
QUICK_REPEATS = 3
QUICK_TIME_BUDGET_S = 300.0
"""Most of a quick probe is start-up (torch import, process group); the 2-node grid itself takes seconds."""
QUICK_EC2_TIMEOUT_S = 900.0
"""EC2 instances of a quick probe are terminated after 15 minutes whatever happens (bounds its cost)."""
DEFAULT_QUICK_MAX_COST_USD = 5.0


def quick_probe_body(
    *,
    provider: str,
    instance_type: str,
    backend: str,
    max_cost_usd: float,
    image_id: str | None,
    results_url: str | None,
    region: str | None,
    market: str,
    testbed_prefix: str | None,
) -> dict[str, Any]:
    """The probe-job request of `srift probe run --quick`: 2 nodes, one rank each, 1–64 MiB, 3 repeats."""
    from srift.errors import InvalidInput

    body: dict[str, Any] = {
        "provider": provider,
        "instance_type": instance_type,
        "node_counts": [2],
        "sizes": list(QUICK_SIZES),
        "repeats": QUICK_REPEATS,
        "warmup": 1,
        "ranks_per_node": 1,
        "backend": backend,
        "time_budget_s": QUICK_TIME_BUDGET_S,
    }
    if provider == "testbed":
        if testbed_prefix:
            body["testbed_prefix"] = testbed_prefix
        return body
    if provider != "ec2":
        raise InvalidInput(
            f"--quick measures a cloud type, not provider {provider!r}",
            hint="use --provider ec2 (an AWS type) or --provider testbed",
            field="provider",
        )
    if not image_id or not results_url:
        raise InvalidInput(
            "an EC2 quick probe needs --image-id (an AMI with Python 3.11) and --results-url (this server as "
            "the instances reach it)",
            hint="pass both, e.g. --image-id ami-0123456789abcdef0 --results-url http://10.0.0.5:8000",
            field="image_id" if not image_id else "results_url",
        )
    body["ec2"] = {
        "image_id": image_id,
        "results_url": results_url,
        "region": region or "us-east-1",
        "market": market,
        "max_instances": 2,
        "max_cost_usd": max_cost_usd,
        "timeout_s": QUICK_EC2_TIMEOUT_S,
    }
    return body


def _ready(settings: Settings) -> str:
    """Reachable, migrated database with the shipped catalog (imports check instance types against it)."""
    from srift.db import migrate
    from srift.db.session import check_database

    url = settings.resolved_database_url
    check_database(url)
    migrate.upgrade(url)
    try:
        from srift.catalog.shipped import load_shipped_catalog
    except ImportError:  # pragma: no cover - catalog area not installed
        return url
    load_shipped_catalog(settings)
    return url


def _quick(
    *,
    provider: str,
    instance_type: str,
    backend: str,
    max_cost_usd: float,
    image_id: str | None,
    results_url: str | None,
    region: str | None,
    market: str,
    testbed_prefix: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    from srift.commands.jobs import _submit
    from srift.errors import InvalidInput

    if instance_type == "local":
        raise InvalidInput(
            "--quick needs the instance type to measure",
            hint="pass --instance-type (e.g. g4dn.12xlarge with --provider ec2)",
            field="instance_type",
        )
    if provider == "local":
        provider = "testbed" if instance_type.startswith(("tb.", "bw.")) else "ec2"
    body = quick_probe_body(
        provider=provider,
        instance_type=instance_type,
        backend=backend,
        max_cost_usd=max_cost_usd,
        image_id=image_id,
        results_url=results_url,
        region=region,
        market=market,
        testbed_prefix=testbed_prefix,
    )
    if not url:
        _ready(get_settings())
    job = _submit("probe", body, url=url, token=token)
    if as_json:
        typer.echo(json.dumps(job, indent=2, default=str))
        return
    console.print(
        f"queued quick probe job {job['id']}: 2 × {instance_type} ({provider}), 1–64 MiB, "
        f"{QUICK_REPEATS} repeats, {backend}",
        highlight=False,
    )
    if provider == "ec2":
        console.print(
            f"cost cap ${max_cost_usd:g} (instances are terminated after {QUICK_EC2_TIMEOUT_S / 60:g} min)",
            highlight=False,
        )
    console.print(
        f"run it with `srift worker --once --provider {provider}` (or a running worker), check it with "
        f"`srift jobs show {job['id']}`, then predict with network.probe_job_ids: [{job['id']}]",
        highlight=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add the `probe` group."""
    probe = typer.Typer(
        help=(
            "Allreduce bandwidth probes: the samples the bus-bandwidth models learn from.\n\n"
            "`srift probe run` measures this machine (N processes on loopback); `srift probe import` stores "
            "output of probes/allreduce.py run elsewhere (JSON lines) or of nccl-tests' all_reduce_perf."
        ),
        no_args_is_help=True,
    )
    app.add_typer(probe, name="probe")

    @probe.command("run")
    def run(
        nodes: int = typer.Option(2, "--nodes", help="processes (emulated nodes, one rank each), ≥ 2"),
        sizes: str | None = typer.Option(None, "--sizes", help="comma-separated sizes, e.g. 4,1K,1M,64M"),
        min_bytes: str = typer.Option("4", "--min-bytes", help="smallest size of the power-of-two grid"),
        max_bytes: str = typer.Option("64M", "--max-bytes", help="largest size of the grid"),
        repeats: int = typer.Option(5, "--repeats", min=1, max=1000, help="timed repetitions per size"),
        warmup: int = typer.Option(2, "--warmup", min=0, max=100, help="untimed allreduces per size"),
        async_count: int = typer.Option(
            1, "--async-count", min=1, max=64, help="concurrent async allreduces"
        ),
        backend: str = typer.Option("gloo", "--backend", help="gloo (CPU) or nccl (GPUs)"),
        time_budget_s: float = typer.Option(300.0, "--time-budget-s", min=1.0, help="stop before this long"),
        provider: str = typer.Option("local", "--provider", help="provider recorded with the samples"),
        instance_type: str = typer.Option("local", "--instance-type", help="instance type recorded"),
        rated_gbps: float = typer.Option(0.0, "--rated-gbps", min=0.0, help="rated network Gbit/s recorded"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON lines here"),
        store: bool = typer.Option(False, "--store", help="store the samples in the database"),
        as_json: bool = typer.Option(False, "--json", help="print the samples as JSON lines"),
        quick: bool = typer.Option(
            False,
            "--quick",
            help="measure a cloud or testbed type's node-to-node rate in minutes: queue a 2-node probe job "
            "(1–64 MiB, 3 repeats) under a cost cap; its id goes into network.probe_job_ids",
        ),
        max_cost_usd: float = typer.Option(
            DEFAULT_QUICK_MAX_COST_USD, "--max-cost-usd", min=0.0, help="--quick on EC2: refuse above this"
        ),
        image_id: str | None = typer.Option(None, "--image-id", help="--quick on EC2: the AMI to launch"),
        results_url: str | None = typer.Option(
            None, "--results-url", help="--quick on EC2: this server's URL as the instances reach it"
        ),
        region: str | None = typer.Option(None, "--region", help="--quick on EC2: region (us-east-1)"),
        market: str = typer.Option("on_demand", "--market", help="--quick on EC2: on_demand or spot"),
        testbed_prefix: str | None = typer.Option(
            None, "--testbed-prefix", help="--quick on the testbed: use this running testbed"
        ),
        url: str | None = typer.Option(None, "--url", help="--quick: queue on a running server"),
        token: str | None = typer.Option(None, "--token", envvar="SRIFT_TOKEN", help="API token for --url"),
    ) -> None:
        """Run probes/allreduce.py with NODES local processes over loopback and summarise busbw per size.

        Bus bandwidth is in Gbit/s (busbw = 2s(n−1)/(n·t)). With --quick it instead queues a short probe
        job on two instances of --instance-type (EC2 or testbed; `srift worker` runs it), whose worst
        case (2 instances × price × 15 min) must stay under --max-cost-usd. Examples:

          srift probe run --nodes 2 --max-bytes 16M

          srift probe run --nodes 4 --sizes 4,4K,4M --repeats 10 --out samples.jsonl --store

          srift probe run --quick --provider ec2 --instance-type g4dn.12xlarge --backend nccl \\
              --image-id ami-0123456789abcdef0 --results-url http://10.0.0.5:8000

          srift probe run --quick --provider testbed --instance-type tb.small
        """
        if quick:
            _quick(
                provider=provider.lower(),
                instance_type=instance_type,
                backend=backend,
                max_cost_usd=max_cost_usd,
                image_id=image_id,
                results_url=results_url,
                region=region,
                market=market,
                testbed_prefix=testbed_prefix,
                url=url,
                token=token,
                as_json=as_json,
            )
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from srift.bandwidth.local_probe import LocalProbe, parse_size, run_local_probe, summarize
        from srift.errors import InvalidInput

        if backend not in ("gloo", "nccl"):
            raise InvalidInput(f"unknown backend {backend!r}", hint="use gloo or nccl", field="backend")
        spec = LocalProbe(
            nodes=nodes,
            sizes=tuple(parse_size(s) for s in sizes.split(",") if s.strip()) if sizes else (),
            min_bytes=parse_size(min_bytes, field="min_bytes"),
            max_bytes=parse_size(max_bytes, field="max_bytes"),
            repeats=repeats,
            warmup=warmup,
            async_count=async_count,
            backend=backend,
            time_budget_s=time_budget_s,
            provider=provider.lower(),
            instance_type=instance_type,
            rated_gbps=rated_gbps,
        )
        with Progress(
            TextColumn("[bold]probing[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=as_json,
        ) as progress:
            task = progress.add_task("starting ranks", total=None)

            def on_progress(done: int, total: int, size: int) -> None:
                progress.update(task, completed=done, total=total, description=f"{size} B")

            records = run_local_probe(spec, on_progress=on_progress, out=out)
        stored = None
        if store:
            from srift.bandwidth.samples import store_samples
            from srift.db.session import transaction

            with transaction(_ready(get_settings())) as session:
                stored = store_samples(session=session, records=records, origin="probe")
        if as_json:
            for r in records:
                typer.echo(r.to_json())
            return
        table = Table(title=f"allreduce, {nodes} ranks on loopback ({backend}, {len(records)} samples)")
        for header in ("size B", "median time s", "median busbw Gbit/s"):
            table.add_column(header, justify="right")
        for size, _world, time_s, busbw in summarize(records):
            table.add_row(str(size), f"{time_s:.3g}", f"{busbw:.4g}")
        console.print(table)
        if stored is not None:
            console.print(f"stored {stored} new samples")

    @probe.command("import")
    def import_(
        file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True, help="file to import"),
        fmt: str = typer.Option("jsonl", "--format", help="jsonl (probes/allreduce.py) or nccl-tests"),
        instance_type: str | None = typer.Option(None, "--instance-type", help="type the test ran on"),
        nodes: int | None = typer.Option(None, "--nodes", help="instances the test spanned"),
        gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", help="ranks per instance"),
        provider: str | None = typer.Option(None, "--provider", help="default aws for nccl-tests"),
        region: str | None = typer.Option(None, "--region", help="e.g. us-east-1"),
        zone: str | None = typer.Option(None, "--zone", help="e.g. us-east-1a"),
        collective: str | None = typer.Option(
            None,
            "--collective",
            help="nccl-tests: allreduce, all_gather or reduce_scatter (default: what the output's header "
            "names, else allreduce)",
        ),
        as_json: bool = typer.Option(False, "--json", help="print {parsed, stored, ...} as JSON"),
    ) -> None:
        """Store the samples of FILE; importing the same file again adds nothing.

        nccl-tests output is read as printed (out-of-place columns; busbw GB/s is stored ×8 as Gbit/s),
        from all_reduce_perf, all_gather_perf or reduce_scatter_perf (bus bandwidth as nccl-tests defines
        it for each; only allreduce samples train bandwidth models). Examples:

          srift probe import a.txt --format nccl-tests --instance-type p5.48xlarge --nodes 2 --gpus-per-node 8

          srift probe import ag.txt --format nccl-tests --collective all_gather --instance-type p5.48xlarge \
              --nodes 2 --gpus-per-node 8

          srift probe import samples.jsonl

        A probe across VMs of several types (a mixed ring) is imported with its
        types joined by "+"; `srift models train` keeps what the ring measured
        against its slowest type alone, and plans for fleets of those types use
        it (docs/simulator.md, "Mixed ring"):

          srift probe import ring.jsonl --instance-type g4dn.12xlarge+g5.12xlarge
        """
        from srift.bandwidth.imports import ImportFormat, import_text
        from srift.db.session import transaction
        from srift.domain.bandwidth import Collective
        from srift.errors import InvalidInput

        try:
            chosen = Collective(collective) if collective is not None else None
        except ValueError:
            raise InvalidInput(
                f"unknown collective {collective!r}",
                hint="use allreduce, all_gather or reduce_scatter",
                field="collective",
            ) from None

        try:
            parsed_fmt = ImportFormat(fmt.lower())
        except ValueError:
            raise InvalidInput(
                f"unknown format {fmt!r}", hint="use --format jsonl or --format nccl-tests", field="format"
            ) from None
        try:
            text = file.read_text()
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{file} is not text", hint="give the probe's text output") from exc
        with transaction(_ready(get_settings())) as session:
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
            typer.echo(
                json.dumps(
                    {
                        "parsed": result.parsed,
                        "stored": result.stored,
                        "sizes": result.sizes,
                        "instance_types": list(result.instance_types),
                    }
                )
            )
            return
        console.print(
            f"{file.name}: {result.parsed} samples ({result.sizes} sizes) "
            f"for {', '.join(result.instance_types)}; "
            f"{result.stored} new, {result.parsed - result.stored} already stored"
        )
