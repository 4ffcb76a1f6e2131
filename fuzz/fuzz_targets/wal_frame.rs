//! Any bytes: the frame decoder answers without panicking, and a frame it accepts encodes back to
//! exactly the bytes it was read from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_wal::frame::{self, Decoded};

fuzz_target!(|data: &[u8]| {
    if let Decoded::Frame { lsn, payload, size } = frame::decode(data) {
        let mut again = Vec::new();
        frame::encode(lsn, payload, &mut again);
        assert_eq!(&again[..], &data[..size]);
    }
});
