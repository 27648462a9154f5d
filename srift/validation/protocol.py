"""The accuracy protocol: figures pooled over several independent `srift validate` runs, with their spread.

One run is one sample: runs of identical code on this machine differ by several points, so a published
figure pools the cases of at least three runs (each with fresh profiles and probes), and shows each run's
own figures beside the pooled ones. A run may consist of several reports (the shipped models, then the
held-out models in groups of three, each a `srift validate --quick` of its own); its cases are those of all
its reports. The targets are issue 43's: MAPE ≤ 7 %, at most 60 % of cases underestimated, the 90th
percentile of the underestimates ≤ 12 %, and the measured time at or below the predicted p90 in 80–97 %.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srift.validation import stats

MIN_RUNS = 3
"""Runs a published figure pools at least."""

TARGETS: dict[str, tuple[float, float]] = {
    "mape": (0.0, 0.07),
    "underestimate_share": (0.0, 0.60),
    "underestimate_p90": (0.0, 0.12),
    "below_p90_share": (0.80, 0.97),
}
"""Each pooled figure's allowed range (fractions): issue 43's, for the DDP cases."""

SHARDED_TARGETS: dict[str, tuple[float, float]] = {"mape": (0.0, 0.10), "underestimate_p90": (0.0, 0.15)}
"""Issue 45's for the sharded cases (and their peak memory per rank within 10 %)."""


@dataclass(frozen=True, slots=True)
class Figures:
    """Accuracy of a set of cases: the ErrorSummary's figures and the p90 coverage."""

    cases: int
    mape: float
    underestimate_share: float
    underestimate_p90: float
    below_p90_share: float

    def to_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.__slots__}


