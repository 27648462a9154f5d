"""The validation report as text: rich tables for the terminal and Markdown for docs/BENCHMARKS.md."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Group as RichGroup
from rich.table import Table


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f} %"


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{1000 * value:.1f}"


def _summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    rows: list[tuple[str, str, Mapping[str, Any]]] = [("all", "all cases", summary["overall"])]
    for title, key in (
        ("model", "by_model"),
        ("hosts", "by_hosts"),
        ("type", "by_type"),
        ("batches", "by_batches"),
        ("placement", "by_placement"),
    ):
        for name, block in summary.get(key, {}).items():
            rows.append((title, name, block))
    return rows


def _coverage(summary: Mapping[str, Any], by: str, name: str) -> Mapping[str, Any] | None:
    cov = summary.get("coverage")
    if not cov:
        return None
    block: Mapping[str, Any] | None = cov["overall"] if by == "all" else cov.get(f"by_{by}", {}).get(name)
    return block


def _share(block: Mapping[str, Any] | None, key: str) -> str:
    if not block or not block.get("cases"):
        return "n/a"
    return f"{block[key]}/{block['cases']}"


def summary_table(report: Mapping[str, Any]) -> Table:
    summary = report["summary"]
    table = Table(title=f"end-to-end accuracy ({report['level']} matrix)", title_justify="left")
    columns = ("by", "group", "cases", "MAPE", "under", "p90 under", "worst under", "mean error")
    for col in (*columns, "≤ p90", "≥ p10"):
        table.add_column(col, justify="right" if col not in ("by", "group") else "left")
    for by, name, b in _summary_rows(summary):
        cov = _coverage(summary, _BY_KEY.get(by, by), name)
        table.add_row(
            by,
            name,
            str(b["cases"]),
            pct(b["mape"]),
            f"{b['underestimates']}/{b['cases']}",
            pct(b["underestimate_p90"]),
            pct(b["worst_underestimate"]),
            pct(b["mean_error"]),
            _share(cov, "below_p90"),
            _share(cov, "above_p10"),
        )
    return table


_BY_KEY = {"model": "model", "hosts": "hosts", "type": "type", "batches": "batches", "placement": "placement"}


def cases_table(report: Mapping[str, Any]) -> Table:
    table = Table(title="cases (mean iteration time, ms)", title_justify="left")
    for col in ("model", "fleet", "predicted", "p10 – p90", "measured", "error", "repeat noise", "runs"):
        table.add_column(col, justify="left" if col in ("model", "fleet") else "right")
    for r in report["cases"]:
        ok = [x for x in r["runs"] if x.get("ok")]
        pred = r["predicted"]
        table.add_row(
            r["model"],
            r["fleet"],
            ms(pred["iteration_s"]),
            f"{ms(pred.get('iteration_p10_s'))} – {ms(pred.get('iteration_p90_s'))}",
            ms(r["measured_iteration_s"]),
            "n/a" if r["error"] is None else f"{100 * r['error']:+.1f} %",
            pct(r["repeat_noise"]),
            f"{len(ok)}/{len(r['runs'])}",
        )
    return table


def _rank_label(choice: Mapping[str, Any], *, of: str) -> str:
    """A policy's measured rank ("2/8"), or why it has none: its measured time misses the deadline."""
    if choice.get("feasible") is False:
        return "misses deadline"
    return f"{choice['rank']}{of}{choice['of']}" if choice.get("rank") else "n/a"


def plan_table(plan: Mapping[str, Any]) -> Table:
    table = Table(
        title=f"plan quality: {plan['model']}, global batch {plan['global_batch']}, "
        f"{plan['configurations']} configurations run for real",
        title_justify="left",
    )
    for col in ("objective", "policy", "choice", "rank", "ratio to measured best", "measured best"):
        table.add_column(col)
    for block, policy, c, ratio in _plan_rows(plan):
        table.add_row(
            block["objective"],
            policy,
            str(c.get("fleet")),
            _rank_label(c, of="/"),
            ratio,
            str(block.get("best")),
        )
    return table


def _plan_rows(plan: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], str, Mapping[str, Any], str]]:
    """Per objective (primary, then secondary) and policy (Srift, CAP, TAP): the objective's block, the
    policy, its choice and the choice's measured ratio to the best as text ("n/a" without one)."""
    for key in ("primary", "secondary"):
        block = plan[key]
        for policy in ("srift", "cap", "tap"):
            c = block.get(policy) or {}
            ratio = c.get("ratio_to_best")
            yield block, policy, c, "n/a" if ratio is None else f"{ratio:.3f}"


