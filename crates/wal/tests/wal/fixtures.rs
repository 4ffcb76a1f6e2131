//! Recovery from committed corrupt-segment fixtures (in `tests/fixtures/`, written by
//! `make_fixtures.py` there, an independent implementation of the format).

use std::path::Path;
use std::sync::Arc;

use sluice_wal::{FsStorage, RecoveryMode, Wal, WalConfig, WalError};

/// The recovered frames and the recovery report, or the refusal.
type Opened = Result<(Vec<(u64, Vec<u8>)>, sluice_wal::Recovered), WalError>;

/// Opens a log whose only (newest) segment is the fixture, or whose older segment it is when
/// `older` is set (a valid newest segment follows it).
fn open(fixture: &str, mode: RecoveryMode, older: bool) -> (tempfile::TempDir, Opened) {
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    std::fs::copy(&source, dir.path().join("00000000000000000001.wal")).unwrap();
    if older {
        let clean = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clean.wal");
        // A later segment whose frames (LSN 1..5) sort after anything in the fixture once renamed:
        // its content is only read after the fixture's, and a refusal happens first.
        std::fs::copy(clean, dir.path().join("00000000000000001000.wal")).unwrap();
    }
    let mut config = WalConfig::new(dir.path());
    config.recovery = mode;
    let result = Wal::open(config, Arc::new(FsStorage), 0).map(|(wal, replay, recovered)| {
        let mut frames = Vec::new();
        replay
            .for_each(|lsn, payload| frames.push((lsn, payload.to_vec())))
            .unwrap();
        wal.close();
        (frames, recovered)
    });
    (dir, result)
}

fn lsns(frames: &[(u64, Vec<u8>)]) -> Vec<u64> {
    frames.iter().map(|(lsn, _)| *lsn).collect()
}

#[test]
fn clean_segment_replays_everything() {
    let (_dir, result) = open("clean.wal", RecoveryMode::Strict, false);
    let (frames, recovered) = result.unwrap();
    assert_eq!(lsns(&frames), [1, 2, 3, 4, 5]);
    assert_eq!(frames[2].1, b"payload 3");
    assert!(recovered.cut_tail.is_none());
}

#[test]
fn torn_tail_is_cut_or_refused_by_mode() {
    let (dir, result) = open("torn_tail.wal", RecoveryMode::TolerateTail, false);
    let (frames, recovered) = result.unwrap();
    assert_eq!(lsns(&frames), [1, 2, 3]);
    let (_, problem, cut) = recovered.cut_tail.unwrap();
    assert_eq!(problem.reason, "the frame is cut short");
    assert!(cut > 0);
    // The cut is on disk: after frame 3 the segment holds only zeros, up to its preallocation.
    let bytes = std::fs::read(dir.path().join("00000000000000000001.wal")).unwrap();
    let end = 16 + 3 * (16 + 9);
    assert_eq!(bytes.len() as u64, sluice_wal::DEFAULT_SEGMENT_BYTES);
    assert!(bytes[end - 1] != 0 && bytes[end..].iter().all(|&b| b == 0));
    let (_dir, result) = open("torn_tail.wal", RecoveryMode::Strict, false);
    assert!(matches!(result, Err(WalError::Corrupt { .. })));
}

#[test]
fn zeroed_tail_is_the_unwritten_rest() {
    // Zeros after the last frame are what a preallocated segment holds where no frame reached:
    // the end of the log, in every mode, with nothing to cut.
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTail] {
        let (_dir, result) = open("zeroed_tail.wal", mode, false);
        let (frames, recovered) = result.unwrap();
        assert_eq!(lsns(&frames), [1, 2]);
        assert!(recovered.cut_tail.is_none());
    }
}

#[test]
fn flipped_bit_in_the_newest_segment_follows_the_mode() {
    // tolerate_tail: the log ends before the bad frame (documented: later frames go too).
    let (_dir, result) = open("flipped_bit_middle.wal", RecoveryMode::TolerateTail, false);
    let (frames, _) = result.unwrap();
    assert_eq!(lsns(&frames), [1, 2]);
    // skip_corrupt: only the bad frame is lost.
    let (_dir, result) = open("flipped_bit_middle.wal", RecoveryMode::SkipCorrupt, false);
    let (frames, recovered) = result.unwrap();
    assert_eq!(lsns(&frames), [1, 2, 4, 5]);
    assert_eq!(recovered.skipped.len(), 1);
    assert_eq!(recovered.skipped[0].1.reason, "checksum mismatch");
    // strict: refused.
    let (_dir, result) = open("flipped_bit_middle.wal", RecoveryMode::Strict, false);
    assert!(matches!(result, Err(WalError::Corrupt { offset, .. }) if offset == 16 + 2 * 25));
}

#[test]
fn corruption_in_an_older_segment_refuses_to_start() {
    let (_dir, result) = open("flipped_bit_middle.wal", RecoveryMode::TolerateTail, true);
    let error = result.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, WalError::Corrupt { .. }), "{message}");
    assert!(
        message.contains("00000000000000000001.wal") && message.contains("checksum mismatch"),
        "{message}"
    );
}

#[test]
fn lsn_going_backwards_ends_the_log() {
    let (_dir, result) = open("lsn_backwards.wal", RecoveryMode::TolerateTail, false);
    let (frames, recovered) = result.unwrap();
    assert_eq!(lsns(&frames), [5]);
    assert_eq!(
        recovered.cut_tail.unwrap().1.reason,
        "log sequence number went backwards"
    );
}

#[test]
fn a_newest_segment_without_its_header_is_replaced() {
    let (dir, result) = open("torn_header.wal", RecoveryMode::TolerateTail, false);
    let (frames, _) = result.unwrap();
    assert!(frames.is_empty());
    // The log is usable again: a fresh segment with a whole header took its place.
    let (wal, replay, _) = Wal::open(WalConfig::new(dir.path()), Arc::new(FsStorage), 0).unwrap();
    replay.for_each(|_, _| {}).unwrap();
    let appended = wal.append(b"after").unwrap();
    futures_lite_block_on(appended.durable.wait()).unwrap();
    wal.close();
}

#[test]
fn a_preallocated_newest_segment_without_its_header_is_replaced() {
    // A crash after a segment took its space and before its header reached the disk.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("00000000000000000001.wal"), [0u8; 4096]).unwrap();
    let (wal, replay, recovered) =
        Wal::open(WalConfig::new(dir.path()), Arc::new(FsStorage), 0).unwrap();
    replay.for_each(|_, _| panic!("no frame")).unwrap();
    assert_eq!(recovered.frames, 0);
    let appended = wal.append(b"after").unwrap();
    futures_lite_block_on(appended.durable.wait()).unwrap();
    wal.close();
    let (_, replay, _) = Wal::open(WalConfig::new(dir.path()), Arc::new(FsStorage), 0).unwrap();
    let mut payloads = Vec::new();
    replay.for_each(|_, p| payloads.push(p.to_vec())).unwrap();
    assert_eq!(payloads, [b"after".to_vec()]);
}

#[test]
fn bad_magic_is_refused_in_an_older_segment() {
    let (_dir, result) = open("bad_magic.wal", RecoveryMode::TolerateTail, true);
    assert!(matches!(
        result,
        Err(WalError::Corrupt {
            reason: "not a sluice WAL segment (bad magic)",
            ..
        })
    ));
}

fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}
