//! Any bytes as a body in each Content-Encoding sluice reads: decompressed or refused, never a
//! panic, and never more than the limit. The first byte picks the encoding, so one corpus covers
//! the hand-written framings (LZ4 frames back to back, Hadoop snappy) and the libraries alike.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sluice_server::decode_content_encoding;

const LIMIT: usize = 1 << 20;

const ENCODINGS: [&str; 9] = [
    "identity", "gzip", "deflate", "br", "zstd", "lz4", "xz", "bz2", "snappy",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let encoding = ENCODINGS[usize::from(pick) % ENCODINGS.len()];
    if let Ok(raw) = decode_content_encoding(encoding, Bytes::copy_from_slice(body), LIMIT) {
        assert!(raw.len() <= LIMIT, "{encoding}: {} bytes", raw.len());
    }
});
