//! Synthetic API events, as in seed 000: timestamp, service, endpoint, status, latency, response
//! bytes, request id and user id, in time order, from a fixed seed.
//!
//! The same seed always yields the same events (within one build of sluice).

use std::io::Write;

use std::sync::Arc;

use arrow::array::{
    Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, SecondsFormat};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Services events come from.
pub const SERVICES: [&str; 8] = [
    "api", "auth", "billing", "search", "checkout", "catalog", "profile", "notify",
];

/// Endpoints called.
pub const ENDPOINTS: [&str; 12] = [
    "/v1/items",
    "/v1/items/{id}",
    "/v1/users/{id}",
    "/v1/login",
    "/v1/logout",
    "/v1/cart",
    "/v1/cart/items",
    "/v1/orders",
    "/v1/orders/{id}",
    "/v1/search",
    "/v1/recommendations",
    "/v1/health",
];

/// The columns of the rows [`Event::write_ndjson`] writes, as the value of a table's
/// `columns = ...` in sluice's config file.
pub const COLUMNS_TOML: &str = r#"[
  { name = "id", type = "int64", nullable = false },
  { name = "ts", type = "timestamp" },
  { name = "service", type = "string" },
  { name = "endpoint", type = "string" },
  { name = "status", type = "int32" },
  { name = "latency_ms", type = "float64" },
  { name = "bytes", type = "int64" },
  { name = "request_id", type = "string" },
  { name = "user_id", type = "int64" },
]"#;

/// One event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Microseconds since the epoch.
    pub ts_micros: i64,
    /// Index into [`SERVICES`].
    pub service: &'static str,
    /// Index into [`ENDPOINTS`].
    pub endpoint: &'static str,
    /// HTTP status.
    pub status: u16,
    /// Latency in milliseconds.
    pub latency_ms: f64,
    /// Response bytes.
    pub bytes: i64,
    /// A 128-bit request id as 32 hex digits.
    pub request_id: u128,
    /// The user.
    pub user_id: i64,
}

/// Generates events in time order.
#[derive(Debug, Clone)]
pub struct EventGen {
    rng: SmallRng,
    ts_micros: i64,
}

/// 2026-01-01T00:00:00Z, where generated time starts.
pub const START_MICROS: i64 = 1_767_225_600_000_000;

impl EventGen {
    /// A generator from `seed`, starting at [`START_MICROS`].
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(seed),
            ts_micros: START_MICROS,
        }
    }

    /// The next event; time moves forward 0 to 2 ms per event.
    pub fn next_event(&mut self) -> Event {
        let rng = &mut self.rng;
        self.ts_micros += rng.random_range(0..2_000);
        // Skewed choices: a few services and endpoints get most of the traffic.
        let service = SERVICES[skewed(rng, SERVICES.len())];
        let endpoint = ENDPOINTS[skewed(rng, ENDPOINTS.len())];
        let status = match rng.random_range(0..1000) {
            0..=939 => 200,
            940..=959 => 201,
            960..=979 => 404,
            980..=994 => 400,
            _ => 500,
        };
        let latency_ms = (rng.random_range(1.0f64..50.0) * rng.random_range(1.0f64..4.0) * 100.0)
            .round()
            / 100.0;
        Event {
            ts_micros: self.ts_micros,
            service,
            endpoint,
            status,
            latency_ms,
            bytes: rng.random_range(64..65_536),
            request_id: rng.random(),
            user_id: rng.random_range(1..100_000),
        }
    }
}

/// The Arrow schema of [`EventGen::batch`]: seed 000's eight columns.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            false,
        ),
        Field::new("service", DataType::Utf8, false),
        Field::new("endpoint", DataType::Utf8, false),
        Field::new("status", DataType::Int32, false),
        Field::new("latency_ms", DataType::Float64, false),
        Field::new("bytes", DataType::Int64, false),
        Field::new("request_id", DataType::Utf8, false),
        Field::new("user_id", DataType::Int64, false),
    ]))
}

