"""CLI command `srift predict FILE`: iteration time, total time, cost and breakdown of a fleet or a sweep."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from srift.commands.ddp_options import DDP_OPTIONS, DDP_PARAMETERS, BucketCapMb, PerLayer, apply_ddp_options
from srift.commands.local import served_session
from srift.commands.options import ExampleFlag, ReadToken, ServerUrl, in_cli_words
from srift.commands.plan import network_rate_lines, render_sources, render_strategy
from srift.commands.remote import answer_request, load_request_file, put_given, request_body
from srift.commands.tables import add_columns

console = Console()

EXAMPLE = """\
# srift predict request (YAML or JSON; the body of POST /v1/predictions)
model: resnet50                 # or profile_ids: [3, 4]  or profiles: [<profile documents>]
provider: aws
region: us-east-1
iterations: 10000
config:
  choices:
    - {instance_type: p3.8xlarge, market: spot, count: 2, batch: 256}  # per VM, split over its GPUs
    - {instance_type: g4dn.xlarge, market: on_demand, count: 4, batch: 32}
# or a sweep, one prediction per fleet:
# configs:
#   - choices: [{instance_type: g4dn.12xlarge, count: 2, batch: 128}]
#   - choices: [{instance_type: g4dn.12xlarge, count: 4, batch: 64, gpus: 2}]   # 2 of its 4 GPUs
network:                        # how the nodes talk (all optional)
  transport: tcp                # tcp: PyTorch DDP (NCCL or gloo over sockets); efa: aws-ofi-nccl
  library: nccl                 # nccl or gloo
  placement_group: false        # cluster placement group: 10, not 5 Gbit/s per TCP flow on AWS
  # ena_visible: true           # NCCL sees the ENA (bare VM / host network): 16 sockets per peer
  # flows_per_peer: 1           # NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS (AWS 1; ENA seen 16)
  # measured_gbps: {g4dn.12xlarge: 4.5}    # a measured node-to-node rate replaces the prior
  # probe_job_ids: [12]         # or take it from a probe job (`srift probe run --quick`)
