"""CLI `srift plan FILE`: the cheapest or fastest fleet under time and budget limits, with baselines."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from srift.commands.ddp_options import DDP_OPTIONS, DDP_PARAMETERS, BucketCapMb, PerLayer, apply_ddp_options
from srift.commands.local import served_session
from srift.commands.options import ExampleFlag, ServerUrl, WriteToken, finite_number, in_cli_words
from srift.commands.remote import answer_request, call_api, env_token, put_given, request_body
from srift.commands.tables import add_columns

console = Console()

EXAMPLE = """\
# srift plan request (YAML or JSON; the body of POST /v1/plans)
model: resnet50                 # a reference model (resnet50, bert-base, gpt2-small, vit-b16, and
                                # sharded: llama-1b, llama-8b, gpt2-xl, see --example-model), your
                                # model's name, or profile_ids: [3, 4]  or profiles: [<documents>]
precision: fp16                 # fp32, tf32, fp16 or bf16 (autocast); profiles in it are used
# allow_cpu_profiles: false     # true: let profiles measured on a CPU stand for GPU types (marked)
global_batch: 1024              # samples per iteration over the whole fleet
iterations: 20000               # about 16 ImageNet epochs at this batch
objective: min_cost             # or min_time
time_limit_s: 7200              # optional: N · t_iter must not exceed it
budget_usd: 100.0               # optional: total cost must not exceed it
confidence: 0.9                 # limits hold at this quantile of time and cost (0.5: prediction)
provider: aws
region: us-east-1
market: spot                    # spot, on_demand, or any (the cheaper market per type)
# availability:                 # optional: only these types, at most this many of each
#   p3.8xlarge: 4
#   g4dn.12xlarge: 8
max_count_per_type: 4           # the cap per type when availability is not given (every GPU type)
mode: auto                      # exhaustive, eager, or auto (exhaustive when the space is small)
solve_budget_s: 1.0
seed: 0
network:                        # how the nodes talk (optional; see `srift predict --example`)
  transport: tcp                # tcp: plain PyTorch DDP over sockets; efa: aws-ofi-nccl (EFA types)
  placement_group: false
# Fleets across regions and clouds (each location's VMs are candidates of their own):
# providers: [aws, gcp]
# regions: [aws/us-east-1, aws/eu-west-1, gcp/us-central1]   # or names, for each provider with them
# allreduce: ring               # ring (PyTorch DDP) or hierarchical (reduce per location first)
# links: [{from: aws/us-east-1, to: gcp/us-central1, bandwidth_gbps: 1.2, rtt_ms: 20}]  # measured
# Data loading (else the profiles' own input_pipeline, if any):
# input_pipeline: {samples_per_s_per_core: 120, bytes_per_sample: 110000}
# read_gbps: 5                  # each VM's read rate (default: its network)
# Spot interruptions (priced in by default):
# price_interruptions: true
# interruption_rates: {g4dn.xlarge: 0.075}   # share of VMs interrupted per month (default: shipped)
# checkpoint_interval_s: 600
# restart_s: 150                # Srift §5.4: EC2 launch time
# fallback: true                # also plan an on-demand fallback for spot plans
# recent_market:                # spot figures from the recent market (nowcast), not the law alone
#   trace: user:log.csv#aws/us-east-1a/p3.2xlarge   # `srift traces list`; or log_csv: <the CSV>
#   as_of_s: 86400              # the run starts this long after the log's start (default: its end)
# Sharded data parallelism (plans say how to run it: strategy, wrapping, checkpointing, precision):
# strategy: auto                # the fastest that fits; or ddp, zero1, zero2, full_shard, hybrid
# checkpointing: null           # null: with and without activation checkpointing; or true, false
"""

SHARDED_EXAMPLE = """\
# srift plan request for {title}
# (sharded data parallelism: the plan says which strategy, wrapping, checkpointing and precision to run)
model: {model}
precision: bf16                 # mixed precision: bf16 compute, fp32 master weights and reduction
global_batch: {batch}                # sequences per iteration over the whole fleet
iterations: {iterations}
objective: min_cost
time_limit_s: {deadline}            # the deadline
provider: aws
region: us-east-1
market: on_demand
max_count_per_type: 8
strategy: auto                  # or ddp, zero1, zero2, full_shard, hybrid
checkpointing: null             # null: with and without activation checkpointing
solve_budget_s: 2.0
"""

SHARDED_SIZES = {"llama-1b": (64, 2000, 14400), "llama-8b": (64, 1000, 28800), "gpt2-xl": (64, 2000, 14400)}
"""Example sizes: global batch (sequences), iterations and deadline (s) of each sharded reference model."""


def example_for(model: str) -> str:
    """An example request for reference model `model` (the sharded ones get their own)."""
    from srift.errors import InvalidInput
    from srift.refmodels import REFERENCE_MODELS

    found = next((m for m in REFERENCE_MODELS if m.name == model), None)
    if found is None:
        names = ", ".join(m.name for m in REFERENCE_MODELS)
        raise InvalidInput(
            f"{model!r} is not a reference model", hint=f"use one of {names}", field="--example-model"
        )
    if not found.sharded:
        return EXAMPLE.replace("model: resnet50 ", f"model: {model} ", 1)
    batch, iterations, deadline = SHARDED_SIZES.get(model, (64, 1000, 28800))
    return SHARDED_EXAMPLE.format(
        title=found.title, model=model, batch=batch, iterations=iterations, deadline=deadline
    )


def _local(body: dict[str, Any]) -> Any:
    from srift.api.schemas.plans import PlanOut, parse_plan_request
    from srift.services.plans import create_plan

    request = parse_plan_request(body)
    with served_session() as (session, settings):
        plan = create_plan(
            session=session,
            settings=settings,
            query=request.to_domain(),
            request_doc=request.model_dump(mode="json"),
        )
    return PlanOut.model_validate(plan.document()).model_dump(mode="json")


def _stored(plan_id: int) -> dict[str, Any]:
    from srift.api.schemas.plans import PlanOut
    from srift.services.plans import get_plan

    with served_session(tell_progress=False) as (session, _):
        plan = get_plan(session=session, plan_id=plan_id)
    return PlanOut.model_validate(plan.document()).model_dump(mode="json")


@dataclass(frozen=True, slots=True)
class _Launch:
    """What `--emit` writes the launch files for: the training script, node 0's address, the folder."""

    script: str | None
    """None: train.py."""
    master_addr: str | None
    out: Path | None