impl EventGen {
    /// The next `rows` events as one Arrow batch with [`schema`].
    pub fn batch(&mut self, rows: usize) -> RecordBatch {
        let mut ts = TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("+00:00");
        let mut service = StringBuilder::with_capacity(rows, rows * 8);
        let mut endpoint = StringBuilder::with_capacity(rows, rows * 16);
        let mut status = Int32Builder::with_capacity(rows);
        let mut latency = Float64Builder::with_capacity(rows);
        let mut bytes = Int64Builder::with_capacity(rows);
        let mut request_id = StringBuilder::with_capacity(rows, rows * 32);
        let mut user_id = Int64Builder::with_capacity(rows);
        let mut hex = String::with_capacity(32);
        for _ in 0..rows {
            let e = self.next_event();
            ts.append_value(e.ts_micros);
            service.append_value(e.service);
            endpoint.append_value(e.endpoint);
            status.append_value(i32::from(e.status));
            latency.append_value(e.latency_ms);
            bytes.append_value(e.bytes);
            hex.clear();
            let _ = std::fmt::Write::write_fmt(&mut hex, format_args!("{:032x}", e.request_id));
            request_id.append_value(&hex);
            user_id.append_value(e.user_id);
        }
        let columns: Vec<arrow::array::ArrayRef> = vec![
            Arc::new(ts.finish()),
            Arc::new(service.finish()),
            Arc::new(endpoint.finish()),
            Arc::new(status.finish()),
            Arc::new(latency.finish()),
            Arc::new(bytes.finish()),
            Arc::new(request_id.finish()),
            Arc::new(user_id.finish()),
        ];
        RecordBatch::try_new(schema(), columns).expect("the builders follow the schema")
    }
}

fn skewed(rng: &mut SmallRng, n: usize) -> usize {
    let a = rng.random_range(0..n);
    let b = rng.random_range(0..n);
    a.min(b)
}

impl Event {
    /// Writes the event as one NDJSON line with an extra unique `id` column, the timestamp as
    /// RFC 3339 UTC text with microseconds.
    pub fn write_ndjson(&self, id: u64, out: &mut Vec<u8>) {
        let _ = writeln!(
            out,
            "{{\"id\":{id},\"ts\":\"{}\",\"service\":\"{}\",\"endpoint\":\"{}\",\"status\":{},\
             \"latency_ms\":{:.2},\"bytes\":{},\"request_id\":\"{:032x}\",\"user_id\":{}}}",
            self.rfc3339(),
            self.service,
            self.endpoint,
            self.status,
            self.latency_ms,
            self.bytes,
            self.request_id,
            self.user_id
        );
    }

    fn rfc3339(&self) -> String {
        DateTime::from_timestamp_micros(self.ts_micros)
            .unwrap_or_default()
            .to_rfc3339_opts(SecondsFormat::Micros, true)
    }

    /// The timestamp as ClickHouse's text formats write a `DateTime64(6)`.
    fn clickhouse_time(&self) -> String {
        DateTime::from_timestamp_micros(self.ts_micros)
            .unwrap_or_default()
            .format("%Y-%m-%d %H:%M:%S%.6f")
            .to_string()
    }

    /// Writes the event with an `id` in ClickHouse's row `format`, in [`COLUMNS_TOML`]'s order.
    fn write_as(&self, format: RowFormat, id: u64, out: &mut Vec<u8>) {
        let (open, delimiter, close, quote) = match format {
            RowFormat::JsonEachRow => return self.write_ndjson(id, out),
            RowFormat::RowBinary => return self.write_row_binary(id, out),
            // Column-oriented: `write_insert` writes a whole insert as one block.
            RowFormat::Native => unreachable!("Native is written by blocks"),
            RowFormat::JsonCompactEachRow => ("[", ",", "]", "\""),
            RowFormat::TabSeparated => ("", "\t", "", ""),
            RowFormat::Csv => ("", ",", "", ""),
            // Tuples may be separated by whitespace alone, as ClickHouse reads them.
            RowFormat::Values => ("(", ",", ")", "'"),
        };
        // No value holds a quote, a delimiter or a character any format escapes.
        let values: Vec<String> = self
            .text_values(id)
            .into_iter()
            .map(|(text, is_string)| {
                if is_string {
                    format!("{quote}{text}{quote}")
                } else {
                    text
                }
            })
            .collect();
        let _ = writeln!(out, "{open}{}{close}", values.join(delimiter));
    }

    /// The values with an `id`, in [`COLUMNS_TOML`]'s order, as text, each with whether it is a
    /// string (which some formats quote).
    fn text_values(&self, id: u64) -> [(String, bool); 9] {
        [
            (id.to_string(), false),
            (self.clickhouse_time(), true),
            (self.service.to_owned(), true),
            (self.endpoint.to_owned(), true),
            (self.status.to_string(), false),
            (format!("{:.2}", self.latency_ms), false),
            (self.bytes.to_string(), false),
            (format!("{:032x}", self.request_id), true),
            (self.user_id.to_string(), false),
        ]
    }

