// What both console pages share: asking the server (with the credentials this tab was given),
// numbers as people read them, and charts drawn as inline SVG.

const SVG = "http://www.w3.org/2000/svg";
const AUTH_KEY = "sluice-console-authorization";

/** Series colours, in order. */
export const COLORS = ["var(--c1)", "var(--c2)", "var(--c3)", "var(--c4)", "var(--c5)", "var(--c6)"];

// ---------------------------------------------------------------- numbers

const whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

/** 720000 -> "720,000". */
export function fmtInt(n) {
  return n == null || !isFinite(n) ? "–" : whole.format(Math.round(n));
}

/** A figure to about three significant digits, with thousands separators: 0.25, 12.5, 1,234. */
export function fmtNum(x) {
  if (x == null || !isFinite(x)) return "–";
  const a = Math.abs(x);
  if (a === 0) return "0";
  if (a >= 100) return fmtInt(x);
  const digits = a >= 10 ? 1 : a >= 1 ? 2 : Math.min(6, 2 - Math.floor(Math.log10(a)));
  return new Intl.NumberFormat("en-US", { maximumFractionDigits: digits }).format(x);
}

/** Short, for axes: 950, 1.2k, 3.4M. */
export function fmtShort(x) {
  if (x == null || !isFinite(x)) return "";
  const a = Math.abs(x);
  for (const [unit, size] of [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]]) {
    if (a >= size) return fmtNum(x / size) + unit;
  }
  return fmtNum(x);
}

/** Bytes in binary units: 512 B, 1.5 KiB, 64 MiB. */
export function fmtBytes(b) {
  if (b == null || !isFinite(b)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  let v = b;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return (i === 0 ? fmtInt(v) : fmtNum(v)) + " " + units[i];
}

/** Seconds as a duration: 250 ms, 1.2 s, 3.5 min, 2.1 h, 4 days. */
export function fmtSeconds(s) {
  if (s == null || !isFinite(s)) return "–";
  if (s < 1) return fmtNum(s * 1000) + " ms";
  if (s < 120) return fmtNum(s) + " s";
  if (s < 7200) return fmtNum(s / 60) + " min";
  if (s < 172800) return fmtNum(s / 3600) + " h";
  return fmtNum(s / 86400) + " days";
}

/** How long ago a time in milliseconds was. */
export function fmtAgo(ms) {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 5) return "just now";
  return fmtSeconds(Math.round(s)) + " ago";
}

// ---------------------------------------------------------------- elements

/**
 * An element: `el("div", {class: "x", data: {table: "t"}, text: "hi"}, child, ...)`.
 * Children are elements or text; null children are skipped.
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "data") for (const [k, v] of Object.entries(value)) node.dataset[k] = v;
    else if (key === "style") Object.assign(node.style, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child == null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An SVG element with attributes. */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value != null) node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

/** Replaces a node's children. */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c != null));
}

// ---------------------------------------------------------------- the server

/** An answer other than 200, with the server's own words. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let asking = null;

/**
 * GETs `path` as JSON. When the server asks for credentials (401), asks the person once, keeps
 * what they give for this tab only (sessionStorage), and tries again.
 */
export async function api(path) {
  let refused = false;
  for (;;) {
    const headers = { Accept: "application/json" };
    const auth = sessionStorage.getItem(AUTH_KEY);
    if (auth) headers.Authorization = auth;
    const response = await fetch(path, { headers, cache: "no-store" });
    if (response.status === 401) {
      sessionStorage.removeItem(AUTH_KEY);
      await askCredentials(refused || Boolean(auth));
      refused = true;
      continue;
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new ApiError(response.status, body.error || response.statusText);
    return body;
  }
}

/** Shows the sign-in form (once, however many requests wait) until it is sent. */
function askCredentials(wasRefused) {
  if (!asking) {
    asking = new Promise((resolve) => {
      const token = el("input", { type: "password", autocomplete: "off", name: "token" });
      const user = el("input", { type: "text", autocomplete: "username", name: "user" });
      const password = el("input", { type: "password", autocomplete: "current-password", name: "password" });
      const form = el(
        "form",
        { class: "card" },
        el("h2", { text: "This sluice asks who you are" }),
        wasRefused ? el("p", { class: "why", text: "Those credentials were not accepted." }) : null,
        el("p", { text: "Give a token or a user its access rules accept. It stays in this tab, and goes to this server only." }),
        el("label", {}, "Token", token),
        el("div", { class: "or", text: "or" }),
        el("label", {}, "User", user),
        el("label", {}, "Password", password),
        el("button", { type: "submit", text: "Show the console" }),
      );
      const overlay = el("div", { class: "overlay" }, form);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const value = token.value.trim()
          ? "Bearer " + token.value.trim()
          : "Basic " + btoa(unescape(encodeURIComponent(user.value + ":" + password.value)));
        sessionStorage.setItem(AUTH_KEY, value);
        overlay.remove();
        asking = null;
        resolve();
      });
      document.body.append(overlay);
      token.focus();
    });
  }
  return asking;
}

