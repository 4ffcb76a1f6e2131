// The dashboard: asks /v1/dashboard every REFRESH_MS for what changed, keeps fifteen minutes
// of samples, and draws them. Elements a test or a tool reads carry data-* attributes.

import {
  api, el, fill, fmtInt, fmtNum, fmtBytes, fmtSeconds, fmtAgo, lineChart, legend, sparkline,
} from "./console.js";

const REFRESH_MS = 1500;
const DOORS = { api: "Native API", clickhouse_http: "ClickHouse HTTP", clickhouse_native: "ClickHouse native" };
const REASONS = ["rows", "bytes", "age", "inserts", "shutdown"];

const state = {
  started: null,
  last: 0,
  hist: null,
  data: null,
  timer: null,
  filter: new URLSearchParams(location.search).get("filter") || "",
  charts: [],
};

// ---------------------------------------------------------------- the charts

const rate = (unit) => (d) => `${fmtNum(d)} ${unit}`;

/** Every chart: its series (history columns), how its numbers read, the limits it is held to. */
const CHARTS = [
  {
    title: "Rows received",
    series: [["rows_api", "Native API"], ["rows_clickhouse_http", "ClickHouse HTTP"], ["rows_clickhouse_native", "ClickHouse native"]],
    now: (d) => rate("rows/s")(d.now.rows_per_s),
    area: true,
  },
  {
    title: "Rows landed",
    series: [["rows_written", "rows landed"]],
    now: (d) => rate("rows/s")(d.now.rows_written_per_s),
    colors: ["var(--c2)"],
    area: true,
  },
  {
    title: "Inserts, by ack mode",
    series: [["inserts_async", "async"], ["inserts_durable", "durable"], ["inserts_committed", "committed"]],
    now: (d) => rate("inserts/s")(d.now.inserts_per_s),
  },
  {
    title: "Flushes, by reason",
    series: REASONS.map((r) => ["flushes_" + r, r]),
    now: (d) => rate("/s")(d.now.flushes_per_s),
    quiet: true,
  },
  {
    title: "Rows per part",
    series: [["rows_per_part", "rows per part"]],
    now: (d) => (d.now.rows_per_part ? fmtInt(d.now.rows_per_part) + " rows" : "–"),
    area: true,
  },
  {
    title: "Wait from insert to commit",
    series: [["wait_p50", "p50"], ["wait_p99", "p99"]],
    now: (d) => [fmtSeconds(d.now.wait_p50_s), `p99 ${fmtSeconds(d.now.wait_p99_s)}`],
    format: fmtSeconds,
    limits: (d) => [{ value: d.policy.max_age_s, label: "max_age", color: "var(--c4)", always: true }],
  },
  {
    title: "Buffer memory",
    series: [["memory_used", "in use"]],
    now: (d) => [fmtBytes(d.memory.used_bytes), `of ${fmtBytes(d.memory.limit_bytes)}`],
    format: fmtBytes,
    binary: true,
    area: true,
    limits: (d) => [{ value: d.memory.limit_bytes, label: "max_buffer_bytes", color: "var(--bad)" }],
  },
  {
    title: "Active parts, fullest partition",
    series: [["parts_max", "parts"]],
    now: (d) => fmtInt(last("parts_max")) + " parts",
    area: true,
    limits: (d) => [
      { value: d.throttle.parts_to_delay_insert, label: "delay", color: "var(--warn)" },
      { value: d.throttle.parts_to_throw_insert, label: "refuse", color: "var(--bad)" },
    ],
  },
  {
    title: "Parts landed and merged",
    series: [["parts_per_s", "parts landed"], ["merges", "merges"]],
    now: (d) => rate("parts/s")(d.now.parts_per_s),
  },
  {
    title: "Write-ahead log",
    series: [["wal_bytes", "written"]],
    now: (d) => (d.wal.enabled ? fmtBytes(d.now.wal_bytes_per_s) + "/s" : "off"),
    format: (v) => fmtBytes(v) + "/s",
    binary: true,
    area: true,
  },
  {
    title: "Log fsyncs",
    series: [["wal_fsyncs", "fsyncs"]],
    now: (d) => (d.wal.enabled ? rate("/s")(d.now.wal_fsyncs_per_s) : "off"),
  },
  {
    title: "Refusals",
    series: [["refusals", "refusals"]],
    now: (d) => rate("/s")(d.now.refusals_per_s),
    colors: ["var(--bad)"],
    area: true,
  },
];