def _emit_files(plan: dict[str, Any], fmt: str, launch: _Launch) -> None:
    """Print (or write into `launch.out`, with the plan as plan-ID.json for the helper) the plan's launch
    files."""
    from srift.errors import parse_choice
    from srift.launch.emit import EmitFormat, LaunchOptions, joined
    from srift.services.launch import emit_document

    form = parse_choice(EmitFormat, fmt, what="format", field="--emit")
    out = launch.out
    plan_ref = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        plan_file = out / f"plan-{plan['id']}.json"
        plan_file.write_text(json.dumps(plan, indent=1, default=str))
        plan_ref = str(plan_file.resolve())
    script = launch.script or DEFAULT_SCRIPT
    options = LaunchOptions(script=script, master_addr=launch.master_addr, plan_ref=plan_ref)
    files = emit_document(plan, form, options)
    if out is None:
        typer.echo(joined(files), nl=False)
        return
    for f in files:
        (out / f.name).write_text(f.text)
        typer.echo(str(out / f.name))
    typer.echo(plan_ref)


def memory_text(choice: dict[str, Any]) -> str:
    """E.g. "11.2/16": the memory model's peak GiB per GPU at the choice's batch over one GPU's GiB ("?"
    without a memory model, "-" for a CPU type)."""
    used, total = choice.get("memory_per_gpu_bytes"), choice.get("gpu_memory_bytes")
    if total is None:
        return "-"
    return f"{'?' if used is None else f'{used / 2**30:.1f}'}/{total / 2**30:.0f}"


def duration(seconds: float) -> str:
    """Seconds as a short human duration with at least two significant digits: "41 min", "378 s", "2.4 h",
    "2.5 min" (never 2.4 h read as "2 h")."""
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.{1 if seconds < 100 * 3600 else 0}f} h"
    if seconds >= 120:
        return f"{seconds / 60:.{1 if seconds < 600 else 0}f} min"
    return f"{seconds:.3g} s"


def durations(seconds: list[float]) -> list[str]:
    """A column of durations in one unit picked from the largest (s, min or h), with the fewest decimals
    (up to 3) that keep different values apart: 180 s, 185 s and 190 s read "3.0 min", "3.1 min" and
    "3.2 min", not "3 min" three times."""
    if not seconds:
        return []
    top = max(seconds)
    unit, scale = ("h", 3600.0) if top >= 2 * 3600 else ("min", 60.0) if top >= 120 else ("s", 1.0)
    scaled = [v / scale for v in seconds]
    d = _decimals(scaled, least=_two_digits(scaled))
    return [f"{v:.{d}f} {unit}" for v in scaled]


def _two_digits(values: list[float]) -> int:
    """The decimals that give every value at least two significant digits (2.4 h, not 2 h), at most 3."""
    small = min((abs(v) for v in values if v), default=10.0)
    return 0 if small >= 10 else 1 if small >= 1 else 2 if small >= 0.1 else 3


def dollars(amounts: list[float]) -> list[str]:
    """A column of costs with 2 to 4 decimals, the fewest that keep different amounts apart."""
    d = _decimals(amounts, least=2, most=4)
    return [f"${v:.{d}f}" for v in amounts]


def _decimals(values: list[float], *, least: int = 0, most: int = 3) -> int:
    distinct = len({round(v, 9) for v in values})
    for d in range(least, most + 1):
        if len({f"{v:.{d}f}" for v in values}) == distinct:
            return d
    return most


def fleet_text(choices: list[dict[str, Any]]) -> str:
    """`16 × g4dn.8xlarge @ 64 + 2 × p3.8xlarge @ 512 (on-demand)`; `[provider/region]` when the plan spans
    several locations (its choices then carry theirs)."""
    return " + ".join(
        f"{c['count']} × {c['instance_type']} @ {c['batch']}"
        + (" (on-demand)" if c["market"] == "on_demand" else "")
        + (f" [{c['location']}]" if c.get("location") else "")
        for c in choices
    )


def band_text(predicted: dict[str, Any], key: str, fmt: Any) -> str:
    """ "41 min (36–47 min)": the prediction and its p10–p90 band, when the plan has one."""
    lo, hi = predicted.get(f"{key}_p10{_unit(key)}"), predicted.get(f"{key}_p90{_unit(key)}")
    mid = predicted[f"{key}{_unit(key)}"]
    if lo is None or hi is None or fmt(lo) == fmt(hi):
        return str(fmt(mid))
    return f"{fmt(mid)} ({fmt(lo)}–{fmt(hi)})"


def _unit(key: str) -> str:
    return "_usd" if key == "cost" else "_s"


def _money(value: float) -> str:
    return f"${value:.2f}"


def chances(item: dict[str, Any]) -> tuple[float | None, float | None]:
    """The plan's one P(deadline) and one P(budget): the prediction band's, and for a spot plan priced
    with interruptions the lower of that and the simulated runs' (both must hold, so the lower bounds the
    chance); None for a limit not given."""
    chance = item.get("probability") or {}
    spot = item.get("spot") or {}
    out: list[float | None] = []
    for key, spot_key in (("meets_time_limit", "p_meets_time_limit"), ("within_budget", "p_within_budget")):
        values = [v for v in (chance.get(key), spot.get(spot_key)) if v is not None]
        out.append(min(values) if values else None)
    return out[0], out[1]


def chance_text(item: dict[str, Any]) -> str:
    """ "P(deadline) 93 %, P(budget) 99 %" for the limits that are given (see `chances`)."""
    deadline, budget = chances(item)
    parts = []
    if deadline is not None:
        parts.append(f"P(deadline) {_percent(deadline)}")
    if budget is not None:
        parts.append(f"P(budget) {_percent(budget)}")
    return ", ".join(parts)


