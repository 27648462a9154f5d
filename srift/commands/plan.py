"""CLI `srift plan FILE`: the cheapest or fastest fleet under time and budget limits, with baselines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.remote import call_api, load_request_file

console = Console()

EXAMPLE = """\
# srift plan request (YAML or JSON; the body of POST /v1/plans)
model: resnet50                 # a shipped reference model (resnet50, bert-base, gpt2-small, vit-b16),
                                # your model's name, or profile_ids: [3, 4]  or profiles: [<documents>]
precision: fp16                 # fp32, tf32, fp16 or bf16 (autocast); profiles in it are used
global_batch: 1024              # samples per iteration over the whole fleet
iterations: 20000               # about 16 ImageNet epochs at this batch
objective: min_cost             # or min_time
time_limit_s: 7200              # optional: N · t_iter must not exceed it
budget_usd: 100.0               # optional: total cost must not exceed it
confidence: 0.9                 # the limits hold for this quantile of time and cost (0.5: the prediction)
provider: aws
region: us-east-1
market: spot                    # spot, on_demand, or any (the cheaper market per type)
# availability:                 # optional: only these types, at most this many of each
#   p3.8xlarge: 4
#   g4dn.12xlarge: 8
max_count_per_type: 4           # the cap per type when availability is not given (every GPU type)
mode: auto                      # exhaustive, eager, or auto (exhaustive when the space fits the budget)
solve_budget_s: 1.0
seed: 0
network:                        # how the nodes talk (optional; see `srift predict --example`)
  transport: tcp                # tcp: plain PyTorch DDP over sockets; efa: aws-ofi-nccl (EFA types only)
  placement_group: false
