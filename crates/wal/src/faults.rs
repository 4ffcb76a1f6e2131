//! Fault injection: real files with switches that make the next operations fail the way disks
//! do (an fsync error, a full disk, a short write). For tests of the log and of everything above
//! it; sluice itself always runs on [`FsStorage`].

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::storage::{FsStorage, SegmentFile, Storage};

/// Real files, with switches that make the next operations fail.
/// The switches. Set one and the next matching operation fails.
#[derive(Debug, Default)]
pub struct Faults {
    /// Every fsync fails with EIO while set.
    pub fail_fsync: AtomicBool,
    /// Every write fails with ENOSPC while set.
    pub enospc: AtomicBool,
    /// The next write stops halfway and fails.
    pub short_write: AtomicBool,
    /// Writes attempted.
    pub writes: AtomicU64,
    /// Bytes of zeros written ahead of the frames.
    pub zeros: AtomicU64,
}

/// [`FsStorage`] with [`Faults`].
pub struct FaultyStorage {
    /// The switches.
    pub faults: Arc<Faults>,
}

impl FaultyStorage {
    /// Real files and a fresh set of switches.
    pub fn new() -> (Arc<Self>, Arc<Faults>) {
        let faults = Arc::new(Faults::default());
        (
            Arc::new(Self {
                faults: faults.clone(),
            }),
            faults,
        )
    }
}

struct FaultyFile {
    inner: Box<dyn SegmentFile>,
    faults: Arc<Faults>,
}

impl SegmentFile for FaultyFile {
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.faults.writes.fetch_add(1, Ordering::Relaxed);
        if self.faults.enospc.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        if self.faults.short_write.swap(false, Ordering::Relaxed) {
            self.inner.write_all_at(&buf[..buf.len() / 2], offset)?;
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        self.inner.write_all_at(buf, offset)
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

    /// Zeros written ahead are not frames: the switches leave them alone, as a disk would that
    /// had the space reserved.
    fn write_zeros(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.faults.zeros.fetch_add(len, Ordering::Relaxed);
        self.inner.write_zeros(offset, len)
    }
}

impl Storage for FaultyStorage {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        FsStorage.list(dir)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        FsStorage.read(path)
    }
    fn read_prefix(&self, path: &Path, len: u64) -> io::Result<Vec<u8>> {
        FsStorage.read_prefix(path, len)
    }
    fn create(&self, path: &Path, size: u64) -> io::Result<Box<dyn SegmentFile>> {
        let inner = FsStorage.create(path, size)?;
        Ok(Box::new(FaultyFile {
            inner,
            faults: self.faults.clone(),
        }))
    }
    fn open_at(&self, path: &Path, len: u64, size: u64) -> io::Result<Box<dyn SegmentFile>> {
        let inner = FsStorage.open_at(path, len, size)?;
        Ok(Box::new(FaultyFile {
            inner,
            faults: self.faults.clone(),
        }))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        FsStorage.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        FsStorage.rename(from, to)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        FsStorage.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        FsStorage.sync_dir(dir)
    }
}
