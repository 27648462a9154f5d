// Loaders shared by the request forms: stored profiles, the catalog's providers, regions and instance types.

import { config, el, fillSelect, fmtNumber, get, items, query, readJsonFile, renderTable } from "./common.js";

/**
 * Stored profiles as [{id, model, accelerator, reference}], from GET /v1/profiles (grouped there by model);
 * the user's own models first, then the shipped reference models (estimated on every catalog GPU).
 */
export async function loadProfiles() {
  const groups = [];
  for (let offset = 0; ; ) {  // every page: `total` says how many there are (a page holds at most 1000)
    const data = await get(`/profiles?limit=1000&offset=${offset}`);
    groups.push(...items(data, "models"));
    offset += data?.count || 0;
    if (!data?.count || offset >= (data?.total ?? 0)) break;
  }
  const all = groups.flatMap((group) =>
    (group.profiles || []).map((p) => ({
      id: p.id, model: p.model ?? group.model, accelerator: p.accelerator, reference: Boolean(p.reference),
    })));
  return [...all.filter((p) => !p.reference), ...all.filter((p) => p.reference)];
}

/** Fill a model <select>: one option per model name, listing its accelerators; value is the model name. */
export function fillModelSelect(select, profiles) {
  const byModel = groupProfiles(profiles);
  const options = [...byModel.entries()].map(([model, list]) => ({
    value: model,
    label: list.every((p) => p.reference)
      ? `${model}  (reference model, estimated on ${new Set(list.map((p) => p.accelerator)).size} GPU models)`
      : `${model}  (${[...new Set(list.map((p) => p.accelerator))].join(", ")})`,
  }));
  if (!options.length) options.push({ value: "", label: "no stored profiles: upload one below" });
  fillSelect(select, options, options[0].value);
  return byModel;
}

export function groupProfiles(profiles) {
  const byModel = new Map();
  for (const p of profiles) {
    if (!byModel.has(p.model)) byModel.set(p.model, []);
    byModel.get(p.model).push(p);
  }
  return byModel;
}

/**
 * The model part of a request: inline `profiles` when a file is chosen, else the selected stored `model`
 * (the API uses every stored profile of it). An empty choice is sent as-is so the API names the field.
 */
export async function profilePart(select, fileInput) {
  const uploaded = await readJsonFile(fileInput, "profiles");
  if (uploaded !== null) return { profiles: Array.isArray(uploaded) ? uploaded : [uploaded] };
  return select.value ? { model: select.value } : {};
}

/**
 * GET /v1/instance-types answers one entry per (provider, type, region) with `prices: {on_demand, spot}`;
 * merge them into one object per type whose `prices` lists {region, market, price_usd_per_hr, source, as_of}.
 */
export function mergeEntries(entries) {
  const types = new Map();
  for (const e of entries) {
    const key = `${e.provider}/${e.name}`;
    if (!types.has(key)) {
      const { prices: _prices, region: _region, ...specs } = e;
      types.set(key, { ...specs, prices: [] });
    }
    for (const market of ["on_demand", "spot"]) {
      const p = e.prices?.[market];
      if (p) types.get(key).prices.push({ region: e.region, market, ...p });
    }
  }
  return [...types.values()];
}

/** Instance types (merged across regions) from GET /v1/instance-types with optional filters. */
export async function loadInstanceTypes(filters = {}) {
  const data = await get(`/instance-types${query(filters)}`);
  return mergeEntries(items(data, "instance_types"));
}

/** Providers and their regions, read from the catalog (every type's prices). */
export function providersAndRegions(types) {
  const map = new Map();
  for (const t of types) {
    if (!map.has(t.provider)) map.set(t.provider, new Set());
    for (const p of t.prices) if (p.region) map.get(t.provider).add(p.region);
  }
  return map;
}

/**
 * Wire a provider and a region <select> to the catalog; calls `onChange(provider, region)` after each change.
 * Returns {types, map}: every instance type and the provider → regions map.
 */
export async function initWhere(providerSelect, regionSelect, onChange) {
  const types = await loadInstanceTypes();
  const map = providersAndRegions(types);
  const providers = [...map.keys()].sort((a, b) => (a === "aws" ? -1 : b === "aws" ? 1 : a.localeCompare(b)));
  fillSelect(providerSelect, providers, providers[0]);
  const fillRegions = () => {
    const regions = [...(map.get(providerSelect.value) || [])].sort();
    const preferred = regions.includes(config.defaultRegion) ? config.defaultRegion : regions[0];
    fillSelect(regionSelect, regions, preferred);
  };
  fillRegions();
  providerSelect.addEventListener("change", () => {
    fillRegions();
    onChange?.(providerSelect.value, regionSelect.value);
  });
  regionSelect.addEventListener("change", () => onChange?.(providerSelect.value, regionSelect.value));
  return { types, map };
}

