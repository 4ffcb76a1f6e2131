//! Any bytes a client could send on ClickHouse's native protocol, read as a connection reads
//! them: packets back to back at a revision sluice may speak, and a data packet's block framed
//! both plain (block info, then the block's measure) and in compressed blocks. An error or a
//! wait for more bytes, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::formats::native_block_len;
use sluice_server::clickhouse::compressed::{block_len, decompress_blocks};
use sluice_server::clickhouse::tcp::packets::{
    ClientPacket, Reader, SERVER_REVISION, read_client_packet, skip_block_info,
};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let revision = [0, 54058, 54412, SERVER_REVISION][usize::from(pick % 4)];
    let mut reader = Reader::new(bytes);
    while let Ok(packet) = read_client_packet(&mut reader, revision) {
        if let ClientPacket::Data { .. } = packet {
            let rest = reader.rest();
            let mut block = Reader::new(rest);
            if skip_block_info(&mut block).is_ok() {
                if let Ok(Some((len, _))) = native_block_len(block.rest()) {
                    assert!(len <= block.rest().len());
                }
            }
            if let Ok(Some(len)) = block_len(rest) {
                assert!(len <= rest.len());
                let _ = decompress_blocks(&rest[..len], 1 << 20);
            }
            return;
        }
    }
});
