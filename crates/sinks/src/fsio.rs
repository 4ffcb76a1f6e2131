//! File operations: the order of fsyncs that makes a file exist, whole, after power loss, and
//! reading a file without writing to its inode.
//!
//! Hazard: a rename is durable only once the directory holding it is fsynced, and a new directory
//! only once its parent is. Every helper here fsyncs the file first, then the directory entries.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Duration;

    use super::*;

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
