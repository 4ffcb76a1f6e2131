//! Any body in each of ClickHouse's input formats, decoded into a schema with every column type:
//! rows or an error, never a panic; a batch always has the table's columns; a new table inferred
//! from a header always has at least one column. The first byte picks the format, so one corpus
//! covers them all.
#![no_main]

#[path = "every_type.rs"]
mod every_type;

use libfuzzer_sys::fuzz_target;
use sluice_core::{DecodeOptions, InputFormat, decode, infer_table_schema};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let names = InputFormat::NAMES;
    let Some(format) = InputFormat::parse(names[usize::from(pick) % names.len()]) else {
        return;
    };
    for skip_unknown_fields in [false, true] {
        let options = DecodeOptions {
            format,
            skip_unknown_fields,
            csv_delimiter: (pick & 0x80 != 0).then_some(b';'),
            null_as_default: pick & 0x40 != 0,
            ..DecodeOptions::default()
        };
        if let Ok(batch) = decode(every_type::schema(), body, &options) {
            assert_eq!(batch.schema(), *every_type::schema().arrow());
        }
        if let Ok(inferred) = infer_table_schema(body, &options) {
            assert!(!inferred.columns().is_empty());
        }
    }
});
