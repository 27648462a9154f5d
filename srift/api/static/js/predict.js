// Predict page: a hand-made fleet → POST /v1/predictions; keeps this session's what-ifs for comparison.

import { drawBreakdown, drawWhatIfScatter, plotly } from "./charts.js";
import {
  card, markReady, el, fillSelect, fmtNumber, fmtSeconds, fmtUsd, numberOrNull, post, renderTable, showError, submitting,
} from "./common.js";
import {
  fillModelSelect, initWhere, loadProfiles, profilePart, renderStrategy, sourcesLine, typeOption, typesIn, wireUpload,
} from "./shared.js";

const $ = (id) => document.getElementById(id);
const form = $("predict-form");
const fleet = $("predict-fleet");
const whatIfs = [];
let byModel = new Map();
let catalog = { types: [] };

function availableTypes() {
  const accelerators = (byModel.get($("predict-model").value) || []).map((p) => p.accelerator);
  const matching = typesIn(catalog.types, $("predict-provider").value, $("predict-region").value, accelerators);
  return matching.length ? matching : typesIn(catalog.types, $("predict-provider").value, $("predict-region").value);
}

/** Give each fleet row's inputs the API field names of its index, so errors land next to them. */
function renumberRows() {
  [...fleet.rows].forEach((tr, i) => {
    for (const input of tr.querySelectorAll("[data-name]")) {
      const name = input.dataset.name;
      input.dataset.field = `config.choices[${i}].${name} config.choices.${i}.${name}`;
      input.dataset.label = `row ${i + 1}, ${name.replace("_", " ")}`;
    }
  });
  updateGlobalBatch();
}

function updateGlobalBatch() {
  let total = 0;
  for (const tr of fleet.rows) {
    const count = Number(tr.querySelector("[data-name=count]").value) || 0;
    const batch = Number(tr.querySelector("[data-name=batch]").value) || 0;
    total += count * batch;
  }
  $("predict-global-batch").textContent = `global batch: ${total} samples per iteration`;
}

/** A new row's type: the first available type no row has yet (the API refuses a type and market listed twice),
 * else the first. */
function unusedType(types) {
  const used = new Set([...fleet.querySelectorAll("[data-name=instance_type]")].map((s) => s.value));
  return (types.find((t) => !used.has(t.name)) ?? types[0])?.name;
}

function addRow(initial = {}) {
  const types = availableTypes();
  const typeSelect = el("select", { "data-name": "instance_type", "aria-label": "instance type" });
  fillSelect(typeSelect, types.map(typeOption), initial.instance_type ?? unusedType(types));
  const market = el("select", { "data-name": "market", "aria-label": "market" });
  fillSelect(market, [{ value: "spot", label: "spot" }, { value: "on_demand", label: "on-demand" }], initial.market ?? "spot");
  const count = el("input", { type: "number", step: "1", value: initial.count ?? 2, "data-name": "count", "aria-label": "count" });
  const batch = el("input", { type: "number", step: "1", value: initial.batch ?? 64, "data-name": "batch", "aria-label": "batch per VM" });
  for (const input of [count, batch]) input.addEventListener("input", updateGlobalBatch);
  const remove = el("button", { type: "button", class: "small secondary", title: "remove this row", onclick: () => { tr.remove(); renumberRows(); } }, "×");
  const tr = el("tr", {}, el("td", {}, typeSelect), el("td", {}, market), el("td", {}, count), el("td", {}, batch), el("td", {}, remove));
  fleet.append(tr);
  renumberRows();
}

function refreshRowTypes() {
  const types = availableTypes();
  for (const select of fleet.querySelectorAll("[data-name=instance_type]")) {
    const keep = types.some((t) => t.name === select.value) ? select.value : types[0]?.name;
    fillSelect(select, types.map(typeOption), keep);
  }
}

// ---------------------------------------------------------------- strategy, samples and communication
//
// The server's rule `strategy-as-planned` (the OpenAPI schema's x-srift-rules): Monte Carlo samples and
// parameter servers are modelled for plain DDP without checkpointing alone. So with a setup that is never
// that (a sharded strategy, or checkpointing every block) the form holds the samples at 0 and the exchange at
// ring allreduce, and never sends the combination the server refuses; with one that may compare more than
// DDP (auto, or DDP with and without checkpointing) samples above 0 are allowed and narrow it to plain DDP, so
// choosing it sets them to 0 (the comparison a user asks for) and says what samples above 0 mean. Leaving
// either gives back the samples the user had.

