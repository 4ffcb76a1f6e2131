//! Synthetic OpenTelemetry log records: a timestamp, a severity, a body, trace and span ids,
//! the resource as a `map<string, string>` and the attributes as a `map<string, json>`, whose
//! keys vary from record to record as real instrumentation's do and whose values are strings,
//! numbers or objects, as OpenTelemetry's `AnyValue` is. From a fixed seed, like
//! [`crate::events`].

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use chrono::{DateTime, SecondsFormat};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sluice_core::{Column, ColumnType, TableSchema};

use crate::events::{ENDPOINTS, SERVICES, START_MICROS};

/// Severity texts and their OpenTelemetry numbers, most frequent first.
const SEVERITIES: [(&str, i32); 4] = [("INFO", 9), ("DEBUG", 5), ("WARN", 13), ("ERROR", 17)];

/// Hosts records come from.
const HOSTS: usize = 24;

/// The columns of an OpenTelemetry log table, as sluice declares them.
pub fn columns() -> Vec<Column> {
    vec![
        Column::new("ts", ColumnType::Timestamp).required(),
        Column::new("severity_text", ColumnType::String),
        Column::new("severity_number", ColumnType::Int32),
        Column::new("body", ColumnType::String),
        Column::new("trace_id", ColumnType::String),
        Column::new("span_id", ColumnType::String),
        Column::new("resource", ColumnType::map(ColumnType::String)),
        Column::new("attributes", ColumnType::map(ColumnType::Json)),
    ]
}

/// The columns as the value of a table's `columns = ...` in sluice's config file.
pub fn columns_toml() -> String {
    let columns: Vec<String> = columns()
        .iter()
        .map(|c| {
            format!(
                "{{ name = \"{}\", type = \"{}\", nullable = {} }}",
                c.name,
                c.ty.name(),
                c.nullable
            )
        })
        .collect();
    format!("[{}]", columns.join(", "))
}

/// The Arrow schema of [`OtelGen::batch`].
pub fn schema() -> SchemaRef {
    let fields: Vec<_> = columns()
        .iter()
        .map(|c| c.ty.arrow_field(&c.name, c.nullable))
        .collect();
    Arc::new(Schema::new(fields))
}

/// One log record.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// Microseconds since the epoch.
    pub ts_micros: i64,
    /// Severity text and number.
    pub severity: (&'static str, i32),
    /// The message.
    pub body: String,
    /// 128-bit trace id.
    pub trace_id: u128,
    /// 64-bit span id.
    pub span_id: u64,
    /// The resource, a JSON object.
    pub resource: String,
    /// The attributes, a JSON object whose keys vary.
    pub attributes: String,
}

/// Generates log records in time order.
#[derive(Debug, Clone)]
pub struct OtelGen {
    rng: SmallRng,
    ts_micros: i64,
}

impl OtelGen {
    /// A generator from `seed`, starting at [`START_MICROS`].
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(seed),
            ts_micros: START_MICROS,
        }
    }

    /// The next record; time moves forward 0 to 2 ms per record.
    pub fn next_record(&mut self) -> LogRecord {
        let rng = &mut self.rng;
        self.ts_micros += rng.random_range(0..2_000);
        let severity = SEVERITIES[skewed(rng, SEVERITIES.len())];
        let service = SERVICES[skewed(rng, SERVICES.len())];
        let route = ENDPOINTS[skewed(rng, ENDPOINTS.len())];
        let status = if severity.1 >= 17 { 500 } else { 200 };
        let duration_ms = rng.random_range(1..2_000);
        let host = rng.random_range(0..HOSTS);
        let resource = format!(
            "{{\"service.name\":\"{service}\",\"service.version\":\"1.{}.0\",\
             \"host.name\":\"node-{host:02}\",\"k8s.pod.name\":\"{service}-{:05x}\"}}",
            host % 4,
            rng.random_range(0..0x100000)
        );
        let mut attributes = format!(
            "{{\"http.method\":\"{}\",\"http.route\":\"{route}\",\"http.status_code\":{status},\
             \"duration_ms\":{duration_ms}",
            if rng.random_bool(0.7) { "GET" } else { "POST" }
        );
        // Keys that only some records carry.
        if rng.random_bool(0.5) {
            let _ = write!(attributes, ",\"user.id\":{}", rng.random_range(1..100_000));
        }
        if severity.1 >= 13 {
            let _ = write!(
                attributes,
                ",\"exception\":{{\"type\":\"TimeoutError\",\"retries\":[{},{}]}}",
                rng.random_range(0..3),
                rng.random_range(3..6)
            );
        }
        attributes.push('}');
        LogRecord {
            ts_micros: self.ts_micros,
            severity,
            body: format!(
                "{} {route} answered {status} in {duration_ms} ms",
                severity.0
            ),
            trace_id: rng.random(),
            span_id: rng.random(),
            resource,
            attributes,
        }
    }

    /// The next `rows` records as one Arrow batch with [`schema`], decoded from their NDJSON
    /// as sluice's API would.
    pub fn batch(&mut self, rows: usize) -> RecordBatch {
        let mut body = Vec::with_capacity(rows * 512);
        for _ in 0..rows {
            self.next_record().write_ndjson(&mut body);
        }
        let table = TableSchema::new(columns()).expect("the columns are valid");
        sluice_core::decode(&table, &body, &Default::default())
            .expect("the records decode into their table")
    }
}

impl LogRecord {
    /// Writes the record as one NDJSON line, its resource and attributes as JSON objects.
    pub fn write_ndjson(&self, out: &mut Vec<u8>) {
        let ts = DateTime::from_timestamp_micros(self.ts_micros)
            .unwrap_or_default()
            .to_rfc3339_opts(SecondsFormat::Micros, true);
        let _ = writeln!(
            out,
            "{{\"ts\":\"{ts}\",\"severity_text\":\"{}\",\"severity_number\":{},\"body\":\"{}\",\
             \"trace_id\":\"{:032x}\",\"span_id\":\"{:016x}\",\"resource\":{},\"attributes\":{}}}",
            self.severity.0,
            self.severity.1,
            self.body,
            self.trace_id,
            self.span_id,
            self.resource,
            self.attributes
        );
    }
}

fn skewed(rng: &mut SmallRng, n: usize) -> usize {
    let a = rng.random_range(0..n);
    let b = rng.random_range(0..n);
    a.min(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_json_with_varying_attributes_and_decode_into_the_table() {
        let mut generator = OtelGen::new(3);
        let mut body = Vec::new();
        let mut keys = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let record = generator.next_record();
            let attributes: serde_json::Value = serde_json::from_str(&record.attributes).unwrap();
            keys.insert(attributes.as_object().unwrap().len());
            serde_json::from_str::<serde_json::Value>(&record.resource).unwrap();
            record.write_ndjson(&mut body);
        }
        assert!(keys.len() > 1, "the attributes' keys vary: {keys:?}");
        let schema = sluice_core::TableSchema::new(columns()).unwrap();
        let batch = sluice_core::decode(&schema, &body, &Default::default()).unwrap();
        assert_eq!(batch.num_rows(), 200);
        assert_eq!(batch.schema(), OtelGen::new(3).batch(1).schema());
    }
}
