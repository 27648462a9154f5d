// Plotly charts shared by the pages. Plotly (the bundle vendored from the `plotly` package, 4.8 MB) is loaded
// on first use, so pages and moments that draw nothing never pay for parsing it.

const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
const COLORS = {
  feasible: "#4c78a8",
  infeasible: "#b8c0cc",
  front: "#f58518",
  chosen: "#d62728",
  cap: "#54a24b",
  tap: "#b279a2",
  compute: "#4c78a8",
  straggler: "#f2cf5b",
  intra: "#72b7b2",
  network: "#e45756",
  stall: "#9d755d",
};
let loading = null;

/**
 * The unit a time axis is drawn in, picked from the largest of `seconds` as the CLI's columns do: hours from
 * 2 h, minutes from 2 min, else seconds (a 50-second job is plotted as 50 s, not 0.014 h).
 */
export function timeUnit(seconds) {
  const finite = seconds.filter((v) => Number.isFinite(v) && v > 0);
  const top = finite.length ? Math.max(...finite) : 0;
  if (top >= 7200) return { name: "hours", symbol: "h", scale: 3600 };
  if (top >= 120) return { name: "minutes", symbol: "min", scale: 60 };
  return { name: "seconds", symbol: "s", scale: 1 };
}

/** The Plotly global, loading /static/vendor/plotly.min.js once on first call. */
export function plotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = document.body.dataset.plotlyUrl;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => {
        loading = null;
        reject(new Error(`The chart could not be drawn: the chart library (${script.getAttribute("src")}) did not load.`));
      };
      document.head.append(script);
    });
  }
  return loading;
}

const LOAD_FAILED_HINT = "reload the page; if it fails again, check that the server has the `plotly` package (a Srift "
  + "dependency: pip install plotly where Srift runs).";

/**
 * Put a note in a chart's place (replacing any earlier one), or with `text` null take it away: a status
 * while the chart library loads, an alert with what to do when it cannot.
 */
function chartNote(div, text, { role = "status", hint = null } = {}) {
  div.querySelector(":scope > .chart-note")?.remove();
  if (text === null) return;
  const note = document.createElement("p");
  note.className = `chart-note ${role === "alert" ? "failed" : "loading"}`;
  note.setAttribute("role", role);
  note.textContent = text;
  if (hint) {
    const fix = document.createElement("span");
    fix.className = "hint";
    fix.textContent = ` To fix: ${hint}`;
    note.append(fix);
  }
  div.prepend(note);
}

/**
 * Draw (or redraw in place) a figure with the dashboard's Plotly config. Until the chart library has loaded
 * (about a second on first use), the chart's place says so; if it cannot load, the place says why and what
 * to do, and the promise resolves to null (the rest of the page stays usable).
 */
export async function react(div, traces, layout) {
  if (!window.Plotly) chartNote(div, "Loading the chart…");
  let Plotly;
  try {
    Plotly = await plotly();
  } catch (err) {
    chartNote(div, err.message, { role: "alert", hint: LOAD_FAILED_HINT });
    return null;
  }
  chartNote(div, null);
  return Plotly.react(div, traces, layout, PLOT_CONFIG);
}

function baseLayout(extra) {
  return {
    margin: { l: 64, r: 24, t: 16, b: 52 },
    hovermode: "closest",
    legend: { orientation: "h", y: -0.2 },
    paper_bgcolor: "#fff",
    plot_bgcolor: "#fff",
    font: { family: "system-ui, sans-serif", size: 12 },
    ...extra,
  };
}

/**
 * Dashed limit lines (time limit on x, budget on y) with their labels, on log axes: shapes take data
 * values, annotations the log10 of them.
 */
function limitShapes(timeLimitS, budgetUsd, unit) {
  const shapes = [];
  const annotations = [];
  const line = (dash) => ({ color: COLORS.chosen, dash, width: 1.5 });
  if (Number.isFinite(timeLimitS) && timeLimitS > 0) {
    const x = timeLimitS / unit.scale;
    shapes.push({ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line: line("dash"), name: "time limit" });
    annotations.push({ x: Math.log10(x), y: 0, xref: "x", yref: "paper", text: `time limit ${fmtIn(x, unit)}`, showarrow: false, textangle: -90, xanchor: "right", yanchor: "bottom", font: { color: COLORS.chosen } });
  }
  if (Number.isFinite(budgetUsd) && budgetUsd > 0) {
    shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: budgetUsd, y1: budgetUsd, line: line("dot"), name: "budget" });
    annotations.push({ x: 1, y: Math.log10(budgetUsd), xref: "paper", yref: "y", text: `budget $${budgetUsd.toLocaleString("en-US")}`, showarrow: false, xanchor: "right", yanchor: "bottom", font: { color: COLORS.chosen } });
  }
  return { shapes, annotations };
}

