//! Bodies decoded together for a round get, each, what they get decoded alone: the same rows, or
//! the same error. The first byte picks the format, the schema (every type, or three plain
//! columns) and the JSON dialect; the rest is cut into bodies at each `0xFF 0xFE`.
#![no_main]

#[path = "every_type.rs"]
mod every_type;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_core::formats::{decode_together, may_join};
use sluice_core::{
    Column, ColumnType, DecodeOptions, InputFormat, JsonDialect, TableSchema, decode,
};

/// What the direct pass for JSON rows reads: plain columns only.
fn plain_schema() -> &'static TableSchema {
    static SCHEMA: OnceLock<TableSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
            Column::new("x", ColumnType::Float64),
        ])
        .expect("schema")
    })
}

/// At most this many bodies in a round, as a fuzzer's input is short anyway.
const MAX_BODIES: usize = 8;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let names = InputFormat::NAMES;
    let Some(format) = InputFormat::parse(names[usize::from(pick & 0x1f) % names.len()]) else {
        return;
    };
    let schema = if pick & 0x80 != 0 {
        plain_schema()
    } else {
        every_type::schema()
    };
    let dialect = if pick & 0x40 != 0 {
        JsonDialect::ClickHouse
    } else {
        JsonDialect::Ndjson
    };
    let options = DecodeOptions {
        format,
        dialect,
        skip_unknown_fields: pick & 0x20 != 0,
        ..DecodeOptions::default()
    };
    let bodies = cut(rest);
    // The pipeline sends only the bodies that may join a round.
    if bodies.is_empty() || !bodies.iter().all(|body| may_join(body, &options)) {
        return;
    }
    let answers = decode_together(schema, &bodies, &options).into_batches();
    assert_eq!(answers.len(), bodies.len());
    for (body, answer) in bodies.iter().zip(answers) {
        assert_eq!(answer, decode(schema, body, &options), "{format:?} {body:?}");
    }
});

/// `data` cut at each `0xFF 0xFE`, into at most [`MAX_BODIES`] bodies.
fn cut(data: &[u8]) -> Vec<&[u8]> {
    let mut bodies = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at + 1 < data.len() && bodies.len() + 1 < MAX_BODIES {
        if data[at] == 0xFF && data[at + 1] == 0xFE {
            bodies.push(&data[start..at]);
            start = at + 2;
            at = start;
        } else {
            at += 1;
        }
    }
    bodies.push(&data[start..]);
    bodies
}