/** Instance types offered in a provider and region (catalog order), optionally only those matching accelerators. */
export function typesIn(types, provider, region, accelerators) {
  const wanted = accelerators?.map((a) => a.toLowerCase());
  return types
    .filter((t) => t.provider === provider && t.prices.some((p) => p.region === region))
    .filter((t) => !wanted || !wanted.length || wanted.some((a) => matchesAccelerator(t, a)));
}

function norm(text) {
  return String(text || "").toLowerCase().replace(/[^a-z0-9]/g, "");
}

/** The same rule as InstanceType.matches_accelerator: the type's name, or its GPU model as a whole word. */
export function matchesAccelerator(type, accelerator) {
  const wanted = accelerator.trim().toLowerCase();
  if (wanted === type.name.toLowerCase()) return true;
  if (!type.gpu_model) return false;
  const model = type.gpu_model.toLowerCase();
  if (norm(wanted) === norm(model)) return true;
  const escaped = model.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^a-z0-9])${escaped}([^a-z0-9]|$)`).test(wanted);
}

export function typeOption(t) {
  const gpus = t.gpu_count ? `${t.gpu_count}× ${t.gpu_model}` : `${t.vcpus} vCPU`;
  return { value: t.name, label: `${t.name}  (${gpus})` };
}

/** Sources line: which profiles, bandwidth models and prices a prediction rests on (long ones shortened). */
export function sourcesLine(node, sources) {
  const list = (sources || []).filter(Boolean);
  const short = (s) => (s.length > 64 ? `${s.slice(0, 61)}…` : s);
  node.replaceChildren(list.length ? el("span", {}, "Based on: ", list.map((s, i) => [i ? ", " : "", el("code", { title: s }, short(s))])) : "");
}

/** While a profile file is chosen it replaces the stored model: say so, and offer to go back. */
export function wireUpload(fileInput, clearButton, modelSelect) {
  const sync = () => {
    const chosen = Boolean(fileInput.files?.length);
    clearButton.hidden = !chosen;
    modelSelect.disabled = chosen;
  };
  fileInput.addEventListener("change", sync);
  clearButton.addEventListener("click", () => {
    fileInput.value = "";
    sync();
  });
}

/**
 * How a fleet runs under the request's strategy (a plan's or a prediction's `strategy` section) in the
 * `${prefix}-strategy-*` panel: the setup (what to write in PyTorch), why, memory per GPU, the setups compared;
 * hidden without one. `subject` ("plan", "prediction") names what nothing else was weighed for.
 */
export function renderStrategy(prefix, view, subject) {
  const $ = (part) => document.getElementById(`${prefix}-strategy-${part}`);
  $("panel").hidden = !view || !view.strategy;
  if ($("panel").hidden) return;
  $("how").replaceChildren(el("code", {}, view.how || ""));
  $("why").textContent = `${view.precision}; ${view.why}`;
  if (!view.memory?.length && !view.compared?.length) {
    // Nothing was weighed (e.g. DDP alone): say so once, not "nothing to show" under each table.
    $("memory").replaceChildren(el("p", { class: "empty" },
      `No memory per GPU or other setups to show: no other strategy was weighed for this ${subject}.`));
    $("compared").replaceChildren();
    return;
  }
  renderTable($("memory"), [
    { label: "Instance type", value: (m) => el("code", {}, m.instance_type) },
    { label: "Peak GiB / GPU", value: (m) => (m.peak_bytes == null ? "—" : fmtNumber(m.peak_bytes / 2 ** 30)), num: true },
    { label: "Of GiB", value: (m) => fmtNumber(m.capacity_gib), num: true },
    { label: "Parts (GiB)", wrap: true, value: (m) => Object.entries(m.parts || {}).filter(([, v]) => v)
      .map(([k, v]) => `${k} ${fmtNumber(v / 2 ** 30)}`).join(", ") || "—" },
  ], view.memory || [], { id: `${prefix}-strategy-memory-table`, empty: "no memory per GPU for this fleet" });
  renderTable($("compared"), [
    { label: "Setup", value: (r) => el("code", {}, r.setup) },
    { label: "Fits", value: (r) => (r.fits ? "yes" : el("span", { class: "badge infeasible", title: r.reason || "" }, "no")) },
    { label: "Iteration", value: (r) => (r.iteration_s == null ? "—" : `${fmtNumber(r.iteration_s)} s`), num: true },
    { label: "Peak GiB / GPU", value: (r) => (r.peak_gib == null ? "—" : fmtNumber(r.peak_gib)), num: true },
  ], view.compared || [], { id: `${prefix}-strategy-compared-table`, empty: "no other setups compared", rowClass: (r) => (r.setup === `${view.strategy}${view.checkpointing ? "+ckpt" : ""}` ? "chosen" : null) });
}