comm: allreduce                 # or parameter_server (with ps_servers: 2)
mc_samples: 200                 # Monte Carlo draws for the stragglers' part of the band (0: none)
# strategy: auto                # how the fleet runs, as a plan says: ddp, zero1, zero2, full_shard,
#                               # hybrid or auto; a sharded one needs mc_samples 0
#                               # (auto with mc_samples > 0 predicts DDP)
# checkpointing: null           # with a strategy: null (with and without), true or false
seed: 0
"""


def _local(body: dict[str, Any]) -> Any:
    from srift.api.schemas.predictions import PredictionOut, PredictionSweepOut, parse_prediction_request
    from srift.services.predictions import answer

    request = parse_prediction_request(body)
    with served_session() as (session, settings):
        result = answer(session=session, settings=settings, query=request.to_domain())
    schema = PredictionSweepOut if "predictions" in result else PredictionOut
    return schema.model_validate(result).model_dump(mode="json")


def _seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.2f} h"
    if value >= 60:
        return f"{value / 60:.1f} min"
    return f"{value:.4g} s"


def render_sweep(result: dict[str, Any], *, verbose: bool = False) -> None:
    """Print a sweep as one table, one row per fleet, in request order."""
    preds = result["predictions"]
    first = preds[0] if preds else {}
    title = f"{result['count']} fleets, {first.get('iterations', '?')} iterations each"
    table = Table(title=title)
    for col in ("#", "fleet", "iteration", "p90", "total", "cost", "net"):
        table.add_column(col, justify="left" if col == "fleet" else "right", no_wrap=col != "fleet")
    for k, p in enumerate(preds):
        it = p["predicted"]
        exposed = p["breakdown"]["exposed_network_s"] / it["iteration_s"] if it["iteration_s"] > 0 else 0.0
        table.add_row(
            str(k),
            p["label"],
            _seconds(it["iteration_s"]),
            _seconds(it["iteration_p90_s"]),
            _seconds(it["total_time_s"]),
            f"${it['cost_usd']:.2f}",
            f"{100 * exposed:.0f} %",
        )
    console.print(table)
    console.print("net: the share of an iteration spent waiting on the network (exposed)", highlight=False)
    _network_lines(result.get("network") or first.get("network"), verbose=verbose)
    console.print(f"answered in {result['elapsed_s']:.3f} s", highlight=False)


def _network_lines(network: dict[str, Any] | None, *, verbose: bool = False) -> None:
    """The transport, each type's rate (with why, --verbose) and the advice: in full with --verbose, else
    the commands it recommends."""
    if not network:
        return
    network_rate_lines(network, verbose=verbose)
    advice = network.get("recommendation")
    if advice and verbose:
        console.print(f"[yellow]advice:[/] {escape(advice)}", highlight=False)
    elif advice:
        commands = re.findall(r"`([^`]+)`", advice)
        todo = "; ".join(f"`{c}`" for c in commands) if commands else "see --verbose"
        console.print(
            f"[yellow]advice:[/] the network rate rests on the prior; measure it: {escape(todo)} "
            "(--verbose says what was assumed)",
            highlight=False,
        )


def _strategy_lines(view: dict[str, Any] | None) -> None:
    """How the fleet runs under the request's strategy, as `srift plan` says it (srift.commands.plan.
    render_strategy); with DDP alone, which compares nothing, the how and why in one line."""
    if not view:
        return
    if not view.get("compared"):
        console.print(f"how to run it: {view['how']}; why: {view['why']}", highlight=False)
    render_strategy(view)


def render(result: dict[str, Any], *, verbose: bool = False) -> None:
    """Print a prediction as tables: the fleet, the times and cost, and where an iteration's time goes;
    `verbose` adds every source and the network's assumptions."""
    fleet = Table(title=f"fleet {result['label']} ({result['comm']})")
    add_columns(
        fleet,
        ("instance type", "market", "count", "batch/VM", "GPUs", "batch/GPU", "$/h"),
        left=("instance type", "market"),
    )
    for c in result["choices"]:
        fleet.add_row(
            c["instance_type"],
            c["market"],
            str(c["count"]),
            str(c["batch"]),
            str(c["gpus"]),
            f"{c['per_gpu_batch']:g}",
            f"{c['price_usd_per_hr']:.3f}",
        )
    console.print(fleet)
    p = result["predicted"]
    times = Table(
        title=f"prediction for {result['iterations']} iterations (global batch {result['global_batch']})"
    )
    add_columns(times, ("iteration (mean)", "p10 / p50 / p90", "total time (p10–p90)", "cost (p10–p90)"))
    lo_t, hi_t = p.get("total_time_p10_s"), p.get("total_time_p90_s")
    lo_c, hi_c = p.get("cost_p10_usd"), p.get("cost_p90_usd")
    times.add_row(
        _seconds(p["iteration_s"]),
        " / ".join(_seconds(p[k]) for k in ("iteration_p10_s", "iteration_p50_s", "iteration_p90_s")),
        _seconds(p["total_time_s"])
        + (f" ({_seconds(lo_t)}–{_seconds(hi_t)})" if lo_t is not None and hi_t is not None else ""),
        f"${p['cost_usd']:.2f}"
        + (f" (${lo_c:.2f}–${hi_c:.2f})" if lo_c is not None and hi_c is not None else "")
        + f"  (${result['usd_per_hr']:.2f}/h)",
    )
    console.print(times)
    terms = (p.get("band") or {}).get("terms") or []
    if terms:
        console.print(
            "band (spread of the run's mean iteration time, log): "
            + ", ".join(f"{t['source']} {t['sigma']:.3f}" for t in terms)
            + f"; total {p['band']['sigma']:.3f}",
            highlight=False,
        )
    b = result["breakdown"]
    parts = Table(title="one iteration (Stash stall breakdown)")
    parts.add_column("part")
    parts.add_column("seconds", justify="right")
    parts.add_column("share", justify="right")
    for label, key in (
        ("compute (fw + bw)", "compute_s"),
        ("straggler wait", "straggler_wait_s"),
        ("exposed intra-node", "exposed_intra_s"),
        ("exposed network", "exposed_network_s"),
    ):
        share = b[key] / p["iteration_s"] if p["iteration_s"] > 0 else 0.0
        parts.add_row(label, f"{b[key]:.4g}", f"{100 * share:.1f} %")
    granularity = "∞ (no communication)" if b["granularity"] is None else f"{b['granularity']:.2f}"
    parts.add_row("communication (overlapped or not)", f"{b['communication_s']:.4g}", "")
    parts.add_row("granularity = compute / communication", granularity, "")
    console.print(parts)
    _strategy_lines(result.get("strategy"))
    _network_lines(result.get("network"), verbose=verbose)
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    render_sources(result["sources"], verbose=verbose, out=console)


