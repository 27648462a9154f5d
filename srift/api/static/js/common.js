// Shared by every page: the /v1 client (token, errors), field-error display, formatting, DOM and table helpers.

const TOKEN_KEY = "srift.token";
const body = document.body;
export const config = {
  authEnabled: body.dataset.authEnabled === "true",
  readRequiresToken: body.dataset.readRequiresToken === "true",
  defaultRegion: body.dataset.defaultRegion || "",
};

// ---------------------------------------------------------------- API client

/** An error answer of the API: {error, detail, hint, field} plus the HTTP status. */
export class ApiError extends Error {
  constructor(status, payload) {
    const p = payload && typeof payload === "object" ? payload : {};
    super(p.detail || `HTTP ${status}`);
    this.status = status;
    this.error = p.error || `http_${status}`;
    this.detail = p.detail || `the server answered HTTP ${status}`;
    this.hint = p.hint || "";
    this.field = p.field || null;
    this.relaxations = p.relaxations || null;
  }
}

export function getToken() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

/** Call /v1`path`; resolves with the parsed JSON or rejects with an ApiError. */
export async function api(method, path, payload) {
  const headers = { Accept: "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers };
  if (payload !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(payload);
  }
  let response;
  try {
    response = await fetch(`/v1${path}`, init);
  } catch (err) {
    throw new ApiError(0, { error: "network", detail: `cannot reach the Srift server (${err.message})`, hint: "check that `srift serve` is running" });
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text.slice(0, 300) };
    }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    if (error.status === 401 || error.status === 403) showTokenProblem(error);
    throw error;
  }
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, payload) => api("POST", path, payload ?? {});

/** Build "?a=1&b=2" from an object, leaving out empty values; arrays repeat the key. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") continue;
    for (const v of Array.isArray(value) ? value : [value]) search.append(key, String(v));
  }
  const s = search.toString();
  return s ? `?${s}` : "";
}

/** Lists come back either bare or wrapped ({items: [...]} and similar); return the array. */
export function items(data, ...keys) {
  if (Array.isArray(data)) return data;
  if (data && typeof data === "object") {
    for (const key of [...keys, "items", "results", "data"]) if (Array.isArray(data[key])) return data[key];
  }
  return [];
}

/** Mark the page as loaded (its first API calls answered, charts drawn): `body[data-ready]`. */
export function markReady() {
  document.body.dataset.ready = "true";
}

// ---------------------------------------------------------------- token box

function showTokenProblem(error) {
  const box = document.getElementById("token-error");
  if (!box) return;
  const hint = error.hint || "create one with `srift tokens create --scope write`";
  renderMessage(box, error.detail, `${hint}, then paste it here`);
  document.getElementById("api-token")?.classList.add("invalid");
}

function initTokenBox() {
  const input = document.getElementById("api-token");
  if (!input) return;
  const state = document.getElementById("token-state");
  const box = document.getElementById("token-error");
  const refresh = () => {
    const token = getToken();
    state.textContent = token ? `saved (${token.slice(0, 10)}…)` : "not set";
    input.value = "";
    input.placeholder = token ? "replace the saved token" : "srift_…  (write scope)";
  };
  const save = () => {
    const value = input.value.trim();
    if (value) localStorage.setItem(TOKEN_KEY, value);
    box.hidden = true;
    input.classList.remove("invalid");
    refresh();
  };
  document.getElementById("token-save").addEventListener("click", save);
  document.getElementById("token-box").addEventListener("submit", (ev) => {
    ev.preventDefault();
    save();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    refresh();
  });
  refresh();
}
initTokenBox();

// ---------------------------------------------------------------- errors next to fields

// An infeasible request's relaxations (PlanInfeasible.relaxations): the limit each one raises, in words and
// units, rounded up as the API's hint rounds them, so that the figure offered meets the limit it names.
const secondsUp = (v) => Math.ceil(Number(v.toFixed(6)));
const usdUp = (v) => Math.ceil(Number((v * 100).toFixed(6))) / 100;
const RELAXATIONS = {
  fastest_time_s: { field: "time_limit_s", limit: "time limit", up: secondsUp, fmt: (v) => `${v.toLocaleString("en-US")} s` },
  fastest_time_within_budget_s: { field: "time_limit_s", limit: "time limit", up: secondsUp, fmt: (v) => `${v.toLocaleString("en-US")} s` },
  least_budget_for_deadline_usd: { field: "budget_usd", limit: "budget", up: usdUp, fmt: (v) => `$${v.toFixed(2)}` },
  cheapest_cost_usd: { field: "budget_usd", limit: "budget", up: usdUp, fmt: (v) => `$${v.toFixed(2)}` },
  time_short_s: { text: (v) => `${fmtSeconds(v)} past the deadline already` },
  budget_short_usd: { text: (v) => `${fmtUsd(v)} over the budget already` },
};