/** The newest value of a history column. */
function last(column) {
  const values = state.hist ? state.hist[column] : [];
  for (let i = values.length - 1; i >= 0; i--) if (values[i] != null) return values[i];
  return null;
}

function buildCharts() {
  const root = document.getElementById("charts");
  state.charts = CHARTS.map((spec) => {
    const now = el("span", { class: "now" });
    const box = el("div", { class: "chart" });
    const keys = el("div");
    const caption = el("div", { class: "caption" });
    root.append(el("div", { class: "card chart-card" }, el("div", { class: "chart-head" }, el("h2", { text: spec.title }), now), keys, box, caption));
    return { spec, now, box, keys, caption };
  });
}

function drawCharts(d) {
  const h = state.hist;
  const to = d.now_ms;
  const first = h.t.length ? h.t[0] : to;
  // The whole window once it is full; until then, what there is (at least a few seconds).
  const from = Math.max(to - d.window_s * 1000, Math.min(first, to - 15_000));
  for (const chart of state.charts) {
    const { spec } = chart;
    let series = spec.series.map(([key, name], i) => ({
      name,
      values: h[key] || [],
      color: spec.colors ? spec.colors[i] : undefined,
    }));
    series = series.map((s, i) => ({ ...s, color: s.color || `var(--c${(i % 6) + 1})` }));
    if (spec.quiet) {
      const moving = series.filter((s) => s.values.some((v) => v > 0));
      series = moving.length ? moving : series.slice(0, 1);
    }
    fill(chart.now, nowParts(spec.now(d)));
    fill(chart.keys, series.length > 1 || spec.quiet ? legend(series) : null);
    const limits = spec.limits ? spec.limits(d) : [];
    const hidden = lineChart(chart.box, { t: h.t, series, from, to, format: spec.format, area: spec.area, binary: spec.binary, limits });
    fill(chart.caption, hidden.length ? hidden.map((l) => `${l.label} at ${(spec.format || fmtInt)(l.value)}`).join(" · ") + ", far above" : null);
  }
}

/** A chart's figure now: a text, or a text and a quieter one after it. */
function nowParts(value) {
  if (!Array.isArray(value)) return [document.createTextNode(value)];
  return [document.createTextNode(value[0] + " "), el("small", { text: value[1] })];
}

// ---------------------------------------------------------------- the rest of the page

function tile(label, value, unit, note, data) {
  return el("div", { class: "card tile", data }, el("div", { class: "label", text: label }),
    el("div", { class: "value" }, value, unit ? el("small", { text: unit }) : null),
    el("div", { class: "note", text: note }));
}

