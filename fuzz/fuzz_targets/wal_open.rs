//! Any bytes as the newest segment on disk: opening the log never panics in any recovery mode,
//! what it recovers replays, and opening it a second time finds the same frames. Slow (real
//! files, fsyncs, a writer thread per open); `wal_recovery` covers the scan itself fast.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sluice_wal::{FsStorage, RecoveryMode, Wal, WalConfig};

fn frames(dir: &std::path::Path, mode: RecoveryMode) -> Option<Vec<(u64, Vec<u8>)>> {
    let mut config = WalConfig::new(dir);
    config.recovery = mode;
    let (wal, replay, _) = Wal::open(config, Arc::new(FsStorage), 0).ok()?;
    let mut out = Vec::new();
    replay.for_each(|lsn, p| out.push((lsn, p.to_vec()))).ok()?;
    wal.close();
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    for mode in [RecoveryMode::TolerateTail, RecoveryMode::Strict, RecoveryMode::SkipCorrupt] {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("00000000000000000001.wal"), data).expect("write");
        if let Some(first) = frames(dir.path(), mode) {
            let second = frames(dir.path(), mode).expect("a recovered log opens again");
            assert_eq!(first, second);
        }
    }
});