def _percent(p: float) -> str:
    """A probability as a whole percent, never rounded up to a certainty it is not: 99.6 % reads ">99 %"."""
    if 0.99 < p < 1.0:
        return ">99 %"
    if 0.0 < p < 0.01:
        return "<1 %"
    return f"{100 * p:.0f} %"


def headline(plan: dict[str, Any]) -> str:
    p = plan["predicted"]
    return (
        f"{fleet_text(plan['choices'])}, {band_text(p, 'total_time', duration)}, "
        f"{band_text(p, 'cost', _money)}"
    )


def render(plan: dict[str, Any], *, verbose: bool = False) -> None:
    """Print a plan: the headline, the fleet, Srift against CAP and TAP, the limits and the Pareto front;
    `verbose` adds each source and each network rate's reason."""
    _render_summary(plan)
    console.print(_fleet_table(plan))
    for c in plan["choices"]:
        if c.get("batch_limit"):
            console.print(f"batch limit: {c['batch_limit']}", highlight=False)
    render_strategy(plan.get("strategy"))
    _estimate_lines(plan)
    render_placement(plan)
    console.print(_compare_table(plan))
    _limits_line(plan)
    front = [p for p in plan["pareto"] if p["on_front"]]
    if front:
        console.print(_pareto_table(front, total=plan["pareto_total"]))
    _plan_network_lines(plan.get("network"), verbose=verbose)
    for warning in warning_lines(plan, verbose=verbose):
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    render_sources(plan["sources"], verbose=verbose)


PER_TYPE_WARNINGS = {
    "batch capped by memory": re.compile(r"^(\S+): batch \d+ per GPU, capped by memory"),
    "left out (the model does not fit one GPU's memory at batch 1)": re.compile(
        r"^(\S+) left out: .* does not fit one GPU's memory at batch 1"
    ),
}
"""Warnings a plan repeats once per instance type it considered (a pattern whose group is the type), each
with what a summary of them says."""


def _other_type_kind(warning: str, *, chosen: set[str]) -> str | None:
    """The PER_TYPE_WARNINGS kind of `warning` when it is about a type outside `chosen`, else None."""
    for kind, pattern in PER_TYPE_WARNINGS.items():
        match = pattern.match(warning)
        if match and match.group(1) not in chosen:
            return kind
    return None


def warning_lines(plan: dict[str, Any], *, verbose: bool = False) -> list[str]:
    """The plan's warnings as the CLI prints them: in full those about the chosen fleet's types and every
    other kind, but each kind of PER_TYPE_WARNINGS about two or more other types summarised in one line
    in place of the first ("batch capped by memory on 36 other types (--verbose lists each)"), so a
    request over a whole catalog does not bury the plan under a line per type; `verbose` lists each. A
    warning a choice's "batch limit:" line already says is not said again. The API's `warnings` stay whole."""
    chosen = {c["instance_type"] for c in plan["choices"]}
    said = {c["batch_limit"] for c in plan["choices"] if c.get("batch_limit")}
    kinds = {w: _other_type_kind(w, chosen=chosen) for w in plan["warnings"]}
    others: dict[str, list[str]] = {}
    for warning, kind in kinds.items():
        if kind is not None:
            others.setdefault(kind, []).append(warning)
    lines: list[str] = []
    for warning, kind in kinds.items():
        group = others.get(kind or "", [])
        if warning in said:
            continue
        if verbose or len(group) < 2:
            lines.append(warning)
        elif warning == group[0]:
            lines.append(f"{kind} on {len(group)} other types (--verbose lists each)")
    return lines


def _render_summary(plan: dict[str, Any]) -> None:
    """The headline, how the plan was found, its calibration and the confidence its limits were held to."""
    solved = "proven optimal" if plan["proven_optimal"] else "best found"
    console.print(f"[bold]{escape(headline(plan))}[/]", highlight=False)
    console.print(
        f"plan {plan['id']}: {plan['objective']}, {plan['mode']} search ({solved}), "
        f"{plan['configs_evaluated']} configurations in {plan['solve_time_s']:.2f} s",
        highlight=False,
    )
    calibration = plan.get("calibration") or {}
    if calibration.get("text"):
        console.print(
            f"{calibration['text']} of {calibration['model']} on these types "
            "(`srift run corrections`; the band narrows only as far as the runs allow)",
            highlight=False,
            soft_wrap=True,
        )
    confidence = plan.get("confidence")
    if confidence is not None:
        chance = chance_text(plan)
        console.print(
            f"time and cost: prediction (p10–p90); limits checked at p{100 * confidence:g}"
            + (f"; {chance}" if chance else ""),
            highlight=False,
        )


def _fleet_table(plan: dict[str, Any]) -> Table:
    """One row per choice: type (* when its compute is estimated), market, VMs, batch, GPUs, memory, price
    (and location or strategy when any choice has one)."""
    fleet = Table(title=f"fleet for global batch {plan['global_batch']}, {plan['iterations']} iterations")
    located = any(c.get("location") for c in plan["choices"])
    columns = ["instance type", *(["location"] if located else []), "market", "VMs", "batch/VM", "GPUs"]
    setup = any(c.get("strategy") not in (None, "ddp") or c.get("checkpointing") for c in plan["choices"])
    add_columns(
        fleet,
        (*columns, "per GPU", "GiB/GPU", "$/h", *(["strategy"] if setup else [])),
        left=("instance type", "location", "market", "strategy"),
    )
    for c in plan["choices"]:
        estimated = (c.get("compute") or "measured") != "measured"
        fleet.add_row(
            c["instance_type"] + (" *" if estimated else ""),
            *([c.get("location") or ""] if located else []),
            c["market"],
            str(c["count"]),
            str(c["batch"]),
            str(c["gpus"]),
            f"{c['per_gpu_batch']:g}",
            memory_text(c),
            f"{c['price_usd_per_hr']:.3f}",
            *([(c.get("strategy") or "") + ("+ckpt" if c.get("checkpointing") else "")] if setup else []),
        )
    return fleet