function drawTiles(d) {
  const now = d.now;
  const mem = d.memory;
  const share = mem.limit_bytes ? (100 * mem.used_bytes) / mem.limit_bytes : 0;
  const fullest = last("parts_max") ?? Math.max(0, ...d.tables.rows.map((t) => t.parts.max));
  fill(document.getElementById("tiles"),
    tile("Rows in", fmtNum(now.rows_per_s ?? 0), "/s", `${fmtNum(now.inserts_per_s ?? 0)} inserts/s · ${fmtInt(d.totals.rows_received)} since start`),
    tile("Parts landed", fmtNum(now.parts_per_s ?? 0), "/s", now.rows_per_part ? `${fmtInt(now.rows_per_part)} rows per part` : `${fmtInt(d.totals.parts_written)} since start`),
    tile("Wait to commit", fmtSeconds(now.wait_p50_s), "p50", `p99 ${fmtSeconds(now.wait_p99_s)} · max_age ${fmtSeconds(d.policy.max_age_s)}`),
    tile("Buffer", fmtBytes(mem.used_bytes), null, `${fmtNum(share)}% of ${fmtBytes(mem.limit_bytes)}`),
    tile("Fullest partition", fmtInt(fullest), "parts", `delay at ${fmtInt(d.throttle.parts_to_delay_insert)} · refuse at ${fmtInt(d.throttle.parts_to_throw_insert)}`),
    tile("Write-ahead log", d.wal.enabled ? fmtBytes(now.wal_bytes_per_s ?? 0) : "off", d.wal.enabled ? "/s" : null,
      d.wal.enabled ? (d.wal.poisoned ? "poisoned: " + d.wal.poisoned : `${fmtNum(now.wal_fsyncs_per_s ?? 0)} fsyncs/s · ${fmtInt(d.wal.outstanding)} outstanding`) : "durable acks are refused"),
    tile("Refusals", fmtNum(now.refusals_per_s ?? 0), "/s", `${fmtInt(d.refusals.reduce((a, r) => a + r.count, 0))} since start`),
    tile("Dead letters", fmtInt(d.totals.dead_letter_rows), "rows", `${fmtInt(d.totals.dead_letter_batches)} batches · ${fmtInt(d.totals.rows_dropped)} rows dropped`),
  );
}

function drawDoors(d) {
  const head = el("tr", {}, ["Door", "Ack", "Rows/s", "Inserts/s", "Rows", "Inserts"].map((h) => el("th", { text: h })));
  const rows = d.doors.map((r, i) => el("tr", { class: r.inserts ? null : "dim", data: { door: r.door, ack: r.ack } },
    el("td", { text: i % 3 === 0 ? DOORS[r.door] || r.door : "" }),
    el("td", { text: r.ack }),
    el("td", { text: fmtNum(r.rows_per_s) }),
    el("td", { text: fmtNum(r.inserts_per_s) }),
    el("td", { text: fmtInt(r.rows) }),
    el("td", { text: fmtInt(r.inserts) })));
  fill(document.getElementById("doors"), el("thead", {}, head), el("tbody", {}, rows));
}

function bars(items, color, empty) {
  const total = items.reduce((a, i) => a + i.count, 0);
  if (!total) return el("div", { class: "calm", text: empty });
  return el("div", { class: "bars" }, items.flatMap((i) => [
    el("span", { text: i.reason }),
    el("div", { class: "track" }, el("div", { class: "fill", style: { width: `${(100 * i.count) / total}%`, background: color } })),
    el("span", { class: "num", data: { reason: i.reason, count: String(i.count) } }, fmtInt(i.count), i.per_s ? el("span", { class: "dim", text: ` ${fmtNum(i.per_s)}/s` }) : null),
  ]));
}

function drawCounts(d) {
  fill(document.getElementById("flushes"), bars(d.flushes, "var(--c2)", "No flush yet."));
  fill(document.getElementById("refusals"), bars(d.refusals, "var(--bad)", "None since start: every request was taken."));
}

function drawStores(d) {
  const stores = d.stores.map((s) => {
    const last = s.last_error;
    const failing = s.failing > 0;
    return el("div", { class: "store", data: { store: s.sink, health: s.health } },
      el("div", { class: "name" }, s.sink, el("span", { class: "pill " + s.health, text: s.health })),
      el("div", { class: "facts", text: `${fmtInt(s.tables)} table${s.tables === 1 ? "" : "s"} · ${fmtInt(s.failing)} failing · ${fmtInt(s.dead_letter_rows)} dead-letter rows · ${fmtInt(s.rows_dropped)} dropped` }),
      last ? el("div", { class: failing ? "error" : "error past" }, `${failing ? "" : "last error, "}${fmtAgo(last.at_ms)}, ${last.table}: ${last.error}`) : null);
  });
  fill(document.getElementById("stores"), stores.length ? stores : el("div", { class: "calm", text: "No table yet: the first insert makes one." }));
}