function fmtIn(v, unit) {
  return v >= 10 ? `${Math.round(v)} ${unit.symbol}` : `${Number(v.toPrecision(2))} ${unit.symbol}`;
}

function pointTrace(name, points, marker, extra = {}, unit = timeUnit(points.map((p) => p.total_time_s))) {
  return {
    type: "scatter",
    mode: "markers",
    name,
    x: points.map((p) => p.total_time_s / unit.scale),
    y: points.map((p) => p.cost_usd),
    text: points.map((p) => p.label),
    hovertemplate: `%{text}<br>%{x:.4g} ${unit.symbol}, $%{y:,.4g}<extra>${name}</extra>`,
    marker,
    ...extra,
  };
}

/**
 * Scatter of every configuration evaluated: total time vs total cost (USD); infeasible ones grey, the Pareto
 * front joined, the chosen plan a large star, CAP/TAP as diamonds, limits as dashed lines. The time unit
 * (s, min or h, named in the axis title) is picked from the Pareto front, the chosen plan and the limit.
 * Trace `uid`s ("evaluated-feasible", "evaluated-infeasible", "chosen", ...) let tests and users find them.
 */
export function drawPlanScatter(div, { points, chosen, baselines = {}, timeLimitS, budgetUsd }) {
  const feasible = points.filter((p) => p.feasible !== false);
  const infeasible = points.filter((p) => p.feasible === false);
  const front = points.filter((p) => p.on_front).sort((a, b) => a.total_time_s - b.total_time_s);
  const read = [...front, ...(chosen ? [chosen] : [])].map((p) => p.total_time_s);
  const unit = timeUnit(read.length ? [...read, timeLimitS] : points.map((p) => p.total_time_s));
  const traces = [
    pointTrace("infeasible", infeasible, { color: COLORS.infeasible, size: 6, symbol: "circle-open" }, { uid: "evaluated-infeasible" }, unit),
    pointTrace("feasible", feasible, { color: COLORS.feasible, size: 7, opacity: 0.75 }, { uid: "evaluated-feasible" }, unit),
    pointTrace("Pareto front", front, { color: COLORS.front, size: 8 }, { uid: "front", mode: "lines+markers", line: { color: COLORS.front, width: 2, shape: "hv" } }, unit),
  ];
  for (const [policy, color] of [["cap", COLORS.cap], ["tap", COLORS.tap]]) {
    const b = baselines[policy];
    if (!b) continue;
    traces.push(pointTrace(policy.toUpperCase(), [b], { color, size: 13, symbol: "diamond", line: { color: "#fff", width: 1 } }, { uid: policy }, unit));
  }
  if (chosen) {
    traces.push(pointTrace("chosen plan", [chosen], { color: COLORS.chosen, size: 20, symbol: "star", line: { color: "#fff", width: 1 } }, { uid: "chosen" }, unit));
  }
  const { shapes, annotations } = limitShapes(timeLimitS, budgetUsd, unit);
  const layout = baseLayout({
    xaxis: { title: { text: `total time (${unit.name}, log scale)` }, type: "log", zeroline: false, gridcolor: "#eef1f5" },
    yaxis: { title: { text: "total cost (USD, log scale)" }, type: "log", zeroline: false, gridcolor: "#eef1f5", tickprefix: "$" },
    shapes,
    annotations,
  });
  return react(div, traces, layout);
}

const SEGMENTS = [
  ["compute", "compute_s", COLORS.compute],
  ["straggler wait", "straggler_wait_s", COLORS.straggler],
  ["exposed intra-node comm.", "exposed_intra_s", COLORS.intra],
  ["exposed network comm.", "exposed_network_s", COLORS.network],
  ["data-loading stall", "data_stall_s", COLORS.stall],
];

/** Stacked horizontal bars of one iteration's time per configuration: [{name, breakdown}]. */
export function drawBreakdown(div, bars) {
  const shown = bars.filter((b) => b.breakdown);
  const names = shown.map((b) => b.name);
  const traces = SEGMENTS.map(([label, key, color]) => ({
    type: "bar",
    orientation: "h",
    name: label,
    uid: key,
    y: names,
    x: shown.map((b) => b.breakdown[key] ?? 0),
    marker: { color },
    customdata: shown.map((b) => [b.breakdown.forward_s, b.breakdown.backward_s, b.breakdown.granularity]),
    hovertemplate:
      key === "compute_s"
        ? "%{y}: compute %{x:.4g} s<br>forward %{customdata[0]:.4g} s, backward %{customdata[1]:.4g} s<extra></extra>"
        : `%{y}: ${label} %{x:.4g} s<extra></extra>`,
  }));
  const layout = baseLayout({
    barmode: "stack",
    margin: { l: 110, r: 24, t: 10, b: 70 },
    xaxis: { title: { text: "seconds per iteration" }, gridcolor: "#eef1f5", rangemode: "tozero" },
    yaxis: { autorange: "reversed" },
    legend: { orientation: "h", y: -0.35, traceorder: "normal" },
  });
  return react(div, traces, layout);
}