def acceptance_table(report: Mapping[str, Any]) -> Table:
    table = Table(title="acceptance", title_justify="left")
    for col in ("check", "measured", "limit", "met"):
        table.add_column(col)
    for name, item in report["acceptance"].items():
        shown, lim = _acceptance_cells(name, item)
        table.add_row(name, shown, lim, "yes" if item["ok"] else "NO")
    return table


def _acceptance_cells(name: str, item: Mapping[str, Any]) -> tuple[str, str]:
    """(measured, limit) of one acceptance check as text."""
    value, limit = item["value"], item["limit"]
    if name.startswith("quick"):
        return f"{(value or 0) / 60:.1f} min", f"≤ {limit / 60:.0f} min"
    if isinstance(value, bool):
        return ("yes" if value else "no"), str(limit)
    if isinstance(limit, list | tuple):
        return pct(value), f"{pct(limit[0], 0)} – {pct(limit[1], 0)}"
    if name.startswith("plan"):
        return ("n/a" if value is None else f"{value:.3f}"), f"≤ {limit:.2f}"
    return pct(value), f"≤ {pct(limit)}"


def terminal_view(report: Mapping[str, Any]) -> RichGroup:
    parts: list[Any] = [cases_table(report), summary_table(report)]
    if report.get("plan_quality") and "primary" in report["plan_quality"]:
        parts.append(plan_table(report["plan_quality"]))
    parts.append(acceptance_table(report))
    return RichGroup(*parts)


def _passes_lines(report: Mapping[str, Any]) -> list[str]:
    """How the profiles' further timing passes moved them, and the accuracy with the first pass alone."""
    single = report["summary"].get("single_pass_overall")
    pooled = [p for p in report.get("profiles", []) if p.get("pass_compute_s_at_32")]
    if not single or not pooled:
        return []
    passes = max(p["timing_passes"] for p in pooled)
    lines = [
        "",
        f"Profiles: the `srift profile` pass plus up to {passes - 1} further timing passes over its "
        "breakpoints, spread over the DDP runs, pooled (each point the mean of the passes' means). With the "
        "first pass alone: MAPE "
        f"{pct(single['mape'])}, p90 underestimate {pct(single['underestimate_p90'])}. Forward+backward "
        "at batch 32 (ms) in each pass shows how far this host's speed drifted:",
        "",
        "| model | type | first pass | further passes | pooled |",
        "|---|---|---|---|---|",
    ]
    for p in pooled:
        further = ", ".join(ms(x) for x in p["pass_compute_s_at_32"])
        lines.append(
            f"| {p['model']} | {p['instance_type']} | {ms(p['single_pass_compute_s_at_32'])} | {further} | "
            f"{ms(p['compute_s_at_32'])} |"
        )
    return lines


def _colocation_lines(summary: Mapping[str, Any]) -> list[str]:
    """What the co-location factor did to the multi-host cases (srift.validation.colocation)."""
    found = summary.get("colocation")
    if not found:
        return []
    return [
        "",
        f"**Co-location** (the testbed's hosts share one machine): {found['cases']} multi-host cases "
        f"measured a host's compute with the fleet's other hosts computing at ×{found['factor_median']:.3f} "
        f"of alone (range ×{found['factor_min']:.3f} – ×{found['factor_max']:.3f}). Their MAPE from the "
        f"profiles as timed alone {pct(found['without']['mape'])}, with the factor "
        f"{pct(found['with']['mape'])}.",
    ]


def _coverage_lines(summary: Mapping[str, Any]) -> list[str]:
    cov = (summary.get("coverage") or {}).get("overall")
    if not cov or not cov.get("cases"):
        return []
    return [
        "",
        f"**Prediction band** (p10 – p90 of the mean iteration time, from the measured spreads of the "
        f"profiles, the bandwidth model and stragglers): measured ≤ p90 in {cov['below_p90']}/{cov['cases']} "
        f"cases ({pct(cov['below_p90_share'])}), ≥ p10 in {cov['above_p10']}/{cov['cases']} "
        f"({pct(cov['above_p10_share'])}), inside in {cov['inside']}/{cov['cases']} "
        f"({pct(cov['inside_share'])}); calibrated would be about 90 %, 90 % and 80 %.",
    ]


