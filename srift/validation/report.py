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

REPORT_FORMAT = "srift-validation/1"


def summarize_cases(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """MAPE and underestimates overall and by model, host count, type group and batch mix; noise."""
    good = [r for r in rows if r.get("error") is not None]

    def block(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return stats.summarize([r["error"] for r in items]).to_dict()

    def by(key: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        return {k: block(v) for k, v in stats.group_by(good, key).items()}

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
        "by_model": by(lambda r: str(r["model"])),
        "by_hosts": by(lambda r: str(r["hosts"])),
        "by_type": by(lambda r: str(r["type_group"])),
        "by_batches": by(lambda r: "uniform" if len(set(r["batches"])) == 1 else "mixed"),
        "noise": {
            "repeat_noise_mape": statistics.fmean(noises) if noises else None,
            "repeat_noise_p90": stats.percentile(noises, 90) if noises else None,
            "cases_with_repeats": len(noises),
            "iteration_cv_mean": statistics.fmean(cvs) if cvs else None,
            "explained": "repeat_noise_mape is the MAPE of each repeat against its case's mean: the error "
            "a perfect predictor would still show on these measurements",
        },
        "failed_cases": len(rows) - len(good),
        "failed_runs": sum(1 for r in rows for x in r["runs"] if not x.get("ok")),
    }


def acceptance(
    summary: dict[str, Any], plan: dict[str, Any] | None, *, duration_s: float, full: bool
) -> dict[str, Any]:
    """The issue's acceptance checks, each with the measured figure."""
    overall = summary["overall"]
    out: dict[str, Any] = {
        "mape_le_10pct": {
            "value": overall["mape"],
            "limit": 0.10,
            "ok": overall["mape"] is not None and overall["mape"] <= 0.10,
        },
        "mape_target_5pct": {
            "value": overall["mape"],
            "limit": 0.05,
            "ok": overall["mape"] is not None and overall["mape"] <= 0.05,
        },
        "underestimate_p90_le_13_5pct": {
            "value": overall["underestimate_p90"],
            "limit": 0.135,
            "ok": overall["underestimate_p90"] is not None and overall["underestimate_p90"] <= 0.135,
        },
    }
    if not full:
        out["quick_within_15_min"] = {"value": duration_s, "limit": 900.0, "ok": duration_s <= 900.0}
    if plan is not None:
        ratio = plan.get("primary", {}).get("srift", {}).get("ratio_to_best")
        out["plan_within_5pct_of_best"] = {
            "value": ratio,
            "limit": 1.05,
            "ok": ratio is not None and ratio <= 1.05,
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
        },
        "effort": {k: getattr(ctx.effort, k) for k in ctx.effort.__slots__ if k != "probe_sizes"}
        | {"probe_sizes": [min(ctx.effort.probe_sizes), max(ctx.effort.probe_sizes)]},
        "profiles": ctx.profile_info,
        "timing_passes": ctx.timing_log,
        "bandwidth": ctx.bandwidth,
        "cases": rows,
        "summary": summary,
        "plan_quality": plan,
        "acceptance": acceptance(summary, plan, duration_s=duration, full=ctx.options.full),
        "timings": ctx.timings,
        "workdir": str(ctx.workdir),
    }