def _compare_table(plan: dict[str, Any]) -> Table:
    """The plan against the CAP and TAP baselines: fleet, times, cost and whether each meets the limits."""
    compare = Table(title="Srift against the static policies of Srift §5.2")
    add_columns(
        compare,
        ("policy", "fleet", "iteration", "total time (p10–p90)", "cost (p10–p90)", "meets limits"),
        left=("policy", "fleet"),
        overflow="fold",
    )
    rows: list[tuple[str, dict[str, Any] | None]] = [("Srift", plan)]
    rows += [(name.upper(), plan["baselines"].get(name)) for name in ("cap", "tap")]
    for name, item in rows:
        if item is None:
            compare.add_row(name, "cannot allocate the global batch", "", "", "", "")
            continue
        p = item["predicted"]
        meets = "yes" if name == "Srift" or item.get("feasible") else "no"
        chance = chance_text(item)
        compare.add_row(
            name,
            escape(fleet_text(item["choices"])),
            f"{p['iteration_s']:.3f} s",
            band_text(p, "total_time", duration),
            band_text(p, "cost", _money),
            meets + (f" ({chance})" if chance else ""),
        )
    return compare


def _limits_line(plan: dict[str, Any]) -> None:
    """The time limit and budget given, each with the plan's headroom under it."""
    limits, head = plan["limits"], plan["headroom"]
    parts = []
    if limits["time_limit_s"] is not None:
        parts.append(f"time limit {duration(limits['time_limit_s'])} (headroom {duration(head['time_s'])})")
    if limits["budget_usd"] is not None:
        parts.append(f"budget ${limits['budget_usd']:.2f} (headroom ${head['budget_usd']:.2f})")
    if parts:
        console.print("limits: " + "; ".join(parts), highlight=False)


def _pareto_table(front: list[dict[str, Any]], *, total: int) -> Table:
    """The first 12 configurations of the Pareto front, the plan's marked."""
    table = Table(title=f"Pareto front ({len(front)} of {total} evaluated configurations)")
    add_columns(
        table, ("configuration", "total time", "cost", "feasible"), left=("configuration",), overflow="fold"
    )
    shown = front[:12]
    times = iter(durations([p["total_time_s"] for p in shown]))
    costs = iter(dollars([p["cost_usd"] for p in shown]))
    for p in shown:
        mark = " ◀ plan" if p["chosen"] else ""
        table.add_row(escape(p["label"]) + mark, next(times), next(costs), "yes" if p["feasible"] else "no")
    return table


def network_rate_lines(network: dict[str, Any], *, verbose: bool) -> None:
    """The network an answer assumed (plan or prediction): its label and each type's rate, with its band's
    fast end and, `verbose`, what limits it."""
    console.print(f"network: {escape(network['label'])}", highlight=False)
    for r in network["rates"]:
        rate = "learned model" if r["gbps"] is None else f"{r['gbps']:.3g} Gbit/s"
        if r.get("high_gbps"):
            rate += f", band's fast end {r['high_gbps']:.3g} Gbit/s"
        why = f" ({escape(r['limit'])})" if verbose else ""
        console.print(f"  {r['instance_type']}: {rate}{why}", highlight=False)


def _plan_network_lines(network: dict[str, Any] | None, *, verbose: bool) -> None:
    """The network the plan assumed: each type's rate (with its reason, `verbose`) and the advice."""
    if not network:
        return
    network_rate_lines(network, verbose=verbose)
    if network.get("recommendation"):
        console.print(f"[yellow]advice:[/] {network['recommendation']}", highlight=False)


def render_sources(sources: list[str], *, verbose: bool, out: Console | None = None) -> None:
    """Every source on its own line with --verbose; else one summary line (profiles counted by kind)."""
    out = out or console
    if verbose:
        out.print("sources:", highlight=False)
        for source in sources:
            out.print(f"  {escape(source)}", highlight=False)
        return
    profiles = [s for s in sources if s.startswith("profile:")]
    estimated = sum("(estimate:" in s for s in profiles)
    prices = sum(s.startswith(("price ", "price:")) for s in sources)
    others = [s for s in sources if not s.startswith(("profile:", "price ", "price:"))]
    parts = []
    if profiles:
        parts.append(f"{len(profiles)} profile(s) ({estimated} estimated)")
    parts += [escape(s) for s in others]
    if prices:
        parts.append(f"{prices} catalog price(s)")
    out.print(f"sources: {', '.join(parts)} (--verbose lists each)", highlight=False)