def _network_options(
    body: dict[str, Any],
    transport: str | None,
    library: str | None,
    placement_group: bool | None,
    measured: list[str],
    ena_visible: bool | None = None,
) -> None:
    """Fold the command-line network options into the request's `network` object."""
    from srift.errors import InvalidInput

    network = body.get("network")
    network = dict(network) if isinstance(network, dict) else {}
    if transport is not None:
        network["transport"] = transport
    if library is not None:
        network["library"] = library
    if placement_group is not None:
        network["placement_group"] = placement_group
    if ena_visible is not None:
        network["ena_visible"] = ena_visible
    for item in measured:
        name, sep, value = item.partition("=")
        try:
            rate = float(value)
        except ValueError:
            rate = None
        if not sep or not name.strip() or rate is None:
            raise InvalidInput(
                f"{item!r} is not TYPE=GBPS",
                hint="e.g. --measured-gbps g4dn.12xlarge=4.5",
                field="--measured-gbps",
            )
        if not rate > 0:  # 0, a negative rate or nan: the form is right, the number is not a rate
            raise InvalidInput(
                f"{item!r}: {value.strip()} Gbit/s is not a positive rate",
                hint=f"give the node-to-node rate measured on {name.strip()} in Gbit/s, e.g. "
                f"--measured-gbps {name.strip()}=4.5",
                field="--measured-gbps",
            )
        network.setdefault("measured_gbps", {})[name.strip()] = rate
    if network:
        body["network"] = network


def _profile_documents(paths: list[Path], *, file: Path | None) -> list[Any]:
    """The documents of the `--profile` files, read before the request FILE so that a missing one is named
    as such (field --profile); FILE is still required, since --profile only replaces the request's
    profiles: without it, InvalidInput says so on FILE."""
    from srift.errors import InvalidInput

    without_file = "; the request FILE is needed too (`srift predict --example > r.yaml`)"
    documents = []
    for path in paths:
        try:
            documents.append(load_request_file(path, field="--profile"))
        except InvalidInput as exc:
            hint = f"{exc.hint}{without_file if file is None else ''}"
            raise InvalidInput(exc.detail, hint=hint, field=exc.field) from exc
    if paths and file is None:
        raise InvalidInput(
            "no request file given: --profile only inlines the model's profiles; the request FILE gives "
            "the fleet (config or configs), iterations, provider and region",
            hint="run `srift predict --example > r.yaml`, edit it, then `srift predict r.yaml --profile "
            f"{paths[0]}`",
            field="FILE",
        )
    return documents


PredictFile = Annotated[Path | None, typer.Argument(help="request file (YAML or JSON); see --example")]
PredictJson = Annotated[bool, typer.Option("--json", help="print the prediction as JSON")]
McSamples = Annotated[
    int | None,
    typer.Option("--mc-samples", min=0, max=1000, help="override the file's Monte Carlo sample count"),
]
Seed = Annotated[int | None, typer.Option("--seed", min=0, help="override the file's seed")]
ProfileFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--profile",
        help="a profile document (from `srift profile` or `srift profile import`) to inline; repeatable",
    ),
]
Transport = Annotated[
    str | None,
    typer.Option("--transport", help="tcp (plain PyTorch DDP) or efa (aws-ofi-nccl): sets network.transport"),
]
Library = Annotated[str | None, typer.Option("--library", help="nccl or gloo: sets network.library")]
PlacementGroup = Annotated[
    bool | None,
    typer.Option(
        "--placement-group/--no-placement-group",
        help="instances in one cluster placement group: sets network.placement_group",
    ),
]
EnaVisible = Annotated[
    bool | None,
    typer.Option(
        "--ena-visible/--ena-hidden",
        help="NCCL sees the AWS ENA (bare VM, host network: 16 sockets per peer) or not (a container "
        "with its own network: 1); default: not known, 1 assumed, band up to 16. Sets "
        "network.ena_visible",
    ),
]
MeasuredGbps = Annotated[
    list[str] | None,
    typer.Option(
        "--measured-gbps",
        metavar="TYPE=GBPS",
        help="a measured node-to-node rate for a type (e.g. g4dn.12xlarge=4.5); repeatable",
    ),
]
PredictVerbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="also list every source and the network's assumptions")
]


