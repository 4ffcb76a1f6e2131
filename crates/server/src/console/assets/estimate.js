// The estimator: every change to the inputs asks /v1/estimate, which runs the model
// `sluice estimate` runs, and shows both sides. Inputs can come in the URL
// (?rows_per_second=20000&rows_per_insert=100); what is not given is the server's own.

import { api, ApiError, el, fill, fmtInt, fmtNum, fmtSeconds } from "./console.js";

const FIELDS = ["rows_per_second", "rows_per_insert", "partitions", "max_age", "max_rows", "max_bytes", "row_bytes"];

/** Every row of the comparison: its label, the model's field, how it reads. */
const ROWS = [
  ["Parts per second", "parts_per_s", fmtNum],
  ["Parts per hour", "parts_per_hour", fmtInt],
  ["Parts per day", "parts_per_day", fmtInt],
  ["Rows per part", "rows_per_part", fmtInt],
  ["Merges per hour", "merges_per_hour", fmtInt],
  ["Write amplification", "write_amplification", (x) => fmtNum(x) + "×"],
  ["Merge thread busy, per partition", "merger_busy", (x) => fmtNum(x * 100) + "%"],
  ["1,000 parts if merges stop", "delay_after_s_without_merges", fmtSeconds],
  ["3,000 parts if merges stop", "refuse_after_s_without_merges", fmtSeconds],
  ["1,000 parts, merges running", "delay_after_s", (x) => (x == null ? "never: merges keep up" : fmtSeconds(x))],
  ["3,000 parts, merges running", "refuse_after_s", (x) => (x == null ? "never: merges keep up" : fmtSeconds(x))],
];

const form = document.getElementById("inputs");
const input = (name) => form.elements.namedItem(name);
let typing = null;
let asked = 0;

/** A size as the config writes it: 64MiB when it is whole, else bytes. */
function size(bytes) {
  for (const [unit, scale] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
    if (bytes >= scale && bytes % scale === 0) return bytes / scale + unit;
  }
  return String(bytes);
}

/** A duration as the config writes it: 250ms, 1s, 1.5s. */
function duration(seconds) {
  return seconds < 1 ? Math.round(seconds * 1000) + "ms" : seconds + "s";
}

function fillInputs(taken) {
  const text = {
    rows_per_second: String(Math.round(taken.rows_per_second * 100) / 100),
    rows_per_insert: String(taken.rows_per_insert),
    partitions: String(taken.partitions),
    max_age: duration(taken.max_age_s),
    max_rows: String(taken.max_rows),
    max_bytes: size(taken.max_bytes),
    row_bytes: String(taken.row_bytes),
  };
  for (const name of FIELDS) input(name).value = text[name];
}

function describeSource(answer) {
  const m = answer.measured;
  const from = answer.from;
  if (from.rows_per_second === "measured" && m) {
    return `Prefilled from this server: ${fmtNum(m.rows_per_second)} rows/s in inserts of ${fmtNum(m.rows_per_insert)} rows, over the last ${fmtSeconds(m.window_s)}; its own flush limits.`;
  }
  if (from.rows_per_second === "example") {
    return "This server took no insert in the last minute, so the write rate is seed 000's example. The flush limits are this server's.";
  }
  return "Flush limits not given are this server's.";
}

function cell(side, key, value, format) {
  const id = `${side}-${key.replaceAll("_", "-")}`;
  return el("td", { id, data: { value: value == null ? "" : String(value) }, text: format(value) });
}

function render(answer) {
  const e = answer.estimate;
  const d = e.direct;
  const s = e.sluice;
  fill(document.getElementById("headline"),
    "Without sluice, ", el("span", { class: "big", text: fmtNum(d.parts_per_s) }), " parts a second. Through sluice, ",
    el("span", { class: "big", text: fmtNum(s.parts_per_s) }), `: ${fmtNum(e.parts_ratio)} times fewer.`);
  document.getElementById("trigger").textContent =
    `sluice flushes each partition every ${fmtSeconds(e.flush_interval_s)}, when its ${e.flush_trigger} limit is reached first.`;
  fill(document.getElementById("direct-big"), fmtInt(d.parts_per_hour), el("small", { text: " parts per hour" }));
  fill(document.getElementById("sluice-big"), fmtInt(s.parts_per_hour), el("small", { text: " parts per hour" }));
  fill(document.getElementById("compare"), ROWS.map(([label, key, format]) =>
    el("tr", {}, el("td", { text: label }), cell("direct", key, d[key], format), cell("sluice", key, s[key], format))));
  document.getElementById("source").textContent = describeSource(answer);
  document.body.dataset.ready = "true";
}

function showError(error) {
  for (const node of form.querySelectorAll(".bad")) node.textContent = "";
  for (const name of FIELDS) input(name).classList.remove("invalid");
  const banner = document.getElementById("banner");
  banner.hidden = true;
  if (!error) return;
  const name = FIELDS.find((f) => error.message.startsWith(f + ":"));
  if (error instanceof ApiError && error.status === 400 && name) {
    input(name).classList.add("invalid");
    form.querySelector(`[data-for="${name}"]`).textContent = error.message.slice(name.length + 1).trim();
  } else {
    banner.hidden = false;
    banner.textContent = "The server could not estimate: " + error.message;
  }
}

/** Asks the server with `query`; fills the inputs from its answer when `prefill`. */
async function ask(query, prefill) {
  const mine = ++asked;
  try {
    const answer = await api("/v1/estimate?" + query);
    if (mine !== asked) return;
    if (prefill) fillInputs(answer.input);
    showError(null);
    render(answer);
  } catch (error) {
    if (mine === asked) showError(error);
  }
}

function fromInputs() {
  const query = new URLSearchParams();
  for (const name of FIELDS) query.set(name, input(name).value.trim());
  return query;
}

form.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => {
    const query = fromInputs();
    history.replaceState(null, "", "?" + query);
    ask(query, false);
  }, 200);
});
form.addEventListener("submit", (event) => event.preventDefault());
document.getElementById("reset").addEventListener("click", () => {
  history.replaceState(null, "", location.pathname);
  ask(new URLSearchParams(), true);
});

const given = new URLSearchParams();
for (const [key, value] of new URLSearchParams(location.search)) if (FIELDS.includes(key)) given.set(key, value);
ask(given, true);
