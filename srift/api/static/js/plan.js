// Plan page: build a POST /v1/plans request, then show the plan, CAP/TAP, every evaluated config and the breakdown.

import { drawBreakdown, drawPlanScatter } from "./charts.js";
import {
  ApiError, card, clearErrors, markReady, el, fillSelect, fmtNumber, fmtSeconds, fmtUsd, get, numberOrNull, post, renderTable, showError,
} from "./common.js";
import { fillModelSelect, initWhere, loadProfiles, profilePart, sourcesLine, typeOption, typesIn } from "./shared.js";

const $ = (id) => document.getElementById(id);
const form = $("plan-form");
const availability = new Map();
let byModel = new Map();
let catalog = { types: [] };

function accelerators() {
  return (byModel.get($("plan-model").value) || []).map((p) => p.accelerator);
}

function refreshAvailabilityTypes() {
  const types = typesIn(catalog.types, $("plan-provider").value, $("plan-region").value, accelerators());
  const list = types.length ? types : typesIn(catalog.types, $("plan-provider").value, $("plan-region").value);
  fillSelect($("plan-availability-type"), list.map(typeOption), list[0]?.name);
}

function renderChips() {
  const chips = [...availability.entries()].map(([name, count]) =>
    el("li", { dataset: { type: name } }, `${name} ≤ ${count}`,
      el("button", { type: "button", title: `remove ${name}`, "aria-label": `remove ${name}`, onclick: () => { availability.delete(name); renderChips(); } }, "×")));
  $("plan-availability-chips").replaceChildren(...chips);
}

function addAvailability() {
  const name = $("plan-availability-type").value;
  if (!name) return;
  const count = numberOrNull($("plan-availability-count"));
  availability.set(name, count);
  renderChips();
}

async function buildRequest() {
  const request = await profilePart($("plan-model"), $("plan-profile-file"), byModel);
  const numbers = {
    global_batch: $("plan-global-batch"),
    iterations: $("plan-iterations"),
    time_limit_s: $("plan-time-limit"),
    budget_usd: $("plan-budget"),
    solve_budget_s: $("plan-solve-budget"),
  };
  for (const [key, input] of Object.entries(numbers)) {
    const value = numberOrNull(input);
    if (value !== null) request[key] = value;
  }
  request.objective = $("plan-objective").value;
  request.provider = $("plan-provider").value;
  request.region = $("plan-region").value;
  request.market = $("plan-market").value;
  request.mode = $("plan-mode").value;
  if (availability.size) request.availability = Object.fromEntries(availability);
  return request;
}

function choiceRows(plan) {
  return plan.choices || plan.config?.choices || [];
}