PREDICT_OPTIONS = {
    "network.transport": "--transport",
    "network.library": "--library",
    "network.placement_group": "--placement-group",
    "network.ena_visible": "--ena-visible",
    "mc_samples": "--mc-samples",
    "seed": "--seed",
    **DDP_OPTIONS,
}
"""The request fields `srift predict`'s flags set over FILE's, each with its flag."""
PREDICT_PARAMETERS = {
    "--transport": "transport",
    "--library": "library",
    "--placement-group": "placement_group",
    "--ena-visible": "ena_visible",
    "--mc-samples": "mc_samples",
    "--seed": "seed",
    **DDP_PARAMETERS,
}
"""Each of those flags' parameter: an error names the flag only when it was given, else FILE's field."""


@in_cli_words(PREDICT_OPTIONS, given=PREDICT_PARAMETERS)
def predict_command(
    file: PredictFile = None,
    as_json: PredictJson = False,
    url: ServerUrl = None,
    token: ReadToken = None,
    mc_samples: McSamples = None,
    seed: Seed = None,
    profile_files: ProfileFiles = None,
    transport: Transport = None,
    library: Library = None,
    placement_group: PlacementGroup = None,
    ena_visible: EnaVisible = None,
    measured: MeasuredGbps = None,
    example: ExampleFlag = False,
    verbose: PredictVerbose = False,
    bucket_cap_mb: BucketCapMb = None,
    per_layer: PerLayer = False,
) -> None:
    """Predict one fleet's iteration time (mean, p10/p50/p90), total time and cost, with a breakdown.

    FILE names the model's profiles, the fleet (instance type, market, count and per-VM batch per
    choice; `gpus` uses part of each VM's GPUs), provider/region and iterations; `configs` instead of
    `config` predicts a sweep of fleets in one call (one row each). Compute comes from the profile of
    each type's accelerator, communication from the active bandwidth model or the α-β prior under the
    request's `network` (default: TCP sockets, as plain PyTorch DDP), prices from the catalog, billed
    per second.

    Examples:

      srift predict --example > request.yaml

      srift predict request.yaml

      srift predict sweep.yaml --profile bert-t4.json \\
          --measured-gbps g4dn.12xlarge=4.5

      srift predict request.yaml --transport efa --json

      srift predict request.yaml --mc-samples 500 --json

      srift predict request.yaml --url http://127.0.0.1:8000
    """
    if example:
        typer.echo(EXAMPLE, nl=False)
        return
    profiles = _profile_documents(profile_files or [], file=file)
    body = request_body(file, command="predict")
    put_given(body, mc_samples=mc_samples, seed=seed)
    if profiles:
        body.pop("model", None)
        body.pop("profile_ids", None)
        body["profiles"] = profiles
    _network_options(body, transport, library, placement_group, measured or [], ena_visible)
    apply_ddp_options(body, bucket_cap_mb=bucket_cap_mb, per_layer=per_layer)
    result = answer_request(
        body, url=url, path="/v1/predictions", token=token, local=_local, busy=console, status="simulating..."
    )
    if as_json:
        typer.echo(json.dumps(result, indent=1))
    elif "predictions" in result:
        render_sweep(result, verbose=verbose)
    else:
        render(result, verbose=verbose)


def register(app: typer.Typer) -> None:
    """Add `srift predict`."""
    app.command("predict")(predict_command)