def render_placement(plan: dict[str, Any]) -> None:
    """Locations, the cost line (instances and egress), egress routes, data loading and the spot outlook."""
    if len(plan.get("locations") or []) > 1:
        table = Table(title="VMs per location")
        add_columns(
            table,
            ("location", "place", "continent", "VMs", "GPUs", "$/h"),
            left=("location", "place", "continent"),
        )
        for loc in plan["locations"]:
            table.add_row(
                loc["location"],
                loc["place"],
                loc["continent"] or "",
                str(loc["vms"]),
                str(loc["gpus"]),
                f"{loc['usd_per_hr']:.3f}",
            )
        console.print(table)
    cost = plan.get("cost")
    if cost and cost["egress_usd"] > 0:
        console.print(
            f"cost: instances ${cost['instances_usd']:.2f} + egress ${cost['egress_usd']:.2f} "
            f"= ${cost['total_usd']:.2f} (egress {cost['egress_share']:.0%})",
            highlight=False,
        )
        table = Table(title="egress per iteration (gradient traffic leaving each location)")
        add_columns(
            table, ("from", "to", "route", "GB/iteration", "$/GB", "$ total"), left=("from", "to", "route")
        )
        for e in plan["egress"]:
            table.add_row(
                e["source"],
                e["destination"],
                e["route"],
                f"{e['gb_per_iteration']:.3g}",
                f"{e['usd_per_gb']:.3f}",
                f"{e['usd']:.2f}",
            )
        console.print(table)
    stalls = [f for f in plan.get("data_loading") or [] if f["stalls_above_batch"] is not None]
    if stalls:
        table = Table(title="data loading: types whose input pipeline cannot feed their GPUs at full batch")
        columns = ("type", "loader vCPUs", "feeds/s", "bound", "GPUs train/s", "stalls above batch")
        add_columns(table, columns, left=("type", "bound"))
        for f in stalls:
            table.add_row(
                escape(f["instance_type"] + (f" [{f['location']}]" if f["location"] else "")),
                str(f["loader_cores"]),
                f"{f['samples_per_s']:.0f}",
                f["bound"],
                f"{f['gpu_samples_per_s']:.0f}",
                str(f["stalls_above_batch"]),
            )
        console.print(table)
    spot = plan.get("spot")
    if spot:
        how = "Srift's deadline policy" if spot.get("nowcast") else "§4.5 re-planning"
        console.print(
            "spot: the headline's time and cost restart the fleet in place after each interruption (what the "
            f"search compares spot fleets by); with {how} instead: "
            f"expected {duration(spot['expected_time_s'])}, ${spot['expected_cost_usd']:.2f} "
            f"(uninterrupted {duration(spot['uninterrupted_time_s'])}, "
            f"${spot['uninterrupted_cost_usd']:.2f}); "
            f"p90 {duration(spot['time_p90_s'])}; "
            f"{spot['expected_interruptions']:.2g} interruptions expected — "
            f"{spot['samples']} simulated runs, checkpoint every "
            f"{duration(spot['checkpoint_interval_s'])}, {spot['restart_s']:.0f} s restart "
            "(their chance of meeting the limits is in P(deadline) and P(budget) above)",
            highlight=False,
        )
        _spot_model_line(spot)
    fallback = plan.get("fallback")
    if fallback:
        p = fallback["predicted"]
        console.print(
            f"on-demand fallback: {escape(fleet_text(fallback['choices']))}, {duration(p['total_time_s'])}, "
            f"${p['cost_usd']:.2f}",
            highlight=False,
        )


def _spot_model_line(spot: dict[str, Any]) -> None:
    """Which model produced the spot figures, and for a nowcast what it saw and what it replaced."""
    seen = spot.get("nowcast")
    if not seen:
        console.print(f"spot model: {spot.get('spot_model') or 'fitted law'}", highlight=False)
        return
    fitted, alone = seen["fitted_law"], seen["without_recent"]
    console.print(
        f"spot model: {spot['spot_model']} — {escape(seen['trace'])} at {duration(seen['as_of_s'])} "
        "into the log: "
        f"{seen['interruptions']} interruption(s), {seen['capacity_returns']} capacity return(s) in the "
        f"look-back, capacity {'up' if seen['up_at_start'] else 'down'} at the start; Srift's deadline "
        f"policy, {100 * seen['spot_share']:.0f} % of the time on spot. Without the look-back: "
        f"{duration(alone['expected_time_s'])}, ${alone['expected_cost_usd']:.2f}; the fitted law's Monte "
        f"Carlo: {duration(fitted['expected_time_s'])}, ${fitted['expected_cost_usd']:.2f}",
        highlight=False,
    )


def _estimate_lines(plan: dict[str, Any]) -> None:
    """Say which of the plan's numbers rest on estimated compute, and the band they carry."""
    estimated = plan.get("estimated") or {}
    chosen = estimated.get("in_plan") or []
    candidates = estimated.get("candidates") or {}
    p = plan["predicted"]
    if chosen:
        parts = []
        for name in chosen:
            e = candidates[name]
            how = f"scaled from {e['based_on']}" if e.get("based_on") else e["method"]
            parts.append(f"{name} ({e['accelerator']}, {how}, ±{100 * e['spread']:.0f} %)")
        console.print(
            "[yellow]* estimated compute[/] (no profile measured on these GPUs): " + "; ".join(parts),
            highlight=False,
        )
        console.print(
            f"  iteration {p['iteration_p10_s']:.3g}–{p['iteration_p90_s']:.3g} s (p10–p90, estimate error "
            "included); profile the model on the chosen GPU (`srift profile --device cuda`) for measured "
            "times",
            highlight=False,
        )
        _unaligned_line({name: candidates[name] for name in chosen})
    elif candidates:
        console.print(
            f"{len(candidates)} other candidate types had estimated compute; the plan's are measured",
            highlight=False,
        )
    if plan.get("precision"):
        console.print(f"precision: {plan['precision']}", highlight=False)


def _unaligned_line(chosen: dict[str, dict[str, Any]]) -> None:
    """Caution where a chosen type's estimate rests on unaligned half-precision products whose cost is not
    settled (the threshold and the words are srift.services.views', which the dashboard's Plan page shows
    too)."""
    from srift.services.views import UNALIGNED_NOTE, UNALIGNED_NOTE_SHARE

    share = max((e.get("unaligned_share") or 0.0 for e in chosen.values()), default=0.0)
    if share < UNALIGNED_NOTE_SHARE:
        return
    console.print(
        f"  [yellow]![/] {escape(UNALIGNED_NOTE.format(share=f'{100 * share:.0f} %'))}", highlight=False
    )


def render_strategy(view: dict[str, Any] | None) -> None:
    """How to run the plan: the setup, its memory per GPU by part, and how the other setups compared."""
    if not view or not view.get("strategy") or not view.get("compared"):
        return
    console.print(f"how to run it: {view['how']}", highlight=False)
    console.print(f"precision: {view['precision']}; why: {view['why']}", highlight=False)
    for m in view.get("memory") or []:
        if not m.get("parts"):
            continue
        parts = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in m["parts"].items() if v)
        console.print(
            f"memory per GPU on {m['instance_type']}: {m['peak_bytes'] / 2**30:.1f} of "
            f"{m['capacity_gib']:.0f} GiB ({parts} GiB)",
            highlight=False,
        )
    compared = view.get("compared") or []
    if len(compared) > 1:
        table = Table(title="setups on this fleet")
        add_columns(table, ("setup", "fits", "iteration", "peak GiB/GPU"), left=("setup", "fits"))
        for r in compared:
            peak = r.get("peak_gib")
            table.add_row(
                r["setup"],
                "yes" if r["fits"] else "no",
                f"{r['iteration_s']:.3g} s" if r.get("iteration_s") is not None else "",
                f"{peak:.1f}" if peak is not None else "",
            )
        console.print(table)