// ---------------------------------------------------------------- charts

/** About `count` round steps covering 0..max; in powers of 1024 when `binary` (bytes). */
function niceStep(max, count, binary) {
  if (binary && max >= 1024) {
    const unit = Math.pow(1024, Math.floor(Math.log(max) / Math.log(1024)));
    return niceStep(max / unit, count, false) * unit;
  }
  const raw = max / count;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const scaled = raw / power;
  const nice = scaled <= 1 ? 1 : scaled <= 2 ? 2 : scaled <= 2.5 ? 2.5 : scaled <= 5 ? 5 : 10;
  return nice * power;
}

/** Round steps of time for the x axis, in milliseconds. */
const TIME_STEPS = [5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3];

function clock(ms) {
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, "0");
  return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (d.getSeconds() ? ":" + pad(d.getSeconds()) : "");
}

/** Where everything goes: the plot's box, its scales, and the limits drawn or only named. */
function layout(box, opts) {
  const width = Math.max(240, box.clientWidth || 400);
  const height = Math.max(100, box.clientHeight || 150);
  const pad = { left: 46, right: 10, top: 10, bottom: 20 };
  const w = width - pad.left - pad.right;
  const h = height - pad.top - pad.bottom;
  let max = 0;
  for (const s of opts.series) for (const v of s.values) if (v != null && v > max) max = v;
  const empty = max === 0 && opts.series.every((s) => s.values.every((v) => v == null));
  const shown = (opts.limits || []).filter((l) => l.always || (max > 0 && l.value <= max * 4));
  const hidden = (opts.limits || []).filter((l) => !shown.includes(l));
  for (const l of shown) max = Math.max(max, l.value);
  const step = niceStep(max > 0 ? max * 1.08 : 1, 4, opts.binary);
  const top = Math.ceil((max > 0 ? max * 1.08 : 1) / step) * step;
  const { from, to } = opts;
  return {
    width, height, pad, w, h, step, top, empty, shown, hidden,
    x: (ms) => pad.left + ((ms - from) / Math.max(1, to - from)) * w,
    y: (v) => pad.top + h - (v / top) * h,
  };
}

function text(attrs, content) {
  const node = svg("text", attrs);
  node.textContent = content;
  return node;
}

/** Grid lines with their values, and times along the bottom. */
function drawAxes(root, g, opts, format) {
  for (let v = 0; v <= g.top + g.step / 2; v += g.step) {
    root.append(svg("line", { class: "gridline", x1: g.pad.left, x2: g.pad.left + g.w, y1: g.y(v), y2: g.y(v) }));
    root.append(text({ class: "axis", x: g.pad.left - 6, y: g.y(v) + 3.5, "text-anchor": "end" }, format(v)));
  }
  const span = opts.to - opts.from;
  const tstep = TIME_STEPS.find((s) => span / s <= 5) || TIME_STEPS[TIME_STEPS.length - 1];
  for (let m = Math.ceil(opts.from / tstep) * tstep; m <= opts.to; m += tstep) {
    root.append(text({ class: "axis", x: g.x(m), y: g.height - 4, "text-anchor": "middle" }, clock(m)));
  }
  if (g.empty) {
    root.append(text({ class: "empty", x: g.pad.left + g.w / 2, y: g.pad.top + g.h / 2, "text-anchor": "middle" }, "nothing yet"));
  }
}

