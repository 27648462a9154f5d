// Jobs page: probe/profile jobs with state and logs; training runs with progress, their re-plan history, and a
// form that amends a run's limits or objective (POST /v1/jobs/{id}/amendments), resuming one in needs_input.

import { react, timeUnit } from "./charts.js";
import {
  badge, clearErrors, el, markReady, fmtNumber, fmtSeconds, fmtTime, fmtUsd, get, items, numberOrNull, post, renderTable,
  showBoxError, submitting,
} from "./common.js";

const $ = (id) => document.getElementById(id);
const amendForm = $("runs-amend");
let selectedJob = null;
let selectedRun = null;
let shownRun = null;
let amendFilledFor = null;
let timer = null;

function duration(job) {
  const start = job.started_at ? new Date(job.started_at) : null;
  const end = job.finished_at ? new Date(job.finished_at) : null;
  if (!start) return "—";
  const seconds = ((end || new Date()) - start) / 1000;
  return seconds >= 0 ? fmtSeconds(seconds) : "—";
}

/**
 * A list fetched into a table whose rows select an item: `items(await get(path), key)` drawn with `columns`
 * into `${name}-table` (a failure shown in `${name}-error`); the row whose id `selected()` returns is marked,
 * a click shows its item (`show(id)`), and after each load the selected item is shown again, quietly.
 */
async function loadList(name, { path, key, columns, empty, selected, show }) {
  const box = $(`${name}-error`);
  try {
    const rows = items(await get(path), key);
    box.hidden = true;
    renderTable($(`${name}-table`), columns, rows, {
      id: `${name}-list`,
      empty,
      rowClass: (row) => (row.id === selected() ? "selected" : null),
      onClick: (row) => show(row.id),
    });
    if (selected() !== null) await show(selected(), { quiet: true });
  } catch (err) {
    showBoxError(box, err);
  }
}

function loadJobs() {
  return loadList("jobs", {
    path: "/probe-jobs",
    key: "jobs",
    columns: [
      { label: "#", value: (j) => j.id, num: true },
      { label: "Kind", value: (j) => j.kind ?? "probe" },
      { label: "Provider", value: (j) => j.provider ?? "—" },
      { label: "Instance type", value: (j) => jobTypes(j) },
      { label: "State", value: (j) => badge(j.state) },
      { label: "Created", value: (j) => fmtTime(j.created_at) },
      { label: "Ran for", value: duration, num: true },
      { label: "Attempts", value: (j) => j.attempts ?? "—", num: true },
      { label: "Outcome", value: (j) => (j.error ? String(j.error).slice(0, 80) : outcome(j.result)) },
    ],
    empty: "no probe or profile jobs yet: `srift probe run` or POST /v1/probe-jobs queues one",
    selected: () => selectedJob,
    show: showJob,
  });
}

function jobTypes(job) {
  const r = job.request || {};
  return (r.instance_types || (r.instance_type ? [r.instance_type] : [])).join(", ") || "—";
}

/** A job's result in a few words: samples or profiles it stored, and anything else it reports. */
function outcome(result) {
  if (!result || !Object.keys(result).length) return "";
  return Object.entries(result)
    .map(([k, v]) => `${k.replaceAll("_", " ")}: ${Array.isArray(v) ? v.length : typeof v === "object" && v ? Object.keys(v).length : v}`)
    .join(", ")
    .slice(0, 80);
}

function listText(values) {
  return values.length > 6 ? `${values[0]}…${values[values.length - 1]} (${values.length} values)` : values.join(",");
}

function requestLine(job) {
  const r = { ...(job.request || {}) };
  delete r.ec2;
  return Object.entries(r)
    .filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && !v.length))
    .map(([k, v]) => `${k}=${Array.isArray(v) ? listText(v) : typeof v === "object" ? JSON.stringify(v) : v}`)
    .join("  ");
}

async function showJob(id, { quiet = false } = {}) {
  selectedJob = id;
  const box = $("jobs-detail-error");
  try {
    const job = await get(`/probe-jobs/${id}`);
    box.hidden = true;
    $("jobs-detail").hidden = false;
    $("jobs-detail-title").replaceChildren(`Job #${job.id} · ${job.kind} on ${job.provider} · `, badge(job.state),
      job.worker_id ? ` · worker ${job.worker_id}` : "");
    $("jobs-request").textContent = requestLine(job);
    const log = job.log ?? (job.logs || []).join("\n");
    const pre = $("jobs-log");
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = [log || "(no log yet)", job.error ? `\nerror: ${job.error}` : ""].join("");
    if (atBottom || !quiet) pre.scrollTop = pre.scrollHeight;
    for (const tr of $("jobs-table").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.firstChild.textContent === String(id));
  } catch (err) {
    showBoxError(box, err);
  }
}

