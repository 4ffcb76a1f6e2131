//! The JSON of `GET /v1/dashboard`: the server now, the last fifteen minutes, and its tables,
//! summarised so that the answer stays small and the page readable with many tables.
//!
//! With more tables than the page asks for, it shows those with the most active parts in a
//! partition (failing ones first); within a table, the partitions with the most parts. Every
//! count covers all of them, so nothing is hidden without the page saying so. `filter` finds a
//! table or partition by part of its name. `since` sends only the samples the page lacks.

use std::collections::{HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sluice_core::{FlushPolicy, PartitionParts, PartsThrottle};
use sluice_pipeline::{FlushCounts, PipelineConfig, TableInfo, WalInfo};

use super::counts::{ACKS, CompactionTotals, Door, DoorCounts, pair};
use super::history::{History, Sample, TableTrack};
use super::redact::redact;
use super::sample::parts_max;
use crate::error::{ApiError, Kind};

/// Tables shown when the page does not say.
const DEFAULT_TABLES: usize = 50;
/// The most tables one answer shows.
const MAX_TABLES: usize = 500;
/// Partitions shown per table when the page does not say.
const DEFAULT_PARTITIONS: usize = 10;
/// The most partitions one table shows.
const MAX_PARTITIONS: usize = 100;
/// The most partitions one answer shows, all tables together: each table's share shrinks as
/// more tables are shown, so the answer stays well under a megabyte.
const PARTITION_BUDGET: usize = 2_000;
/// The window "now" rates are taken over, in seconds.
const RATE_WINDOW_S: u64 = 5;

/// What the page asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Params {
    /// Part of a table's or a partition's name; empty: everything.
    pub(crate) filter: String,
    /// Tables to show.
    pub(crate) tables: usize,
    /// Partitions to show per table.
    pub(crate) partitions: usize,
    /// Only the samples after this one.
    pub(crate) since: Option<u64>,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            filter: String::new(),
            tables: DEFAULT_TABLES,
            partitions: DEFAULT_PARTITIONS,
            since: None,
        }
    }
}

impl Params {
    /// Reads `filter`, `tables`, `partitions` and `since`, and refuses any other parameter.
    pub(crate) fn parse(pairs: &[(String, String)]) -> Result<Params, ApiError> {
        let mut params = Params::default();
        for (key, value) in pairs {
            let bad = |why: &str| {
                ApiError::new(
                    Kind::BadRequest,
                    format!("{key}: {why}, got '{}'", value.escape_debug()),
                )
            };
            let count = |max: usize| match value.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(bad(&format!("must be a whole number from 1 to {max}"))),
            };
            match key.as_str() {
                "filter" => params.filter = value.trim().to_lowercase(),
                "tables" => params.tables = count(MAX_TABLES)?,
                "partitions" => params.partitions = count(MAX_PARTITIONS)?,
                "since" => {
                    params.since = Some(
                        value
                            .parse()
                            .map_err(|_| bad("must be a sample's number"))?,
                    );
                }
                other => {
                    return Err(ApiError::new(
                        Kind::BadRequest,
                        format!(
                            "unknown parameter '{}': the parameters are filter, tables, \
                             partitions and since",
                            other.escape_debug()
                        ),
                    ));
                }
            }
        }
        Ok(params)
    }
}

/// Everything the answer is made of, read at one moment.
pub(crate) struct Inputs<'a> {
    pub(crate) now_ms: u64,
    pub(crate) started_ms: u64,
    /// `ok`, `degraded` or `stopping`, as `/health` says.
    pub(crate) status: &'static str,
    pub(crate) config: &'a PipelineConfig,
    /// Bytes buffered, and `max_buffer_bytes`.
    pub(crate) memory: (u64, u64),
    pub(crate) wal: Option<WalInfo>,
    pub(crate) tables: &'a [TableInfo],
    pub(crate) doors: DoorCounts,
    pub(crate) refusals: Vec<(&'static str, u64)>,
    pub(crate) compactions: HashMap<String, CompactionTotals>,
}