PlanFile = Annotated[Path | None, typer.Argument(help="plan request (YAML or JSON); see --example")]
PlanJson = Annotated[bool, typer.Option("--json", help="print the plan as JSON")]
Mode = Annotated[str | None, typer.Option("--mode", help="override the file's mode: exhaustive, eager, auto")]
SolveBudget = Annotated[
    float | None,
    typer.Option(
        "--solve-budget",
        parser=finite_number("--solve-budget"),
        help="override solve_budget_s: seconds the search may take, more than 0 and at most the "
        "server's SRIFT_MAX_SOLVE_BUDGET_S (default 30; checked by the same rule as POST /v1/plans)",
    ),
]
Confidence = Annotated[
    float | None,
    typer.Option(
        "--confidence",
        parser=finite_number("--confidence", within=(0.5, 0.99)),
        help="override the file's confidence, from 0.5 to 0.99: the quantile of time and cost that must meet "
        "the limits (default 0.9; 0.5 checks the prediction itself)",
    ),
]
Emit = Annotated[
    str | None,
    typer.Option(
        "--emit",
        help="print the plan as launch files instead: torchrun (a command per VM), skypilot (a task "
        "per type) or kubernetes (a JobSet per location), with the NCCL settings the plan assumed",
    ),
]
PlanId = Annotated[
    int | None,
    typer.Option(
        "--plan-id",
        min=1,
        help="with --emit: a stored plan as it was planned, instead of planning FILE (so without --mode, "
        "--confidence and the other planning options)",
    ),
]
DEFAULT_SCRIPT = "train.py"
"""The training script `--emit` launches unless `--script` names another."""
Script = Annotated[
    str | None,
    typer.Option("--script", help=f"with --emit: the training script to run (default {DEFAULT_SCRIPT})"),
]
MasterAddr = Annotated[
    str | None,
    typer.Option("--master-addr", help="with --emit: node 0's address (else each VM's shell asks for it)"),
]
LaunchOut = Annotated[
    Path | None,
    typer.Option("--out", help="with --emit: write the files and the plan (plan-ID.json) into this folder"),
]
ExampleModel = Annotated[
    str | None,
    typer.Option(
        "--example-model",
        help="print an example request for a reference model and exit (llama-1b, llama-8b and gpt2-xl "
        "ask for sharded data parallelism)",
    ),
]
ReplayTraces = Annotated[
    Path | None,
    typer.Option(
        "--replay-traces",
        help="replay the plan's spot run through these traces (a trace file, a folder, a git repository, "
        "or the set `srift traces import` keeps) under each deadline policy",
    ),
]
ReplayNowcast = Annotated[
    bool,
    typer.Option(
        "--replay-nowcast",
        help="with --replay-traces: predict each replayed window from the traces before its start (what a "
        "user knows when the run starts: the recent market and whether capacity is there), not from the "
        "period's law alone",
    ),
]
RecentTrace = Annotated[
    str | None,
    typer.Option(
        "--recent-trace",
        help="condition the spot figures on the recent market: an imported trace's name as `srift traces "
        "list` shows it (sets the request's recent_market.trace), e.g. --recent-trace "
        "user:log.csv#aws/us-east-1a/p3.2xlarge. The plan's spot section then says "
        "spot_model: nowcast(look-back H h, K ended runs) instead of fitted law",
    ),
]
RecentLog = Annotated[
    Path | None,
    typer.Option(
        "--recent-log",
        help="condition the spot figures on your own launch/interruption log, sent inline (the CSV `srift "
        "traces import` reads: time,zone,instance_type,event,count; sets recent_market.log_csv), e.g. "
        "--recent-log my-interruptions.csv",
    ),
]
AsOf = Annotated[
    float | None,
    typer.Option(
        "--as-of-s",
        help="with --recent-trace or --recent-log: the run starts this many seconds after the log's first "
        "tick, only the log before it is used (default: the log's end), e.g. --as-of-s 86400",
    ),
]
PlanVerbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="also list every source and each network rate's reason")
]


PLAN_OPTIONS = {
    "mode": "--mode",
    "solve_budget_s": "--solve-budget",
    "confidence": "--confidence",
    "recent_market.as_of_s": "--as-of-s",
    **DDP_OPTIONS,
}
"""The request fields `srift plan`'s flags set over FILE's, each with its flag."""
PLAN_PARAMETERS = {
    "--mode": "mode",
    "--solve-budget": "solve_budget_s",
    "--confidence": "confidence",
    "--as-of-s": "as_of_s",
    **DDP_PARAMETERS,
}
"""Each of those flags' parameter: an error names the flag only when it was given, else FILE's field."""


