// Bandwidth page: busbw vs buffer size (model lines, probe samples as points), model versions, activate/rollback.

import {
  badge, clearErrors, el, markReady, fillSelect, fmtBytes, fmtNumber, fmtPercent, fmtTime, get, items, post, query, renderTable, showBoxError, showError,
} from "./common.js";
import { react } from "./charts.js";
import { loadInstanceTypes, providersAndRegions } from "./shared.js";

const $ = (id) => document.getElementById(id);
const form = $("bw-filters");
const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#eeca3b", "#bab0ac", "#1f4e79", "#8c564b"];
let versions = [];
let types = [];
let groups = [];

/** A figure from a version's metrics (null when not measured). */
function metric(v, ...names) {
  for (const source of [v.metrics || {}, v]) {
    for (const name of names) if (typeof source[name] === "number") return source[name];
  }
  return null;
}

function coverage(v) {
  const covers = v.covers || [];
  const text = covers.slice(0, 3).join(", ") + (covers.length > 3 ? ` +${covers.length - 3}` : "");
  return el("span", { title: covers.join("\n") }, text || "—");
}

/** The sample count, flagged with training's warnings (too few samples in a half) when it gave any. */
function samplesCell(v) {
  const warnings = v.metrics?.warnings || [];
  const count = fmtNumber(metric(v, "n_samples"));
  if (!warnings.length) return count;
  return el("span", { class: "warn", title: warnings.join("\n") }, `${count} ⚠ too few`);
}

/** Training's warnings of the newest version, under the table (the tooltip alone is easy to miss). */
function renderWarnings(rows) {
  const newest = rows[0];
  const warnings = newest?.metrics?.warnings || [];
  $("bw-warnings").replaceChildren(...warnings.map((w) => el("li", {}, `${newest.version}: ${w}`)));
}

function isActive(v) {
  return Boolean(v.is_active ?? v.active);
}

function renderVersions() {
  const rows = [...versions].sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
  renderTable($("bw-versions"), [
    { label: "Version", value: (v) => el("code", {}, v.version) },
    { label: "State", value: (v) => (isActive(v) ? badge("active") : "") },
    { label: "Created", value: (v) => fmtTime(v.created_at) },
    { label: "MAPE < MTU", value: (v) => fmtPercent(metric(v, "test_mape_small")), num: true, title: "held-out mean absolute percentage error, buffers below the MTU" },
    { label: "MAPE ≥ MTU", value: (v) => fmtPercent(metric(v, "test_mape_large")), num: true, title: "held-out mean absolute percentage error, buffers at or above the MTU" },
    { label: "Noise floor < / ≥ MTU", value: (v) => `${fmtPercent(metric(v, "noise_floor_small"))} / ${fmtPercent(metric(v, "noise_floor_large"))}`, num: true, title: "MAPE of each sample against its configuration's mean: the best any model can do" },
    { label: "Samples", value: (v) => samplesCell(v), num: true, title: "samples trained and tested on; ⚠: too few on one side of the MTU" },
    { label: "Covers", value: (v) => coverage(v), wrap: true },
    { label: "", value: (v) => (isActive(v) ? "" : el("button", { type: "button", class: "small", "data-version": v.version, onclick: (ev) => { ev.stopPropagation(); activate(v.version); } }, "Activate")) },
  ], rows, { id: "bw-versions-table", empty: "no trained models: predictions use the α-β prior", rowClass: (v) => (isActive(v) ? "chosen" : null) });
  renderWarnings(rows);
  const previous = rollbackTarget();
  $("bw-rollback").disabled = !previous;
  $("bw-rollback").textContent = previous ? `Roll back to ${previous.version}` : "Roll back to the previous version";
}

/** The version created just before the active one. */
function rollbackTarget() {
  const sorted = [...versions].sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)));
  const i = sorted.findIndex(isActive);
  return i > 0 ? sorted[i - 1] : null;
}

async function activate(version) {
  const box = $("bw-versions-error");
  box.hidden = true;
  try {
    await post(`/bandwidth-models/${encodeURIComponent(version)}/activate`);
    await loadVersions();
    await draw();
  } catch (err) {
    showBoxError(box, err);
  }
}

async function loadVersions() {
  versions = items(await get("/bandwidth-models"), "models", "versions");
  const options = [{ value: "active", label: "active (serving predictions)" }, ...versions.map((v) => ({ value: v.version, label: v.version }))];
  fillSelect($("bw-version"), options, $("bw-version").value || "active");
  renderVersions();
}

function fillInstances(groups) {
  const provider = $("bw-provider").value;
  const probed = new Set(groups.filter((g) => g.provider === provider).map((g) => g.instance_type));
  const names = types.filter((t) => t.provider === provider).map((t) => t.name);
  const ordered = [...new Set([...[...probed].sort(), ...names.sort((a, b) => a.localeCompare(b, "en", { numeric: true }))])];
  const current = $("bw-instance").value;
  fillSelect($("bw-instance"), ordered.map((n) => ({ value: n, label: probed.has(n) ? `${n}  (probed)` : n })), ordered.includes(current) ? current : ordered[0]);
}

