//! Any body read as ClickHouse `Native` blocks, into a schema with every column type: rows or an
//! error, never a panic; and the measure the native protocol frames blocks with agrees with
//! itself: a block it finds has the length it says, whatever follows it.
#![no_main]

#[path = "every_type.rs"]
mod every_type;

use libfuzzer_sys::fuzz_target;
use sluice_core::formats::native_block_len;
use sluice_core::{DecodeOptions, InputFormat, decode};

fuzz_target!(|body: &[u8]| {
    for skip_unknown_fields in [false, true] {
        let options = DecodeOptions {
            format: InputFormat::Native,
            skip_unknown_fields,
            ..DecodeOptions::default()
        };
        if let Ok(batch) = decode(every_type::schema(), body, &options) {
            assert_eq!(batch.schema(), *every_type::schema().arrow());
        }
    }
    if let Ok(Some((len, rows))) = native_block_len(body) {
        assert!(len <= body.len());
        assert_eq!(native_block_len(&body[..len]), Ok(Some((len, rows))));
    }
});