/**
 * What-if scatter: one point per prediction, p10–p90 as horizontal error bars, the latest highlighted; the time
 * unit is picked from the what-ifs' p90 totals.
 */
export function drawWhatIfScatter(div, history) {
  const unit = timeUnit(history.map((h) => Math.max(h.prediction.total_time_s, h.prediction.iteration_p90_s * h.iterations)));
  const toPoint = (h) => ({ label: h.label, total_time_s: h.prediction.total_time_s, cost_usd: h.prediction.cost_usd });
  const errors = (list) => ({
    type: "data",
    symmetric: false,
    array: list.map((h) => Math.max(0, (h.prediction.iteration_p90_s - h.prediction.iteration_s) * h.iterations) / unit.scale),
    arrayminus: list.map((h) => Math.max(0, (h.prediction.iteration_s - h.prediction.iteration_p10_s) * h.iterations) / unit.scale),
    color: "#9aa5b1",
  });
  const earlier = history.slice(0, -1);
  const latest = history.slice(-1);
  const traces = [
    pointTrace("earlier what-ifs", earlier.map(toPoint), { color: COLORS.feasible, size: 9 }, { uid: "earlier", error_x: errors(earlier) }, unit),
    pointTrace("latest", latest.map(toPoint), { color: COLORS.chosen, size: 18, symbol: "star" }, { uid: "chosen", error_x: errors(latest) }, unit),
  ];
  const layout = baseLayout({
    xaxis: { title: { text: `total time (${unit.name})` }, gridcolor: "#eef1f5", rangemode: "tozero" },
    yaxis: { title: { text: "total cost (USD)" }, gridcolor: "#eef1f5", tickprefix: "$", rangemode: "tozero" },
  });
  return react(div, traces, layout);
}

/**
 * A replayed distribution as bars (one per bin, its share of the windows) with dashed marks at the plan's
 * own figures: `hist` {edges, shares, counts}; `kind` "time" (edges in seconds, drawn in the unit picked
 * from them) or "cost" (USD); `marks` [{name, value, color}] drawn as vertical lines (shapes named after
 * them). Trace uid "replayed".
 */
export function drawReplayHistogram(div, { hist, kind, marks = [] }) {
  const edges = hist.edges || [];
  const shown = marks.filter((m) => Number.isFinite(m.value));
  const unit = kind === "time" ? timeUnit([...edges, ...shown.map((m) => m.value)]) : { scale: 1, symbol: "$", name: "USD" };
  const x = (v) => v / unit.scale;
  const centres = edges.slice(1).map((hi, i) => x((edges[i] + hi) / 2));
  const widths = edges.slice(1).map((hi, i) => Math.max(x(hi - edges[i]), 1e-9));
  const fmt = (v) => (kind === "time" ? fmtIn(v, unit) : `$${Number(v.toPrecision(3))}`);
  const traces = [{
    type: "bar",
    name: "replayed windows",
    uid: "replayed",
    x: centres,
    y: (hist.shares || []).map((s) => 100 * s),
    width: widths,
    customdata: (hist.counts || []).map((c, i) => [c, fmt(x(edges[i])), fmt(x(edges[i + 1]))]),
    hovertemplate: "%{customdata[1]}–%{customdata[2]}: %{y:.1f} % of the windows (%{customdata[0]})<extra></extra>",
    marker: { color: COLORS.feasible, opacity: 0.8 },
  }];
  const shapes = shown.map((m) => ({
    type: "line", xref: "x", yref: "paper", x0: x(m.value), x1: x(m.value), y0: 0, y1: 1, name: m.name,
    line: { color: m.color || COLORS.chosen, dash: m.dash || "dash", width: 1.5 },
  }));
  const annotations = shown.map((m, i) => ({
    x: x(m.value), y: 1 - 0.09 * i, xref: "x", yref: "paper", text: `${m.name} ${fmt(x(m.value))}`, showarrow: false,
    xanchor: "left", yanchor: "top", font: { color: m.color || COLORS.chosen, size: 11 }, bgcolor: "rgba(255,255,255,.8)",
  }));
  const layout = baseLayout({
    margin: { l: 56, r: 16, t: 10, b: 48 },
    bargap: 0.05,
    showlegend: false,
    xaxis: {
      title: { text: kind === "time" ? `finish time (${unit.name})` : "cost (USD)" },
      gridcolor: "#eef1f5", tickprefix: kind === "time" ? "" : "$", zeroline: false,
    },
    yaxis: { title: { text: "% of windows" }, gridcolor: "#eef1f5", rangemode: "tozero" },
    shapes,
    annotations,
  });
  return react(div, traces, layout);
}
