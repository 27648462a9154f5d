// Plan page: build a POST /v1/plans request, then show the plan, CAP/TAP, every evaluated config and the breakdown.

import { drawBreakdown, drawPlanScatter, drawReplayHistogram, plotly } from "./charts.js";
import {
  ApiError, card, clearErrors, el, fillSelect, fmtNumber, fmtPercent, fmtSeconds, fmtUsd, get, markReady, numberOrNull, post, renderTable, showError,
  submitting,
} from "./common.js";
import {
  fillModelSelect, initWhere, loadProfiles, profilePart, renderStrategy, sourcesLine, typeOption, typesIn, wireUpload,
} from "./shared.js";

const $ = (id) => document.getElementById(id);
const form = $("plan-form");
const availability = new Map();
let byModel = new Map();
let catalog = { types: [] };

// ---------------------------------------------------------------- the request form

function accelerators() {
  return (byModel.get($("plan-model").value) || []).map((p) => p.accelerator);
}

function refreshAvailabilityTypes() {
  const provider = $("plan-provider").value;
  const region = $("plan-region").value;
  const matching = typesIn(catalog.types, provider, region, accelerators());
  const list = matching.length ? matching : typesIn(catalog.types, provider, region);
  fillSelect($("plan-availability-type"), list.map(typeOption), list[0]?.name);
}

function renderChips() {
  const chips = [...availability.entries()].map(([name, count]) =>
    el("li", { dataset: { type: name } }, `${name} ≤ ${count}`,
      el("button", {
        type: "button", title: `remove ${name}`, "aria-label": `remove ${name}`,
        onclick: () => { availability.delete(name); renderChips(); },
      }, "×")));
  $("plan-availability-chips").replaceChildren(...chips);
}

function addAvailability() {
  const name = $("plan-availability-type").value;
  if (!name) return;
  availability.set(name, numberOrNull($("plan-availability-count")));
  renderChips();
}

async function buildRequest() {
  const request = await profilePart($("plan-model"), $("plan-profile-file"));
  const numbers = {
    global_batch: $("plan-global-batch"),
    iterations: $("plan-iterations"),
    time_limit_s: $("plan-time-limit"),
    budget_usd: $("plan-budget"),
    solve_budget_s: $("plan-solve-budget"),
    max_count_per_type: $("plan-max-count"),
    bucket_cap_mb: $("plan-bucket-cap"),
    checkpoint_interval_s: $("plan-checkpoint-interval"),
    restart_s: $("plan-restart"),
    spot_samples: $("plan-spot-samples"),
  };
  for (const [key, input] of Object.entries(numbers)) {
    const value = numberOrNull(input);
    if (value !== null) request[key] = value;
  }
  if ($("plan-precision").value) request.precision = $("plan-precision").value;
  if ($("plan-exchange").value !== "ddp_buckets") request.exchange = $("plan-exchange").value;
  if ($("plan-strategy").value !== "auto") request.strategy = $("plan-strategy").value;
  if ($("plan-checkpointing").value) request.checkpointing = $("plan-checkpointing").value === "true";
  request.objective = $("plan-objective").value;
  request.confidence = Number($("plan-confidence").value);
  request.provider = $("plan-provider").value;
  request.region = $("plan-region").value;
  request.market = $("plan-market").value;
  request.mode = $("plan-mode").value;
  if (availability.size) request.availability = Object.fromEntries(availability);
  const providers = listed("plan-providers");
  const regions = listed("plan-regions");
  if (providers.length) request.providers = [...new Set([request.provider, ...providers])];
  if (regions.length) request.regions = [...new Set([request.region, ...regions])];
  if ($("plan-allreduce").value !== "ring") request.allreduce = $("plan-allreduce").value;
  const rate = numberOrNull($("plan-loader-rate"));
  const bytes = numberOrNull($("plan-loader-bytes"));
  if (rate !== null || bytes !== null) {
    request.input_pipeline = { samples_per_s_per_core: rate };
    if (bytes !== null) request.input_pipeline.bytes_per_sample = bytes;
  }
  if (!$("plan-price-interruptions").checked) request.price_interruptions = false;
  if ($("plan-allow-cpu").checked) request.allow_cpu_profiles = true;
  const recent = recentMarket();
  if (recent) request.recent_market = recent;
  return request;
}

/** The comma-separated entries of a text input (the extra providers or regions). */
const listed = (id) => $(id).value.split(",").map((v) => v.trim()).filter(Boolean);

/** Under the provider and region: the locations the request allows when "Also allow providers/regions" add
 * some (they sit in a folded section), so the form's top never reads as one provider and region alone. */
function describeWhere() {
  const note = $("plan-where-note");
  const provider = $("plan-provider").value;
  const providers = [...new Set([provider, ...listed("plan-providers")])];
  const regions = listed("plan-regions");
  note.hidden = providers.length < 2 && !regions.length;
  if (note.hidden) return;
  const where = regions.length
    ? `regions ${[...new Set([$("plan-region").value, ...regions])].join(", ")} of ${providers.join(", ")}`
    : `every catalog region of ${providers.join(", ")} (the region above does not limit it)`;
  note.textContent = `The fleet may use ${where}; set under “Locations, data loading, spot”.`;
}

