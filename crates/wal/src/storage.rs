//! File access, behind a small trait so tests can inject faults (short writes, fsync errors,
//! a full disk) into a log that otherwise runs on real files.
//!
//! Segments are preallocated: a new segment takes its whole size at once, as zeros, before the
//! log writes to it. Appending to a file changes its size, and `fdatasync` must then write the
//! inode as well as the data. Writing into reserved space changes the file's extent map, with
//! the same cost, so the log writes zeros a little ahead of its frames (see
//! [`SegmentFile::write_zeros`]); a group that lands in written space pays for its data only. A
//! segment's frames are written at an offset, and the rest of the file reads as zeros until
//! frames fill it. Preallocation is best effort: where the file system cannot do it, the segment
//! grows as it is written, which is correct, only slower to sync.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// An open segment the log writes to.
pub trait SegmentFile: Send {
    /// Writes all of `buf` at byte `offset`.
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes everything written so far durable (fdatasync).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Drops everything from byte `len` on (a partial write): it reads as zeros again.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Writes `len` zeros at byte `offset`, so that the space is written, not only reserved.
    fn write_zeros(&mut self, offset: u64, len: u64) -> io::Result<()>;
}

/// The file system as the log uses it.
pub trait Storage: Send + Sync + 'static {
    /// Names of the entries in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The first `len` bytes of a file, or all of it when it is shorter: what replay reads of a
    /// segment, whose preallocated rest it need not.
    fn read_prefix(&self, path: &Path, len: u64) -> io::Result<Vec<u8>> {
        let mut bytes = self.read(path)?;
        bytes.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(bytes)
    }
    /// Creates a new file (failing if it exists) of `size` zeros, preallocated where the file
    /// system can.
    fn create(&self, path: &Path, size: u64) -> io::Result<Box<dyn SegmentFile>>;
    /// Opens an existing file, drops everything from byte `len` on and makes it `size` bytes
    /// again, zeros past `len`, durably.
    fn open_at(&self, path: &Path, len: u64, size: u64) -> io::Result<Box<dyn SegmentFile>>;
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
    /// The size the file is kept at: its preallocation.
    size: u64,
}

impl FsFile {
    /// Cuts the file at `len` and gives it back its size, as zeros past `len`.
    fn cut(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        preallocate(&self.file, self.size)
    }
}

impl SegmentFile for FsFile {
    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.cut(len)
    }

    fn write_zeros(&mut self, offset: u64, len: u64) -> io::Result<()> {
        static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
        let end = offset.saturating_add(len);
        let mut at = offset;
        while at < end {
            let n = (end - at).min(ZEROS.len() as u64) as usize;
            self.file.write_all_at(&ZEROS[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }
}

/// Gives `file` space for `size` bytes, as zeros, and makes it at least `size` bytes long.
/// Where the space cannot be had (no preallocation in the file system, or not `size` bytes
/// free), the file is made sparse instead: its writes allocate as they go, and fail only when
/// the disk is really full.
fn preallocate(file: &File, size: u64) -> io::Result<()> {
    if size == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    if rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size).is_ok() {
        return Ok(());
    }
    if file.metadata()?.len() < size {
        file.set_len(size)?;
    }
    Ok(())
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

    fn read_prefix(&self, path: &Path, len: u64) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        File::open(path)?.take(len).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn create(&self, path: &Path, size: u64) -> io::Result<Box<dyn SegmentFile>> {
        let file = OpenOptions::new().create_new(true).write(true).open(path)?;
        preallocate(&file, size)?;
        Ok(Box::new(FsFile { file, size }))
    }

    fn open_at(&self, path: &Path, len: u64, size: u64) -> io::Result<Box<dyn SegmentFile>> {
        let file = OpenOptions::new().write(true).open(path)?;
        let mut file = FsFile { file, size };
        file.cut(len)?;
        file.file.sync_data()?;
        Ok(Box::new(file))
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