function parseWorldSizes() {
  const raw = $("bw-world-sizes").value.trim();
  if (!raw) return [];
  return raw.split(/[\s,]+/).filter(Boolean).map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

async function draw(ev) {
  ev?.preventDefault();
  clearErrors(form);
  const params = {
    provider: $("bw-provider").value,
    instance_type: $("bw-instance").value || undefined,
    world_size: parseWorldSizes(),
  };
  try {
    const curves = await get(`/bandwidth-models/${encodeURIComponent($("bw-version").value || "active")}/curves${query(params)}`);
    groups = curves.groups;
    if ($("bw-instance").value !== curves.instance_type) $("bw-instance").value = curves.instance_type;
    if (!$("bw-world-sizes").value.trim()) $("bw-world-sizes").value = curves.series.map((s) => s.world_size).join(", ");
    await plot(curves);
  } catch (err) {
    showError(form, worldSizeError(err, params.world_size));
  }
}

/** The API names a bad world size by its index ("world_size[2]"), which the box does not show: name the entry
 * as typed instead, and say what the box takes. */
function worldSizeError(err, sizes) {
  const index = /^world_size\[(\d+)\]$/.exec(err?.field || "")?.[1];
  if (index === undefined) return err;
  err.detail = `“${sizes[Number(index)]}”: ${err.detail}`;
  err.field = "world_size";
  err.hint = "give whole numbers of ranks (2 or more), separated by commas, e.g. 2, 4, 8, 16";
  return err;
}

async function plot(curves) {
  const traces = [];
  curves.series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    traces.push({
      type: "scatter",
      mode: "lines",
      uid: `model-${s.world_size}`,
      name: `model · ${s.world_size} ranks (${s.nodes} node${s.nodes > 1 ? "s" : ""})`,
      legendgroup: String(s.world_size),
      x: s.buffer_bytes,
      y: s.busbw_gbps,
      line: { color, width: 2.5 },
      customdata: s.buffer_bytes.map(fmtBytes),
      hovertemplate: `%{customdata}: %{y:.3g} Gbit/s<extra>${s.source}</extra>`,
    });
    const points = curves.samples.filter((p) => p.world_size === s.world_size);
    if (points.length) {
      traces.push({
        type: "scatter",
        mode: "markers",
        uid: `samples-${s.world_size}`,
        name: `samples · ${s.world_size} ranks (${points.length})`,
        legendgroup: String(s.world_size),
        x: points.map((p) => p.buffer_bytes),
        y: points.map((p) => p.busbw_gbps),
        marker: { color, size: 6, opacity: 0.55, line: { color: "#fff", width: 0.5 } },
        customdata: points.map((p) => [fmtBytes(p.buffer_bytes), p.backend, p.origin, p.async_count]),
        hovertemplate: "%{customdata[0]}: %{y:.3g} Gbit/s<br>%{customdata[1]}, %{customdata[2]}, async %{customdata[3]}<extra>sample</extra>",
      });
    }
  });
  const layout = {
    margin: { l: 64, r: 24, t: 16, b: 52 },
    hovermode: "closest",
    xaxis: { title: { text: "buffer size (bytes)" }, type: "log", gridcolor: "#eef1f5", exponentformat: "power" },
    yaxis: { title: { text: "bus bandwidth (Gbit/s)" }, gridcolor: "#eef1f5", rangemode: "tozero" },
    legend: { orientation: "v", x: 1.01, y: 1 },
    paper_bgcolor: "#fff",
    plot_bgcolor: "#fff",
    font: { family: "system-ui, sans-serif", size: 12 },
  };
  await react($("bw-chart"), traces, layout);
  const sources = [...new Set(curves.series.map((s) => s.source))];
  $("bw-sources").textContent = `${curves.instance_type}: model ${sources.join(", ")}; ${curves.samples.length}${curves.samples_truncated ? "+" : ""} probe samples shown.`;
}

async function init() {
  form.addEventListener("submit", draw);
  $("bw-rollback").addEventListener("click", () => {
    const target = rollbackTarget();
    if (target) activate(target.version);
  });
  try {
    const [catalogTypes, first] = await Promise.all([loadInstanceTypes(), get("/bandwidth-models/active/curves"), loadVersions()]);
    types = catalogTypes;
    groups = first.groups;
    const providers = [...new Set([...providersAndRegions(types).keys(), ...groups.map((g) => g.provider)])].sort();
    fillSelect($("bw-provider"), providers, first.provider);
    fillInstances(groups);
    $("bw-instance").value = first.instance_type;
    $("bw-provider").addEventListener("change", () => {
      fillInstances(groups);
      $("bw-world-sizes").value = "";
      draw();
    });
    $("bw-instance").addEventListener("change", () => {
      $("bw-world-sizes").value = "";
      draw();
    });
    $("bw-version").addEventListener("change", () => draw());
    $("bw-world-sizes").value = first.series.map((s) => s.world_size).join(", ");
    await plot(first);
  } catch (err) {
    showError(form, err);
  }
  markReady();
}

init();