/// The whole answer.
pub(crate) fn dashboard(inputs: &Inputs<'_>, history: &History, params: &Params) -> Value {
    let samples = history.samples();
    let (p50, p99) = history.minute_waits();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "now_ms": inputs.now_ms,
        "started_ms": inputs.started_ms,
        "interval_ms": super::sample::INTERVAL.as_millis() as u64,
        "window_s": super::history::SAMPLES as u64 * super::sample::INTERVAL.as_secs(),
        "status": inputs.status,
        "policy": policy_json(&inputs.config.default_policy),
        "throttle": throttle_json(&inputs.config.default_throttle),
        "memory": { "used_bytes": inputs.memory.0, "limit_bytes": inputs.memory.1 },
        "wal": wal_json(inputs.wal.as_ref()),
        "now": now_json(samples, p50, p99),
        "doors": doors_json(&inputs.doors, samples),
        "refusals": refusals_json(&inputs.refusals),
        "flushes": flushes_json(inputs.tables, samples),
        "totals": totals_json(inputs),
        "stores": stores_json(inputs.tables),
        "tables": tables_json(inputs, history, params),
        "history": history_json(samples, params.since),
    })
}

/// `x` to three significant figures: rates do not need more, and the answer stays short.
fn round(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return 0.0;
    }
    let scale = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// Per second between `earlier` and `later`, when they are apart.
fn per_s(later: u64, earlier: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        round(later.saturating_sub(earlier) as f64 / seconds)
    } else {
        0.0
    }
}

/// The newest sample and the newest one at least `seconds` before it (or the oldest), and
/// the seconds between them.
fn window(samples: &VecDeque<Sample>, seconds: u64) -> Option<(&Sample, &Sample, f64)> {
    let last = samples.back()?;
    let first = (samples.iter().rev())
        .find(|s| last.at_ms.saturating_sub(s.at_ms) >= seconds * 1000)
        .or(samples.front())?;
    let apart = last.at_ms.saturating_sub(first.at_ms) as f64 / 1000.0;
    (apart > 0.0).then_some((first, last, apart))
}

fn policy_json(policy: &FlushPolicy) -> Value {
    json!({
        "max_rows": policy.max_rows(),
        "max_bytes": policy.max_bytes(),
        "max_age_s": policy.max_age().as_secs_f64(),
        "max_inserts": policy.max_inserts(),
    })
}

fn throttle_json(throttle: &PartsThrottle) -> Value {
    json!({
        "parts_to_delay_insert": throttle.parts_to_delay_insert,
        "parts_to_throw_insert": throttle.parts_to_throw_insert,
        "max_delay_s": throttle.max_delay.as_secs_f64(),
    })
}

fn wal_json(wal: Option<&WalInfo>) -> Value {
    match wal {
        None => json!({ "enabled": false }),
        Some(w) => json!({
            "enabled": true,
            "frames": w.frames,
            "bytes": w.bytes,
            "fsyncs": w.fsyncs,
            "outstanding": w.outstanding,
            "poisoned": w.poisoned.as_deref().map(redact),
        }),
    }
}

/// Rates over the last few seconds, and the minute's waits.
fn now_json(samples: &VecDeque<Sample>, p50: Option<f64>, p99: Option<f64>) -> Value {
    let Some((first, last, s)) = window(samples, RATE_WINDOW_S) else {
        return json!({ "wait_p50_s": p50, "wait_p99_s": p99 });
    };
    let parts = last.parts_written.saturating_sub(first.parts_written);
    let rows = last.rows_written.saturating_sub(first.rows_written);
    json!({
        "rows_per_s": per_s(last.doors.rows_total(), first.doors.rows_total(), s),
        "inserts_per_s": per_s(last.doors.inserts_total(), first.doors.inserts_total(), s),
        "refusals_per_s": per_s(last.refusals, first.refusals, s),
        "parts_per_s": per_s(last.parts_written, first.parts_written, s),
        "rows_written_per_s": per_s(last.rows_written, first.rows_written, s),
        "rows_per_part": (parts > 0).then(|| round(rows as f64 / parts as f64)),
        "flushes_per_s": per_s(last.flushes.iter().sum(), first.flushes.iter().sum(), s),
        "wal_bytes_per_s": per_s(last.wal_bytes, first.wal_bytes, s),
        "wal_fsyncs_per_s": per_s(last.wal_fsyncs, first.wal_fsyncs, s),
        "merges_per_s": per_s(last.merges, first.merges, s),
        "wait_p50_s": p50,
        "wait_p99_s": p99,
    })
}