@in_cli_words(PLAN_OPTIONS, given=PLAN_PARAMETERS)
def plan_command(
    file: PlanFile = None,
    as_json: PlanJson = False,
    url: ServerUrl = None,
    token: WriteToken = None,
    mode: Mode = None,
    solve_budget_s: SolveBudget = None,
    confidence: Confidence = None,
    example: ExampleFlag = False,
    emit: Emit = None,
    plan_id: PlanId = None,
    script: Script = None,
    master_addr: MasterAddr = None,
    out: LaunchOut = None,
    example_model: ExampleModel = None,
    verbose: PlanVerbose = False,
    replay_traces: ReplayTraces = None,
    replay_nowcast: ReplayNowcast = False,
    recent_trace: RecentTrace = None,
    recent_log: RecentLog = None,
    as_of_s: AsOf = None,
    bucket_cap_mb: BucketCapMb = None,
    per_layer: PerLayer = False,
) -> None:
    """Find the cheapest (min_cost) or fastest (min_time) set of VMs and the per-VM batch for each type.

    FILE names the model's profiles, the global batch, iterations, the objective and optional limits
    (time_limit_s, budget_usd), provider/region (or several: providers, regions), market and
    availability. The answer is counts and batches per instance type (and location), e.g. "16 ×
    g4dn.8xlarge @ 64, 41 min (38–45 min), $9.80 ($9.10–$10.70)", with the p10–p90 band of time and cost
    from the measured spreads the prediction rests on, compared with the CAP and TAP baselines, with the
    Pareto front of everything evaluated. Limits are checked at the request's `confidence` (default 0.9:
    the p90 of time and cost must meet them), and every plan and baseline says how likely it meets each
    limit. Across locations it shows VMs per location and the cost line with egress; a spot plan shows
    its expected time and cost over interruptions next to the uninterrupted run and its on-demand
    fallback; its P(deadline) counts the interruptions too. When no fleet meets the limits the error
    says which limit and the nearest relaxation. `--verbose` lists every source.

    Examples:

      srift plan --example > request.yaml

      srift plan --example-model llama-8b > llama.yaml

      srift plan request.yaml

      srift plan request.yaml --mode exhaustive --json

      srift plan request.yaml --verbose

      srift plan request.yaml --url http://127.0.0.1:8000 --token $SRIFT_TOKEN

      srift plan request.yaml --emit torchrun --script train.py --out launch/

      srift plan request.yaml \\
          --recent-trace user:log.csv#aws/us-east-1a/p3.2xlarge --as-of-s 86400

      srift plan request.yaml --recent-log my-interruptions.csv \\
          --replay-traces my-traces/

      srift plan --plan-id 12 --emit kubernetes
    """
    if example_model is not None or example:
        typer.echo(EXAMPLE if example_model is None else example_for(example_model), nl=False)
        return
    launch = _Launch(script=script, master_addr=master_addr, out=out)
    planning = (
        ("--mode", mode),
        ("--solve-budget", solve_budget_s),
        ("--confidence", confidence),
        ("--recent-trace", recent_trace),
        ("--recent-log", recent_log),
        ("--as-of-s", as_of_s),
        ("--replay-traces", replay_traces),
        ("--replay-nowcast", replay_nowcast or None),
        ("--bucket-cap-mb", bucket_cap_mb),
        ("--per-layer", per_layer or None),
    )
    if plan_id is not None:
        _check_companions(
            emit=emit, as_json=as_json, launch=launch, replay=None, nowcast=False, stored=(plan_id, planning)
        )
        _emit_stored(plan_id, emit, file=file, url=url, token=env_token(token), launch=launch)
        return
    body = request_body(file, command="plan")
    put_given(body, mode=mode, solve_budget_s=solve_budget_s, confidence=confidence)
    apply_ddp_options(body, bucket_cap_mb=bucket_cap_mb, per_layer=per_layer)
    put_recent_market(body, trace=recent_trace, log=recent_log, as_of_s=as_of_s)
    _check_companions(emit=emit, as_json=as_json, launch=launch, replay=replay_traces, nowcast=replay_nowcast)
    result = answer_request(
        body,
        url=url,
        path="/v1/plans",
        token=token,
        local=_local,
        busy=console,
        status="searching...",
        timeout_s=600,
    )
    if replay_traces is not None:
        nowcast = replay_nowcast or bool(body.get("recent_market"))
        result["replay"] = _replay(result, body, replay_traces, nowcast=nowcast)
    if emit is not None:
        _emit_files(result, emit, launch)
    elif as_json:
        typer.echo(json.dumps(result, indent=1))
    else:
        render(result, verbose=verbose)
        if replay_traces is not None:
            render_replay(result["replay"])


def _check_companions(
    *,
    emit: str | None,
    as_json: bool,
    launch: _Launch,
    replay: Path | None,
    nowcast: bool,
    stored: tuple[int, tuple[tuple[str, object], ...]] | None = None,
) -> None:
    """Options that act only beside another are refused without it (before the search), not dropped
    without a word: --script, --master-addr and --out shape --emit's launch files, --replay-nowcast the
    --replay-traces replay; --emit prints launch files, so --json beside it would be ignored. `stored`
    (--plan-id N and the planning options given as (option, value or None)): a stored plan is emitted as
    it was planned, so an option that shapes a search (--mode, --confidence, --recent-log, ...) is refused
    beside it, not ignored."""
    from srift.errors import InvalidInput

    planned = [name for name, value in (stored[1] if stored else ()) if value is not None]
    if stored is not None and planned:
        names = ", ".join(planned)
        raise InvalidInput(
            f"{names} {'shapes' if len(planned) == 1 else 'shape'} the search that plans a FILE, but "
            f"--plan-id {stored[0]} emits the stored plan as it was planned: nothing would read "
            f"{'it' if len(planned) == 1 else 'them'}",
            hint=f"drop {names} (srift plan --plan-id {stored[0]} --emit FORMAT), or drop --plan-id and plan "
            f"the request again with them (srift plan FILE {planned[0]} ... --emit FORMAT)",
            field=planned[0],
        )

    launch_options = (
        ("--script", launch.script),
        ("--master-addr", launch.master_addr),
        ("--out", launch.out),
    )
    given = [name for name, value in launch_options if value is not None]
    if emit is None and given:
        raise InvalidInput(
            f"{', '.join(given)} only {'acts' if len(given) == 1 else 'act'} with --emit (shaping the launch "
            "files); without it the plan is printed and nothing reads them",
            hint="add --emit torchrun (or skypilot, kubernetes), e.g. srift plan FILE --emit torchrun "
            "--script train.py --out launch/, or drop " + ", ".join(given),
            field=given[0],
        )
    if emit is not None and as_json:
        raise InvalidInput(
            "--emit and --json exclude each other: --emit prints launch files, --json the plan",
            hint="drop --json (with --emit, --out writes the plan's JSON beside the files as plan-ID.json), "
            "or drop --emit",
            field="--json",
        )
    if nowcast and replay is None:
        raise InvalidInput(
            "--replay-nowcast only acts with --replay-traces (it says how the replayed windows are "
            "predicted); without it nothing is replayed",
            hint="add --replay-traces PATH (a trace file, a folder, or the set `srift traces import` keeps)",
            field="--replay-nowcast",
        )