function loadRuns() {
  return loadList("runs", {
    path: "/jobs",
    key: "runs",
    columns: [
      { label: "#", value: (r) => r.id, num: true },
      { label: "State", value: (r) => badge(r.state) },
      { label: "Plan", value: (r) => planLink(r.plan_id) },
      { label: "Current plan", value: (r) => planLink(r.current_plan_id) },
      { label: "Iterations done", value: (r) => fmtNumber(r.iterations_done), num: true },
      { label: "Elapsed", value: (r) => fmtSeconds(r.elapsed_s), num: true },
      { label: "Spent", value: (r) => fmtUsd(r.spent_usd), num: true },
      { label: "Interruptions", value: (r) => r.interruptions, num: true },
      { label: "Re-plans", value: (r) => r.replans, num: true },
      { label: "Created", value: (r) => fmtTime(r.created_at) },
    ],
    empty: "no tracked training runs: POST /v1/jobs with a plan id starts tracking one",
    selected: () => selectedRun,
    show: showRun,
  });
}

function planLink(id) {
  return id ? el("a", { href: `/?plan=${id}`, onclick: (ev) => ev.stopPropagation() }, `#${id}`) : "—";
}

function isReplan(e) {
  return /replan|interrupt/i.test(e.kind || "");
}

async function showRun(id) {
  selectedRun = id;
  try {
    const run = await get(`/jobs/${id}`);
    shownRun = run;
    showAmendForm(run);
    $("runs-detail").hidden = false;
    for (const tr of $("runs-table").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.firstChild.textContent === String(id));
    const limits = [run.time_limit_s != null ? `time limit ${fmtSeconds(run.time_limit_s)}` : null, run.budget_usd != null ? `budget ${fmtUsd(run.budget_usd)}` : null].filter(Boolean);
    $("runs-detail-title").replaceChildren(
      `Run #${run.id} · `, badge(run.state),
      ` · ${fmtNumber(run.iterations_done)} of ${fmtNumber(run.iterations_total)} iterations`,
      limits.length ? ` · ${limits.join(", ")}` : "",
      run.excluded_types?.length ? ` · no longer launched: ${run.excluded_types.join(", ")}` : "",
    );
    renderTable($("runs-plans"), [
      { label: "Plan", value: (p) => planLink(p.id) },
      { label: "", value: (p) => (p.id === run.current_plan_id ? badge("current") : p.id === run.plan_id ? "first" : "re-plan") },
      { label: "Fleet", value: (p) => p.label },
      { label: "Iterations", value: (p) => fmtNumber(p.iterations), num: true },
      { label: "Predicted time", value: (p) => fmtSeconds(p.total_time_s), num: true },
      { label: "Predicted cost", value: (p) => fmtUsd(p.cost_usd), num: true },
    ], run.plans || [], { id: "runs-plans-table", rowClass: (p) => (p.id === run.current_plan_id ? "chosen" : null) });
    const events = run.events || [];
    renderTable($("runs-events"), [
      { label: "When", value: (e) => fmtTime(e.created_at) },
      { label: "Event", value: (e) => (e.payload?.error ? [e.kind, " ", badge("failed")] : e.kind) },
      { label: "Iterations done", value: (e) => fmtNumber(e.payload?.iterations_done), num: true },
      { label: "Elapsed", value: (e) => fmtSeconds(e.payload?.elapsed_s), num: true },
      { label: "Spent", value: (e) => fmtUsd(e.payload?.spent_usd), num: true },
      { label: "New plan", value: (e) => (e.kind === "started" ? "—" : planLink(e.payload?.plan_id)) },
      { label: "Details", value: (e) => summary(e.payload), wrap: true },
    ], events, { id: "runs-events-table", empty: "no events yet" });
    await drawProgress(events);
    await drawIterations(await get(`/jobs/${run.id}/iterations`));
  } catch (err) {
    showBoxError($("runs-error"), err);
  }
}

/** The run's last failed re-plan (interruption or amendment), which is why it waits in needs_input. */
function lastFailure(run) {
  const failed = (run.events || []).filter((e) => e.payload?.error);
  return failed.length ? failed[failed.length - 1].payload.error : null;
}