/** The request's recent_market: the imported trace chosen and the as-of time, when either is given (an
 * as-of time alone is sent too, so that the API names what is missing). */
function recentMarket() {
  const trace = $("plan-recent-trace").value;
  const asOf = numberOrNull($("plan-recent-as-of"));
  if (!trace && asOf === null) return null;
  const recent = {};
  if (trace) recent.trace = trace;
  if (asOf !== null) recent.as_of_s = asOf;
  return recent;
}

/** The imported spot traces (GET /v1/traces) a recent market may name, after "none". */
async function loadTraces() {
  const traces = await get("/traces");
  const select = $("plan-recent-trace");
  const chosen = select.value;
  fillSelect(select, [
    { value: "", label: "none: the fitted law alone" },
    ...traces.map((t) => ({
      value: t.name,
      label: `${t.name} (${t.instance_type} ×${t.node_count}, ${fmtNumber(t.days, 2)} days)`,
    })),
  ], chosen);
}

// ---------------------------------------------------------------- the answer

const predictionOf = (b) => b?.predicted ?? null;

function choiceLabel(choices) {
  return choices.map((c) => `${c.count}×${c.instance_type}@${c.batch}${c.market === "on_demand" ? " (od)" : ""}`).join(" + ");
}

function versus(b, srift) {
  if (!b || !srift || b === srift || !srift.cost_usd || !srift.total_time_s) return "—";
  return `${(b.cost_usd / srift.cost_usd).toFixed(2)}× cost · ${(b.total_time_s / srift.total_time_s).toFixed(2)}× time`;
}

/** "p10 … · p90 …" of a band, when the prediction has one. */
function band(lo, hi, fmt) {
  return lo != null && hi != null ? `p10 ${fmt(lo)} · p90 ${fmt(hi)}` : null;
}

/** The plan's one P(deadline) and one P(budget), as the CLI shows them: the prediction band's, and for a
 * spot plan priced with interruptions the lower of that and the simulated runs' (both must hold). */
export function oneChance(item) {
  const c = item?.probability || {};
  const s = item?.spot || {};
  const lower = (a, b) => (a == null ? b : b == null ? a : Math.min(a, b));
  return { time: lower(c.meets_time_limit, s.p_meets_time_limit), budget: lower(c.within_budget, s.p_within_budget) };
}

/** A probability as a whole percent, never rounded up to a certainty it is not (99.6 % reads ">99 %"). */
function percent(p) {
  if (p > 0.99 && p < 1) return ">99 %";
  if (p > 0 && p < 0.01) return "<1 %";
  return `${Math.round(100 * p)} %`;
}

/** "P(deadline) 93 % · P(budget) 99 %" for the limits that are given. */
function chances(item) {
  if (!item) return null;
  const { time, budget } = oneChance(item);
  const parts = [];
  if (time != null) parts.push(`P(deadline) ${percent(time)}`);
  if (budget != null) parts.push(`P(budget) ${percent(budget)}`);
  return parts.length ? parts.join(" · ") : null;
}

function renderCards(plan) {
  const p = plan.predicted;
  const vms = plan.choices.reduce((n, c) => n + c.count, 0);
  const gpus = plan.choices.reduce((n, c) => n + c.count * (c.gpus || 0), 0);
  const limits = plan.limits || {};
  const c = plan.probability || {};
  const one = oneChance(plan);
  const at = plan.confidence != null ? `p${Math.round(100 * plan.confidence)}` : null;
  const timeNote = [band(p.total_time_p10_s, p.total_time_p90_s, fmtSeconds),
    limits.time_limit_s != null && one.time != null
      ? `P(deadline) ${percent(one.time)}` : null].filter(Boolean).join(" · ");
  const costNote = [band(p.cost_p10_usd, p.cost_p90_usd, fmtUsd),
    limits.budget_usd != null && one.budget != null
      ? `P(budget) ${percent(one.budget)}` : null].filter(Boolean).join(" · ");
  $("plan-cards").replaceChildren(
    card("Iteration", fmtSeconds(p.iteration_s), `p10 ${fmtSeconds(p.iteration_p10_s)} · p90 ${fmtSeconds(p.iteration_p90_s)}`),
    card("Total time", fmtSeconds(p.total_time_s), timeNote || `${fmtNumber(plan.iterations)} iterations`),
    card("Total cost", fmtUsd(p.cost_usd), costNote || null),
    card("Limits checked at", at || "—", (limits.time_limit_s != null || limits.budget_usd != null) && c.total_time_s_at_confidence != null
      ? `${at}: ${fmtSeconds(c.total_time_s_at_confidence)} · ${fmtUsd(c.cost_usd_at_confidence)}` : "no limits given"),
    card("Fleet", `${vms} VM${vms === 1 ? "" : "s"}`, `${gpus ? `${gpus} GPUs · ` : ""}global batch ${fmtNumber(plan.global_batch)}`),
    card("Searched", `${fmtNumber(plan.configs_evaluated)} configs`,
      `${plan.mode}${plan.proven_optimal ? ", proven optimal" : ""} in ${fmtSeconds(plan.solve_time_s)}`),
  );
}