def put_recent_market(
    body: dict[str, Any], *, trace: str | None, log: Path | None, as_of_s: float | None
) -> None:
    """`--recent-trace`, `--recent-log` and `--as-of-s` as the request's `recent_market` (over the file's);
    the server checks them as it checks the file's (one source, as_of_s within the log)."""
    if trace is None and log is None and as_of_s is None:
        return
    recent = dict(body.get("recent_market") or {})
    if trace is not None or log is not None:
        recent.pop("trace", None)
        recent.pop("log_csv", None)
    if trace is not None:
        recent["trace"] = trace
    if log is not None:
        from srift.commands.remote import read_file_text

        recent["log_csv"] = read_file_text(log, field="--recent-log")
    if as_of_s is not None:
        if "trace" not in recent and "log_csv" not in recent:
            from srift.errors import InvalidInput

            raise InvalidInput(
                "--as-of-s says where in a recent log the run starts, but no log is named",
                hint="add --recent-trace NAME (`srift traces list`) or --recent-log FILE.csv, or give "
                "recent_market.trace or recent_market.log_csv in FILE",
                field="--as-of-s",
            )
        recent["as_of_s"] = as_of_s
    body["recent_market"] = recent


def _replay(
    plan: dict[str, Any], body: dict[str, Any], path: Path, *, nowcast: bool = False
) -> dict[str, Any]:
    """`--replay-traces PATH`: the plan's spot run replayed through the traces at PATH (`--replay-nowcast`:
    each window predicted from the traces before it)."""
    from srift.errors import InvalidInput
    from srift.services.replays import replay_plan, request_location
    from srift.spot.sources import read_traces

    provider, region = request_location(body, default_region="us-east-1")
    try:
        traces = read_traces(path)
    except InvalidInput as exc:  # the reader names its argument `path`; here it is this option
        field = "--replay-traces" if exc.field == "path" else exc.field
        raise InvalidInput(exc.detail, hint=exc.hint, field=field) from exc
    return replay_plan(
        plan,
        traces,
        provider=provider,
        region=region,
        seed=int(body.get("seed") or 0),
        nowcast=nowcast,
    )


REPLAY_POLICIES = {
    "on_demand": "on-demand only",
    "spot_only": "spot only (waits out gaps)",
    "spot_then_on_demand": "spot until interrupted, then on-demand",
    "uniform_progress": "Uniform Progress (Can't Be Late)",
    "srift": "Srift (plan-aware)",
}


def render_replay(rep: dict[str, Any]) -> None:
    """The replay: per policy, the replayed cost and finish time (mean, p90), misses, beside predictions."""
    table = Table(
        title=f"replay: {rep['windows']} windows of {rep['traces']} trace(s), {rep['instance_type']} × "
        f"{rep['nodes']} in {rep['provider']}/{rep['region']}, deadline {duration(rep['deadline_s'])} "
        f"({rep['slack']:.2f}× on-demand)"
    )
    add_columns(
        table,
        (
            "policy",
            "mean cost",
            "p90 cost",
            "mean finish",
            "p90 finish",
            "misses",
            "P(deadline) replayed/predicted",
        ),
        left=("policy",),
    )
    for s in rep["policies"]:
        r, p = s["replayed"], s["predicted"]
        table.add_row(
            REPLAY_POLICIES.get(s["policy"], s["policy"]),
            f"${r['mean_cost_usd']:.2f}",
            f"${r['cost_p90_usd']:.2f}",
            duration(r["mean_finish_s"]),
            duration(r["finish_p90_s"]),
            f"{r['deadline_misses']}/{r['runs']}",
            f"{r['p_meets_deadline']:.3f} / {p.get('p_meets_deadline', float('nan')):.3f}",
        )
    console.print(table)
    if rep.get("nowcast"):
        console.print(
            f"predicted: each window from the traces before its start ({rep['nowcast']})", highlight=False
        )
    gap = rep.get("plan_gap")
    if gap:
        points = gap.get("p_meets_time_limit_points")
        console.print(
            "the plan's own outlook against Srift's policy replayed: expected cost "
            f"{gap['expected_cost_pct']:+.1f} %"
            + (f", P(meets the time limit) {points:+.1f} points" if points is not None else ""),
            highlight=False,
        )


def _emit_stored(
    plan_id: int,
    emit: str | None,
    *,
    file: Path | None,
    url: str | None,
    token: str | None,
    launch: _Launch,
) -> None:
    """`--plan-id N --emit FORMAT`: the launch files of a stored plan (from the server with --url). A
    request FILE beside --plan-id is refused: the stored plan is emitted as it is, so FILE would be read
    by nothing, and the user would get plan N's files believing they came from FILE."""
    from srift.errors import InvalidInput

    if file is not None:
        raise InvalidInput(
            f"both a request FILE ({file}) and --plan-id {plan_id} given: --plan-id emits stored plan "
            f"{plan_id} as it is and reads no request file",
            hint=f"drop FILE to emit plan {plan_id} (srift plan --plan-id {plan_id} --emit FORMAT), or drop "
            f"--plan-id to plan {file} (srift plan {file} --emit FORMAT)",
            field="--plan-id",
        )
    if emit is None:
        raise InvalidInput(
            "--plan-id only emits a stored plan", hint="add --emit torchrun", field="--plan-id"
        )
    stored = call_api("GET", url, f"/v1/plans/{plan_id}", token=token) if url else _stored(plan_id)
    _emit_files(stored, emit, launch)


def register(app: typer.Typer) -> None:
    """Add `srift plan`."""
    app.command("plan")(plan_command)