/**
 * The amend form of the shown run: hidden once it completed; filled with the run's limits and objective when
 * another run is shown (not on the 5-second refresh, which would undo what you type); a run in needs_input
 * says why it waits and the button resumes it.
 */
function showAmendForm(run) {
  amendForm.hidden = run.state === "completed";
  const waiting = run.state === "needs_input";
  $("runs-amend-title").textContent = waiting ? "Resume: change the limits or objective" : "Change the limits or objective";
  $("runs-amend-submit").textContent = waiting ? "Re-plan and resume" : "Re-plan";
  const why = waiting ? lastFailure(run) : null;
  $("runs-amend-why").textContent = waiting
    ? `No plan fits the rest of the run${why ? `: ${why.detail}${why.hint ? `. To fix: ${why.hint}` : ""}` : ""}. Raise a limit or change the objective, then re-plan.`
    : "A new plan for the rest of the run under these limits (the types lost so far stay excluded).";
  if (amendFilledFor === run.id) return;
  amendFilledFor = run.id;
  clearErrors(amendForm);
  $("runs-amend-done").textContent = "";
  $("runs-amend-time").value = run.time_limit_s ?? "";
  $("runs-amend-budget").value = run.budget_usd ?? "";
  $("runs-amend-objective").value = run.objective ?? "min_cost";
}

/** What the form changes against the run: only fields that differ are sent (the API keeps the rest). */
function amendment(run) {
  const body = {};
  const time = numberOrNull($("runs-amend-time"));
  const budget = numberOrNull($("runs-amend-budget"));
  if (time !== null && time !== run.time_limit_s) body.time_limit_s = time;
  if (budget !== null && budget !== run.budget_usd) body.budget_usd = budget;
  if ($("runs-amend-objective").value !== (run.objective ?? "min_cost")) body.objective = $("runs-amend-objective").value;
  return body;
}

async function amend(ev) {
  ev.preventDefault();
  const run = shownRun;
  if (!run) return;
  $("runs-amend-done").textContent = "";
  await submitting(amendForm, "runs-amend", async () => {
    const answer = await post(`/jobs/${run.id}/amendments`, amendment(run));
    amendFilledFor = null;
    await loadRuns();
    $("runs-amend-done").textContent = `${answer.job.state === "running" ? "running" : answer.job.state} on plan #${answer.plan.id}: ${answer.plan.label}`;
  }, async (err) => {
    if (err.error === "infeasible") await loadRuns();
  });
}

/**
 * Each reported step's measured time beside the predicted mean and p10–p90 band of the plan it ran (one
 * series per plan the run followed: the first and each re-plan).
 */
function drawIterations(answer) {
  const series = answer.series || [];
  const steps = series.reduce((n, s) => n + s.steps.length, 0);
  $("runs-iter-note").textContent = steps
    ? `${fmtNumber(steps)} steps reported, against ${series.length} plan${series.length === 1 ? "" : "s"}`
    : "no steps reported yet: the helper's IterationReporter sends them with the run's token";
  const all = series.flatMap((s) => s.steps.map((p) => p.iteration_s));
  const unit = timeUnit(all.length ? all : [0]);
  const traces = [];
  const palette = ["#4c78a8", "#f58518", "#54a24b", "#b279a2"];
  series.forEach((s, k) => {
    const color = palette[k % palette.length];
    const xs = s.steps.map((p) => p.step);
    const first = xs.length ? xs[0] : 0;
    const last = xs.length ? xs[xs.length - 1] : 0;
    traces.push({ type: "scatter", mode: "markers", name: `measured (plan #${s.plan_id})`, uid: `measured-${s.plan_id}`, x: xs, y: s.steps.map((p) => p.iteration_s / unit.scale), marker: { size: 4, color } });
    if (s.predicted_s != null) {
      if (s.predicted_p10_s != null && s.predicted_p90_s != null) {
        traces.push({ type: "scatter", mode: "lines", name: `p10–p90 (plan #${s.plan_id})`, uid: `band-${s.plan_id}`, x: [first, last, last, first], y: [s.predicted_p10_s, s.predicted_p10_s, s.predicted_p90_s, s.predicted_p90_s].map((v) => v / unit.scale), fill: "toself", line: { width: 0 }, fillcolor: "rgba(76,120,168,0.12)", hoverinfo: "skip" });
      }
      traces.push({ type: "scatter", mode: "lines", name: `predicted (plan #${s.plan_id})`, uid: `predicted-${s.plan_id}`, x: [first, last], y: [s.predicted_s / unit.scale, s.predicted_s / unit.scale], line: { color, dash: "dash" } });
    }
  });
  const layout = {
    margin: { l: 64, r: 20, t: 10, b: 44 },
    xaxis: { title: { text: "step" }, rangemode: "tozero", gridcolor: "#eef1f5" },
    yaxis: { title: { text: `iteration (${unit.name})` }, rangemode: "tozero", gridcolor: "#eef1f5" },
    legend: { orientation: "h", y: -0.3 },
    paper_bgcolor: "#fff",
    plot_bgcolor: "#fff",
  };
  return react($("runs-iter-chart"), traces, layout);
}

