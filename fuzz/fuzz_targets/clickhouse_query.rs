//! Any bytes as the start of a ClickHouse request body: the INSERT parser and the handshake-read
//! parser answer without panicking, and the rows an INSERT's parser finds start inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_server::clickhouse::handshake::parse_read;
use sluice_server::clickhouse::query::parse_insert;

fuzz_target!(|data: &[u8]| {
    if let Ok(query) = parse_insert(data) {
        assert!(query.data_offset <= data.len());
        assert!(!query.table.is_empty());
    }
    let _ = parse_read(data);
});