def measured_cases(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's cases that have a measurement, an error and a band."""
    return [
        c
        for c in report.get("cases", [])
        if c.get("error") is not None
        and c.get("measured_iteration_s") is not None
        and c.get("predicted", {}).get("iteration_p90_s") is not None
    ]


def figures(cases: Sequence[Mapping[str, Any]]) -> Figures:
    """MAPE, share and 90th percentile of underestimates, and p90 coverage of `cases` (non-empty)."""
    if not cases:
        raise ValueError("no measured cases to score")
    summary = stats.summarize([float(c["error"]) for c in cases])
    below = sum(1 for c in cases if c["measured_iteration_s"] <= c["predicted"]["iteration_p90_s"])
    return Figures(
        cases=len(cases),
        mape=summary.mape,
        underestimate_share=summary.underestimate_share,
        underestimate_p90=summary.underestimate_p90,
        below_p90_share=below / len(cases),
    )


@dataclass(frozen=True, slots=True)
class Run:
    """One protocol run: a name and its reports."""

    name: str
    reports: tuple[Mapping[str, Any], ...]

    @property
    def cases(self) -> list[dict[str, Any]]:
        return [c for r in self.reports for c in measured_cases(r)]

    @property
    def minutes(self) -> float:
        return sum(float(r.get("duration_s") or 0.0) for r in self.reports) / 60

    @property
    def load_average(self) -> tuple[float, float]:
        """The least and largest load average before or after any of its reports."""
        loads = [
            float(r["machine"][k])
            for r in self.reports
            for k in ("load_avg_before", "load_avg_after")
            if isinstance(r.get("machine", {}).get(k), int | float)
        ]
        return (min(loads), max(loads)) if loads else (math.nan, math.nan)


@dataclass(frozen=True, slots=True)
class Pooled:
    """The protocol's answer: pooled figures over every run's cases, each run's own, and their spread."""

    pooled: Figures
    per_run: tuple[tuple[str, Figures], ...]
    spread: dict[str, tuple[float, float, float]]
    """Per figure: (min, max, standard deviation) over the runs."""
    met: dict[str, bool]

    @property
    def all_met(self) -> bool:
        return all(self.met.values())


def pool(runs: Sequence[Run], *, targets: Mapping[str, tuple[float, float]] = TARGETS) -> Pooled:
    """Pool the runs' cases. ValueError with fewer than MIN_RUNS runs or a run without measured cases."""
    if len(runs) < MIN_RUNS:
        raise ValueError(f"the protocol pools at least {MIN_RUNS} runs, got {len(runs)}")
    per_run = []
    for run in runs:
        cases = run.cases
        if not cases:
            raise ValueError(f"run {run.name!r} has no measured cases")
        per_run.append((run.name, figures(cases)))
    pooled = figures([c for run in runs for c in run.cases])
    spread = {}
    for key in TARGETS:
        values = [float(getattr(f, key)) for _, f in per_run]
        spread[key] = (min(values), max(values), statistics.stdev(values) if len(values) > 1 else 0.0)
    met = {key: lo <= float(getattr(pooled, key)) <= hi for key, (lo, hi) in targets.items()}
    return Pooled(pooled=pooled, per_run=tuple(per_run), spread=spread, met=met)


CaseFilter = Callable[[Mapping[str, Any]], bool]


def subset(runs: Sequence[Run], keep: CaseFilter) -> list[Run]:
    """The runs with only the cases `keep` accepts."""
    return [
        Run(run.name, tuple({**r, "cases": [c for c in r.get("cases", []) if keep(c)]} for r in run.reports))
        for run in runs
    ]


def sharded(case: Mapping[str, Any]) -> bool:
    """A case of a sharded strategy (FSDP/ZeRO; srift.validation.sharded), not plain DDP."""
    return str(case.get("strategy") or "ddp") != "ddp"


def memory_errors(cases: Sequence[Mapping[str, Any]]) -> list[float]:
    """Predicted-over-measured peak memory errors per rank of the cases that measured them."""
    return [
        float(e)
        for c in cases
        for e in (c.get("memory") or {}).get("errors", [])
        if isinstance(e, int | float)
    ]


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def markdown(
    runs: Sequence[Run],
    *,
    sets: Mapping[str, CaseFilter],
    targets: Mapping[str, tuple[float, float]] = TARGETS,
) -> str:
    """The BENCHMARKS.md section: the pooled figures against the targets, each run's figures, the spread
    between runs, and the same pooled per case set (`sets`: name → which cases)."""
    result = pool(runs, targets=targets)
    p = result.pooled
    wanted = ", ".join(
        f"{key} ≤ {_pct(hi)}" if lo == 0 else f"{key} {_pct(lo)}–{_pct(hi)}"
        for key, (lo, hi) in targets.items()
    )
    lines = [
        f"Pooled over {len(runs)} independent quick runs ({p.cases} cases; each run profiles, probes and "
        f"measures afresh). Targets: {wanted}.",
        "",
        "| runs | cases | MAPE | underestimated | p90 of underestimates | measured ≤ p90 | minutes | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run, (name, f) in zip(runs, result.per_run, strict=True):
        lo, hi = run.load_average
        lines.append(
            f"| {name} | {f.cases} | {_pct(f.mape)} | {_pct(f.underestimate_share)} | "
            f"{_pct(f.underestimate_p90)} | {_pct(f.below_p90_share)} | {run.minutes:.1f} | "
            f"{lo:.2f}–{hi:.2f} |"
        )
    lines.append(
        f"| **pooled** | {p.cases} | **{_pct(p.mape)}** | **{_pct(p.underestimate_share)}** | "
        f"**{_pct(p.underestimate_p90)}** | **{_pct(p.below_p90_share)}** | | |"
    )
    spread = ", ".join(
        f"{key} {_pct(lo)}–{_pct(hi)} (sd {_pct(sd)})"
        for key, (lo, hi, sd) in result.spread.items()
        if key in targets
    )
    lines += ["", f"Between runs: {spread}.", ""]
    met = ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in result.met.items())
    lines += [f"Pooled against the targets: {met}.", ""]
    if sets:
        lines += [
            "| case set | cases | MAPE | underestimated | p90 of underestimates | measured ≤ p90 |",
            "|---|---|---|---|---|---|",
        ]
        for name, keep in sets.items():
            part = subset(runs, keep)
            cases = [c for run in part for c in run.cases]
            if not cases:
                continue
            f = figures(cases)
            memory = memory_errors(cases)
            worst = f"; peak memory per rank within {_pct(max(abs(e) for e in memory))}" if memory else ""
            lines.append(
                f"| {name} | {f.cases} | {_pct(f.mape)} | {_pct(f.underestimate_share)} | "
                f"{_pct(f.underestimate_p90)} | {_pct(f.below_p90_share)}{worst} |"
            )
    return "\n".join(lines)
