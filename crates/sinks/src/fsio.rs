//! File operations: the order of fsyncs that makes a file exist, whole, after power loss,
//! syncing a large file as it is written, and reading a file without writing to its inode.
//!
//! Hazard: a rename is durable only once the directory holding it is fsynced, and a new directory
//! only once its parent is. Every helper here fsyncs the file first, then the directory entries.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::thread::JoinHandle;

/// Fsyncs a directory so that the entries created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens `path` for reading, without updating its access time where the system allows it
/// (Linux's `O_NOATIME`, for files this process owns; others are opened plainly). A part is
/// read once, by the compaction that replaces it, and under the default `relatime` mount
/// option that first read after the write would update the access time: an inode dirtied, and
/// a journal write, per input. On the compaction lab's 20,000 files, the access-time updates
/// were 2% of the pass's CPU (`perf`, `touch_atime`).
pub fn open_to_read(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOATIME)
            .open(path)
        {
            // Only the file's owner (or a process with CAP_FOWNER) may leave the time alone.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            opened => return opened,
        }
    }
    File::open(path)
}

/// Creates `dir` and any missing parents below `root`, fsyncing each parent whose entries changed.
/// `root` itself must exist.
pub fn create_dir_durably(root: &Path, dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(root);
    if parent != root && parent.starts_with(root) {
        create_dir_durably(root, parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => sync_dir(parent),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `dir/name` atomically: a hidden temporary file, fsync, rename, fsync `dir`.
/// A reader sees the old file or the new one, never a partial one.
pub fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// Bytes a [`SyncBehind`] writes between the syncs it starts behind the writer.
pub const SYNC_BEHIND_BYTES: u64 = 16 << 20;

/// A new file written to be fsynced when whole, which syncs what was written so far on a
/// thread of its own every [`SYNC_BEHIND_BYTES`] (one sync at a time), while the writer goes
/// on. The page cache holds a written file's pages until the kernel writes them back, 30
/// seconds later by default, so a large file's closing fsync otherwise writes all of it while
/// the writer waits: for the compaction lab's 52 MB file, 84 ms with both cores idle. Synced
/// behind, it waits for what was written since the last sync.
///
/// [`SyncBehind::finish`] waits for the sync in flight and then fsyncs the file; a sync behind
/// that failed fails it. Dropped unfinished (a write that failed), it leaves any sync in flight
/// to end on its own.
pub struct SyncBehind {
    file: File,
    written: u64,
    synced_to: u64,
    in_flight: Option<JoinHandle<io::Result<()>>>,
    syncs: u32,
}

impl SyncBehind {
    /// `file`, new and empty, written from its start.
    pub fn new(file: File) -> Self {
        Self {
            file,
            written: 0,
            synced_to: 0,
            in_flight: None,
            syncs: 0,
        }
    }

    /// Waits for the sync in flight, fsyncs the file, and returns it with how many syncs ran
    /// behind the writer.
    pub fn finish(mut self) -> io::Result<(File, u32)> {
        self.wait()?;
        self.file.sync_all()?;
        Ok((self.file, self.syncs))
    }

    /// Waits for the sync in flight, if any: its error, or a panic of its thread, as an error.
    fn wait(&mut self) -> io::Result<()> {
        match self.in_flight.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(io::Error::other("a sync behind the writer panicked")),
        }
    }

    /// Starts syncing what was written, unless a sync is still in flight (the next write
    /// tries again). A sync that failed fails the write; one that cannot start (no thread to
    /// be had) is skipped, and the closing fsync writes what it would have.
    fn sync_behind(&mut self) -> io::Result<()> {
        if self.in_flight.as_ref().is_some_and(|t| !t.is_finished()) {
            return Ok(());
        }
        self.wait()?;
        let started = self.file.try_clone().and_then(|file| {
            std::thread::Builder::new()
                .name("sync-behind".into())
                .spawn(move || file.sync_data())
        });
        self.synced_to = self.written;
        if let Ok(thread) = started {
            self.in_flight = Some(thread);
            self.syncs += 1;
        }
        Ok(())
    }
}

impl Write for SyncBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.synced_to >= SYNC_BEHIND_BYTES {
            self.sync_behind()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_file_synced_behind_its_writer_is_whole_and_synced_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        let mut writer = SyncBehind::new(File::create(&path).unwrap());
        // Two and a half times the interval, in writes that do not divide it: one sync starts
        // behind the writer, and a second if the first is done by the time it is due.
        let total = SYNC_BEHIND_BYTES as usize * 5 / 2;
        let bytes: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        for piece in bytes.chunks(1_000_003) {
            writer.write_all(piece).unwrap();
        }
        let (file, syncs) = writer.finish().unwrap();
        drop(file);
        assert!((1..=2).contains(&syncs), "{syncs} syncs");
        assert_eq!(fs::read(&path).unwrap(), bytes);
        // A file smaller than the interval is synced once, at the end.
        let small = dir.path().join("small.parquet");
        let mut writer = SyncBehind::new(File::create(&small).unwrap());
        writer.write_all(b"rows").unwrap();
        let (_, syncs) = writer.finish().unwrap();
        assert_eq!(syncs, 0);
        assert_eq!(fs::read(&small).unwrap(), b"rows");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reading_a_file_leaves_its_access_time_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        fs::write(&path, b"rows").unwrap();
        // An access time before the last write: under `relatime` a plain read would update it.
        let modified = fs::metadata(&path).unwrap().modified().unwrap();
        let accessed = modified - Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_times(fs::FileTimes::new().set_accessed(accessed))
            .unwrap();

        let mut read = String::new();
        open_to_read(&path)
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "rows");
        assert_eq!(fs::metadata(&path).unwrap().accessed().unwrap(), accessed);
    }
}
