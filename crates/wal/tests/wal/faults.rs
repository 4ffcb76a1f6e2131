//! The log on real files with faults injected through its storage trait: group commit, a failed
//! fsync poisons, a full disk or a short write fails the group without a false acknowledgement,
//! release deletes only what the stores hold.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use sluice_wal::faults::{Faults, FaultyStorage};
use sluice_wal::{FsStorage, Wal, WalConfig, WalError};

fn open(dir: &Path, faults: &Arc<Faults>, segment_bytes: u64) -> (Wal, Vec<(u64, Vec<u8>)>) {
    let mut config = WalConfig::new(dir);
    config.segment_bytes = segment_bytes;
    let storage = Arc::new(FaultyStorage {
        faults: faults.clone(),
    });
    let (wal, replay, _) = Wal::open(config, storage, 0).unwrap();
    let mut frames = Vec::new();
    replay
        .for_each(|lsn, p| frames.push((lsn, p.to_vec())))
        .unwrap();
    (wal, frames)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_fsyncs_and_all_replay() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 64 * 1024);
    let wal = Arc::new(wal);
    let mut tasks = Vec::new();
    for producer in 0..64u32 {
        let wal = wal.clone();
        tasks.push(tokio::spawn(async move {
            let mut lsns = Vec::new();
            for i in 0..50u32 {
                let appended = wal.append(format!("{producer}:{i}").as_bytes()).unwrap();
                appended.durable.wait().await.unwrap();
                lsns.push(appended.lsn);
            }
            lsns
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let fsyncs = wal.stats().fsyncs.load(Ordering::Relaxed);
    assert_eq!(wal.stats().frames.load(Ordering::Relaxed), 3200);
    assert!(
        fsyncs < 3200,
        "no group commit: {fsyncs} fsyncs for 3200 appends"
    );
    wal.close();
    drop(wal);

    let (_wal, frames) = open(dir.path(), &faults, 64 * 1024);
    assert_eq!(frames.len(), 3200);
    let replayed: Vec<u64> = frames.iter().map(|(l, _)| *l).collect();
    all.sort_unstable();
    assert_eq!(
        replayed, all,
        "every acknowledged frame replays, in LSN order"
    );
    // Small segments rotated several times.
    let segments = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(segments > 1, "{segments}");
}

/// An append to an idle log wakes its writer: the frame is written without waiting for the
/// writer's idle wake, here an hour away.
#[tokio::test]
async fn an_append_to_an_idle_log_is_written_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = WalConfig::new(dir.path());
    config.idle_wake = std::time::Duration::from_secs(3600);
    let (wal, _, _) = Wal::open(config, Arc::new(FsStorage), 0).unwrap();
    for i in 0..5u8 {
        // Long enough for the writer to go back to waiting.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let appended = wal.append(&[i]).unwrap();
        let written =
            tokio::time::timeout(std::time::Duration::from_secs(60), appended.durable.wait());
        assert!(written.await.is_ok(), "append {i} waited for the idle wake");
    }
}

#[tokio::test]
async fn a_failed_fsync_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 1 << 20);
    wal.append(b"before").unwrap().durable.wait().await.unwrap();
    faults.fail_fsync.store(true, Ordering::Relaxed);
    let failed = wal.append(b"during").unwrap();
    assert!(matches!(failed.durable.wait().await, Err(WalError::Failed(m)) if m.contains("fsync")));
    // Fixing the disk does not help: nobody knows what reached it.
    faults.fail_fsync.store(false, Ordering::Relaxed);
    assert!(matches!(wal.append(b"after"), Err(WalError::Poisoned(_))));
    assert!(wal.poisoned().is_some());
}

#[tokio::test]
async fn a_full_disk_fails_the_group_without_a_false_ack_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 1 << 20);
    wal.append(b"one").unwrap().durable.wait().await.unwrap();
    faults.enospc.store(true, Ordering::Relaxed);
    let failed = wal.append(b"two").unwrap();
    let error = failed.durable.wait().await.unwrap_err();
    assert!(error.to_string().contains("No space left"), "{error}");
    faults.enospc.store(false, Ordering::Relaxed);
    // Not poisoned: once there is space, appends go through.
    wal.append(b"three").unwrap().durable.wait().await.unwrap();
    wal.close();
    let (_wal, frames) = open(dir.path(), &faults, 1 << 20);
    let payloads: Vec<&[u8]> = frames.iter().map(|(_, p)| p.as_slice()).collect();
    assert_eq!(payloads, [&b"one"[..], b"three"]);
}

#[tokio::test]
async fn a_short_write_is_cut_back() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 1 << 20);
    wal.append(b"whole").unwrap().durable.wait().await.unwrap();
    faults.short_write.store(true, Ordering::Relaxed);
    assert!(
        wal.append(&[7u8; 1000])
            .unwrap()
            .durable
            .wait()
            .await
            .is_err()
    );
    wal.append(b"next").unwrap().durable.wait().await.unwrap();
    wal.close();
    // No half frame sits between "whole" and "next".
    let (_wal, frames) = open(dir.path(), &faults, 1 << 20);
    let payloads: Vec<&[u8]> = frames.iter().map(|(_, p)| p.as_slice()).collect();
    assert_eq!(payloads, [&b"whole"[..], b"next"]);
}