function renderChoices(plan) {
  renderTable($("plan-table"), [
    { label: "Instance type", value: (c) => el("code", {}, c.instance_type) },
    ...(plan.choices.some((c) => c.location) ? [{ label: "Location", value: (c) => c.location || "—" }] : []),
    { label: "Market", value: (c) => c.market.replace("_", "-") },
    { label: "Count", value: (c) => c.count, num: true },
    { label: "Batch / VM", value: (c) => c.batch, num: true },
    { label: "GPUs / VM", value: (c) => c.gpus || "—", num: true },
    { label: "Batch / GPU", value: (c) => fmtNumber(c.per_gpu_batch), num: true },
    { label: "$ / h per VM", value: (c) => fmtUsd(c.price_usd_per_hr), num: true },
    { label: "Samples / iteration", value: (c) => c.count * c.batch, num: true },
    {
      label: "Compute",
      value: (c) => (c.compute && c.compute !== "measured"
        ? el("span", { class: "estimated", title: "not measured on this GPU: estimated from the model's structure and the GPU's specs" },
          `${c.compute} ±${Math.round(100 * (c.compute_spread || 0))} %`)
        : "measured"),
    },
    ...(plan.choices.some((c) => c.strategy) ? [
      { label: "Strategy", value: (c) => el("code", {}, `${c.strategy}${c.checkpointing ? "+ckpt" : ""}`) },
      { label: "GiB / GPU", value: (c) => (c.memory_per_gpu_bytes == null ? "—" : fmtNumber(c.memory_per_gpu_bytes / 2 ** 30)), num: true },
    ] : []),
  ], plan.choices, { id: "plan-choices" });
}

/** The CLI's caution where the plan's estimated types train largely in unaligned fp16/bf16 products: the
 * largest share among them (estimated.in_plan), against the threshold and in the words the page was served
 * with (srift.services.views' UNALIGNED_NOTE_SHARE and UNALIGNED_NOTE). */
function renderUnaligned(plan) {
  const box = $("plan-unaligned");
  const estimated = plan.estimated || {};
  const shares = (estimated.in_plan || []).map((name) => estimated.candidates?.[name]?.unaligned_share || 0);
  const share = Math.max(0, ...shares);
  box.hidden = share < Number(box.dataset.shareAtLeast);
  box.replaceChildren(...(box.hidden ? [] : [
    el("span", { class: "warn" }, "! "), box.dataset.note.replace("{share}", `${(100 * share).toFixed(0)} %`),
  ]));
}

/** Counts per location, the cost line (instances and egress) and the bytes crossing between locations. */
function renderGeo(plan) {
  const cost = plan.cost;
  const spans = (plan.locations || []).length > 0;
  $("plan-geo-panel").hidden = !spans && !(cost && cost.egress_usd > 0);
  if ($("plan-geo-panel").hidden) return;
  $("plan-cost-line").replaceChildren(
    card("Instances", fmtUsd(cost?.instances_usd)),
    card("Egress", fmtUsd(cost?.egress_usd), `${fmtPercent(cost?.egress_share)} of the cost`),
    card("Total", fmtUsd(cost?.total_usd)),
  );
  renderTable($("plan-locations"), [
    { label: "Location", value: (l) => el("code", {}, l.location) },
    { label: "Place", value: (l) => l.place || "—" },
    { label: "Continent", value: (l) => l.continent || "—" },
    { label: "VMs", value: (l) => l.vms, num: true },
    { label: "GPUs", value: (l) => l.gpus, num: true },
    { label: "$ / h", value: (l) => fmtUsd(l.usd_per_hr), num: true },
  ], plan.locations || [], { id: "plan-locations-table" });
  renderTable($("plan-egress"), [
    { label: "From", value: (f) => el("code", {}, f.source) },
    { label: "To", value: (f) => el("code", {}, f.destination) },
    { label: "Route", value: (f) => f.route.replaceAll("_", "-") },
    { label: "GB / iteration", value: (f) => fmtNumber(f.gb_per_iteration), num: true },
    { label: "$ / GB", value: (f) => fmtUsd(f.usd_per_gb), num: true },
    { label: "Egress $", value: (f) => fmtUsd(f.usd), num: true },
  ], plan.egress || [], { id: "plan-egress-table", empty: "no gradient traffic leaves a location: the fleet runs in one" });
}

/** Each candidate type's input pipeline: what it feeds, what bounds it, and the batch above which it stalls. */
function renderLoading(plan) {
  const rows = plan.data_loading || [];
  $("plan-loading-panel").hidden = !rows.length;
  if (!rows.length) return;
  const chosen = new Set(plan.choices.map((c) => `${c.instance_type}|${c.location || ""}`));
  renderTable($("plan-loading"), [
    { label: "Instance type", value: (r) => el("code", {}, r.instance_type) },
    { label: "Location", value: (r) => r.location || "—" },
    { label: "Loader vCPUs", value: (r) => r.loader_cores, num: true },
    { label: "Feeds (samples/s)", value: (r) => fmtNumber(r.samples_per_s), num: true },
    { label: "Bound by", value: (r) => r.bound },
    { label: "GPUs train (samples/s)", value: (r) => fmtNumber(r.gpu_samples_per_s), num: true },
    { label: "Stalls", value: (r) => (r.samples_per_s >= r.gpu_samples_per_s ? "no"
      : el("span", { class: "badge infeasible" }, r.stalls_above_batch ? `above batch ${r.stalls_above_batch}` : "at every batch")) },
  ], rows, { id: "plan-loading-table", rowClass: (r) => (chosen.has(`${r.instance_type}|${r.location || ""}`) ? "chosen" : null) });
}

