"""The report of `srift validate`: per-case errors summarised, the acceptance checks, machine and effort."""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from srift.validation import conditions, stats
from srift.validation.context import Context
from srift.validation.sharded import sharded_summary
from srift.validation.steps import testbed_links

REPORT_FORMAT = "srift-validation/1"

GROUPINGS: dict[str, Callable[[dict[str, Any]], str]] = {
    "by_model": lambda r: str(r["model"]),
    "by_hosts": lambda r: str(r["hosts"]),
    "by_type": lambda r: str(r["type_group"]),
    "by_batches": lambda r: "uniform" if len(set(r["batches"])) == 1 else "mixed",
    "by_placement": lambda r: str(r.get("placement") or "one location"),
}
"""How the report groups its cases (each group's errors and band coverage): name, then the case's group."""


def summarize_cases(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """MAPE and underestimates overall and by model, host count, type group and batch mix; noise."""
    good = [r for r in rows if r.get("error") is not None]

    def block(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return stats.summarize([r["error"] for r in items]).to_dict()

    def by(key: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        return {k: block(v) for k, v in stats.group_by(good, key).items()}

    def cover(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return coverage(items)

    def cover_by(key: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        return {k: cover(v) for k, v in stats.group_by(good, key).items()}

    noises = [r["repeat_noise"] for r in good if len([x for x in r["runs"] if x.get("ok")]) >= 2]
    cvs = [r["iteration_cv"] for r in good if r.get("iteration_cv") is not None]
    return {
        "overall": block(good),
        "per_layer_overall": stats.summarize([r["per_layer_error"] for r in good]).to_dict(),
        "single_pass_overall": (
            stats.summarize([r["single_pass_error"] for r in good]).to_dict()
            if all(r.get("single_pass_error") is not None for r in good) and good
            else None
        ),
        "colocation": colocation_summary(good),
        **{name: by(key) for name, key in GROUPINGS.items()},
        "coverage": {
            "overall": cover(good),
            **{name: cover_by(key) for name, key in GROUPINGS.items()},
            "explained": "share of cases whose measured mean iteration time is at or above the predicted "
            "p10 (above_p10), at or below the predicted p90 (below_p90, the p90 coverage), and both "
            "(inside); a calibrated band has about 90 %, 90 % and 80 %",
        },
        "noise": {
            "repeat_noise_mape": statistics.fmean(noises) if noises else None,
            "repeat_noise_p90": stats.percentile(noises, 90) if noises else None,
            "cases_with_repeats": len(noises),
            "iteration_cv_mean": statistics.fmean(cvs) if cvs else None,
            "explained": "repeat_noise_mape is the MAPE of each repeat against its case's mean: the error "
            "a perfect predictor would still show on these measurements",
        },
        "sharded": sharded_summary(rows),
        "failed_cases": len(rows) - len(good),
        "failed_runs": sum(1 for r in rows for x in r["runs"] if not x.get("ok")),
    }


def colocation_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The co-location factors the multi-host cases measured, and those cases' errors without them."""
    found = [r for r in rows if r.get("colocation")]
    if not found:
        return None
    factors = [f for r in found for f in r["colocation"]["factors"]]
    return {
        "cases": len(found),
        "factor_median": statistics.median(factors),
        "factor_min": min(factors),
        "factor_max": max(factors),
        "without": stats.summarize([r["colocation"]["alone_error"] for r in found]).to_dict(),
        "with": stats.summarize([r["error"] for r in found]).to_dict(),
        "explained": "factor: a host's compute seconds with the fleet's other hosts computing over alone, "
        "per group (srift.validation.colocation); without/with: these cases' errors predicted from the "
        "profiles as timed alone and with the factor",
    }


def coverage(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How often the measured value fell inside the predicted band: counts and shares (of cases that have a
    band and a measurement)."""
    banded = [
        r
        for r in rows
        if r.get("measured_iteration_s") is not None and r["predicted"].get("iteration_p10_s") is not None
    ]
    n = len(banded)
    above = sum(1 for r in banded if r["measured_iteration_s"] >= r["predicted"]["iteration_p10_s"])
    below = sum(1 for r in banded if r["measured_iteration_s"] <= r["predicted"]["iteration_p90_s"])
    inside = sum(
        1
        for r in banded
        if r["predicted"]["iteration_p10_s"] <= r["measured_iteration_s"] <= r["predicted"]["iteration_p90_s"]
    )
    return {
        "cases": n,
        "above_p10": above,
        "below_p90": below,
        "inside": inside,
        "above_p10_share": above / n if n else None,
        "below_p90_share": below / n if n else None,
        "inside_share": inside / n if n else None,
    }


def acceptance(
    summary: dict[str, Any], plan: dict[str, Any] | None, *, duration_s: float, full: bool
) -> dict[str, Any]:
    """The issue's acceptance checks, each with the measured figure."""
    overall = summary["overall"]

    def at_most(value: float | None, limit: float) -> dict[str, Any]:
        return {"value": value, "limit": limit, "ok": value is not None and value <= limit}

    covered = (summary.get("coverage") or {}).get("overall") or {}
    p90_share = covered.get("below_p90_share")
    out: dict[str, Any] = {
        "mape_le_7pct": at_most(overall["mape"], 0.07),
        "underestimated_share_le_60pct": at_most(overall["underestimate_share"], 0.60),
        "underestimate_p90_le_12pct": at_most(overall["underestimate_p90"], 0.12),
        "p90_coverage_80_to_97pct": {
            "value": p90_share,
            "limit": [0.80, 0.97],
            "ok": p90_share is not None and 0.80 <= p90_share <= 0.97,
        },
    }
    across = summary.get("by_placement", {}).get("across locations")
    if across is not None:
        out["across_locations_mape_le_10pct"] = at_most(across["mape"], 0.10)
    if not full:
        out["quick_within_15_min"] = {"value": duration_s, "limit": 900.0, "ok": duration_s <= 900.0}
    if plan is not None and "secondary" in plan:
        chosen = plan["secondary"].get("srift") or {}
        met = chosen.get("feasible")
        out["plan_meets_deadline_in_every_repeat"] = {"value": met, "limit": True, "ok": met is True}
        ratio = chosen.get("ratio_to_best")
        out["plan_cost_within_10pct_of_cheapest"] = {
            "value": ratio,
            "limit": 1.10,
            "ok": met is True and ratio is not None and ratio <= 1.10,
        }
        fastest = plan.get("primary", {}).get("srift", {}).get("ratio_to_best")
        out["plan_min_time_within_5pct_of_best"] = {
            "value": fastest,
            "limit": 1.05,
            "ok": fastest is not None and fastest <= 1.05,
        }
    return out


def build_report(
    ctx: Context,
    rows: list[dict[str, Any]],
    plan: dict[str, Any] | None,
    *,
    started_at: dt.datetime,
    load_before: float,
) -> dict[str, Any]:
    """The JSON-ready report of one run (format REPORT_FORMAT)."""
    from srift.profiling.accelerator import cpu_model

    summary = summarize_cases(rows)
    finished = dt.datetime.now(dt.UTC)
    duration = (finished - started_at).total_seconds()
    return {
        "format": REPORT_FORMAT,
        "level": "full" if ctx.options.full else "quick",
        "command": ctx.options.command,
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": cpu_model(),
            "python": platform.python_version(),
            "load_avg_before": load_before,
            "load_avg_after": conditions.load_average(),
        },
        "testbed": {
            "prefix": ctx.spec.prefix,
            "spec": ctx.spec.to_dict(),
            "max_cores": ctx.options.resolved_max_cores(),
            "cpu_period_us": ctx.options.period_us,
            "links": testbed_links(ctx.spec),
        },
        "effort": {k: getattr(ctx.effort, k) for k in ctx.effort.__slots__ if k != "probe_sizes"}
        | {"probe_sizes": [min(ctx.effort.probe_sizes), max(ctx.effort.probe_sizes)]},
        "models": list(ctx.options.model_specs()),
        "user_models": [
            {"name": m.name, "factory": m.factory, "input": m.input_factory, "loss": m.loss}
            for m in ctx.options.user_models
        ],
        "profiles": ctx.profile_info,
        "timing_passes": ctx.timing_log,
        "bandwidth": ctx.bandwidth,
        "bandwidth_source": ctx.options.bandwidth.value,
        "seed": ctx.options.seed,
        "overlap": ctx.overlap,
        "cases": rows,
        "summary": summary,
        "plan_quality": plan,
        "acceptance": acceptance(summary, plan, duration_s=duration, full=ctx.options.full),
        "timings": ctx.timings,
        "workdir": str(ctx.workdir),
    }