/// Reserved space costs every fsync an inode write until it is written, so the log writes zeros
/// a mebibyte ahead of small groups, once per mebibyte, never past the segment's size, and
/// again after a failed write gave the space back. A large group writes into reserved space.
#[tokio::test]
async fn zeros_are_written_ahead_of_the_frames_once_per_stretch() {
    const AHEAD: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 4 << 20);
    wal.append(b"one").unwrap().durable.wait().await.unwrap();
    assert_eq!(faults.zeros.load(Ordering::Relaxed), AHEAD);
    wal.append(b"two").unwrap().durable.wait().await.unwrap();
    assert_eq!(faults.zeros.load(Ordering::Relaxed), AHEAD);
    wal.append(&vec![1u8; AHEAD as usize])
        .unwrap()
        .durable
        .wait()
        .await
        .unwrap();
    assert_eq!(faults.zeros.load(Ordering::Relaxed), AHEAD);
    wal.append(b"after the large one")
        .unwrap()
        .durable
        .wait()
        .await
        .unwrap();
    assert_eq!(faults.zeros.load(Ordering::Relaxed), 2 * AHEAD);

    faults.enospc.store(true, Ordering::Relaxed);
    assert!(
        wal.append(&[2u8; 100])
            .unwrap()
            .durable
            .wait()
            .await
            .is_err()
    );
    faults.enospc.store(false, Ordering::Relaxed);
    wal.append(b"three").unwrap().durable.wait().await.unwrap();
    assert_eq!(faults.zeros.load(Ordering::Relaxed), 3 * AHEAD);
    wal.close();

    let small = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(small.path(), &faults, 64 * 1024);
    wal.append(b"one").unwrap().durable.wait().await.unwrap();
    let zeros = faults.zeros.load(Ordering::Relaxed);
    assert!(zeros > 0 && zeros < 64 * 1024, "{zeros} bytes of zeros");
    wal.close();
    let (_wal, frames) = open(small.path(), &faults, 64 * 1024);
    assert_eq!(frames.len(), 1);
}

async fn append_all(wal: &Wal, n: usize) -> Vec<u64> {
    let mut lsns = Vec::new();
    for i in 0..n {
        let appended = wal
            .append(format!("frame number {i:04}").as_bytes())
            .unwrap();
        appended.durable.wait().await.unwrap();
        lsns.push(appended.lsn);
    }
    lsns
}

/// The segment files in `dir` (beside them is the LSN reservation).
fn segments(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")
        })
        .count()
}

#[tokio::test]
async fn landed_frames_release_their_segments_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 200);
    let lsns = append_all(&wal, 20).await;
    let before = segments(dir.path());
    assert!(before >= 4, "{before} segments");
    for lsn in &lsns[..10] {
        wal.landed(*lsn);
    }
    wal.append(b"wake").unwrap().durable.wait().await.unwrap();
    wal.close();

    let (wal, frames) = open(dir.path(), &faults, 200);
    let first = frames.first().unwrap().0;
    assert!(
        first <= lsns[10],
        "frame {} was released before it landed (first kept {first})",
        lsns[10]
    );
    assert!(first > lsns[0], "nothing was released");
    assert_eq!(
        wal.outstanding(),
        frames.len(),
        "recovered frames are outstanding"
    );

    // Land everything but one old frame: the segments from it on stay.
    let keep = frames[1].0;
    for (lsn, _) in &frames {
        if *lsn != keep {
            wal.landed(*lsn);
        }
    }
    let later = append_all(&wal, 10).await;
    wal.close();
    let (wal, frames) = open(dir.path(), &faults, 200);
    assert!(
        frames.iter().any(|(l, _)| *l == keep),
        "an outstanding frame was released"
    );
    assert!(frames.iter().any(|(l, _)| *l == *later.last().unwrap()));

    // Everything landed: only the active segment is left, and LSNs keep rising.
    for (lsn, _) in &frames {
        wal.landed(*lsn);
    }
    let next = wal.append(b"last").unwrap();
    next.durable.wait().await.unwrap();
    assert!(next.lsn > *later.last().unwrap());
    wal.close();
    assert_eq!(segments(dir.path()), 1);
    let (wal, frames) = open(dir.path(), &faults, 200);
    assert!(frames.iter().any(|(l, _)| *l == next.lsn));
    assert!(wal.append(b"x").unwrap().lsn > next.lsn);
}

#[tokio::test]
async fn a_failed_group_is_not_outstanding() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 1 << 20);
    faults.enospc.store(true, Ordering::Relaxed);
    let failed = wal.append(b"lost").unwrap();
    assert!(failed.durable.wait().await.is_err());
    assert_eq!(wal.outstanding(), 0);
}

#[tokio::test]
async fn lsns_start_above_what_the_stores_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _, _) = Wal::open(WalConfig::new(dir.path()), Arc::new(FsStorage), 1_000).unwrap();
    assert_eq!(wal.append(b"a").unwrap().lsn, 1_000);
    assert_eq!(wal.next_lsn().unwrap(), 1_001);
    assert_eq!(wal.append(b"b").unwrap().lsn, 1_002);
}