/** What conditioned a nowcast plan's spot figures (its request's recent_market), and what they replaced. */
function spotNowcastNote(n) {
  if (!n) return "";
  const alone = n.without_recent || {}, fitted = n.fitted_law || {};
  return ` Conditioned on ${n.trace} at ${fmtSeconds(n.as_of_s)} into the log: ${n.interruptions} interruption(s) and `
    + `${n.capacity_returns} capacity return(s) in the ${fmtSeconds(n.lookback_s)} look-back, capacity `
    + `${n.up_at_start ? "up" : "down"} at the start; ${fmtPercent(n.spot_share)} of the time on spot. Without the `
    + `look-back: ${fmtSeconds(alone.expected_time_s)}, ${fmtUsd(alone.expected_cost_usd)}; the fitted law's Monte `
    + `Carlo: ${fmtSeconds(fitted.expected_time_s)}, ${fmtUsd(fitted.expected_cost_usd)}.`;
}

/** Expected against uninterrupted time and cost of a spot plan, P(meets the limits), and the fallback. */
function renderSpot(plan) {
  const s = plan.spot;
  $("plan-spot-panel").hidden = false;
  if (s) {
    $("plan-spot-cards").replaceChildren(
      card("Expected cost", fmtUsd(s.expected_cost_usd), `uninterrupted ${fmtUsd(s.uninterrupted_cost_usd)}`),
      card("Expected time", fmtSeconds(s.expected_time_s), `uninterrupted ${fmtSeconds(s.uninterrupted_time_s)} · p90 ${fmtSeconds(s.time_p90_s)}`),
      card("Interruptions", fmtNumber(s.expected_interruptions), `P(any) ${fmtPercent(s.p_interrupted)}`),
    );
    const how = s.nowcast ? "follow Srift's deadline policy" : "re-plan after an interruption (§4.5)";
    $("plan-spot-note").textContent = "The plan's total time and cost above restart the fleet in place after "
      + `each interruption (what the search compares spot fleets by); these figures ${how}. `
      + `Spot model: ${s.spot_model || "fitted law"}. `
      + `${fmtNumber(s.samples)} ${s.nowcast ? "timelines" : "Monte Carlo runs"} (${s.method}); checkpoint every `
      + `${fmtSeconds(s.checkpoint_interval_s)}, ${fmtSeconds(s.restart_s)} to restart; their chance of `
      + "meeting the limits is in the plan's P(deadline) and P(budget) above." + spotNowcastNote(s.nowcast);
  } else {
    $("plan-spot-cards").replaceChildren();
    const spotVms = plan.choices.some((c) => c.market === "spot");
    $("plan-spot-note").textContent = spotVms
      ? "Spot interruptions are not priced into this plan (price_interruptions: false)."
      : "This plan runs no spot VMs: there are no interruptions to expect.";
  }
  const fb = plan.fallback;
  $("plan-fallback").replaceChildren(...(fb ? [el("p", {}, "On-demand fallback: ", el("code", {}, fb.label),
    ` (${fmtUsd(fb.predicted?.cost_usd)}, ${fmtSeconds(fb.predicted?.total_time_s)} uninterrupted)`)] : []));
  renderReplay(plan);
}

// ---------------------------------------------------------------- the replay through spot traces

const REPLAY_POLICIES = {
  on_demand: "on-demand only",
  spot_only: "spot only (waits out gaps)",
  spot_then_on_demand: "spot until interrupted, then on-demand",
  uniform_progress: "Uniform Progress (Can't Be Late)",
  srift: "Srift (plan-aware)",
};
let replayTicket = 0;

/** What the plan's spot prediction rests on, per spot type (the shipped traces' model or a fallback band). */
function restsOn(rates) {
  return (rates || []).map((r) => `${r.instance_type}${r.location ? ` in ${r.location}` : ""}: ${r.band === "traces"
    ? "" : `band ${r.band} — `}${r.source}`).join("; ");
}

/** Ask for the plan's replay (GET /v1/plans/{id}/replay) after the plan is shown, and render it. */
async function renderReplay(plan) {
  const ticket = ++replayTicket;
  const box = $("plan-replay");
  box.dataset.state = "loading";
  $("plan-replay-status").className = "busy";
  $("plan-replay-status").title = "";
  $("plan-replay-status").textContent = "replaying through the imported spot traces…";
  for (const id of ["plan-replay-cards", "plan-replay-table", "plan-replay-policies"]) $(id).replaceChildren();
  $("plan-replay-gap").textContent = "";
  $("plan-replay-charts").hidden = true;
  try {
    const answer = await get(`/plans/${encodeURIComponent(plan.id)}/replay`);
    if (ticket !== replayTicket) return;
    $("plan-replay-status").className = "";
    if (answer.status === "replayed") await showReplay(answer);
    else showNotReplayed(answer);
    box.dataset.state = "done";
  } catch (err) {
    if (ticket !== replayTicket) return;
    $("plan-replay-status").className = "form-error";
    $("plan-replay-status").textContent = `The replay failed: ${err.detail || err.message}${err.hint ? ` To fix: ${err.hint}` : ""}`;
    box.dataset.state = "failed";
  }
}

