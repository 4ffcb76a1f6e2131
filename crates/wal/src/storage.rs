//! File access, behind a small trait so tests can inject faults (short writes, fsync errors,
//! a full disk) into a log that otherwise runs on real files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// An open segment the log appends to.
pub trait SegmentFile: Send {
    /// Writes all of `buf` at the end of the file.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable (fdatasync).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Cuts the file to `len` bytes (drops a partial write).
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// The file system as the log uses it.
pub trait Storage: Send + Sync + 'static {
    /// Names of the entries in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Creates a new, empty file (failing if it exists) open for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn SegmentFile>>;
    /// Opens an existing file for appending after cutting it to `len` bytes.
    fn open_append(&self, path: &Path, len: u64) -> io::Result<Box<dyn SegmentFile>>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to` if it exists (atomically, as rename(2) does).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Creates `dir` (and parents) if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Fsyncs a directory so entries created, renamed or removed in it are durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// Real files.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsStorage;

struct FsFile {
    file: File,
}

impl SegmentFile for FsFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        // The file is opened for appending, so the next write lands at the new end.
        Ok(())
    }
}

impl Storage for FsStorage {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        File::open(path)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn SegmentFile>> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)?;
        Ok(Box::new(FsFile { file }))
    }

    fn open_append(&self, path: &Path, len: u64) -> io::Result<Box<dyn SegmentFile>> {
        let file = OpenOptions::new().append(true).open(path)?;
        if file.metadata()?.len() != len {
            file.set_len(len)?;
            file.sync_data()?;
        }
        Ok(Box::new(FsFile { file }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// The path of segment `first_lsn` in `dir`.
pub(crate) fn segment_path(dir: &Path, first_lsn: u64) -> PathBuf {
    dir.join(format!("{first_lsn:020}.wal"))
}

/// The first LSN of a segment file name, if it is one.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