/**
 * One line per relaxation: a button that puts the relaxed limit into its input, in a form whose inputs are
 * the request's own limits (data-relaxations="fill": the Plan page's; a run's re-plan relaxes the time and
 * money left, not the whole run's limits its form holds, so there the message and its hint say it alone).
 * An unknown key is left out rather than shown raw.
 */
function relaxationLines(box, relaxations) {
  const form = box.closest("form[data-relaxations=fill]");
  const lines = [];
  for (const [key, value] of Object.entries(relaxations || {})) {
    const spec = RELAXATIONS[key];
    if (!spec || value === null || value === undefined || !Number.isFinite(value)) continue;
    if (spec.text) {
      lines.push(el("span", { class: "hint" }, spec.text(value)));
      continue;
    }
    const input = form ? inputForField(form, spec.field) : null;
    if (!input || input.tagName !== "INPUT") continue;
    const relaxed = spec.up(value);
    const label = `Set the ${spec.limit} to ${spec.fmt(relaxed)}`;
    lines.push(el("span", { class: "hint" }, el("button", {
      type: "button", class: "small secondary relax", dataset: { relax: key },
      onclick: () => {
        input.value = String(relaxed);
        input.dispatchEvent(new Event("input", { bubbles: true }));
        input.focus();
      },
    }, label)));
  }
  return lines;
}

function renderMessage(box, detail, hint, relaxations) {
  box.replaceChildren(document.createTextNode(detail));
  if (hint) box.append(el("span", { class: "hint" }, `To fix: ${hint}`));
  box.append(...relaxationLines(box, relaxations));
  box.hidden = false;
}

/** Hide every error message of a form and un-mark its inputs. */
export function clearErrors(form) {
  for (const box of form.querySelectorAll(".field-error, .form-error")) {
    box.hidden = true;
    box.replaceChildren();
  }
  for (const input of form.querySelectorAll(".invalid")) input.classList.remove("invalid");
  for (const input of form.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
}

function fieldMatches(path, name) {
  return path === name || path.startsWith(`${name}.`) || path.startsWith(`${name}[`);
}

/** The form element whose data-field is the longest prefix of the API's dotted `field` path. */
export function inputForField(form, path) {
  if (!path) return null;
  let best = null;
  let bestLength = -1;
  for (const candidate of form.querySelectorAll("[data-field]")) {
    for (const name of candidate.dataset.field.split(/\s+/)) {
      if (name && fieldMatches(path, name) && name.length > bestLength) {
        best = candidate;
        bestLength = name.length;
      }
    }
  }
  return best;
}

/** Show an API error next to the input it concerns (by `field`), or at the form's foot when none matches. */
export function showError(form, error) {
  const err = error instanceof ApiError ? error : new ApiError(0, { detail: String(error?.message || error) });
  const target = inputForField(form, err.field);
  const ownName = target?.dataset.field?.split(/\s+/).find((n) => fieldMatches(err.field || "", n));
  const prefix = target?.dataset.label ? `${target.dataset.label}: ` : err.field && err.field !== ownName ? `${err.field}: ` : "";
  let box = null;
  if (target) {
    target.closest("details")?.setAttribute("open", "");  // a message in a folded section must be seen
    box = target.closest(".field")?.querySelector(":scope > .field-error") || null;
    target.classList.add("invalid");
    target.setAttribute("aria-invalid", "true");
  }
  if (!box) box = form.querySelector(".form-error");
  if (!box) return;
  const detail = target ? `${prefix}${err.detail}` : `${err.field ? `${err.field}: ` : ""}${err.detail}`;
  renderMessage(box, detail, err.hint, err.relaxations);
  box.scrollIntoView({ block: "nearest" });
}

/**
 * Throw an ApiError naming the first number input of `form` whose text the browser cannot read as a number
 * ("NaN", "12abc", "1e"): such an input's value is "", and sending it as "none" would drop a limit the user
 * typed (a time limit of "NaN" planned with no deadline, silently).
 */
function refuseUnreadableNumbers(form) {
  for (const input of form.querySelectorAll("input[type=number]")) {
    if (!input.validity?.badInput) continue;
    const field = (input.dataset.field || input.closest("[data-field]")?.dataset.field || "").split(/\s+/)[0] || null;
    throw new ApiError(422, {
      error: "invalid_input", field,
      detail: "not a number: the browser cannot read what is typed here",
      hint: "type a number (e.g. 3600 or 1e4), or empty the box for none",
    });
  }
}

/**
 * Send `form` (the submit button `${prefix}-submit` and busy note `${prefix}-busy` of _macros.html's
 * form_actions): clear its errors, run `send` with the button disabled and the note shown, and show what
 * `send` throws next to its field; `onError(err)` runs after an error is shown.
 */
export async function submitting(form, prefix, send, onError = null) {
  const button = document.getElementById(`${prefix}-submit`);
  const busy = document.getElementById(`${prefix}-busy`);
  clearErrors(form);
  button.disabled = true;
  busy.hidden = false;
  try {
    refuseUnreadableNumbers(form);
    await send();
  } catch (err) {
    showError(form, err);
    if (onError) await onError(err);
  } finally {
    button.disabled = false;
    busy.hidden = true;
  }
}

/** Show an error in a standalone box (not tied to a form). */
export function showBoxError(box, error) {
  if (!box) return;
  const err = error instanceof ApiError ? error : new ApiError(0, { detail: String(error?.message || error) });
  renderMessage(box, err.field ? `${err.field}: ${err.detail}` : err.detail, err.hint, err.relaxations);
}

// ---------------------------------------------------------------- DOM helpers

/** Create an element: el("td", {class: "num"}, "12"). Children may be strings, nodes, null or arrays. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * Render a table into `container`. `columns`: [{label, value: row => text|Node, num?: bool, wrap?: bool}].
 * `options.rowClass(row)` and `options.onClick(row, tr)` decorate rows.
 */
export function renderTable(container, columns, rows, options = {}) {
  if (!rows.length) {
    container.replaceChildren(el("p", { class: "empty" }, options.empty || "nothing to show"));
    return null;
  }
  const head = el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null, title: c.title }, c.label)));
  const bodyRows = rows.map((row) => {
    const classes = [options.rowClass?.(row), options.onClick ? "clickable" : null].filter(Boolean).join(" ");
    const cell = (c) => el("td", { class: [c.num ? "num" : null, c.wrap ? "wrap" : null].filter(Boolean).join(" ") || null }, c.value(row) ?? "—");
    const tr = el("tr", { class: classes || null }, columns.map(cell));
    if (options.onClick) tr.addEventListener("click", () => options.onClick(row, tr));
    return tr;
  });
  const table = el("table", { id: options.id }, el("thead", {}, head), el("tbody", {}, bodyRows));
  container.replaceChildren(table);
  return table;
}