function showNotReplayed(answer) {
  const rests = restsOn(answer.rates);
  const parts = [`Not replayed: ${answer.reason}.`];
  if (answer.status === "no_trace") {
    parts.push(`${answer.imported_traces} trace${answer.imported_traces === 1 ? " is" : "s are"} imported. To fix: ${answer.hint} (srift traces import PATH).`);
  } else if (answer.hint) {
    parts.push(`To fix: ${answer.hint}.`);
  }
  if (answer.status !== "no_spot") {
    parts.push(rests ? `The spot figures above rest on: ${rests}.` : "The plan's spot figures were not priced with interruptions.");
  }
  $("plan-replay-status").textContent = parts.join(" ");
}

async function showReplay(answer) {
  const rep = answer.replay;
  const srift = rep.policies.find((p) => p.policy === "srift") || rep.policies[rep.policies.length - 1];
  const r = srift.replayed;
  const plan = rep.plan_predicted || {};
  $("plan-replay-status").title = rep.trace_names.join("\n");
  $("plan-replay-status").textContent = `Replayed through ${fmtNumber(rep.windows)} windows of ${rep.traces} trace${rep.traces === 1 ? "" : "s"} `
    + `(${rep.trace_names.map((n) => n.split(/[/:]/).pop()).join(", ")}) of ${rep.nodes} × ${rep.instance_type} in ${rep.provider}/${rep.region}; deadline `
    + `${fmtSeconds(rep.deadline_s)} (${rep.deadline_rule}, ${rep.slack.toFixed(2)}× on-demand). Srift's policy, beside the plan's prediction `
    + `(spot model: ${answer.spot_model || "fitted law"}${rep.nowcast ? `; the replay's own prediction conditions each window on the trace before it: ${rep.nowcast}` : ""}):`;
  const windows = `${fmtNumber(r.runs)} windows`;
  $("plan-replay-cards").replaceChildren(
    card("Finish time (replayed)", fmtSeconds(r.finish_p50_s), `p10 ${fmtSeconds(r.finish_p10_s)} · p90 ${fmtSeconds(r.finish_p90_s)} · predicted ${fmtSeconds(plan.expected_time_s)}`),
    card("Cost (replayed)", fmtUsd(r.mean_cost_usd), `p10 ${fmtUsd(r.cost_p10_usd)} · p90 ${fmtUsd(r.cost_p90_usd)} · predicted ${fmtUsd(plan.expected_cost_usd)}`),
    card("Deadline missed", `${fmtNumber(r.deadline_misses)} of ${windows}`, `P(deadline) replayed ${percent(r.p_meets_deadline)}`
      + (plan.p_meets_time_limit != null ? ` · predicted ${percent(plan.p_meets_time_limit)}` : "")),
    card("Traces", `${rep.traces} trace${rep.traces === 1 ? "" : "s"}`, `${windows} · ${fmtPercent(r.mean_spot_share)} of the time on spot`),
  );
  const rows = [
    ["Finish time p10", fmtSeconds(r.finish_p10_s), fmtSeconds(plan.time_p10_s)],
    ["Finish time p50", fmtSeconds(r.finish_p50_s), fmtSeconds(plan.time_p50_s)],
    ["Finish time p90", fmtSeconds(r.finish_p90_s), fmtSeconds(plan.time_p90_s)],
    ["Finish time, mean", fmtSeconds(r.mean_finish_s), fmtSeconds(plan.expected_time_s)],
    ["Cost p10", fmtUsd(r.cost_p10_usd), "—"],
    ["Cost p50", fmtUsd(r.cost_p50_usd), "—"],
    ["Cost p90", fmtUsd(r.cost_p90_usd), fmtUsd(plan.cost_p90_usd)],
    ["Cost, mean", fmtUsd(r.mean_cost_usd), fmtUsd(plan.expected_cost_usd)],
    ["P(meets the deadline)", percent(r.p_meets_deadline), plan.p_meets_time_limit != null ? percent(plan.p_meets_time_limit) : "— (no time limit)"],
    ["Deadline misses", `${fmtNumber(r.deadline_misses)} of ${windows} (${fmtPercent(r.deadline_misses / r.runs)})`, "—"],
  ];
  renderTable($("plan-replay-table"), [
    { label: "", value: (row) => row[0] },
    { label: "Replayed (Srift's policy)", value: (row) => row[1], num: true },
    { label: "Plan's prediction", value: (row) => row[2], num: true },
  ], rows, { id: "plan-replay-figures" });
  const gap = rep.plan_gap;
  $("plan-replay-gap").textContent = gap
    ? `The plan's expected cost is ${gap.expected_cost_pct >= 0 ? "+" : ""}${gap.expected_cost_pct.toFixed(1)} % against the replayed mean`
      + (gap.p_meets_time_limit_points != null ? `; its P(meets the time limit) ${gap.p_meets_time_limit_points >= 0 ? "+" : ""}${gap.p_meets_time_limit_points.toFixed(1)} points against the replayed share.` : ".")
    : "";
  renderTable($("plan-replay-policies"), [
    { label: "Policy", value: (p) => REPLAY_POLICIES[p.policy] || p.policy },
    { label: "Mean cost", value: (p) => fmtUsd(p.replayed.mean_cost_usd), num: true },
    { label: "p90 cost", value: (p) => fmtUsd(p.replayed.cost_p90_usd), num: true },
    { label: "p50 finish", value: (p) => fmtSeconds(p.replayed.finish_p50_s), num: true },
    { label: "p90 finish", value: (p) => fmtSeconds(p.replayed.finish_p90_s), num: true },
    { label: "Misses", value: (p) => `${p.replayed.deadline_misses}/${p.replayed.runs}`, num: true },
    { label: "P(deadline) replayed / fitted", value: (p) => `${percent(p.replayed.p_meets_deadline)} / ${p.predicted.runs ? percent(p.predicted.p_meets_deadline) : "—"}`, num: true },
  ], rep.policies, { id: "plan-replay-policies-table", rowClass: (p) => (p.policy === "srift" ? "chosen" : null) });
  $("plan-replay-charts").hidden = false;
  await Promise.all([
    drawReplayMarked("plan-replay-finish", rep.distribution.finish_s, "time", plan.expected_time_s, { name: "deadline", value: rep.deadline_s }),
    drawReplayMarked("plan-replay-cost", rep.distribution.cost_usd, "cost", plan.expected_cost_usd, { name: "on-demand", value: rep.on_demand_cost_usd }),
  ]);
}

