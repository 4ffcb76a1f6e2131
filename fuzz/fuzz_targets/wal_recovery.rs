//! Any bytes as a segment: recovery's scan answers without panicking in every mode, never reads
//! past the input, and the log it keeps is a clean end of log: scanning just the kept bytes again
//! finds the same frames and no problem (so a second recovery cuts nothing more).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_wal::recovery::{self, RecoveryMode};

fuzz_target!(|data: &[u8]| {
    for mode in [RecoveryMode::TolerateTail, RecoveryMode::Strict, RecoveryMode::SkipCorrupt] {
        let mut first = Vec::new();
        let scan = recovery::scan(data, mode, 0, |lsn, payload| first.push((lsn, payload.to_vec())));
        assert!(scan.valid_len <= data.len());
        assert_eq!(scan.frames as usize, first.len());
        assert!(first.windows(2).all(|w| w[0].0 < w[1].0), "LSNs rise");
        if scan.valid_len >= recovery::SEGMENT_HEADER_LEN {
            let kept = &data[..scan.valid_len];
            let mut again = Vec::new();
            let rescan = recovery::scan(kept, mode, 0, |lsn, payload| again.push((lsn, payload.to_vec())));
            assert_eq!(rescan.end_problem, None);
            assert_eq!(again, first);
        }
    }
});