/// Every door and ack mode: totals, and rates over the last few seconds.
fn doors_json(doors: &DoorCounts, samples: &VecDeque<Sample>) -> Value {
    let recent = window(samples, RATE_WINDOW_S);
    let rows: Vec<Value> = Door::ALL
        .iter()
        .flat_map(|door| ACKS.iter().map(move |ack| (*door, *ack)))
        .map(|(door, ack)| {
            let i = pair(door, ack);
            let (rows_per_s, inserts_per_s) = recent.map_or((0.0, 0.0), |(first, last, s)| {
                (
                    per_s(last.doors.rows[i], first.doors.rows[i], s),
                    per_s(last.doors.inserts[i], first.doors.inserts[i], s),
                )
            });
            json!({
                "door": door.name(),
                "ack": ack.as_str(),
                "rows": doors.rows[i],
                "inserts": doors.inserts[i],
                "rows_per_s": rows_per_s,
                "inserts_per_s": inserts_per_s,
            })
        })
        .collect();
    Value::from(rows)
}

/// Refusals by reason, most first, the reasons never seen left out.
fn refusals_json(refusals: &[(&'static str, u64)]) -> Value {
    let mut seen: Vec<&(&str, u64)> = refusals.iter().filter(|(_, n)| *n > 0).collect();
    seen.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    seen.iter()
        .map(|(reason, count)| json!({ "reason": reason, "count": count }))
        .collect()
}

/// Flushes by reason since start, with their rate over the last few seconds.
fn flushes_json(tables: &[TableInfo], samples: &VecDeque<Sample>) -> Value {
    let recent = window(samples, RATE_WINDOW_S);
    let mut totals = [0u64; 5];
    for table in tables {
        for (i, (_, count)) in table.counters.flushes.by_reason().iter().enumerate() {
            totals[i] += count;
        }
    }
    (FlushCounts::default().by_reason().iter().enumerate())
        .map(|(i, (reason, _))| {
            let rate = recent.map_or(0.0, |(first, last, s)| {
                per_s(last.flushes[i], first.flushes[i], s)
            });
            json!({ "reason": reason, "count": totals[i], "per_s": rate })
        })
        .collect()
}

fn totals_json(inputs: &Inputs<'_>) -> Value {
    let sum = |f: fn(&TableInfo) -> u64| inputs.tables.iter().map(f).sum::<u64>();
    let merges: u64 = inputs.compactions.values().map(|c| c.done.merges).sum();
    json!({
        "rows_received": inputs.doors.rows_total(),
        "inserts": inputs.doors.inserts_total(),
        "rows_written": sum(|t| t.rows_written),
        "parts_written": sum(|t| t.parts_written),
        "bytes_written": sum(|t| t.bytes_written),
        "buffered_rows": sum(|t| t.buffered_rows),
        "merges": merges,
        "delayed_inserts": sum(|t| t.counters.delayed_inserts),
        "flush_errors": sum(|t| t.counters.flush_errors_retriable + t.counters.flush_errors_permanent),
        "dead_letter_batches": sum(|t| t.counters.dead_letter_batches),
        "dead_letter_rows": sum(|t| t.counters.dead_letter_rows),
        "rows_dropped": sum(|t| t.counters.rows_dropped),
    })
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn error_json(error: Option<&(SystemTime, String)>) -> Value {
    error.map_or(
        Value::Null,
        |(at, message)| json!({ "at_ms": unix_ms(*at), "error": redact(message) }),
    )
}

/// One partition's active parts, rows and bytes, as the console and `GET /v1/tables` show them.
pub(crate) fn partition_json(p: &PartitionParts) -> Value {
    json!({
        "partition": p.partition.to_string(),
        "parts": p.parts,
        "rows": p.rows,
        "bytes": p.bytes,
    })
}

/// Each store by its sink's name: its tables, the failing ones, its newest error.
fn stores_json(tables: &[TableInfo]) -> Value {
    let mut stores: Vec<&'static str> = tables.iter().map(|t| t.sink).collect();
    stores.sort_unstable();
    stores.dedup();
    stores
        .into_iter()
        .map(|sink| {
            let mine: Vec<&TableInfo> = tables.iter().filter(|t| t.sink == sink).collect();
            let failing = mine.iter().filter(|t| t.failing.is_some()).count();
            let last = (mine.iter())
                .filter_map(|t| t.last_error.as_ref().map(|e| (t, e)))
                .max_by_key(|(_, (at, _))| *at);
            let sum = |f: fn(&TableInfo) -> u64| mine.iter().map(|t| f(t)).sum::<u64>();
            json!({
                "sink": sink,
                "tables": mine.len(),
                "failing": failing,
                "health": if failing == 0 { "ok" } else { "failing" },
                "last_error": last.map(|(t, e)| {
                    json!({ "table": t.name, "at_ms": unix_ms(e.0), "error": redact(&e.1) })
                }),
                "dead_letter_batches": sum(|t| t.counters.dead_letter_batches),
                "dead_letter_rows": sum(|t| t.counters.dead_letter_rows),
                "rows_dropped": sum(|t| t.counters.rows_dropped),
            })
        })
        .collect()
}

/// A table that matches the filter, with the partitions that may be shown.
struct Match<'a> {
    table: &'a TableInfo,
    partitions: Vec<&'a PartitionParts>,
    parts_max: u64,
}

fn matches<'a>(tables: &'a [TableInfo], filter: &str) -> Vec<Match<'a>> {
    tables
        .iter()
        .filter_map(|table| {
            let all = table.active_parts.iter().flatten();
            let partitions: Vec<&PartitionParts> =
                if filter.is_empty() || table.name.to_lowercase().contains(filter) {
                    all.collect()
                } else {
                    let found: Vec<_> = all
                        .filter(|p| p.partition.to_string().to_lowercase().contains(filter))
                        .collect();
                    if found.is_empty() {
                        return None;
                    }
                    found
                };
            Some(Match {
                table,
                partitions,
                parts_max: parts_max(table),
            })
        })
        .collect()
}