/** One replayed distribution (finish time or cost) with the plan's prediction marked on it, and `reference`
 * ({name, value}: the deadline, or the on-demand cost) as a grey dotted line. */
function drawReplayMarked(id, hist, kind, predicted, reference) {
  return drawReplayHistogram($(id), {
    hist,
    kind,
    marks: [{ name: "predicted", value: predicted }, { ...reference, color: "#5f6b7a", dash: "dot" }],
  });
}

function renderBaselines(plan) {
  const srift = { label: plan.label, predicted: plan.predicted, feasible: true, probability: plan.probability, spot: plan.spot };
  const rows = [["Srift", srift], ["CAP", plan.baselines?.cap ?? null], ["TAP", plan.baselines?.tap ?? null]];
  renderTable($("plan-baselines"), [
    { label: "Policy", value: ([name]) => el("b", {}, name) },
    { label: "Configuration", value: ([, b]) => (b ? b.label || choiceLabel(b.choices || []) : "no single type fits") },
    { label: "Iteration", value: ([, b]) => fmtSeconds(predictionOf(b)?.iteration_s), num: true },
    { label: "Total time (p10–p90)", value: ([, b]) => withBand(predictionOf(b), "total_time", fmtSeconds), num: true },
    { label: "Cost (p10–p90)", value: ([, b]) => withBand(predictionOf(b), "cost", fmtUsd), num: true },
    { label: "vs Srift", value: ([, b]) => versus(predictionOf(b), plan.predicted), num: true },
    { label: "Limits", value: ([, b]) => (b ? (b.feasible ? "met" : el("span", { class: "badge infeasible" }, "violated")) : "—") },
    { label: "Chance", value: ([, b]) => chances(b) || "—" },
  ], rows, { id: "plan-baselines-table", rowClass: ([name]) => (name === "Srift" ? "chosen" : null) });
}

function withBand(p, key, fmt) {
  if (!p) return "—";
  const unit = key === "cost" ? "_usd" : "_s";
  const lo = p[`${key}_p10${unit}`];
  const hi = p[`${key}_p90${unit}`];
  const mid = fmt(p[`${key}${unit}`]);
  return lo != null && hi != null && fmt(lo) !== fmt(hi) ? `${mid} (${fmt(lo)}–${fmt(hi)})` : mid;
}

function renderCharts(plan) {
  const baselines = {};
  for (const key of ["cap", "tap"]) {
    const b = plan.baselines?.[key];
    if (b) baselines[key] = { label: `${key.toUpperCase()}: ${b.label}`, total_time_s: b.predicted.total_time_s, cost_usd: b.predicted.cost_usd };
  }
  const limits = plan.limits || {};
  const scatter = drawPlanScatter($("plan-scatter"), {
    points: plan.pareto,
    chosen: { label: `chosen: ${plan.label}`, total_time_s: plan.predicted.total_time_s, cost_usd: plan.predicted.cost_usd },
    baselines,
    timeLimitS: limits.time_limit_s ?? undefined,
    budgetUsd: limits.budget_usd ?? undefined,
  });
  const shown = plan.pareto.length;
  const total = plan.pareto_total ?? shown;
  $("plan-scatter-note").textContent = shown < total
    ? `Showing ${fmtNumber(shown)} of ${fmtNumber(total)} evaluated configurations: the whole Pareto front plus an even sample of the rest.`
    : `All ${fmtNumber(shown)} evaluated configurations. Hover a point for its fleet.`;
  const bars = [{ name: "Srift plan", breakdown: plan.breakdown }];
  for (const key of ["cap", "tap"]) {
    const b = plan.baselines?.[key];
    if (b?.breakdown) bars.push({ name: key.toUpperCase(), breakdown: b.breakdown });
  }
  return Promise.all([scatter, drawBreakdown($("plan-breakdown"), bars)]);
}