def _across_lines(report: Mapping[str, Any]) -> list[str]:
    """Predicted vs measured for every case across locations, with the links the predictions used."""
    rows = [r for r in report["cases"] if r.get("placement") == "across locations"]
    if not rows:
        return []
    links = ", ".join(
        f"{k['from']} ↔ {k['to']} {k['bandwidth_gbps'] * 1000:g} Mbit/s, {k['rtt_ms']:g} ms round trip"
        for k in report["testbed"].get("links", [])
    )
    lines = [
        "",
        f"Cases across locations (flat ring, predicted through the simulator's location level with the "
        f"testbed's links as the request's `links`: {links}):",
        "",
        "| model | fleet | predicted | measured | error | on the link (predicted) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        error = r.get("error")
        shown = "n/a" if error is None else f"{100 * error:+.1f} %"
        lines.append(
            f"| {r['model']} | {r['fleet']} | {ms(r['predicted']['iteration_s'])} ms | "
            f"{ms(r.get('measured_iteration_s'))} ms | {shown} | "
            f"{ms(r['predicted']['breakdown'].get('exposed_location_s'))} ms |"
        )
    return lines


def markdown(report: Mapping[str, Any]) -> str:
    """The BENCHMARKS.md section body: summary by group, noise, acceptance, plan quality, run time."""
    s = report["summary"]
    o = s["overall"]
    bw = report.get("bandwidth", {})
    repeats = report["effort"]["repeats"]
    minutes = report["duration_s"] / 60
    noise = pct(s["noise"]["repeat_noise_mape"])
    lines = [
        f"{o['cases']} cases ({report['level']} matrix: models × fleets of 1..4 testbed hosts, mixed types "
        f"included), each measured {repeats}× with real PyTorch DDP (gloo) and predicted by the simulator "
        f"from profiles made inside the hosts. Run time {minutes:.1f} min.",
        "",
        f"**End-to-end MAPE {pct(o['mape'])}**; {o['underestimates']}/{o['cases']} underestimates, their "
        f"90th percentile {pct(o['underestimate_p90'])} (Srift paper: 8.9 % and 13.5 %). Measurement noise "
        f"(MAPE of repeats against their case mean): {noise}. Layer-by-layer exchange (Srift's original "
        f"model, no DDP buckets): MAPE {pct(s['per_layer_overall']['mape'])}, p90 underestimate "
        f"{pct(s['per_layer_overall']['underestimate_p90'])}.",
        *_coverage_lines(s),
        *_colocation_lines(s),
        *_passes_lines(report),
        "",
        f"Bandwidth model: {bw.get('how', '?')} — `{bw.get('source', '?')}`.",
        "",
        "| by | group | cases | MAPE | underestimates | p90 underestimate | measured ≤ p90 "
        "| measured ≥ p10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for by, name, b in _summary_rows(s):
        cov = _coverage(s, _BY_KEY.get(by, by), name)
        lines.append(
            f"| {by} | {name} | {b['cases']} | {pct(b['mape'])} | {b['underestimates']}/{b['cases']} | "
            f"{pct(b['underestimate_p90'])} | {_share(cov, 'below_p90')} | {_share(cov, 'above_p10')} |"
        )
    plan = report.get("plan_quality")
    if plan and "primary" in plan:
        lines += [
            "",
            f"Plan quality ({plan['model']}, global batch {plan['global_batch']}, ≤ {plan['cap_per_type']} "
            f"VMs of each type, {plan['configurations']} configurations run for real):",
            "",
            "| objective | policy | choice | measured rank | ratio to measured best |",
            "|---|---|---|---|---|",
        ]
        for block, policy, c, ratio in _plan_rows(plan):
            rank = _rank_label(c, of=" of ")
            lines.append(f"| {block['objective']} | {policy} | {c.get('fleet')} | {rank} | {ratio} |")
    lines += _across_lines(report)
    lines += ["", "| acceptance | measured | limit | met |", "|---|---|---|---|"]
    for name, item in report["acceptance"].items():
        shown, lim = _acceptance_cells(name, item)
        lines.append(f"| {name} | {shown} | {lim} | {'yes' if item['ok'] else 'NO'} |")
    return "\n".join(lines)
