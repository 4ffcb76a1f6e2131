//! The log on real files with faults injected through its storage trait: group commit, a failed
//! fsync poisons, a full disk or a short write fails the group without a false acknowledgement,
//! release deletes only what the stores hold.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sluice_wal::{FsStorage, SegmentFile, Storage, Wal, WalConfig, WalError};

/// Real files, with switches that make the next operations fail.
#[derive(Default)]
struct Faults {
    fail_fsync: AtomicBool,
    enospc: AtomicBool,
    short_write: AtomicBool,
    writes: AtomicU64,
}

struct FaultyStorage {
    faults: Arc<Faults>,
}

struct FaultyFile {
    inner: Box<dyn SegmentFile>,
    faults: Arc<Faults>,
}

impl SegmentFile for FaultyFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.faults.writes.fetch_add(1, Ordering::Relaxed);
        if self.faults.enospc.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        if self.faults.short_write.swap(false, Ordering::Relaxed) {
            self.inner.write_all(&buf[..buf.len() / 2])?;
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        self.inner.write_all(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        if self.faults.fail_fsync.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(5)); // EIO
        }
        self.inner.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

impl Storage for FaultyStorage {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        FsStorage.list(dir)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        FsStorage.read(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn SegmentFile>> {
        let inner = FsStorage.create(path)?;
        Ok(Box::new(FaultyFile {
            inner,
            faults: self.faults.clone(),
        }))
    }
    fn open_append(&self, path: &Path, len: u64) -> io::Result<Box<dyn SegmentFile>> {
        let inner = FsStorage.open_append(path, len)?;
        Ok(Box::new(FaultyFile {
            inner,
            faults: self.faults.clone(),
        }))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        FsStorage.remove(path)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        FsStorage.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        FsStorage.sync_dir(dir)
    }
}

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

#[tokio::test]
async fn release_deletes_only_sealed_segments_below_the_point() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (wal, _) = open(dir.path(), &faults, 200);
    let mut lsns = Vec::new();
    for i in 0..20 {
        let appended = wal
            .append(format!("frame number {i:04}").as_bytes())
            .unwrap();
        appended.durable.wait().await.unwrap();
        lsns.push(appended.lsn);
    }
    let before = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(before >= 4, "{before} segments");
    wal.release(lsns[10]);
    wal.append(b"wake").unwrap().durable.wait().await.unwrap();
    wal.close();
    let (wal, frames) = open(dir.path(), &faults, 200);
    let first = frames.first().unwrap().0;
    assert!(
        first <= lsns[10],
        "frame {} was released too early (first kept {first})",
        lsns[10]
    );
    assert!(first > lsns[0], "nothing was released");
    // Everything released: the active segment stays, and LSNs keep rising after a reopen.
    wal.release(u64::MAX);
    let next = wal.append(b"later").unwrap();
    next.durable.wait().await.unwrap();
    assert!(next.lsn > *lsns.last().unwrap());
    wal.close();
    let (wal, frames) = open(dir.path(), &faults, 200);
    assert!(frames.iter().any(|(l, _)| *l == next.lsn));
    assert!(wal.append(b"x").unwrap().lsn > next.lsn);
}

#[tokio::test]
async fn lsns_start_above_what_the_stores_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _, _) = Wal::open(WalConfig::new(dir.path()), Arc::new(FsStorage), 1_000).unwrap();
    assert_eq!(wal.append(b"a").unwrap().lsn, 1_000);
    assert_eq!(wal.next_lsn(), 1_001);
    assert_eq!(wal.append(b"b").unwrap().lsn, 1_002);
}