/** A bar of `parts` against the throttle's lines, the refuse line at the right end. */
function meter(parts, throttle) {
  const max = Math.max(throttle.parts_to_throw_insert, parts, 1);
  const level = parts >= throttle.parts_to_throw_insert ? "bad" : parts >= throttle.parts_to_delay_insert ? "warn" : "";
  return el("div", { class: "meter", title: `delay at ${fmtInt(throttle.parts_to_delay_insert)}, refuse at ${fmtInt(throttle.parts_to_throw_insert)}` },
    el("div", { class: "fill " + level, style: { width: `${(100 * parts) / max}%` } }),
    el("div", { class: "mark delay", style: { left: `${(100 * throttle.parts_to_delay_insert) / max}%` } }),
    el("div", { class: "mark throw", style: { left: `calc(${(100 * throttle.parts_to_throw_insert) / max}% - 2px)` } }));
}

function fact(value, label) {
  return el("span", {}, el("b", { text: value }), " " + label);
}

function tableCard(t) {
  const p = t.parts;
  const card = el("div", {
    class: "table-card" + (t.health === "failing" ? " failing" : ""),
    data: { table: t.name, partitions: String(p.partitions), activeParts: String(p.active), partsMax: String(p.max) },
  });
  card.append(el("div", { class: "table-top" },
    el("span", { class: "name", text: t.name }),
    el("span", { class: "badge", text: t.sink }),
    el("span", { class: "pill " + t.health, text: t.health }),
    p.counted ? el("span", { class: "dim", text: `${fmtInt(p.partitions)} partition${p.partitions === 1 ? "" : "s"} · ${fmtInt(p.active)} active parts · ${fmtBytes(p.bytes)}` }) : null,
    t.trend.length > 1 ? el("span", { class: "spark", title: "the fullest partition's active parts, last 15 minutes" }, sparkline(t.trend)) : null));
  card.append(el("div", { class: "facts-row" },
    fact(fmtNum(t.rows_per_s), "rows/s"),
    fact(fmtNum(t.inserts_per_s), "inserts/s"),
    fact(fmtInt(t.rows_written), "rows landed"),
    fact(fmtInt(t.parts_written), "parts landed"),
    fact(fmtBytes(t.bytes_written), "landed"),
    fact(t.rows_per_part ? fmtInt(t.rows_per_part) : "–", "rows per part"),
    fact(fmtInt(t.compaction.merges), "merges"),
    fact(fmtInt(t.buffered_rows), "rows buffered"),
    t.dead_letter_rows ? fact(fmtInt(t.dead_letter_rows), "dead-letter rows") : null));
  if (t.failing) card.append(el("div", { class: "error" }, `failing since ${fmtAgo(t.failing.at_ms)}: ${t.failing.error}`));
  else if (t.last_error) card.append(el("div", { class: "error past" }, `last error, ${fmtAgo(t.last_error.at_ms)}: ${t.last_error.error}`));
  if (!p.counted) {
    card.append(el("div", { class: "more", text: "This store does not count parts: its own merges keep them in check." }));
    return card;
  }
  const grid = el("div", { class: "parts" },
    ["Partition", "Active parts", "Parts", "Rows", "Bytes"].map((h, i) => el("div", { class: "head" + (i > 1 ? " r" : ""), text: h })));
  for (const part of p.top) {
    const row = { ofTable: t.name, partition: part.partition, parts: String(part.parts) };
    grid.append(
      el("div", { class: "pname", title: part.partition, data: { partitionName: part.partition }, text: part.partition }),
      meter(part.parts, { parts_to_delay_insert: t.throttle.parts_to_delay_insert, parts_to_throw_insert: t.throttle.parts_to_throw_insert }),
      el("div", { class: "r parts-count", data: row, text: fmtInt(part.parts) }),
      el("div", { class: "r", text: fmtInt(part.rows) }),
      el("div", { class: "r", text: fmtBytes(part.bytes) }));
  }
  card.append(p.top.length ? grid : el("div", { class: "more", text: "No part landed yet." }));
  if (p.more > 0) card.append(el("div", { class: "more", text: `and ${fmtInt(p.more)} more partition${p.more === 1 ? "" : "s"}: those with the most parts are shown` }));
  return card;
}