/// The tables the page shows: every match when they fit, else those under the most pressure.
fn tables_json(inputs: &Inputs<'_>, history: &History, params: &Params) -> Value {
    let mut found = matches(inputs.tables, &params.filter);
    let matching = found.len();
    if found.len() > params.tables {
        found.sort_by(|a, b| {
            (b.table.failing.is_some().cmp(&a.table.failing.is_some()))
                .then(b.parts_max.cmp(&a.parts_max))
                .then(a.table.name.cmp(&b.table.name))
        });
        found.truncate(params.tables);
        found.sort_by(|a, b| a.table.name.cmp(&b.table.name));
    }
    let per_table = params
        .partitions
        .min((PARTITION_BUDGET / found.len().max(1)).max(1));
    let rows: Vec<Value> = found
        .iter()
        .map(|m| table_json(m, inputs, history.table(&m.table.name), per_table))
        .collect();
    let partitions: usize = (inputs.tables.iter())
        .map(|t| t.active_parts.as_ref().map_or(0, Vec::len))
        .sum();
    let parts: u64 = (inputs.tables.iter())
        .flat_map(|t| t.active_parts.iter().flatten())
        .map(|p| p.parts)
        .sum();
    json!({
        "total": inputs.tables.len(),
        "matching": matching,
        "shown": rows.len(),
        "filter": params.filter,
        "partitions_shown_per_table": per_table,
        "partitions_total": partitions,
        "parts_total": parts,
        "rows": rows,
    })
}