const SHARDED = new Set(["zero1", "zero2", "full_shard", "hybrid"]);
let savedSamples = null;  // the user's Monte Carlo samples while a strategy set them to 0
let strategyMode = "plain";

/** "plain" (no strategy, or DDP without checkpointing), "held" (never plain DDP) or "narrowing" (may be). */
function modeOf(strategy, checkpointing) {
  if (!strategy || (strategy === "ddp" && checkpointing === "false")) return "plain";
  if (SHARDED.has(strategy) || checkpointing === "true") return "held";
  return "narrowing";
}

function syncStrategy() {
  const strategy = $("predict-strategy").value;
  const checkpointing = $("predict-checkpointing");
  checkpointing.disabled = !strategy;  // checkpointing is sent only with a strategy
  if (!strategy) checkpointing.value = "";
  const mode = modeOf(strategy, checkpointing.value);
  const samples = $("predict-mc");
  const comm = $("predict-comm");
  const servers = comm.querySelector("option[value=parameter_server]");
  if (mode !== "plain" && savedSamples === null && (strategyMode === "plain" || mode === "held")) {
    savedSamples = samples.value;
  }
  if (mode !== "plain" && strategyMode === "plain") {
    samples.value = "0";
  } else if (mode === "plain" && savedSamples !== null) {
    samples.value = savedSamples;
    savedSamples = null;
  }
  if (mode === "held") {
    samples.value = "0";
    comm.value = "allreduce";
  }
  samples.disabled = mode === "held";
  servers.disabled = mode === "held";
  $("predict-ps").disabled = mode === "held";
  strategyMode = mode;
  const note = $("predict-strategy-note");
  const setup = `strategy ${strategy}${checkpointing.value === "true" ? " with checkpointing" : ""}`;
  note.textContent = mode === "held"
    ? `Monte Carlo samples are held at 0 and communication at ring allreduce: ${setup} runs on the sharded `
      + "simulator, which models neither."
    : mode === "narrowing"
      ? `Monte Carlo samples set to 0 so ${setup} compares every setup it allows; above 0 (or with parameter `
        + "servers) it predicts plain DDP without checkpointing, with the samples' band."
      : "";
  note.hidden = mode === "plain";
}

async function buildRequest() {
  const request = await profilePart($("predict-model"), $("predict-profile-file"));
  request.provider = $("predict-provider").value;
  request.region = $("predict-region").value;
  for (const [key, id] of [
    ["iterations", "predict-iterations"],
    ["mc_samples", "predict-mc"],
    ["ps_servers", "predict-ps"],
    ["bucket_cap_mb", "predict-bucket-cap"],
  ]) {
    const value = numberOrNull($(id));
    if (value !== null) request[key] = value;
  }
  if ($("predict-precision").value) request.precision = $("predict-precision").value;  // else the profiles' own
  request.comm = $("predict-comm").value;
  if ($("predict-exchange").value !== "ddp_buckets") request.exchange = $("predict-exchange").value;
  const strategy = $("predict-strategy").value;
  if (strategy) {
    request.strategy = strategy;
    if ($("predict-checkpointing").value) request.checkpointing = $("predict-checkpointing").value === "true";
    if (modeOf(strategy, $("predict-checkpointing").value) === "held") {
      request.mc_samples = 0;  // what the form holds; never the body the server refuses
      request.comm = "allreduce";
    }
  }
  if (request.comm !== "parameter_server") delete request.ps_servers;
  request.config = {
    choices: [...fleet.rows].map((tr) => ({
      instance_type: tr.querySelector("[data-name=instance_type]").value,
      market: tr.querySelector("[data-name=market]").value,
      count: numberOrNull(tr.querySelector("[data-name=count]")),
      batch: numberOrNull(tr.querySelector("[data-name=batch]")),
    })),
  };
  return request;
}

