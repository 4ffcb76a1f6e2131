//! Durable file operations: the order of fsyncs that makes a file exist, whole, after power loss.
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