// Long because: one table's every figure, one line each.
fn table_json(
    m: &Match<'_>,
    inputs: &Inputs<'_>,
    track: Option<&TableTrack>,
    limit: usize,
) -> Value {
    let t = m.table;
    let c = &t.counters;
    let mut top = m.partitions.clone();
    top.sort_by(|a, b| b.parts.cmp(&a.parts).then(a.partition.cmp(&b.partition)));
    let shown: Vec<Value> = (top.iter().take(limit))
        .map(|p| partition_json(p))
        .collect();
    let all = t.active_parts.iter().flatten();
    let compaction = inputs.compactions.get(&t.name).copied().unwrap_or_default();
    let (rows_per_s, inserts_per_s) = track.map_or((0.0, 0.0), TableTrack::rates);
    let trend: Vec<u64> = track.map_or_else(Vec::new, |k| k.trend().map(|p| p.parts_max).collect());
    json!({
        "name": t.name,
        "sink": t.sink,
        "health": if t.failing.is_some() { "failing" } else { "ok" },
        "failing": error_json(t.failing.as_ref()),
        "last_error": error_json(t.last_error.as_ref()),
        "policy": policy_json(&t.policy),
        "throttle": throttle_json(&t.throttle),
        "buffered_rows": t.buffered_rows,
        "buffered_bytes": t.buffered_bytes,
        "rows_received": c.rows_received,
        "inserts": c.inserts,
        "rows_per_s": round(rows_per_s),
        "inserts_per_s": round(inserts_per_s),
        "rows_written": t.rows_written,
        "parts_written": t.parts_written,
        "bytes_written": t.bytes_written,
        "rows_per_part": (t.parts_written > 0)
            .then(|| round(t.rows_written as f64 / t.parts_written as f64)),
        "flushes": {
            "rows": c.flushes.rows, "bytes": c.flushes.bytes, "age": c.flushes.age,
            "inserts": c.flushes.inserts, "shutdown": c.flushes.shutdown,
        },
        "delayed_inserts": c.delayed_inserts,
        "flush_errors": c.flush_errors_retriable + c.flush_errors_permanent,
        "dead_letter_rows": c.dead_letter_rows,
        "rows_dropped": c.rows_dropped,
        "compaction": {
            "merges": compaction.done.merges,
            "files_in": compaction.done.files_in,
            "files_out": compaction.done.files_out,
            "bytes_in": compaction.done.bytes_in,
            "bytes_out": compaction.done.bytes_out,
            "errors": compaction.errors,
        },
        "parts": {
            "counted": t.active_parts.is_some(),
            "partitions": t.active_parts.as_ref().map_or(0, Vec::len),
            "matching": m.partitions.len(),
            "active": all.clone().map(|p| p.parts).sum::<u64>(),
            "rows": all.clone().map(|p| p.rows).sum::<u64>(),
            "bytes": all.map(|p| p.bytes).sum::<u64>(),
            "max": m.parts_max,
            "top": shown,
            "more": m.partitions.len().saturating_sub(limit),
        },
        "trend": trend,
    })
}

/// The samples after `since` (all, without it), column by column: times, and each series' rate
/// or value. A rate needs the sample before, so a sample whose predecessor is gone has none.
fn history_json(samples: &VecDeque<Sample>, since: Option<u64>) -> Value {
    let start = samples
        .iter()
        .position(|s| since.is_none_or(|after| s.seq > after))
        .unwrap_or(samples.len());
    let mut columns: Vec<(&str, Vec<Value>)> = SERIES.iter().map(|(n, _)| (*n, vec![])).collect();
    let mut seq = Vec::new();
    let mut t = Vec::new();
    for i in start..samples.len() {
        let now = &samples[i];
        let before = (i > 0)
            .then(|| &samples[i - 1])
            .filter(|b| b.seq + 1 == now.seq && now.at_ms > b.at_ms);
        seq.push(Value::from(now.seq));
        t.push(Value::from(now.at_ms));
        for ((_, column), (_, series)) in columns.iter_mut().zip(SERIES) {
            column.push(series(now, before).map_or(Value::Null, |x| Value::from(round(x))));
        }
    }
    let mut out = serde_json::Map::new();
    out.insert(
        "last".into(),
        Value::from(samples.back().map_or(0, |s| s.seq)),
    );
    out.insert("seq".into(), Value::from(seq));
    out.insert("t".into(), Value::from(t));
    for (name, column) in columns {
        out.insert(name.into(), Value::from(column));
    }
    Value::Object(out)
}

