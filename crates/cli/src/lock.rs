//! One server per data directory.
//!
//! `sluice serve` holds an exclusive lock on `DATA_DIR/_sluice/lock` while it runs. Two servers
//! sharing a directory would append to one write-ahead log and commit under one writer identity:
//! each would take the other's flushes for its own, and skip rows as already landed. The lock is
//! the kernel's (`flock`), so it goes with the process however it ends: a server killed outright
//! leaves nothing to clean up. The file holds the holder's process id, for the error message.
//!
//! `sluice compact` and `sluice parts` take no lock: they may run beside the server, as a second
//! compactor and a reader of the logs.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The lock, held until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock on `data_dir` (creating the folder), or says which process holds it.
    pub fn acquire(data_dir: &Path) -> Result<Self> {
        let dir = data_dir.join("_sluice");
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join("lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                let holder = match holder.trim() {
                    "" => "another sluice".to_owned(),
                    pid => format!("another sluice (pid {pid})"),
                };
                bail!(
                    "data directory {} is in use by {holder}; each server needs a data \
                     directory of its own (--data-dir), while several may share a lake root",
                    data_dir.display()
                );
            }
            Err(TryLockError::Error(e)) if e.kind() == ErrorKind::Unsupported => {
                tracing::warn!(
                    path = %path.display(),
                    "this filesystem has no file locks: nothing stops a second server from using this data directory"
                );
                return Ok(Self { _file: file });
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()));
            }
        }
        file.set_len(0)
            .and_then(|()| write!(file, "{}", std::process::id()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Self { _file: file })
    }
}