/** How the fleet exchanges gradients, as a label: "ring allreduce" or "2 parameter servers". */
function commLabel(comm, servers) {
  if (comm !== "parameter_server") return "ring allreduce";
  const n = Number.isInteger(servers) ? servers : 1;
  return `${n} parameter server${n === 1 ? "" : "s"}`;
}

async function render(prediction, request) {
  $("predict-empty").hidden = true;
  $("predict-results").hidden = false;
  const p = { ...prediction.predicted, breakdown: prediction.breakdown };
  const comm = commLabel(prediction.comm, request.ps_servers);
  const view = prediction.strategy;
  const setup = view?.strategy ? ` · ${view.strategy}${view.checkpointing ? "+ckpt" : ""}` : "";
  const precision = prediction.precision ?? "";  // the profiles' arithmetic the answer rests on
  $("predict-title").textContent = `${prediction.label} · ${comm}${setup}${precision ? ` · ${precision}` : ""}`;
  $("predict-cards").replaceChildren(
    card("Iteration", fmtSeconds(p.iteration_s), `p10 ${fmtSeconds(p.iteration_p10_s)} · p90 ${fmtSeconds(p.iteration_p90_s)}`),
    card("Total time", fmtSeconds(p.total_time_s), `${fmtNumber(prediction.iterations)} iterations`),
    card("Total cost", fmtUsd(p.cost_usd), `${fmtUsd(prediction.usd_per_hr)} per hour`),
    card("Global batch", fmtNumber(prediction.global_batch), comm),
    card("Granularity", fmtNumber(prediction.breakdown.granularity), "compute ÷ communication"),
  );
  $("predict-warnings").replaceChildren(...[...(prediction.warnings || []), ...(prediction.breakdown.warnings || [])].map((w) => el("li", {}, w)));
  sourcesLine($("predict-sources"), prediction.sources);
  renderStrategy("predict", view, "prediction");
  whatIfs.push({ label: `${prediction.label} · ${comm}${setup}`, fleet: `${prediction.label}${setup}`, comm, precision, iterations: prediction.iterations, prediction: p });
  const charts = Promise.all([
    drawWhatIfScatter($("predict-scatter"), whatIfs),
    drawBreakdown($("predict-breakdown"), whatIfs.slice(-3).reverse().map((w, i) => ({ name: i === 0 ? "latest" : `earlier ${i}`, breakdown: w.prediction.breakdown }))),
  ]);
  renderTable($("predict-history"), [
    { label: "#", value: (w) => whatIfs.indexOf(w) + 1, num: true },
    { label: "Fleet", value: (w) => w.fleet },
    { label: "Communication", value: (w) => w.comm },
    { label: "Precision", value: (w) => w.precision || "—" },
    { label: "Iteration", value: (w) => fmtSeconds(w.prediction.iteration_s), num: true },
    { label: "Total time", value: (w) => fmtSeconds(w.prediction.total_time_s), num: true },
    { label: "Cost", value: (w) => fmtUsd(w.prediction.cost_usd), num: true },
  ], [...whatIfs].reverse(), { rowClass: (w) => (w === whatIfs[whatIfs.length - 1] ? "chosen" : null) });
  await charts;
}

async function submit(ev) {
  ev.preventDefault();
  await submitting(form, "predict", async () => {
    const request = await buildRequest();
    await render(await post("/predictions", request), request);
  });
}

async function init() {
  form.addEventListener("submit", submit);
  wireUpload($("predict-profile-file"), $("predict-profile-clear"), $("predict-model"));
  // Start loading the chart library early; a failure is said in each chart's place when it is drawn.
  form.addEventListener("focusin", () => plotly().catch(() => null), { once: true });
  $("predict-add-row").addEventListener("click", () => addRow());
  for (const id of ["predict-strategy", "predict-checkpointing"]) $(id).addEventListener("change", syncStrategy);
  $("predict-mc").addEventListener("input", () => { savedSamples = null; });  // the user's own, kept on leaving
  syncStrategy();
  try {
    const [profiles, where] = await Promise.all([loadProfiles(), initWhere($("predict-provider"), $("predict-region"), refreshRowTypes)]);
    byModel = fillModelSelect($("predict-model"), profiles);
    catalog = where;
    $("predict-model").addEventListener("change", refreshRowTypes);
    addRow();
  } catch (err) {
    showError(form, err);
  }
  markReady();
}

init();