/// A series of the history: from a sample and the one before it, when there is one.
type Series = fn(&Sample, Option<&Sample>) -> Option<f64>;

/// The rate of a total between two samples.
fn rate(now: &Sample, before: Option<&Sample>, total: fn(&Sample) -> u64) -> Option<f64> {
    let before = before?;
    let seconds = now.at_ms.saturating_sub(before.at_ms) as f64 / 1000.0;
    Some(total(now).saturating_sub(total(before)) as f64 / seconds)
}

/// Rows per second through one door, every ack mode.
fn door_rows(s: &Sample, door: Door) -> u64 {
    ACKS.iter().map(|a| s.doors.rows[pair(door, *a)]).sum()
}

/// Inserts per second in one ack mode, every door.
fn ack_inserts(s: &Sample, ack: sluice_pipeline::AckMode) -> u64 {
    Door::ALL
        .iter()
        .map(|d| s.doors.inserts[pair(*d, ack)])
        .sum()
}

/// Every series of the history, by its name in the answer.
const SERIES: [(&str, Series); 22] = [
    ("rows_api", |n, b| rate(n, b, |s| door_rows(s, Door::Api))),
    ("rows_clickhouse_http", |n, b| {
        rate(n, b, |s| door_rows(s, Door::ClickHouseHttp))
    }),
    ("rows_clickhouse_native", |n, b| {
        rate(n, b, |s| door_rows(s, Door::ClickHouseNative))
    }),
    ("inserts_async", |n, b| {
        rate(n, b, |s| ack_inserts(s, sluice_pipeline::AckMode::Async))
    }),
    ("inserts_durable", |n, b| {
        rate(n, b, |s| ack_inserts(s, sluice_pipeline::AckMode::Durable))
    }),
    ("inserts_committed", |n, b| {
        rate(n, b, |s| {
            ack_inserts(s, sluice_pipeline::AckMode::Committed)
        })
    }),
    ("refusals", |n, b| rate(n, b, |s| s.refusals)),
    ("flushes_rows", |n, b| rate(n, b, |s| s.flushes[0])),
    ("flushes_bytes", |n, b| rate(n, b, |s| s.flushes[1])),
    ("flushes_age", |n, b| rate(n, b, |s| s.flushes[2])),
    ("flushes_inserts", |n, b| rate(n, b, |s| s.flushes[3])),
    ("flushes_shutdown", |n, b| rate(n, b, |s| s.flushes[4])),
    ("parts_per_s", |n, b| rate(n, b, |s| s.parts_written)),
    ("rows_written", |n, b| rate(n, b, |s| s.rows_written)),
    ("rows_per_part", |n, b| {
        let b = b?;
        let parts = n.parts_written.saturating_sub(b.parts_written);
        let rows = n.rows_written.saturating_sub(b.rows_written);
        (parts > 0).then(|| rows as f64 / parts as f64)
    }),
    ("wait_p50", |n, _| n.wait_p50),
    ("wait_p99", |n, _| n.wait_p99),
    ("memory_used", |n, _| Some(n.memory_used as f64)),
    ("wal_bytes", |n, b| rate(n, b, |s| s.wal_bytes)),
    ("wal_fsyncs", |n, b| rate(n, b, |s| s.wal_fsyncs)),
    ("parts_max", |n, _| Some(n.parts_max as f64)),
    ("merges", |n, b| rate(n, b, |s| s.merges)),
];

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::SystemTime;

    use sluice_core::{FlushPolicy, PartitionKey, PartitionParts, PartsThrottle, TableLayout};
    use sluice_pipeline::{PipelineConfig, TableCounters, TableInfo, Waits};

    use super::*;
    use crate::console::history::{History, Sample, TableReading};

    /// `tables` lake tables of `partitions` partitions each, partition `p` of table `t` holding
    /// `(t + p) % 40` parts; the first table is failing.
    fn tables(tables: usize, partitions: usize) -> Vec<TableInfo> {
        (0..tables)
            .map(|t| {
                let name = format!("events_{t:03}");
                let active = (0..partitions)
                    .map(|p| PartitionParts {
                        partition: PartitionKey::Value(format!(
                            "2026-12-{:02}-shard-{p:03}",
                            p % 28 + 1
                        )),
                        parts: ((t + p) % 40) as u64,
                        rows: 1_000_000,
                        bytes: 64 << 20,
                    })
                    .collect();
                let layout = TableLayout {
                    columns: Vec::new(),
                    partition_by: "day(ts)".into(),
                    sort_by: Vec::new(),
                };
                TableInfo {
                    name,
                    sink: "lake",
                    layout,
                    buffered_rows: 10,
                    buffered_bytes: 1000,
                    rows_written: 1_000_000,
                    parts_written: 100,
                    bytes_written: 1 << 30,
                    failing: (t == 0).then(|| {
                        let error = "cannot reach postgres://sluice:hunter2@db:5432/x".to_owned();
                        (SystemTime::now(), error)
                    }),
                    active_parts: Some(active),
                    last_error: None,
                    counters: TableCounters::default(),
                    row_wait: Waits::default(),
                    policy: FlushPolicy::default(),
                    throttle: PartsThrottle::default(),
                }
            })
            .collect()
    }

    /// A history full of samples of `infos`.
    fn full_history(infos: &[TableInfo]) -> History {
        let mut history = History::default();
        for s in 0..super::super::history::SAMPLES as u64 + 10 {
            let readings: Vec<TableReading> = (infos.iter())
                .map(|t| TableReading {
                    name: t.name.clone(),
                    parts_max: s % 30,
                    rows_received: s * 1000,
                    inserts: s * 10,
                })
                .collect();
            let sample = Sample {
                at_ms: 1_700_000_000_000 + s * 1000,
                rows_written: s * 12_345,
                parts_written: s * 3,
                memory_used: s * 1_000_000,
                wal_bytes: s * 987_654,
                parts_max: s % 30,
                ..Sample::default()
            };
            history.record(sample, &readings, Waits::of(&vec![1.0; s as usize % 7]));
        }
        history
    }

    fn answer(infos: &[TableInfo], history: &History, params: &Params) -> Value {
        let config = PipelineConfig::default();
        let inputs = Inputs {
            now_ms: 1_700_000_001_000,
            started_ms: 1_700_000_000_000,
            status: "degraded",
            config: &config,
            memory: (1, 2),
            wal: None,
            tables: infos,
            doors: DoorCounts::default(),
            refusals: crate::error::refusals(),
            compactions: HashMap::new(),
        };
        dashboard(&inputs, history, params)
    }

    #[test]
    fn two_hundred_tables_of_ten_thousand_partitions_stay_under_a_megabyte() {
        let infos = tables(200, 50);
        let history = full_history(&infos);
        let most = Params {
            tables: MAX_TABLES,
            partitions: MAX_PARTITIONS,
            ..Params::default()
        };
        for params in [Params::default(), most] {
            let body = answer(&infos, &history, &params);
            let bytes = serde_json::to_vec(&body).unwrap().len();
            assert!(bytes < 1 << 20, "{bytes} bytes with {params:?}");
            let t = &body["tables"];
            assert_eq!(t["total"], 200);
            assert_eq!(t["partitions_total"], 10_000);
            let shown = t["rows"].as_array().unwrap();
            assert_eq!(shown.len(), params.tables.min(200));
            let listed: usize = (shown.iter())
                .map(|r| r["parts"]["top"].as_array().unwrap().len())
                .sum();
            assert!(listed <= PARTITION_BUDGET, "{listed} partitions listed");
            for row in shown {
                let top = row["parts"]["top"].as_array().unwrap();
                let more = row["parts"]["more"].as_u64().unwrap() as usize;
                assert_eq!(top.len() + more, 50, "every partition is shown or counted");
                let parts: Vec<u64> = top.iter().map(|p| p["parts"].as_u64().unwrap()).collect();
                assert!(parts.windows(2).all(|w| w[0] >= w[1]), "fullest first");
            }
            assert_eq!(body["history"]["t"].as_array().unwrap().len(), 900);
        }
    }

    #[test]
    fn past_the_limit_the_fullest_and_failing_tables_are_shown_in_name_order() {
        let infos = tables(200, 50);
        let history = History::default();
        let params = Params {
            tables: 5,
            ..Params::default()
        };
        let body = answer(&infos, &history, &params);
        let names: Vec<&str> = (body["tables"]["rows"].as_array().unwrap().iter())
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 5);
        assert_eq!(names[0], "events_000", "failing first: {names:?}");
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        for row in &body["tables"]["rows"].as_array().unwrap()[1..] {
            assert_eq!(row["parts"]["max"], 39, "{}", row["name"]);
        }
    }

    #[test]
    fn a_filter_finds_tables_and_partitions_by_part_of_their_name() {
        let infos = tables(20, 50);
        let history = History::default();
        let by_table = Params::parse(&[("filter".into(), "EVENTS_01".into())]).unwrap();
        let body = answer(&infos, &history, &by_table);
        assert_eq!(body["tables"]["matching"], 10);
        let by_partition = Params::parse(&[("filter".into(), "shard-007".into())]).unwrap();
        let body = answer(&infos, &history, &by_partition);
        assert_eq!(body["tables"]["matching"], 20);
        for row in body["tables"]["rows"].as_array().unwrap() {
            assert_eq!(row["parts"]["matching"], 1);
            assert_eq!(row["parts"]["top"][0]["partition"], "2026-12-08-shard-007");
        }
    }

    #[test]
    fn since_sends_only_newer_samples_each_with_its_rate() {
        let infos = tables(1, 1);
        let history = full_history(&infos);
        let last = history.samples().back().unwrap().seq;
        let params = Params {
            since: Some(last - 2),
            ..Params::default()
        };
        let body = answer(&infos, &history, &params);
        let h = &body["history"];
        assert_eq!(h["seq"], json!([last - 1, last]));
        assert_eq!(h["last"], last);
        assert_eq!(h["rows_per_part"], json!([4120.0, 4120.0]));
        assert_eq!(h["wal_bytes"], json!([988_000.0, 988_000.0]));
        let none = Params {
            since: Some(last),
            ..Params::default()
        };
        let body = answer(&infos, &history, &none);
        assert_eq!(body["history"]["t"], json!([]));
    }

    #[test]
    fn no_secret_reaches_the_page() {
        let infos = tables(1, 1);
        let body = answer(&infos, &History::default(), &Params::default()).to_string();
        assert!(!body.contains("hunter2"), "{body}");
        assert!(body.contains("postgres://sluice:***@db:5432/x"), "{body}");
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let parse = |k: &str, v: &str| Params::parse(&[(k.into(), v.into())]);
        assert_eq!(parse("tables", "3").unwrap().tables, 3);
        for (k, v, says) in [
            (
                "tables",
                "0",
                "tables: must be a whole number from 1 to 500",
            ),
            ("tables", "lots", "tables: must be"),
            (
                "partitions",
                "101",
                "partitions: must be a whole number from 1 to 100",
            ),
            ("since", "-1", "since: must be a sample's number"),
            ("color", "x", "unknown parameter 'color'"),
        ] {
            let error = parse(k, v).unwrap_err();
            assert!(
                error.message.starts_with(says),
                "{k}={v}: {}",
                error.message
            );
        }
    }
}