/** One series as a line broken where it has no value; the first one also as a soft area. */
function drawSeries(root, g, opts, s, i) {
  const color = s.color || COLORS[i % COLORS.length];
  const runs = [];
  let run = null;
  for (let k = 0; k < opts.t.length; k++) {
    const v = s.values[k];
    if (v == null || opts.t[k] < opts.from) {
      run = null;
      continue;
    }
    if (!run) runs.push((run = []));
    run.push([g.x(opts.t[k]).toFixed(1), g.y(v).toFixed(1)]);
  }
  const line = (points) => points.map(([px, py], j) => (j ? "L" : "M") + px + "," + py).join("");
  if (opts.area && i === 0) {
    const base = g.y(0).toFixed(1);
    const d = runs.map((r) => line(r) + `L${r[r.length - 1][0]},${base}L${r[0][0]},${base}Z`).join("");
    if (d) root.append(svg("path", { d, fill: color, "fill-opacity": 0.1, stroke: "none" }));
  }
  const d = runs.map(line).join("");
  if (d) root.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.8, "stroke-linejoin": "round", "stroke-linecap": "round" }));
}

/** A crosshair and a note of every series' value at the sample nearest the pointer. */
function hover(root, g, opts, format) {
  const cross = svg("line", { class: "crosshair", y1: g.pad.top, y2: g.pad.top + g.h, visibility: "hidden" });
  root.append(cross);
  const tip = el("div", { class: "tip", hidden: "" });
  const { t, series, from, to } = opts;
  root.addEventListener("mousemove", (event) => {
    const rect = root.getBoundingClientRect();
    const at = from + (((event.clientX - rect.left) * (g.width / rect.width) - g.pad.left) / g.w) * (to - from);
    let k = -1;
    for (let j = 0; j < t.length; j++) if (k < 0 || Math.abs(t[j] - at) < Math.abs(t[k] - at)) k = j;
    if (k < 0 || t[k] < from) return;
    cross.setAttribute("x1", g.x(t[k]));
    cross.setAttribute("x2", g.x(t[k]));
    cross.setAttribute("visibility", "visible");
    fill(tip, el("div", { class: "dim", text: clock(t[k]) }), series.map((s, i) =>
      el("div", {}, el("b", { text: s.name + " ", style: { color: s.color || COLORS[i % COLORS.length] } }), format(s.values[k]))));
    tip.hidden = false;
    tip.style.left = Math.min((g.x(t[k]) / g.width) * rect.width + 12, rect.width - 150) + "px";
    tip.style.top = "4px";
  });
  root.addEventListener("mouseleave", () => {
    cross.setAttribute("visibility", "hidden");
    tip.hidden = true;
  });
  return tip;
}

/**
 * A line chart of series over time, drawn into `box` (its width, a fixed height).
 *
 * opts: {t: [ms], series: [{name, values, color}], limits: [{value, label, color, always}],
 *        from, to (ms), format (value -> text), area (fill the first series), binary (bytes)}
 * A limit is drawn when `always`, or when the data come near it; otherwise it is returned, for
 * the caller to name, so that a line far above does not flatten what moves.
 */
export function lineChart(box, opts) {
  const format = opts.format || fmtShort;
  const g = layout(box, opts);
  const root = svg("svg", { viewBox: `0 0 ${g.width} ${g.height}`, role: "img" });
  drawAxes(root, g, opts, format);
  opts.series.forEach((s, i) => drawSeries(root, g, opts, s, i));
  for (const l of g.shown) {
    root.append(svg("line", { class: "limit", x1: g.pad.left, x2: g.pad.left + g.w, y1: g.y(l.value), y2: g.y(l.value), stroke: l.color }));
    root.append(text({ class: "limit-label", x: g.pad.left + 4, y: g.y(l.value) - 4, fill: l.color }, l.label + " " + format(l.value)));
  }
  const tip = hover(root, g, opts, format);
  fill(box, root, tip);
  return g.hidden;
}

/** A legend of series: a coloured dash and a name each. */
export function legend(series) {
  return el("div", { class: "legend" }, series.map((s, i) =>
    el("span", {}, el("i", { style: { background: s.color || COLORS[i % COLORS.length] } }), s.name)));
}

/** A small trend line, `width` by `height`, scaled to `max` (or its own largest value). */
export function sparkline(values, { width = 140, height = 28, max = 0, color = "var(--c2)" } = {}) {
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "spark" });
  const top = Math.max(max, ...values, 1);
  if (values.length > 1) {
    const step = width / (values.length - 1);
    const d = values.map((v, i) => (i ? "L" : "M") + (i * step).toFixed(1) + "," + (height - 2 - (v / top) * (height - 4)).toFixed(1)).join("");
    root.append(svg("path", { d: d + `L${width},${height}L0,${height}Z`, fill: color, "fill-opacity": 0.12, stroke: "none" }));
    root.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.5 }));
  }
  return root;
}
