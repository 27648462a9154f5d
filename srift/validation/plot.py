"""Predicted vs measured iteration time as a PNG (matplotlib, headless Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

MARKERS = {1: "o", 2: "s", 3: "^", 4: "D"}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def plot_predicted_vs_measured(
    rows: Sequence[dict[str, Any]], path: Path, *, title: str, summary: dict[str, Any] | None = None
) -> Path:
    """Log-log scatter of measured (x) vs predicted (y) mean iteration time per case, by model (colour) and
    host count (marker), with y = x, ±10 % bands and each case's repeat spread as a horizontal bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    good = [r for r in rows if r.get("measured_iteration_s") is not None]
    fig, ax = plt.subplots(figsize=(7.5, 6.5), dpi=120)
    models = sorted({str(r["model"]) for r in good})
    if good:
        lo = min(min(r["measured_iteration_s"], r["predicted"]["iteration_s"]) for r in good) * 0.8
        hi = max(max(r["measured_iteration_s"], r["predicted"]["iteration_s"]) for r in good) * 1.25
    else:
        lo, hi = 0.01, 1.0
    xs = [lo, hi]
    ax.plot(xs, xs, color="black", linewidth=1, label="predicted = measured")
    ax.fill_between(xs, [x * 0.9 for x in xs], [x * 1.1 for x in xs], color="grey", alpha=0.18, label="±10 %")
    for k, model in enumerate(models):
        color = COLORS[k % len(COLORS)]
        for hosts in sorted({int(r["hosts"]) for r in good if r["model"] == model}):
            mine = [r for r in good if r["model"] == model and int(r["hosts"]) == hosts]
            meas = [r["measured_iteration_s"] for r in mine]
            pred = [r["predicted"]["iteration_s"] for r in mine]
            spreads = [_spread(r) for r in mine]
            ax.errorbar(
                meas,
                pred,
                xerr=list(zip(*spreads, strict=True)) if spreads else None,
                fmt=MARKERS.get(hosts, "o"),
                color=color,
                markersize=6,
                markeredgecolor="black",
                markeredgewidth=0.5,
                elinewidth=0.8,
                capsize=2,
                alpha=0.85,
                label=f"{model}, {hosts} host{'s' if hosts > 1 else ''}",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured mean iteration time (s), bars: min..max of repeats")
    ax.set_ylabel("predicted iteration time (s)")
    if summary is not None:
        overall = summary["overall"]
        title += (
            f"\nMAPE {100 * (overall['mape'] or 0):.1f} %, underestimates {overall['underestimates']}/"
            f"{overall['cases']}, p90 underestimate {100 * (overall['underestimate_p90'] or 0):.1f} %"
        )
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _spread(row: dict[str, Any]) -> tuple[float, float]:
    means = [r["mean_iter_s"] for r in row["runs"] if r.get("ok")]
    centre = float(row["measured_iteration_s"])
    return (centre - min(means), max(means) - centre) if means else (0.0, 0.0)
