//! Any body: decoding into a fixed schema returns rows or an error, never panics, and every error
//! names a line that exists in the body. Differentially, with serde_json as the reference for
//! JSON (RFC 8259): a body with a line the reference refuses is refused by sluice's own API, and
//! a body it takes whole has one row per line.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_core::{
    Column, ColumnType, DecodeOptions, JsonDialect, TableSchema, decode_ndjson, infer_schema,
};

fn schema() -> &'static TableSchema {
    static SCHEMA: OnceLock<TableSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
            Column::new("small", ColumnType::Int8),
            Column::new("ok", ColumnType::Bool),
            Column::new("ts", ColumnType::Timestamp),
            Column::new("day", ColumnType::Date),
            Column::new("x", ColumnType::Float64),
            Column::new("tags", ColumnType::list(ColumnType::Int16)),
            Column::new("attrs", ColumnType::map(ColumnType::list(ColumnType::Uuid))),
        ])
        .expect("schema")
    })
}

/// The non-blank lines of an NDJSON body, as sluice's own API frames them.
fn rows(data: &[u8]) -> Vec<&[u8]> {
    data.split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|b| *b == b'\n').count();
    let every_dialect = [JsonDialect::Ndjson, JsonDialect::ClickHouse, JsonDialect::Lenient];
    for dialect in every_dialect {
        for options in [
            DecodeOptions { dialect, ..Default::default() },
            DecodeOptions {
                dialect,
                skip_unknown_fields: true,
                columns: Some(vec!["id".into(), "x".into()]),
                ..Default::default()
            },
        ] {
            if let Err(error) = decode_ndjson(schema(), data, &options) {
                if let Some(line) = error.line {
                    assert!(line >= 1 && line <= lines, "line {line} of {lines}");
                }
            }
        }
        let _ = infer_schema(data, dialect);
    }
    let rows = rows(data);
    let reference_refuses = rows
        .iter()
        .any(|row| serde_json::from_slice::<serde_json::Value>(row).is_err());
    for options in [
        DecodeOptions::default(),
        DecodeOptions { skip_unknown_fields: true, ..Default::default() },
    ] {
        match decode_ndjson(schema(), data, &options) {
            Ok(batch) => {
                assert!(!reference_refuses, "took a line serde_json refuses: {data:?}");
                assert_eq!(batch.num_rows(), rows.len(), "{data:?}");
            }
            Err(_) => {}
        }
    }
});