/** Iterations done against elapsed time (s, min or h by the run's length), with each interruption marked. */
function drawProgress(events) {
  const timed = events.filter((e) => typeof e.payload?.elapsed_s === "number" && typeof e.payload?.iterations_done === "number");
  const unit = timeUnit(timed.map((e) => e.payload.elapsed_s));
  const progress = [{ x: 0, y: 0 }, ...timed.map((e) => ({ x: e.payload.elapsed_s / unit.scale, y: e.payload.iterations_done }))]
    .sort((a, b) => a.x - b.x);
  const cuts = timed.filter(isReplan).map((e) => ({ x: e.payload.elapsed_s / unit.scale, y: e.payload.iterations_done, text: `${e.payload.instance_type ?? ""} lost ×${e.payload.count ?? "?"}` }));
  const traces = [
    { type: "scatter", mode: "lines+markers", name: "iterations done", uid: "progress", x: progress.map((p) => p.x), y: progress.map((p) => p.y), line: { color: "#4c78a8" } },
    { type: "scatter", mode: "markers", name: "interruption → re-plan", uid: "replans", x: cuts.map((p) => p.x), y: cuts.map((p) => p.y), text: cuts.map((p) => p.text), marker: { symbol: "x", size: 13, color: "#d62728" } },
  ];
  const layout = {
    margin: { l: 64, r: 20, t: 10, b: 44 },
    xaxis: { title: { text: `elapsed (${unit.name})` }, rangemode: "tozero", gridcolor: "#eef1f5" },
    yaxis: { title: { text: "iterations" }, rangemode: "tozero", gridcolor: "#eef1f5" },
    legend: { orientation: "h", y: -0.3 },
    paper_bgcolor: "#fff",
    plot_bgcolor: "#fff",
  };
  return react($("runs-chart"), traces, layout);
}

function summary(payload) {
  if (!payload) return "";
  const r = payload.remaining || {};
  const within = [r.time_limit_s != null ? fmtSeconds(Math.max(0, r.time_limit_s)) : null, r.budget_usd != null ? fmtUsd(Math.max(0, r.budget_usd)) : null].filter(Boolean).join(" and ");
  const rest = `${fmtNumber(r.iterations)} iterations left${within ? ` within ${within}` : ""}`;
  if (payload.instance_type) {
    const lost = `${payload.count}× ${payload.instance_type} lost`;
    return payload.error ? `${lost}; no plan fits ${rest}: ${payload.error.detail}` : `${lost}; re-planned ${rest}`;
  }
  if (payload.set) {
    const set = payload.set;
    const changed = [
      set.time_limit_s != null ? `time limit ${fmtSeconds(set.time_limit_s)}` : null,
      set.budget_usd != null ? `budget ${fmtUsd(set.budget_usd)}` : null,
      set.objective ? `objective ${set.objective}` : null,
    ].filter(Boolean).join(", ");
    return payload.error ? `set ${changed}; still no plan fits ${rest}: ${payload.error.detail}` : `set ${changed}; re-planned ${rest}`;
  }
  const skip = new Set(["iterations_done", "spent_usd", "plan_id", "elapsed_s"]);
  const parts = Object.entries(payload).filter(([k]) => !skip.has(k)).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
  const text = parts.join(", ");
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

function schedule() {
  clearInterval(timer);
  if ($("jobs-auto").checked) timer = setInterval(() => { loadJobs(); loadRuns(); }, 5000);
}

$("jobs-auto").addEventListener("change", schedule);
amendForm.addEventListener("submit", amend);
Promise.all([loadJobs(), loadRuns()]).finally(markReady);
schedule();
