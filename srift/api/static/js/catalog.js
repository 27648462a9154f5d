// Catalog page: instance types and their prices, filtered by provider, region, GPU and name.

import { clearErrors, el, markReady, fillSelect, fmtNumber, fmtUsd, renderTable, showError } from "./common.js";
import { loadInstanceTypes, providersAndRegions } from "./shared.js";

const $ = (id) => document.getElementById(id);
const form = $("catalog-filters");
let all = [];

function priceCell(type, region, market) {
  const p = type.prices.find((x) => x.region === region && x.market === market);
  return p ? fmtUsd(p.price_usd_per_hr) : "—";
}

function render() {
  const provider = $("catalog-provider").value;
  const region = $("catalog-region").value;
  const gpu = $("catalog-gpu").value;
  const minGpus = Number($("catalog-min-gpus").value) || 0;
  const search = $("catalog-search").value.trim().toLowerCase();
  const rows = all
    .filter((t) => !provider || t.provider === provider)
    .filter((t) => !region || t.prices.some((p) => p.region === region))
    .filter((t) => !gpu || t.gpu_model === gpu)
    .filter((t) => (t.gpu_count || 0) >= minGpus)
    .filter((t) => !search || t.name.toLowerCase().includes(search) || String(t.gpu_model || "").toLowerCase().includes(search));
  $("catalog-count").textContent = `${rows.length} of ${all.length} instance types`;
  renderTable($("catalog-table"), [
    { label: "Provider", value: (t) => t.provider },
    { label: "Type", value: (t) => el("code", {}, t.name) },
    { label: "GPUs", value: (t) => (t.gpu_count ? `${t.gpu_count}× ${t.gpu_model}` : "—") },
    { label: "GPU mem (GiB)", value: (t) => (t.gpu_count ? fmtNumber(t.gpu_memory_gib) : "—"), num: true },
    { label: "vCPUs", value: (t) => t.vcpus, num: true },
    { label: "RAM (GiB)", value: (t) => fmtNumber(t.memory_gib), num: true },
    { label: "Network (Gbit/s)", value: (t) => `${fmtNumber(t.network_gbps)}${t.network_burst ? " burst" : ""}${t.efa ? " · EFA" : ""}`, num: true },
    { label: "Intra-node", value: (t) => t.interconnect },
    { label: "On-demand $/h", value: (t) => priceCell(t, region, "on_demand"), num: true },
    { label: "Spot $/h", value: (t) => priceCell(t, region, "spot"), num: true },
  ], rows, { id: "catalog-types", empty: "no instance type matches these filters" });
  const sources = new Set();
  for (const t of rows) for (const p of t.prices) if (p.region === region && p.source) sources.add(`${p.source}${p.as_of ? ` (as of ${p.as_of})` : ""}`);
  $("catalog-sources").replaceChildren(sources.size
    ? el("details", {}, el("summary", {}, `Where these prices come from (${sources.size} source${sources.size > 1 ? "s" : ""})`),
      el("ul", {}, [...sources].map((s) => el("li", {}, s))))
    : "");
}

function fillRegions(map) {
  const regions = [...(map.get($("catalog-provider").value) || [])].sort();
  const current = $("catalog-region").value;
  const body = document.body.dataset.defaultRegion;
  fillSelect($("catalog-region"), regions, regions.includes(current) ? current : regions.includes(body) ? body : regions[0]);
}

async function init() {
  try {
    all = await loadInstanceTypes();
  } catch (err) {
    showError(form, err);
    markReady();
    return;
  }
  const map = providersAndRegions(all);
  const providers = [...map.keys()].sort();
  fillSelect($("catalog-provider"), providers, providers.includes("aws") ? "aws" : providers[0]);
  fillRegions(map);
  const gpus = [...new Set(all.map((t) => t.gpu_model).filter(Boolean))].sort();
  fillSelect($("catalog-gpu"), [{ value: "", label: "any" }, ...gpus], "");
  $("catalog-provider").addEventListener("change", () => {
    fillRegions(map);
    render();
  });
  for (const id of ["catalog-region", "catalog-gpu", "catalog-min-gpus", "catalog-search"]) {
    $(id).addEventListener("input", () => {
      clearErrors(form);
      render();
    });
  }
  form.addEventListener("submit", (ev) => ev.preventDefault());
  render();
  markReady();
}

init();
