//! Any bytes as a body in ClickHouse's compressed blocks (`decompress=1`): decompressed or
//! refused, never a panic, and never more than the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_server::clickhouse::compressed::decompress_blocks;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if let Ok(raw) = decompress_blocks(data, LIMIT) {
        assert!(raw.len() <= LIMIT);
    }
});