function drawTables(d) {
  const t = d.tables;
  const summary = `${fmtInt(t.shown)} of ${fmtInt(t.total)} table${t.total === 1 ? "" : "s"}` +
    (t.filter ? ` matching “${t.filter}” (${fmtInt(t.matching)})` : "") +
    ` · ${fmtInt(t.partitions_total)} partitions · ${fmtInt(t.parts_total)} active parts` +
    (t.shown < t.matching ? " · those with the most active parts first" : "");
  const summaryNode = document.getElementById("tables-summary");
  summaryNode.textContent = summary;
  Object.assign(summaryNode.dataset, { total: t.total, shown: t.shown, partitionsTotal: t.partitions_total });
  fill(document.getElementById("tables"), t.rows.length ? t.rows.map(tableCard) : el("div", { class: "calm", text: t.total ? "No table matches." : "No table yet: the first insert makes one." }));
}

function drawHeader(d) {
  const status = document.getElementById("status");
  status.className = "pill " + d.status;
  status.textContent = d.status;
  document.getElementById("meta").textContent =
    `v${d.version} · up ${fmtSeconds((d.now_ms - d.started_ms) / 1000)} · updated ${new Date(d.now_ms).toLocaleTimeString()}`;
  document.body.dataset.ready = "true";
  document.body.dataset.sample = String(state.last);
}

function banner(message) {
  const node = document.getElementById("banner");
  node.hidden = !message;
  node.textContent = message ? `The server did not answer: ${message}. Trying again.` : "";
}

// ---------------------------------------------------------------- refreshing

/** Adds the samples the server sent to those kept, and forgets what is older than the window. */
function absorb(history, windowMs, nowMs) {
  if (!state.hist) {
    state.hist = history;
  } else {
    for (const [key, values] of Object.entries(history)) {
      if (Array.isArray(values)) state.hist[key] = (state.hist[key] || []).concat(values);
    }
  }
  state.last = history.last;
  const keep = state.hist.t.findIndex((t) => t >= nowMs - windowMs);
  const drop = keep < 0 ? state.hist.t.length : keep;
  if (drop > 0) for (const [key, values] of Object.entries(state.hist)) if (Array.isArray(values)) values.splice(0, drop);
}

async function refresh() {
  clearTimeout(state.timer);
  try {
    const query = new URLSearchParams();
    if (state.filter) query.set("filter", state.filter);
    if (state.hist) query.set("since", String(state.last));
    const d = await api("/v1/dashboard?" + query);
    if (state.started !== null && d.started_ms !== state.started) {
      // Another sluice answered: what was kept is not its history.
      state.hist = null;
      state.started = null;
      return refresh();
    }
    state.started = d.started_ms;
    absorb(d.history, d.window_s * 1000, d.now_ms);
    state.data = d;
    drawHeader(d);
    drawTiles(d);
    drawCharts(d);
    drawDoors(d);
    drawCounts(d);
    drawStores(d);
    drawTables(d);
    banner(null);
  } catch (e) {
    banner(e.message);
    document.getElementById("status").className = "pill stopping";
    document.getElementById("status").textContent = "unreachable";
  }
  state.timer = setTimeout(refresh, REFRESH_MS);
}

function start() {
  buildCharts();
  const filter = document.getElementById("filter");
  filter.value = state.filter;
  let typing = null;
  filter.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      state.filter = filter.value.trim();
      const url = new URL(location.href);
      if (state.filter) url.searchParams.set("filter", state.filter);
      else url.searchParams.delete("filter");
      history.replaceState(null, "", url);
      refresh();
    }, 250);
  });
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => state.data && drawCharts(state.data), 150);
  });
  refresh();
}

start();