export function badge(text) {
  return el("span", { class: `badge ${String(text).toLowerCase()}` }, text);
}

export function card(label, value, sub) {
  return el("div", { class: "card" }, el("div", { class: "k" }, label), el("div", { class: "v" }, value), sub ? el("div", { class: "s" }, sub) : null);
}

export function fillSelect(select, options, selected) {
  select.replaceChildren(...options.map((o) => {
    const opt = typeof o === "object" ? o : { value: o, label: o };
    return el("option", { value: opt.value, selected: String(opt.value) === String(selected) }, opt.label ?? opt.value);
  }));
}

// ---------------------------------------------------------------- formatting

export function fmtSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "—";
  if (s === 0) return "0 s";
  if (s < 1) return `${(s * 1000).toPrecision(3)} ms`;
  if (s < 120) return `${s.toPrecision(3)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(2)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export function fmtUsd(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  if (Math.abs(v) < 10) return `$${v.toFixed(3)}`;
  return `$${v.toLocaleString("en-US", { maximumFractionDigits: 2, minimumFractionDigits: 2 })}`;
}

export function fmtNumber(v, digits = 3) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  return Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : Number(v.toPrecision(digits)).toString();
}

export function fmtPercent(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  return `${(v * 100).toFixed(1)}%`;
}

export function fmtBytes(b) {
  if (!Number.isFinite(b)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = b;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${Number(v.toPrecision(3))} ${units[i]}`;
}

export function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** Parse a number input: "" → null; otherwise the number (NaN passes through, so the API names the field). */
export function numberOrNull(input) {
  const raw = input.value.trim();
  if (raw === "") return null;
  const value = Number(raw);
  return Number.isNaN(value) ? raw : value;
}

/** Read a JSON file chosen in an <input type=file>; rejects with an ApiError naming `field`. */
export async function readJsonFile(input, field) {
  const file = input.files?.[0];
  if (!file) return null;
  const text = await file.text();
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(422, { error: "invalid_input", detail: `${file.name} is not valid JSON (${err.message})`, hint: "choose the JSON file written by `srift profile`", field });
  }
}
