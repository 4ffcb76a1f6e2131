//! Any body: NDJSON decoding into a fixed schema returns rows or an error, never panics, and
//! every error names a line that exists in the body.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_core::{Column, ColumnType, DecodeOptions, TableSchema, decode_ndjson};

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
        ])
        .expect("schema")
    })
}

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|b| *b == b'\n').count();
    for options in [
        DecodeOptions::default(),
        DecodeOptions { skip_unknown_fields: true, columns: Some(vec!["id".into(), "x".into()]) },
    ] {
        if let Err(error) = decode_ndjson(schema(), data, &options) {
            if let Some(line) = error.line {
                assert!(line >= 1 && line <= lines, "line {line} of {lines}");
            }
        }
    }
    let _ = TableSchema::infer(data);
});
