//! Any body read as ClickHouse `Native` blocks, into a schema with every column type: rows or an
//! error, never a panic; and the measure the native protocol frames blocks with agrees with
//! itself: a block it finds has the length it says, whatever follows it.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_core::formats::native_block_len;
use sluice_core::{Column, ColumnType, DecodeOptions, InputFormat, TableSchema, decode};

fn schema() -> &'static TableSchema {
    static SCHEMA: OnceLock<TableSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut columns = vec![Column::new("id", ColumnType::Int64).required()];
        for (i, ty) in ColumnType::ALL.into_iter().enumerate() {
            columns.push(Column::new(format!("c{i}"), ty));
        }
        TableSchema::new(columns).expect("schema")
    })
}

fuzz_target!(|body: &[u8]| {
    for skip_unknown_fields in [false, true] {
        let options = DecodeOptions {
            format: InputFormat::Native,
            skip_unknown_fields,
            ..DecodeOptions::default()
        };
        if let Ok(batch) = decode(schema(), body, &options) {
            assert_eq!(batch.schema(), *schema().arrow());
        }
    }
    if let Ok(Some((len, rows))) = native_block_len(body) {
        assert!(len <= body.len());
        assert_eq!(native_block_len(&body[..len]), Ok(Some((len, rows))));
    }
});