/** Warnings repeated once per instance type, shown as one line that folds out to the list. */
const GROUPED_WARNINGS = [
  { pattern: /^(\S+): batch \d+ per GPU, capped by memory/, label: "batch capped by memory" },
];

/** The plan's warnings, each kind of GROUPED_WARNINGS that repeats shown once in place of its first line:
 * "batch capped by memory on 29 types: g5.xlarge, …", which opens to every line. */
function renderWarnings(warnings) {
  const items = [];
  const groups = new Map();
  for (const w of warnings) {
    const kind = GROUPED_WARNINGS.find((k) => k.pattern.test(w));
    if (!kind) { items.push(el("li", {}, w)); continue; }
    if (!groups.has(kind)) {
      groups.set(kind, []);
      items.push(kind);
    }
    groups.get(kind).push(w);
  }
  const shown = items.map((item) => {
    const lines = groups.get(item);
    if (!lines) return item;
    if (lines.length === 1) return el("li", {}, lines[0]);
    const types = lines.map((w) => w.match(item.pattern)[1]);
    const some = types.slice(0, 4).join(", ") + (types.length > 4 ? `, … (${types.length - 4} more)` : "");
    return el("li", { class: "grouped" }, el("details", {},
      el("summary", {}, `${item.label} on ${types.length} types: ${some}`),
      el("ul", {}, lines.map((w) => el("li", {}, w)))));
  });
  $("plan-warnings").replaceChildren(...shown);
}

/** After a request that failed, the plan still shown is the previous request's: say so and dim it, so that it
 * does not read as the answer to the form as it now stands (a 409 for a $0.001 budget beside a plan with
 * "no limits given"). */
function markStale() {
  if ($("plan-results").hidden) return;
  const shown = $("plan-title").textContent.replace(/^Plan /, "plan ");
  $("plan-stale").textContent = `Below: ${shown}, from an earlier request. The request in the form was not planned; see the message there.`;
  $("plan-stale").hidden = false;
  $("plan-results").classList.add("stale");
}

async function renderPlan(plan) {
  $("plan-empty").hidden = true;
  $("plan-results").hidden = false;
  $("plan-stale").hidden = true;
  $("plan-results").classList.remove("stale");
  $("plan-title").textContent = `Plan #${plan.id}: ${plan.label}`;
  renderCards(plan);
  renderChoices(plan);
  renderUnaligned(plan);
  renderStrategy("plan", plan.strategy, "plan");
  renderWarnings([...(plan.warnings || []), ...(plan.breakdown?.warnings || [])]);
  sourcesLine($("plan-sources"), plan.sources);
  renderGeo(plan);
  renderLoading(plan);
  renderSpot(plan);
  renderBaselines(plan);
  await renderCharts(plan);
}

async function submit(ev) {
  ev.preventDefault();
  await submitting(form, "plan", async () => {
    const plan = await post("/plans", await buildRequest());
    await renderPlan(plan);
    showInAddress(plan.id);
  }, markStale);
}

/** Name plan `id` in the address: a new history entry when the address named no plan or another one (so
 * Back returns to what was shown before), in place when it already names this one. */
function showInAddress(id) {
  const url = `?plan=${id}`;
  if (addressedPlan() === String(id)) history.replaceState({ plan: id }, "", url);
  else history.pushState({ plan: id }, "", url);
}

/** The plan id the address names (`?plan=`), or null. */
function addressedPlan() {
  return new URLSearchParams(location.search).get("plan");
}

let addressed = 0;

/** Show what the address names: its stored plan with its request back in the form, else the empty page
 * (under the message saying why, when it names a plan that cannot be shown). Called at load and on Back/Forward (popstate); an answer overtaken by a later move is dropped. */
async function showAddressed() {
  const turn = ++addressed;
  const planId = addressedPlan();
  clearErrors(form);
  const stored = planId ? await storedPlan(planId) : null;
  if (turn !== addressed) return;
  if (stored) {
    fillForm(stored.request);
    await renderPlan(stored);
  } else {
    $("plan-results").hidden = true;
    $("plan-stale").hidden = true;
    $("plan-empty").hidden = false;
  }
}