    /// One row in the types of [`ROW_BINARY_HEADER`].
    fn write_row_binary(&self, id: u64, out: &mut Vec<u8>) {
        let string = |out: &mut Vec<u8>, text: &str| {
            // Every string here is shorter than 128 bytes: a one-byte length.
            out.push(text.len() as u8);
            out.extend_from_slice(text.as_bytes());
        };
        out.extend_from_slice(&(id as i64).to_le_bytes());
        out.extend_from_slice(&self.ts_micros.to_le_bytes());
        string(out, self.service);
        string(out, self.endpoint);
        out.extend_from_slice(&i32::from(self.status).to_le_bytes());
        out.extend_from_slice(&self.latency_ms.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        string(out, &format!("{:032x}", self.request_id));
        out.extend_from_slice(&self.user_id.to_le_bytes());
    }
}

/// A format ClickHouse clients send rows in, for the lab's producers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RowFormat {
    /// `JSONEachRow`: an object per line.
    JsonEachRow,
    /// `JSONCompactEachRow`: an array per line.
    JsonCompactEachRow,
    /// `TabSeparated`.
    TabSeparated,
    /// `CSV`.
    Csv,
    /// `Values`: SQL tuples.
    Values,
    /// `RowBinaryWithNamesAndTypes`, as the Rust client sends it (uncompressed).
    RowBinary,
    /// `Native`: one block of columns per insert, as clickhouse-connect's `insert()` sends it
    /// (uncompressed).
    Native,
}

impl RowFormat {
    /// Every format, `JSONEachRow` first.
    pub const ALL: [RowFormat; 7] = [
        Self::JsonEachRow,
        Self::JsonCompactEachRow,
        Self::TabSeparated,
        Self::Csv,
        Self::Values,
        Self::RowBinary,
        Self::Native,
    ];

    /// The name in `INSERT ... FORMAT <name>`.
    pub fn name(self) -> &'static str {
        match self {
            Self::JsonEachRow => "JSONEachRow",
            Self::JsonCompactEachRow => "JSONCompactEachRow",
            Self::TabSeparated => "TabSeparated",
            Self::Csv => "CSV",
            Self::Values => "Values",
            Self::RowBinary => "RowBinaryWithNamesAndTypes",
            Self::Native => "Native",
        }
    }

    /// What a body starts with before its rows.
    pub fn header(self) -> Vec<u8> {
        if self != Self::RowBinary {
            return Vec::new();
        }
        let mut out = vec![ROW_BINARY_HEADER.len() as u8];
        for texts in [
            ROW_BINARY_HEADER.map(|(name, _)| name),
            ROW_BINARY_HEADER.map(|(_, ty)| ty),
        ] {
            for text in texts {
                out.push(text.len() as u8);
                out.extend_from_slice(text.as_bytes());
            }
        }
        out
    }
}

/// Writes one insert's body: `events`, each with its id, in `format`.
pub fn write_insert(format: RowFormat, events: &[(u64, Event)], out: &mut Vec<u8>) {
    if format == RowFormat::Native {
        write_native_block(events, &native_columns(), out)
            .expect("the lab's own columns are written in their own types");
        return;
    }
    out.extend(format.header());
    for (id, event) in events {
        event.write_as(format, *id, out);
    }
}

/// The lab's columns in the types its `RowBinaryWithNamesAndTypes` header gives them, for a
/// `Native` body.
pub fn native_columns() -> Vec<(String, String)> {
    ROW_BINARY_HEADER
        .iter()
        .map(|(name, ty)| ((*name).to_owned(), (*ty).to_owned()))
        .collect()
}

/// A value of an event's column, before it is laid out in a column's type.
enum Cell {
    Int(i64),
    Float(f64),
    Text(String),
    Micros(i64),
}

impl Event {
    fn cell(&self, id: u64, column: &str) -> Option<Cell> {
        Some(match column {
            "id" => Cell::Int(id as i64),
            "ts" => Cell::Micros(self.ts_micros),
            "service" => Cell::Text(self.service.to_owned()),
            "endpoint" => Cell::Text(self.endpoint.to_owned()),
            "status" => Cell::Int(i64::from(self.status)),
            "latency_ms" => Cell::Float(self.latency_ms),
            "bytes" => Cell::Int(self.bytes),
            "request_id" => Cell::Text(format!("{:032x}", self.request_id)),
            "user_id" => Cell::Int(self.user_id),
            _ => return None,
        })
    }
}