"""


def _local(body: dict[str, Any]) -> Any:
    from srift.api.schemas.plans import PlanOut, parse_plan_request
    from srift.bootstrap import bootstrap
    from srift.db.session import transaction
    from srift.services.plans import create_plan
    from srift.settings import get_settings

    request = parse_plan_request(body)
    settings = get_settings()
    bootstrap(settings)
    with transaction(settings.resolved_database_url) as session:
        plan = create_plan(
            session=session,
            settings=settings,
            query=request.to_domain(),
            request_doc=request.model_dump(mode="json"),
        )
    return PlanOut.model_validate(plan.document()).model_dump(mode="json")


def duration(seconds: float) -> str:
    """Seconds as a short human duration: "41 min", "378 s", "2.1 h"."""
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.3g} s"


def fleet_text(choices: list[dict[str, Any]]) -> str:
    """`16 × g4dn.8xlarge @ 64 + 2 × p3.8xlarge @ 512 (on-demand)`."""
    return " + ".join(
        f"{c['count']} × {c['instance_type']} @ {c['batch']}"
        + (" (on-demand)" if c["market"] == "on_demand" else "")
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


def chance_text(item: dict[str, Any]) -> str:
    """ "P(deadline) 93 %, P(budget) 99 %" for the limits that are given."""
    chance = item.get("probability") or {}
    parts = []
    if chance.get("meets_time_limit") is not None:
        parts.append(f"P(deadline) {100 * chance['meets_time_limit']:.0f} %")
    if chance.get("within_budget") is not None:
        parts.append(f"P(budget) {100 * chance['within_budget']:.0f} %")
    return ", ".join(parts)


def headline(plan: dict[str, Any]) -> str:
    p = plan["predicted"]
    return (
        f"{fleet_text(plan['choices'])}, {band_text(p, 'total_time', duration)}, "
        f"{band_text(p, 'cost', _money)}"
    )


def render(plan: dict[str, Any]) -> None:
    """Print a plan: the headline, the fleet, Srift against CAP and TAP, the limits and the Pareto front."""
    solved = "proven optimal" if plan["proven_optimal"] else "best found"
    console.print(f"[bold]{headline(plan)}[/]", highlight=False)
    console.print(
        f"plan {plan['id']}: {plan['objective']}, {plan['mode']} search ({solved}), "
        f"{plan['configs_evaluated']} configurations in {plan['solve_time_s']:.2f} s",
        highlight=False,
    )
    confidence = plan.get("confidence")
    if confidence is not None:
        chance = chance_text(plan)
        console.print(
            f"time and cost: prediction (p10–p90); limits checked at p{100 * confidence:g}"
            + (f"; {chance}" if chance else ""),
            highlight=False,
        )
    fleet = Table(title=f"fleet for global batch {plan['global_batch']}, {plan['iterations']} iterations")
    for col in ("instance type", "market", "count", "batch/VM", "GPUs", "batch/GPU", "$/h"):
        fleet.add_column(col, justify="left" if col in ("instance type", "market") else "right")
    for c in plan["choices"]:
        estimated = (c.get("compute") or "measured") != "measured"
        fleet.add_row(
            c["instance_type"] + (" *" if estimated else ""),
            c["market"],
            str(c["count"]),
            str(c["batch"]),
            str(c["gpus"]),
            f"{c['per_gpu_batch']:g}",
            f"{c['price_usd_per_hr']:.3f}",
        )
    console.print(fleet)
    _estimate_lines(plan)
    compare = Table(title="Srift against the static policies of Srift §5.2")
    for col in ("policy", "fleet", "iteration", "total time (p10–p90)", "cost (p10–p90)", "meets limits"):
        compare.add_column(col, justify="left" if col in ("policy", "fleet") else "right")
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
            fleet_text(item["choices"]),
            f"{p['iteration_s']:.3f} s",
            band_text(p, "total_time", duration),
            band_text(p, "cost", _money),
            meets + (f" ({chance})" if chance else ""),
        )
    console.print(compare)
    limits, head = plan["limits"], plan["headroom"]
    parts = []
    if limits["time_limit_s"] is not None:
        parts.append(f"time limit {duration(limits['time_limit_s'])} (headroom {duration(head['time_s'])})")
    if limits["budget_usd"] is not None:
        parts.append(f"budget ${limits['budget_usd']:.2f} (headroom ${head['budget_usd']:.2f})")
    if parts:
        console.print("limits: " + "; ".join(parts), highlight=False)
    front = [p for p in plan["pareto"] if p["on_front"]]
    if front:
        table = Table(title=f"Pareto front ({len(front)} of {plan['pareto_total']} evaluated configurations)")
        for col in ("configuration", "total time", "cost", "feasible"):
            table.add_column(col, justify="left" if col == "configuration" else "right")
        for p in front[:12]:
            mark = " ◀ plan" if p["chosen"] else ""
            table.add_row(
                p["label"] + mark,
                duration(p["total_time_s"]),
                f"${p['cost_usd']:.2f}",
                "yes" if p["feasible"] else "no",
            )
        console.print(table)
    network = plan.get("network")
    if network:
        console.print(f"network: {network['label']}", highlight=False, soft_wrap=True)
        for r in network["rates"]:
            rate = "learned model" if r["gbps"] is None else f"{r['gbps']:.3g} Gbit/s"
            console.print(f"  {r['instance_type']}: {rate} ({r['limit']})", highlight=False, soft_wrap=True)
        if network.get("recommendation"):
            console.print(f"[yellow]advice:[/] {network['recommendation']}", highlight=False, soft_wrap=True)
    for warning in plan["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    console.print("sources: " + "; ".join(plan["sources"]), highlight=False, soft_wrap=True)


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
            soft_wrap=True,
        )
        console.print(
            f"  iteration {p['iteration_p10_s']:.3g}–{p['iteration_p90_s']:.3g} s (p10–p90, estimate error "
            "included); profile the model on the chosen GPU (`srift profile --device cuda`) for measured "
            "times",
            highlight=False,
            soft_wrap=True,
        )
    elif candidates:
        console.print(
            f"{len(candidates)} other candidate types had estimated compute; the plan's are measured",
            highlight=False,
        )
    if plan.get("precision"):
        console.print(f"precision: {plan['precision']}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `srift plan`."""

    @app.command("plan")
    def plan(
        file: Path | None = typer.Argument(None, help="plan request (YAML or JSON); see --example"),
        as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
        url: str | None = typer.Option(
            None,
            "--url",
            help="ask a running server (e.g. http://127.0.0.1:8000) instead of the local database",
        ),
        token: str | None = typer.Option(
            None, "--token", help="API write token for --url (default: $SRIFT_TOKEN)"
        ),
        mode: str | None = typer.Option(
            None, "--mode", help="override the file's mode: exhaustive, eager, auto"
        ),
        solve_budget_s: float | None = typer.Option(
            None, "--solve-budget", min=0.01, help="override solve_budget_s"
        ),
        confidence: float | None = typer.Option(
            None,
            "--confidence",
            min=0.5,
            max=0.99,
            help="override the file's confidence: the quantile of time and cost that must meet the limits "
            "(default 0.9; 0.5 checks the prediction itself)",
        ),
        example: bool = typer.Option(False, "--example", help="print an example request file and exit"),
    ) -> None:
        """Find the cheapest (min_cost) or fastest (min_time) set of VMs and the per-VM batch for each type.

        FILE names the model's profiles, the global batch, iterations, the objective and optional limits
        (time_limit_s, budget_usd), provider/region, market and availability. The answer is counts and
        batches per instance type, e.g. "16 × g4dn.8xlarge @ 64, 41 min (38–45 min), $9.80 ($9.10–$10.70)",
        with the p10–p90 band of time and cost from the measured spreads the prediction rests on, compared
        with the CAP and TAP baselines, with the Pareto front of everything evaluated. Limits are checked
        at the request's `confidence` (default 0.9: the p90 of time and cost must meet them), and every
        plan and baseline says how likely it meets each limit. When no fleet meets the limits the error
        says which limit and the nearest relaxation. Examples:

          srift plan --example > request.yaml

          srift plan request.yaml

          srift plan request.yaml --mode exhaustive --json

          srift plan request.yaml --url http://127.0.0.1:8000 --token $SRIFT_TOKEN
        """
        from srift.errors import InvalidInput

        if example:
            typer.echo(EXAMPLE, nl=False)
            return
        if file is None:
            raise InvalidInput(
                "no request file given", hint="run `srift plan --example > r.yaml`", field="FILE"
            )
        body = load_request_file(file)
        if not isinstance(body, dict):
            raise InvalidInput(f"{file} must hold a mapping", hint="see `srift plan --example`", field="FILE")
        if mode is not None:
            body["mode"] = mode
        if solve_budget_s is not None:
            body["solve_budget_s"] = solve_budget_s
        if confidence is not None:
            body["confidence"] = confidence
        if url:
            result = call_api(
                "POST",
                url,
                "/v1/plans",
                body=body,
                token=token or os.environ.get("SRIFT_TOKEN"),
                timeout_s=600,
            )
        else:
            with console.status("searching...", spinner="dots"):
                result = _local(body)
        if as_json:
            typer.echo(json.dumps(result, indent=1))
            return
        render(result)
