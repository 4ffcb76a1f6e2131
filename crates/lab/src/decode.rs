//! `sluice lab decode`: how fast sluice decodes nested events next to flat ones, on one core.
//!
//! The same number of rows of each shape, as NDJSON bodies of a fixed size, go through
//! `sluice_core::decode` (what the server does with an insert's body, strict checks and all)
//! in this process. Flat: seed 000's API events, eight scalar columns. Nested: OpenTelemetry log
//! records whose resource and attributes are maps. The shapes take
//! turns over several runs and each reports its median, so a slow minute of a shared machine
//! does not land on one side only.

use std::time::Instant;

use serde::Serialize;
use sluice_core::{Column, ColumnType, DecodeOptions, TableSchema};

use crate::events::{EventGen, schema as flat_arrow_schema};
use crate::otel::{self, OtelGen};

/// What to run.
#[derive(Debug, Clone)]
pub struct DecodeLabConfig {
    /// Rows of each shape.
    pub rows: usize,
    /// Rows per body.
    pub rows_per_body: usize,
    /// Runs of each shape, alternated.
    pub runs: usize,
}

/// One shape's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Shape {
    /// `flat` or `nested`.
    pub name: String,
    /// Rows decoded per run.
    pub rows: usize,
    /// Bytes of NDJSON per run.
    pub bytes: usize,
    /// The median run's seconds.
    pub seconds: f64,
    /// Rows per second in the median run.
    pub rows_per_s: f64,
    /// MB (10^6 bytes) of NDJSON per second in the median run.
    pub mb_per_s: f64,
}

/// Both shapes.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeReport {
    /// Rows per body.
    pub rows_per_body: usize,
    /// Runs of each shape.
    pub runs: usize,
    /// Seed 000's API events.
    pub flat: Shape,
    /// OpenTelemetry log records.
    pub nested: Shape,
    /// Nested rows/s over flat rows/s.
    pub rows_ratio: f64,
    /// Nested MB/s over flat MB/s.
    pub bytes_ratio: f64,
}

/// Decodes both shapes `config.runs` times each, alternating.
pub fn run(config: &DecodeLabConfig) -> Result<DecodeReport, String> {
    if config.rows == 0 || config.rows_per_body == 0 || config.runs == 0 {
        return Err("rows, rows per body and runs must be more than zero".into());
    }
    let flat = (flat_schema()?, flat_bodies(config));
    let nested = (
        TableSchema::new(otel::columns()).map_err(|e| e.to_string())?,
        nested_bodies(config),
    );
    let (mut flat_runs, mut nested_runs) = (Vec::new(), Vec::new());
    for _ in 0..config.runs {
        flat_runs.push(time_decode(&flat.0, &flat.1)?);
        nested_runs.push(time_decode(&nested.0, &nested.1)?);
    }
    let flat = shape("flat", config.rows, &flat.1, flat_runs);
    let nested = shape("nested", config.rows, &nested.1, nested_runs);
    Ok(DecodeReport {
        rows_per_body: config.rows_per_body,
        runs: config.runs,
        rows_ratio: nested.rows_per_s / flat.rows_per_s,
        bytes_ratio: nested.mb_per_s / flat.mb_per_s,
        flat,
        nested,
    })
}

/// The flat events' table: an `id`, then seed 000's eight columns.
fn flat_schema() -> Result<TableSchema, String> {
    let mut columns = vec![Column::new("id", ColumnType::Int64).required()];
    for field in flat_arrow_schema().fields() {
        let ty = ColumnType::from_field(field)
            .ok_or_else(|| format!("no column type for {}", field.data_type()))?;
        columns.push(Column::new(field.name().clone(), ty));
    }
    TableSchema::new(columns).map_err(|e| e.to_string())
}

fn flat_bodies(config: &DecodeLabConfig) -> Vec<Vec<u8>> {
    let mut events = EventGen::new(1);
    bodies(config, |id, out| events.next_event().write_ndjson(id, out))
}

fn nested_bodies(config: &DecodeLabConfig) -> Vec<Vec<u8>> {
    let mut records = OtelGen::new(1);
    bodies(config, |_, out| records.next_record().write_ndjson(out))
}

/// `config.rows` rows written by `write`, in bodies of `config.rows_per_body`.
fn bodies(config: &DecodeLabConfig, mut write: impl FnMut(u64, &mut Vec<u8>)) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    let mut body = Vec::new();
    for id in 0..config.rows as u64 {
        write(id, &mut body);
        if (id as usize + 1).is_multiple_of(config.rows_per_body) {
            bodies.push(std::mem::take(&mut body));
        }
    }
    if !body.is_empty() {
        bodies.push(body);
    }
    bodies
}

/// Seconds to decode every body once; fails if one does not decode.
fn time_decode(schema: &TableSchema, bodies: &[Vec<u8>]) -> Result<f64, String> {
    let options = DecodeOptions::default();
    let started = Instant::now();
    for body in bodies {
        let batch = sluice_core::decode(schema, body, &options).map_err(|e| e.to_string())?;
        std::hint::black_box(batch);
    }
    Ok(started.elapsed().as_secs_f64())
}

fn shape(name: &str, rows: usize, bodies: &[Vec<u8>], mut runs: Vec<f64>) -> Shape {
    runs.sort_by(f64::total_cmp);
    let seconds = runs[runs.len() / 2].max(1e-9);
    let bytes = bodies.iter().map(Vec::len).sum();
    Shape {
        name: name.to_owned(),
        rows,
        bytes,
        seconds,
        rows_per_s: rows as f64 / seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_decode_and_are_measured() {
        let report = run(&DecodeLabConfig {
            rows: 2_500,
            rows_per_body: 1_000,
            runs: 3,
        })
        .unwrap();
        for shape in [&report.flat, &report.nested] {
            assert_eq!(shape.rows, 2_500);
            assert!(shape.bytes > 2_500 * 100, "{shape:?}");
            assert!(shape.rows_per_s > 0.0 && shape.mb_per_s > 0.0, "{shape:?}");
        }
        assert!(
            report.nested.bytes > report.flat.bytes,
            "nested rows are larger"
        );
    }
}