/// Writes `events`, each with its id, as one `Native` block of `columns` (names and ClickHouse
/// types, as a server announces them: `Nullable` or not, `DateTime` or `DateTime64`), without
/// block info.
pub fn write_native_block(
    events: &[(u64, Event)],
    columns: &[(String, String)],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    leb128(out, columns.len() as u64);
    leb128(out, events.len() as u64);
    for (name, ty) in columns {
        leb128(out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
        leb128(out, ty.len() as u64);
        out.extend_from_slice(ty.as_bytes());
        let base = match ty
            .strip_prefix("Nullable(")
            .and_then(|t| t.strip_suffix(')'))
        {
            Some(inner) => {
                out.extend(std::iter::repeat_n(0, events.len()));
                inner
            }
            None => ty.as_str(),
        };
        for (id, event) in events {
            let cell = event
                .cell(*id, name)
                .ok_or_else(|| format!("the lab has no column {name}"))?;
            write_native_value(cell, base, out).map_err(|e| format!("column {name}: {e}"))?;
        }
    }
    Ok(())
}

fn write_native_value(cell: Cell, ty: &str, out: &mut Vec<u8>) -> Result<(), String> {
    match (cell, ty) {
        (Cell::Int(n), "Int64") => out.extend_from_slice(&n.to_le_bytes()),
        (Cell::Int(n), "Int32") => {
            let n = i32::try_from(n).map_err(|e| e.to_string())?;
            out.extend_from_slice(&n.to_le_bytes());
        }
        (Cell::Float(f), "Float64") => out.extend_from_slice(&f.to_le_bytes()),
        (Cell::Text(text), "String") => {
            leb128(out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
        (Cell::Micros(micros), ty) if ty.starts_with("DateTime64(6") => {
            out.extend_from_slice(&micros.to_le_bytes());
        }
        (Cell::Micros(micros), ty) if ty == "DateTime" || ty.starts_with("DateTime(") => {
            let seconds = u32::try_from(micros.div_euclid(1_000_000)).map_err(|e| e.to_string())?;
            out.extend_from_slice(&seconds.to_le_bytes());
        }
        (_, ty) => return Err(format!("the lab does not write its value as {ty}")),
    }
    Ok(())
}

/// A LEB128 number, as ClickHouse's binary formats write lengths and counts.
pub(crate) fn leb128(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The columns and ClickHouse types of a `RowBinaryWithNamesAndTypes` body of events.
const ROW_BINARY_HEADER: [(&str, &str); 9] = [
    ("id", "Int64"),
    ("ts", "DateTime64(6, 'UTC')"),
    ("service", "String"),
    ("endpoint", "String"),
    ("status", "Int32"),
    ("latency_ms", "Float64"),
    ("bytes", "Int64"),
    ("request_id", "String"),
    ("user_id", "Int64"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_events() {
        let a: Vec<Event> = {
            let mut g = EventGen::new(42);
            (0..1000).map(|_| g.next_event()).collect()
        };
        let mut g = EventGen::new(42);
        let b: Vec<Event> = (0..1000).map(|_| g.next_event()).collect();
        assert_eq!(a, b);
        let mut other = EventGen::new(43);
        assert_ne!(other.next_event(), a[0]);
    }

    #[test]
    fn batches_are_deterministic_and_match_the_schema() {
        let a = EventGen::new(5).batch(1000);
        let b = EventGen::new(5).batch(1000);
        assert_eq!(a, b);
        assert_eq!(a.num_rows(), 1000);
        assert_eq!(a.schema(), schema());
        assert_ne!(EventGen::new(6).batch(1000), a);
    }

    #[test]
    fn time_moves_forward() {
        let mut g = EventGen::new(1);
        let mut last = 0;
        for _ in 0..10_000 {
            let e = g.next_event();
            assert!(e.ts_micros >= last);
            last = e.ts_micros;
        }
    }

    #[test]
    fn ndjson_line_is_valid_json() {
        let mut out = Vec::new();
        EventGen::new(7).next_event().write_ndjson(99, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 99);
        assert!(
            v["ts"]
                .as_str()
                .unwrap()
                .starts_with("2026-01-01T00:00:00.")
        );
        assert_eq!(v["request_id"].as_str().unwrap().len(), 32);
    }
}