/** Put a stored plan's request back into the form, so it can be tweaked and re-run. */
function fillForm(request) {
  if (!request) return;
  const set = (id, value) => { if (value !== undefined && value !== null) $(id).value = value; };
  if (request.model && byModel.has(request.model)) $("plan-model").value = request.model;
  set("plan-global-batch", request.global_batch);
  set("plan-iterations", request.iterations);
  $("plan-precision").value = request.precision ?? "";
  set("plan-objective", request.objective);
  set("plan-time-limit", request.time_limit_s);
  set("plan-budget", request.budget_usd);
  if (request.confidence != null) {
    const select = $("plan-confidence");
    const value = String(request.confidence);
    if (![...select.options].some((o) => o.value === value)) select.append(el("option", { value }, value));
    select.value = value;
  }
  set("plan-market", request.market);
  set("plan-mode", request.mode);
  set("plan-allreduce", request.allreduce);
  set("plan-bucket-cap", request.bucket_cap_mb);
  set("plan-exchange", request.exchange ?? "ddp_buckets");
  set("plan-strategy", request.strategy ?? "auto");
  $("plan-checkpointing").value = request.checkpointing == null ? "" : String(request.checkpointing);
  const has = (select, value) => [...select.options].some((o) => o.value === value);
  if (request.provider && has($("plan-provider"), request.provider) && request.provider !== $("plan-provider").value) {
    $("plan-provider").value = request.provider;
    $("plan-provider").dispatchEvent(new Event("change"));  // refills the regions and the availability types
  }
  if (request.region && has($("plan-region"), request.region)) {
    $("plan-region").value = request.region;
    $("plan-region").dispatchEvent(new Event("change"));
  }
  const provider = request.provider ?? $("plan-provider").value;
  const region = request.region ?? $("plan-region").value;
  const others = (all, own) => (all || []).filter((v) => !own.includes(v)).join(", ");
  $("plan-providers").value = others(request.providers, [provider]);
  $("plan-regions").value = others(request.regions, [region, `${provider}/${region}`]);
  if ($("plan-providers").value || $("plan-regions").value) $("plan-geo").open = true;
  describeWhere();
  set("plan-loader-rate", request.input_pipeline?.samples_per_s_per_core);
  set("plan-loader-bytes", request.input_pipeline?.bytes_per_sample);
  $("plan-price-interruptions").checked = request.price_interruptions !== false;
  set("plan-checkpoint-interval", request.checkpoint_interval_s);
  set("plan-restart", request.restart_s);
  set("plan-spot-samples", request.spot_samples);
  $("plan-allow-cpu").checked = request.allow_cpu_profiles === true;
  const recent = request.recent_market || {};
  const traces = $("plan-recent-trace");
  if (recent.trace && ![...traces.options].some((o) => o.value === recent.trace)) {
    traces.append(el("option", { value: recent.trace }, recent.trace));
  }
  traces.value = recent.trace || "";
  if (recent.trace) $("plan-geo").open = true;
  // An inline log (recent_market.log_csv) is not the form's to resend: neither it nor its as-of time is filled.
  $("plan-recent-as-of").value = recent.trace ? recent.as_of_s ?? "" : "";
  availability.clear();
  for (const [name, count] of Object.entries(request.availability || {})) availability.set(name, count);
  renderChips();
}

async function init() {
  form.addEventListener("submit", submit);
  wireUpload($("plan-profile-file"), $("plan-profile-clear"), $("plan-model"));
  // Start loading the chart library early; a failure is said in each chart's place when it is drawn.
  form.addEventListener("focusin", () => plotly().catch(() => null), { once: true });
  $("plan-availability-add").addEventListener("click", addAvailability);
  $("plan-time-limit").addEventListener("input", () => {
    const v = numberOrNull($("plan-time-limit"));
    const unreadable = $("plan-time-limit").validity.badInput;
    $("plan-time-limit-help").textContent = typeof v === "number" ? `= ${fmtSeconds(v)}` : unreadable ? "not a number" : "optional";
  });
  try {
    const [profiles, where] = await Promise.all([
      loadProfiles(), initWhere($("plan-provider"), $("plan-region"), refreshAvailabilityTypes), loadTraces(),
    ]);
    byModel = fillModelSelect($("plan-model"), profiles);
    catalog = where;
    refreshAvailabilityTypes();
    $("plan-model").addEventListener("change", refreshAvailabilityTypes);
    // After initWhere's own listeners, so a provider change has refilled the regions first.
    for (const id of ["plan-provider", "plan-region", "plan-providers", "plan-regions"]) {
      $(id).addEventListener(id.endsWith("s") ? "input" : "change", describeWhere);
    }
    await showAddressed();
  } catch (err) {
    showError(form, err);
  }
  window.addEventListener("popstate", () => showAddressed().catch((err) => showError(form, err)));
  markReady();
}

const OPEN_A_PLAN = "open a plan from the Jobs page (each training run links its plans), or fill in the form and "
  + "press Plan to make one.";

/** The plan `?plan=` names, or null after saying in page words that there is none to show: the API's 404
 * and 422 name its plan_id field and POST /v1/plans, words for a program, not for this form. An id that is
 * not a whole number is not sent. */
async function storedPlan(planId) {
  const noPlan = (detail) => {
    showError(form, new ApiError(404, { detail, hint: OPEN_A_PLAN }));
    return null;
  };
  const notAnId = `No plan “${planId}”: plan ids are whole numbers (a link such as /?plan=12).`;
  if (!/^[1-9][0-9]*$/.test(planId)) return noPlan(notAnId);
  try {
    return await get(`/plans/${encodeURIComponent(planId)}`);
  } catch (err) {
    if (!(err instanceof ApiError) || ![404, 422].includes(err.status)) throw err;
    return noPlan(`No plan #${planId} here (it does not exist, or belongs to another user).`);
  }
}

init();
