//! The LSN reservation: LSNs keep rising across restarts, for logged frames and for LSNs taken
//! without one, even when no segment is left to say how far the log got.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use sluice_wal::faults::FaultyStorage;
use sluice_wal::{FsStorage, Storage, Wal, WalConfig, WalError};

/// A log in `dir` reserving `block` LSNs at a time.
fn open_with(dir: &Path, block: u64, storage: Arc<dyn Storage>) -> Result<Wal, WalError> {
    let mut config = WalConfig::new(dir);
    config.reserve_block = block;
    Wal::open(config, storage, 0).map(|(wal, _, _)| wal)
}

fn open(dir: &Path, block: u64) -> Wal {
    open_with(dir, block, Arc::new(FsStorage)).unwrap()
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect()
}

#[tokio::test]
async fn lsns_taken_without_a_frame_stay_below_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 8);
    let logged = wal.append(b"first").unwrap();
    logged.durable.wait().await.unwrap();
    // Twenty LSNs no frame records, past two blocks of the reservation.
    let taken: Vec<u64> = (0..20).map(|_| wal.next_lsn().unwrap()).collect();
    let highest = *taken.last().unwrap();
    assert!(taken.windows(2).all(|w| w[0] < w[1]));
    wal.close();
    drop(wal);

    let wal = open(dir.path(), 8);
    let next = wal.next_lsn().unwrap();
    assert!(next > highest, "{next} reused an LSN up to {highest}");
    let appended = wal.append(b"after").unwrap().lsn;
    assert!(appended > next);
    wal.close();
    drop(wal);

    // Every segment gone, as after every frame landed and was released: the reservation alone
    // still keeps the numbering above everything handed out.
    for segment in segments(dir.path()) {
        std::fs::remove_file(segment).unwrap();
    }
    let wal = open(dir.path(), 8);
    assert!(wal.next_lsn().unwrap() > appended);
}

#[tokio::test]
async fn a_reservation_that_cannot_be_moved_hands_out_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, faults) = FaultyStorage::new();
    let wal = open_with(dir.path(), 4, storage.clone()).unwrap();
    let mut taken = vec![wal.next_lsn().unwrap()];
    faults.fail_fsync.store(true, Ordering::Relaxed);
    // The LSNs the reservation already covers are still handed out; the first past it is not.
    let mut refused = None;
    for _ in 0..8 {
        match wal.next_lsn() {
            Ok(lsn) => taken.push(lsn),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let refused = refused.expect("the reservation had to move within 8 LSNs");
    assert!(
        refused.to_string().contains("reserved-lsn.tmp"),
        "{refused}"
    );
    assert!(
        matches!(wal.append(b"x"), Err(WalError::Io { .. })),
        "an append past the reservation is refused too"
    );
    faults.fail_fsync.store(false, Ordering::Relaxed);
    let after = wal.next_lsn().unwrap();
    assert!(after > *taken.last().unwrap());
    wal.close();
    drop(wal);
    let wal = open_with(dir.path(), 4, storage).unwrap();
    assert!(wal.next_lsn().unwrap() > after);
}

#[test]
fn a_damaged_reservation_stops_the_open_and_a_leftover_temporary_file_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 8);
    let before = wal.next_lsn().unwrap();
    wal.close();
    drop(wal);

    // A crash while moving the reservation leaves its temporary file: ignored and removed.
    std::fs::write(dir.path().join("reserved-lsn.tmp"), b"half").unwrap();
    let wal = open(dir.path(), 8);
    assert!(!dir.path().join("reserved-lsn.tmp").exists());
    let after = wal.next_lsn().unwrap();
    assert!(after > before);
    wal.close();
    drop(wal);

    let path = dir.path().join("reserved-lsn");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let refused = open_with(dir.path(), 8, Arc::new(FsStorage)).err().unwrap();
    assert!(matches!(refused, WalError::Reservation { .. }), "{refused}");
    let message = refused.to_string();
    assert!(
        message.contains("reserved-lsn") && message.contains("move it away"),
        "{message}"
    );
}