function renderPlan(plan, request) {
  $("plan-empty").hidden = true;
  $("plan-results").hidden = false;
  const p = plan.predicted || {};
  $("plan-title").textContent = plan.id ? `Plan #${plan.id}` : "Plan";
  const headroomTime = plan.time_headroom_s;
  const headroomBudget = plan.budget_headroom_usd;
  $("plan-cards").replaceChildren(
    card("Iteration", fmtSeconds(p.iteration_s), `p90 ${fmtSeconds(p.iteration_p90_s)}`),
    card("Total time", fmtSeconds(p.total_time_s), headroomTime != null ? `${fmtSeconds(headroomTime)} to spare` : null),
    card("Total cost", fmtUsd(p.cost_usd), headroomBudget != null ? `${fmtUsd(headroomBudget)} under budget` : null),
    card("VMs", String(choiceRows(plan).reduce((n, c) => n + c.count, 0)), `global batch ${fmtNumber(request?.global_batch ?? plan.constraints?.global_batch)}`),
    card("Searched", `${fmtNumber(plan.configs_evaluated)} configs`, `${plan.mode ?? ""} in ${fmtSeconds(plan.solve_time_s)}`),
  );
  renderTable($("plan-table"), [
    { label: "Instance type", value: (c) => el("code", {}, c.instance_type) },
    { label: "Market", value: (c) => c.market },
    { label: "Count", value: (c) => c.count, num: true },
    { label: "Batch / VM", value: (c) => c.batch, num: true },
    { label: "Samples / iteration", value: (c) => c.count * c.batch, num: true },
  ], choiceRows(plan), { id: "plan-choices" });
  $("plan-warnings").replaceChildren(...(plan.warnings || []).map((w) => el("li", {}, w)));
  sourcesLine($("plan-sources"), plan.sources);

  const baselines = plan.baselines || {};
  const policies = [["Srift", { config_label: planLabel(plan), predicted: p, feasible: true }]];
  for (const key of ["cap", "tap"]) if (baselines[key] !== undefined) policies.push([key.toUpperCase(), baselines[key]]);
  renderTable($("plan-baselines"), [
    { label: "Policy", value: ([name]) => el("b", {}, name) },
    { label: "Configuration", value: ([, b]) => (b ? baselineLabel(b) : "none fits") },
    { label: "Iteration", value: ([, b]) => fmtSeconds(predictionOf(b)?.iteration_s), num: true },
    { label: "Total time", value: ([, b]) => fmtSeconds(predictionOf(b)?.total_time_s), num: true },
    { label: "Cost", value: ([, b]) => fmtUsd(predictionOf(b)?.cost_usd), num: true },
    { label: "vs Srift", value: ([, b]) => versus(predictionOf(b), p), num: true },
    { label: "Limits", value: ([, b]) => (b ? (b.feasible === false ? "violated" : "met") : "—") },
  ], policies, { id: "plan-baselines-table", rowClass: ([name]) => (name === "Srift" ? "chosen" : null) });

  const chosen = { label: planLabel(plan), total_time_s: p.total_time_s, cost_usd: p.cost_usd };
  const basePoints = {};
  for (const key of ["cap", "tap"]) {
    const b = baselines[key];
    const bp = predictionOf(b);
    if (bp) basePoints[key] = { label: `${key.toUpperCase()}: ${baselineLabel(b)}`, total_time_s: bp.total_time_s, cost_usd: bp.cost_usd };
  }
  const constraints = plan.constraints || request || {};
  drawPlanScatter($("plan-scatter"), {
    points: plan.pareto || [],
    chosen,
    baselines: basePoints,
    timeLimitS: numberish(constraints.time_limit_s ?? request?.time_limit_s),
    budgetUsd: numberish(constraints.budget_usd ?? request?.budget_usd),
  });
  const bars = [{ name: "Srift plan", breakdown: plan.breakdown || p.breakdown }];
  for (const key of ["cap", "tap"]) {
    const bp = predictionOf(baselines[key]);
    if (bp?.breakdown) bars.push({ name: key.toUpperCase(), breakdown: bp.breakdown });
  }
  drawBreakdown($("plan-breakdown"), bars);
}

function numberish(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

function predictionOf(b) {
  return b ? b.predicted ?? b.prediction ?? null : null;
}

function planLabel(plan) {
  return plan.label || choiceRows(plan).map((c) => `${c.count}×${c.instance_type}@${c.batch}${c.market === "on_demand" ? " (od)" : ""}`).join(" + ");
}

function baselineLabel(b) {
  if (b.config_label || b.label) return b.config_label || b.label;
  const choices = b.choices || b.config?.choices || [];
  return choices.map((c) => `${c.count}×${c.instance_type}@${c.batch}`).join(" + ") || b.policy || "";
}

function versus(b, srift) {
  if (!b || !srift || b === srift || !srift.cost_usd || !srift.total_time_s) return "—";
  const cost = b.cost_usd / srift.cost_usd;
  const time = b.total_time_s / srift.total_time_s;
  return `${cost.toFixed(2)}× cost, ${time.toFixed(2)}× time`;
}

async function submit(ev) {
  ev.preventDefault();
  clearErrors(form);
  $("plan-submit").disabled = true;
  $("plan-busy").hidden = false;
  try {
    const request = await buildRequest();
    const plan = await post("/plans", request);
    renderPlan(plan, request);
    if (plan.id) history.replaceState(null, "", `?plan=${plan.id}`);
  } catch (err) {
    showError(form, err);
  } finally {
    $("plan-submit").disabled = false;
    $("plan-busy").hidden = true;
  }
}

async function init() {
  form.addEventListener("submit", submit);
  $("plan-availability-add").addEventListener("click", addAvailability);
  $("plan-time-limit").addEventListener("input", () => {
    const v = numberOrNull($("plan-time-limit"));
    $("plan-time-limit-help").textContent = typeof v === "number" ? `= ${fmtSeconds(v)}` : "optional";
  });
  try {
    const [profiles, where] = await Promise.all([loadProfiles(), initWhere($("plan-provider"), $("plan-region"), refreshAvailabilityTypes)]);
    byModel = fillModelSelect($("plan-model"), profiles);
    catalog = where;
    refreshAvailabilityTypes();
    $("plan-model").addEventListener("change", refreshAvailabilityTypes);
  } catch (err) {
    showError(form, err);
  }
  const planId = new URLSearchParams(location.search).get("plan");
  if (planId) {
    try {
      const stored = await get(`/plans/${encodeURIComponent(planId)}`);
      renderPlan(stored.result ?? stored, stored.request);
    } catch (err) {
      showError(form, err instanceof ApiError ? err : new ApiError(0, { detail: String(err) }));
    }
  }
  markReady();
}

init();
